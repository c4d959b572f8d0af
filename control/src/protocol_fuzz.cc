// libFuzzer target: every byte string given to the frame parser and to each
// message decoder must end in a value or an error, never in a crash, a leak or
// undefined behaviour (run under ASan+UBSan).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dlckpt/control/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dlckpt::control::protocol;  // NOLINT
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto frame = ParseFrame(bytes);
  if (frame.ok()) (void)ValidatePayload(*frame);
  if (size > 0) {
    // Also feed the raw bytes (minus a selector byte) to one decoder directly,
    // so payload parsing is explored without having to forge CRCs.
    std::string_view payload = bytes.substr(1);
    switch (data[0] % 7) {
      case 0: (void)DecodeHello(payload); break;
      case 1: (void)DecodeEncode(payload); break;
      case 2: (void)DecodeDone(payload); break;
      case 3: (void)DecodeSurveyReply(payload); break;
      case 4: (void)DecodeRecover(payload); break;
      case 5: (void)DecodeStatusReply(payload); break;
      default: (void)DecodeError(payload); break;
    }
  }
  return 0;
}
