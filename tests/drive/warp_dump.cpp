// Runs the C++ reference warp on one raw frame for warp_numpy_check.py:
//   warp-dump DEVICE ROLE MODEL ROLL,PITCH,YAW W,H,Y_OFFSET,Y_STRIDE,UV_OFFSET,UV_STRIDE IN OUT
// Prints the float32 matrices the kernels would get ("y: m0 .. m8", "uv: ..."), writes the
// prepared 6×128×256 frame to OUT.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "drive/warp_reference.h"

using namespace op;
using namespace op::drive;

namespace {

int Fail(const std::string &what) {
  std::fprintf(stderr, "warp-dump: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 8)
    return Fail("usage: DEVICE ROLE MODEL RPY LAYOUT IN OUT");
  auto device = ParseDeviceType(argv[1]);
  if (!device.ok())
    return Fail(device.status().ToString());
  const std::string role_name = argv[2], model_name = argv[3];
  const CameraRole role = role_name == "wide" ? CameraRole::kWide : CameraRole::kRoad;
  const ModelFrame model =
      model_name == "sbigmodel" ? ModelFrame::kSbigmodel : ModelFrame::kMedmodel;
  auto rpy = ParseRpy(argv[4]);
  if (!rpy.ok())
    return Fail(rpy.status().ToString());
  Nv12Layout l;
  if (std::sscanf(argv[5], "%d,%d,%zu,%zu,%zu,%zu", &l.width, &l.height, &l.y_offset, &l.y_stride,
                  &l.uv_offset, &l.uv_stride) != 6)
    return Fail(std::string("bad layout ") + argv[5]);

  std::ifstream in(argv[6], std::ios::binary);
  std::vector<uint8_t> frame((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  const KernelMatrices m =
      ToKernelMatrices(WarpMatrix(CameraIntrinsics(*device, role), ModelIntrinsics(model), *rpy));
  std::vector<uint8_t> out(kFrameTensorBytes);
  Status s = WarpReference(frame.data(), frame.size(), l, m, out.data());
  if (!s.ok())
    return Fail(s.ToString());
  std::ofstream(argv[7], std::ios::binary)
      .write(reinterpret_cast<const char *>(out.data()), std::streamsize(out.size()));
  for (const auto &[name, v] : {std::pair<const char *, const float *>{"y", m.y}, {"uv", m.uv}}) {
    std::printf("%s:", name);
    for (int i = 0; i < 9; i++)
      std::printf(" %.9g", double(v[i]));
    std::printf("\n");
  }
  return 0;
}
