// What the conformance runner runs a test on. A backend receives the imported, shape-inferred
// graph (input shapes bound from the test's data) and the input values, and returns the
// outputs in graph.outputs order. The runner owns everything else (reading the tests, comparing
// with ONNX's tolerances, counting), so adding the device backend is one class.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/graph.h"

namespace op::nn::conformance {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Runs one test case. An op or feature the backend lacks is a kUnsupported status (the
  // runner counts it as unsupported, never as passed or failed).
  virtual StatusOr<std::vector<Tensor>> Run(const Graph &graph,
                                            const std::vector<Tensor> &inputs) = 0;
};

// "reference": the plain C++ interpreter; "reference-optimized": the graph after OptimizeGraph
// (passes) on the interpreter. Other names are answered by MakeDeviceBackend (device_backend.cpp;
// a stub until the device executor exists).
StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string &name);
StatusOr<std::unique_ptr<Backend>> MakeDeviceBackend(const std::string &name);

}  // namespace op::nn::conformance
