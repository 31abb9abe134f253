// libFuzzer target: the .npy reader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "nn/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)op::nn::ParseNpy(std::string(reinterpret_cast<const char *>(data), size), "fuzz");
  return 0;
}
