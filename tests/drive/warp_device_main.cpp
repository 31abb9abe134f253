// main() of the warp's device tests. They compare the kernels with the C++ reference bit for
// bit, which a device promises only with correctly rounded float32 division. Without an OpenCL
// device, or on one without that, the binary reports itself to Meson as skipped (exit 77),
// never as passed.
#include <gtest/gtest.h>

#include <cstdio>

#include "cl/device.h"
#include "drive/warp.h"

int main(int argc, char **argv) {
  auto device = op::cl::Device::Open("auto");
  if (!device.ok()) {
    std::fprintf(stderr, "SKIP: no OpenCL device: %s\n", device.status().message().c_str());
    return 77;
  }
  if (!op::drive::WarpIsBitExact(**device)) {
    std::fprintf(stderr,
                 "SKIP: %s has no correctly rounded float32 division; the warp is not promised "
                 "to equal the reference there\n",
                 (*device)->caps().device_name.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
