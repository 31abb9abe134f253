// libFuzzer target: the restricted unpickler of output_slices.
#include <cstddef>
#include <cstdint>
#include <string>

#include "nn/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)op::nn::UnpickleSlices(std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}
