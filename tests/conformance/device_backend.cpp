// The device backend of the conformance runner: each test's graph goes through the passes and
// code generation, and runs on the OpenCL device (PoCL here) through the executor.
//
// The runner forks one child per test, so the device is opened inside Run (in the child), never
// in the parent: an OpenCL runtime does not survive fork(). Program binaries are shared between
// the children through the on-disk program cache.
#include "backend.h"
#include "cl/device.h"
#include "cl/queue.h"
#include "nn/codegen.h"
#include "nn/executor.h"
#include "nn/passes.h"

namespace op::nn::conformance {
namespace {

class DeviceBackend : public Backend {
 public:
  DeviceBackend(std::string name, Precision precision)
      : name_(std::move(name)), precision_(precision) {}
  std::string name() const override { return name_; }

  StatusOr<std::vector<Tensor>> Run(const Graph &graph,
                                    const std::vector<Tensor> &inputs) override {
    OP_ASSIGN_OR_RETURN(std::shared_ptr<cl::Device> device, cl::Device::Open("auto"));
    Graph g = graph;
    OP_RETURN_IF_ERROR(OptimizeGraph(g));
    OP_ASSIGN_OR_RETURN(CompiledModel model,
                        GenerateCode(g, OptionsForDevice(device->caps(), precision_)));
    OP_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(device, std::move(model)));
    OP_ASSIGN_OR_RETURN(cl::Queue queue, cl::Queue::Create(*device));
    return exec->RunHost(queue, inputs);
  }

 private:
  std::string name_;
  Precision precision_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeDeviceBackend(const std::string &name) {
  if (name == "device")
    return std::unique_ptr<Backend>(new DeviceBackend(name, Precision::kFp32));
  return NotFound("conformance backend '" + name +
                  "' is not available (known: reference, reference-optimized, device)");
}

}  // namespace op::nn::conformance
