// ONNX → graph IR, through the protobuf classes of Debian's libonnx-dev.
//
// Accepts default-domain opsets 7 to 17 (later opsets are tried and refused per op where their
// semantics differ); tensors of float16/32/64, uint8, int8, int32, int64 and bool from raw_data or
// the typed fields; initializers; Constant nodes (become constant tensors); metadata_props,
// including openpilot's `output_slices` (decoded by nn/pickle.h). External data is read only from
// files inside the model's own folder.
#pragma once

#include <string>

#include "nn/graph.h"

namespace op::nn {

struct ImportOptions {
  // Folder that external-data locations are resolved against (and must stay inside). Empty:
  // external data is refused. ImportOnnxFile sets it to the model's folder.
  std::string base_dir;
};

// Reads and converts a model file. Errors are one line naming the file and the problem
// ("model.onnx: truncated or not an ONNX model", "node 'x': unsupported op Foo (opset 13)").
StatusOr<Graph> ImportOnnxFile(const std::string &path);
// Converts serialized ModelProto bytes.
StatusOr<Graph> ImportOnnxBytes(const std::string &bytes, const ImportOptions &options);

// Reads one serialized TensorProto (ONNX's test_data_set_*/input_*.pb files) as a constant
// tensor, with its name.
StatusOr<Tensor> ReadTensorProtoFile(const std::string &path);

}  // namespace op::nn
