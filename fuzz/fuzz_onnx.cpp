// libFuzzer target: ONNX import, then shape inference with constant folding (what loading a
// model does before code generation). Any status is fine; a crash, a hang or a sanitizer report
// is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "nn/onnx_import.h"
#include "nn/shape_inference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  op::nn::ImportOptions options;  // no folder: external data is refused, nothing is read
  auto g =
      op::nn::ImportOnnxBytes(std::string(reinterpret_cast<const char *>(data), size), options);
  if (g.ok())
    (void)op::nn::InferShapes(*g);
  return 0;
}
