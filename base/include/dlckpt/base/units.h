// dlckpt/base/units.h — parsing and printing of byte sizes and switches for
// tools and options.
#ifndef DLCKPT_BASE_UNITS_H_
#define DLCKPT_BASE_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "dlckpt/base/status.h"

namespace dlckpt {

// "4096", "64K", "64KiB", "16m", "1G", "2TiB" (binary multiples; K/M/G/T with
// optional "iB" or "B"). EINVAL on anything else or on overflow.
Result<uint64_t> ParseSize(std::string_view text);
// 1536 -> "1.5 KiB".
std::string FormatSize(uint64_t bytes);

// A switch that is on by default: false only if the environment variable
// `name` is 0, off, no or false (any case).
bool EnvSwitchOn(const char* name);

}  // namespace dlckpt

#endif  // DLCKPT_BASE_UNITS_H_
