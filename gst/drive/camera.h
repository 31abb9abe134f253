// Cameras, model frames and the warp matrix of openpilot's driving model (docs/contract.md,
// "Cameras and frames" and "The warp").
//
// Everything here is host maths in double; the kernels get the matrices rounded to float32
// once per calibration change (see KernelMatrices in warp_reference.h).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace op::drive {

// A 3×3 matrix, row-major: m[row][col].
using Mat3 = std::array<std::array<double, 3>, 3>;

Mat3 Multiply(const Mat3 &a, const Mat3 &b);
Mat3 Transpose(const Mat3 &a);
// The inverse of `a`, or InvalidArgument when it is singular.
StatusOr<Mat3> Inverse(const Mat3 &a);
// Applies `m` to the pixel (x, y, 1) and divides by the third coordinate.
std::array<double, 2> Project(const Mat3 &m, double x, double y);

enum class DeviceType { kTici, kTizi, kMici };
enum class CameraRole { kRoad, kWide };
enum class ModelFrame { kMedmodel, kSbigmodel };

const char *DeviceTypeName(DeviceType t);
const char *CameraRoleName(CameraRole r);
const char *ModelFrameName(ModelFrame f);
// "tici", "tizi", "mici" (case-insensitive); anything else is InvalidArgument quoting it.
StatusOr<DeviceType> ParseDeviceType(std::string_view s);

struct FrameSize {
  int width = 0;
  int height = 0;
};

// Pinhole intrinsics in pixels.
struct Intrinsics {
  double fx = 0, fy = 0, cx = 0, cy = 0;
  Mat3 K() const { return {{{fx, 0, cx}, {0, fy, cy}, {0, 0, 1}}}; }
};

// The sensor size of a device (tizi shares tici's sensor geometry).
FrameSize SensorSize(DeviceType t);
// The preset intrinsics of one camera: focal from the contract table, centre at (W/2, H/2).
Intrinsics CameraIntrinsics(DeviceType t, CameraRole r);
// The device whose sensor has this size: 1928×1208 → tici, 1344×760 → mici. Any other size is
// NotFound, with a message that says to set the device type or the intrinsics.
StatusOr<DeviceType> DeviceTypeFromFrameSize(int width, int height);
// The preset intrinsics of camera `role` for width×height frames: those of `device`, or with
// nullopt those of the device whose sensor has this size. NotFound when no sensor has this size
// (see DeviceTypeFromFrameSize); InvalidArgument when `device`'s sensor has another size, since
// presets for another frame size would put every pixel in the wrong place.
StatusOr<Intrinsics> PresetIntrinsics(std::optional<DeviceType> device, CameraRole role, int width,
                                      int height);

// Every model frame is 512×256 pixels of Y (and 256×128 of U and V).
constexpr int kModelWidth = 512;
constexpr int kModelHeight = 256;
Intrinsics ModelIntrinsics(ModelFrame f);

// Calibration: roll, pitch, yaw in radians (openpilot's liveCalibration.rpyCalib).
struct Rpy {
  double roll = 0, pitch = 0, yaw = 0;
};

// "roll,pitch,yaw": three finite numbers separated by commas (spaces allowed around them).
// Anything else is InvalidArgument quoting the string.
StatusOr<Rpy> ParseRpy(std::string_view s);
// "fx,fy,cx,cy": four finite numbers, focal lengths > 0. Anything else is InvalidArgument.
StatusOr<Intrinsics> ParseIntrinsics(std::string_view s);
std::string FormatRpy(const Rpy &rpy);

// R(rpy) = Rz(yaw)·Ry(pitch)·Rx(roll), right-handed, in the device frame.
Mat3 RotationFromRpy(const Rpy &rpy);
// view_from_device: x right, y down, z forward from x forward, y right, z down.
Mat3 ViewFromDevice();

// The matrix mapping a model pixel to a camera pixel: K_cam · V · R(rpy) · Vᵀ · K_model⁻¹.
Mat3 WarpMatrix(const Intrinsics &camera, const Intrinsics &model, const Rpy &rpy);
// The chroma form for half-resolution planes: S·M·S⁻¹ with S = diag(0.5, 0.5, 1).
Mat3 ChromaMatrix(const Mat3 &m);

}  // namespace op::drive
