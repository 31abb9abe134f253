// The device half of opc (compile, device run, compiled-model info): a placeholder that says
// what is missing until the executor is wired in (owned by the backend half).
#include <cstdio>

#include "opc.h"

namespace opc {

int Compile(const Args &) {
  return Fail(op::Unsupported("compile is not built yet (the device backend is in progress)"));
}

op::StatusOr<std::vector<op::nn::Tensor>> RunOnDevice(const RunRequest &) {
  return op::Unsupported("device runs are not built yet; use --reference");
}

void PrintDeviceInfo(const std::string &, const op::nn::ShapeBindings &) {}

}  // namespace opc
