// opc: the model tool. Subcommands live in separate files so each half of the runtime owns its
// commands: opc_front.cpp (info, run --reference) and opc_device.cpp (compile, device run,
// and the compiled-model part of info).
#pragma once

#include <string>
#include <vector>

#include "nn/graph.h"
#include "nn/shape_inference.h"

namespace opc {

using Args = std::vector<std::string>;

// Subcommands: each returns the process exit status and prints its own errors.
int Info(const Args &args);
int Run(const Args &args);
int Compile(const Args &args);   // opc_device.cpp
int Profile(const Args &args);   // opc_profile.cpp
int Quantize(const Args &args);  // opc_quantize.cpp

// `opc run` after parsing: inputs are read, named and checked by the front half.
struct RunRequest {
  std::string model;
  std::vector<op::nn::Tensor> inputs;
  op::nn::ShapeBindings shapes;
  std::string output_dir;
  std::string device;     // --device (device runs only)
  std::string precision;  // --precision (device runs only)
};
// Runs on the OpenCL device and returns the outputs in model order (opc_device.cpp).
op::StatusOr<std::vector<op::nn::Tensor>> RunOnDevice(const RunRequest &request);
// `opc info` on a compiled model (.opm): I/O, slices, kernels, arena (opc_device.cpp). Returns
// -1 when `model` is not a compiled model (the ONNX report then runs).
int InfoCompiled(const std::string &model);
// Extra lines for `opc info`: kernels, arena size (opc_device.cpp; may print nothing).
void PrintDeviceInfo(const std::string &model, const op::nn::ShapeBindings &shapes);

// Shared helpers.
int Fail(const op::Status &status);                   // prints "opc: message" and returns 1
std::string FormatCount(double v, const char *unit);  // "1.73 GFLOP", "12.4 M"

}  // namespace opc
