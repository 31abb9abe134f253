// The device backend of the conformance runner: a placeholder until the executor can compile
// and run a graph; it says so instead of pretending to pass anything.
#include "backend.h"

namespace op::nn::conformance {

StatusOr<std::unique_ptr<Backend>> MakeDeviceBackend(const std::string &name) {
  return NotFound("conformance backend '" + name +
                  "' is not available (known: reference, reference-optimized)");
}

}  // namespace op::nn::conformance
