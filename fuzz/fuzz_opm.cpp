// libFuzzer target: compiled-model (.opm) parsing and validation. The input is the payload; the
// target writes the header (magic and checksum) itself so that mutations reach the Cap'n Proto
// reader and ValidateModel instead of stopping at the checksum. A whole .opm file as input (a
// seed) is used as it is.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "nn/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string in(reinterpret_cast<const char *>(data), size);
  if (!op::nn::LooksLikeModelFile(in))
    in = op::nn::ModelFileHeader(in) + in;
  (void)op::nn::ParseModel(in, "fuzz");
  return 0;
}
