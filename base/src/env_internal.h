// env_internal.h — helpers shared by the POSIX Env's sources (not installed).
#ifndef DLCKPT_BASE_ENV_INTERNAL_H_
#define DLCKPT_BASE_ENV_INTERNAL_H_

#include <sys/types.h>

#include <string>

namespace dlckpt {

// "a regular file", "a FIFO", ... for messages.
const char* FileType(mode_t mode);
// "0644": the permission bits of `mode`.
std::string OctalMode(mode_t mode);

}  // namespace dlckpt

#endif  // DLCKPT_BASE_ENV_INTERNAL_H_
