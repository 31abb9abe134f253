// NumPy .npy files (format version 1.0/2.0/3.0; little-endian, C order) for uint8, int8, int32,
// int64, bool, float16, float32 and float64: what `opc run` reads and writes.
#pragma once

#include <string>

#include "nn/graph.h"

namespace op::nn {

// Reads a .npy file as a constant tensor (name left empty). Fortran order, big-endian data,
// object arrays and other dtypes are refused with an error naming the file and the reason.
StatusOr<Tensor> ReadNpy(const std::string &path);
// Parses .npy bytes (the same rules; `what` names the source in errors).
StatusOr<Tensor> ParseNpy(const std::string &bytes, const std::string &what);
// Writes a constant tensor as a version 1.0 .npy file.
Status WriteNpy(const std::string &path, const Tensor &t);
std::string SerializeNpy(const Tensor &t);

}  // namespace op::nn
