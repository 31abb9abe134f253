#include "drive/camera.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace op::drive {

Mat3 Multiply(const Mat3 &a, const Mat3 &b) {
  Mat3 r{};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++)
        r[i][j] += a[i][k] * b[k][j];
  return r;
}

Mat3 Transpose(const Mat3 &a) {
  Mat3 r{};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      r[i][j] = a[j][i];
  return r;
}

StatusOr<Mat3> Inverse(const Mat3 &a) {
  // Adjugate over determinant: exact enough for the well-conditioned camera matrices here.
  Mat3 c{};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      const int i1 = (i + 1) % 3, i2 = (i + 2) % 3, j1 = (j + 1) % 3, j2 = (j + 2) % 3;
      c[j][i] = a[i1][j1] * a[i2][j2] - a[i1][j2] * a[i2][j1];  // cofactor, transposed
    }
  const double det = a[0][0] * c[0][0] + a[0][1] * c[1][0] + a[0][2] * c[2][0];
  if (!std::isfinite(det) || std::fabs(det) < 1e-300)
    return InvalidArgument("matrix is singular (determinant " + std::to_string(det) + ")");
  for (auto &row : c)
    for (double &v : row)
      v /= det;
  return c;
}

std::array<double, 2> Project(const Mat3 &m, double x, double y) {
  const double w = m[2][0] * x + m[2][1] * y + m[2][2];
  return {(m[0][0] * x + m[0][1] * y + m[0][2]) / w, (m[1][0] * x + m[1][1] * y + m[1][2]) / w};
}

const char *DeviceTypeName(DeviceType t) {
  switch (t) {
    case DeviceType::kTici:
      return "tici";
    case DeviceType::kTizi:
      return "tizi";
    case DeviceType::kMici:
      return "mici";
  }
  return "?";
}

const char *CameraRoleName(CameraRole r) {
  switch (r) {
    case CameraRole::kRoad:
      return "road";
    case CameraRole::kWide:
      return "wide";
  }
  return "?";
}

const char *ModelFrameName(ModelFrame f) {
  switch (f) {
    case ModelFrame::kMedmodel:
      return "medmodel";
    case ModelFrame::kSbigmodel:
      return "sbigmodel";
  }
  return "?";
}

namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z')
      x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z')
      y = char(y - 'A' + 'a');
    if (x != y)
      return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Splits on commas and parses each field as a finite double. std::from_chars is used because it
// ignores the C locale: an application that set a decimal-comma locale must not change parsing.
bool ParseNumbers(std::string_view s, size_t count, std::vector<double> *out) {
  out->clear();
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    std::string_view field =
        Trim(s.substr(start, comma == std::string_view::npos ? s.npos : comma - start));
    if (!field.empty() && field.front() == '+')
      field.remove_prefix(1);
    double v = 0;
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size() ||
        !std::isfinite(v))
      return false;
    out->push_back(v);
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return out->size() == count;
}

}  // namespace

StatusOr<DeviceType> ParseDeviceType(std::string_view s) {
  for (DeviceType t : {DeviceType::kTici, DeviceType::kTizi, DeviceType::kMici})
    if (EqualsNoCase(s, DeviceTypeName(t)))
      return t;
  return InvalidArgument("device type \"" + std::string(s) +
                         "\" is not one of \"tici\", \"tizi\", \"mici\"");
}

FrameSize SensorSize(DeviceType t) {
  switch (t) {
    case DeviceType::kTici:
    case DeviceType::kTizi:
      return {1928, 1208};
    case DeviceType::kMici:
      return {1344, 760};
  }
  return {};
}

Intrinsics CameraIntrinsics(DeviceType t, CameraRole r) {
  double f = 0;
  switch (t) {
    case DeviceType::kTici:
    case DeviceType::kTizi:
      f = r == CameraRole::kRoad ? 2648.0 : 567.0;
      break;
    case DeviceType::kMici:
      f = r == CameraRole::kRoad ? 1141.5 : 425.25;
      break;
  }
  const FrameSize size = SensorSize(t);
  return {f, f, size.width / 2.0, size.height / 2.0};
}

StatusOr<DeviceType> DeviceTypeFromFrameSize(int width, int height) {
  for (DeviceType t : {DeviceType::kTici, DeviceType::kMici}) {
    const FrameSize s = SensorSize(t);
    if (s.width == width && s.height == height)
      return t;
  }
  return NotFound("no camera preset for a " + std::to_string(width) + "x" + std::to_string(height) +
                  " frame (presets: 1928x1208 tici/tizi, 1344x760 mici); set the intrinsics "
                  "(\"fx,fy,cx,cy\") for this camera");
}

StatusOr<Intrinsics> PresetIntrinsics(std::optional<DeviceType> device, CameraRole role, int width,
                                      int height) {
  if (!device) {
    OP_ASSIGN_OR_RETURN(device, DeviceTypeFromFrameSize(width, height));
  }
  const FrameSize sensor = SensorSize(*device);
  if (sensor.width != width || sensor.height != height)
    return InvalidArgument(std::string("device type ") + DeviceTypeName(*device) + " has " +
                           std::to_string(sensor.width) + "x" + std::to_string(sensor.height) +
                           " frames, these are " + std::to_string(width) + "x" +
                           std::to_string(height) +
                           "; set the intrinsics (\"fx,fy,cx,cy\") for this camera");
  return CameraIntrinsics(*device, role);
}

Intrinsics ModelIntrinsics(ModelFrame f) {
  switch (f) {
    case ModelFrame::kMedmodel:
      return {910.0, 910.0, 256.0, 47.6};
    case ModelFrame::kSbigmodel:
      return {455.0, 455.0, 256.0, 151.8};
  }
  return {};
}

StatusOr<Rpy> ParseRpy(std::string_view s) {
  std::vector<double> v;
  if (!ParseNumbers(s, 3, &v))
    return InvalidArgument("calibration \"" + std::string(s) +
                           "\" is not \"roll,pitch,yaw\" (three finite numbers in radians)");
  return Rpy{v[0], v[1], v[2]};
}

StatusOr<Intrinsics> ParseIntrinsics(std::string_view s) {
  std::vector<double> v;
  if (!ParseNumbers(s, 4, &v))
    return InvalidArgument("intrinsics \"" + std::string(s) +
                           "\" are not \"fx,fy,cx,cy\" (four finite numbers in pixels)");
  if (v[0] <= 0 || v[1] <= 0)
    return InvalidArgument("intrinsics \"" + std::string(s) +
                           "\" have a focal length that is not positive");
  return Intrinsics{v[0], v[1], v[2], v[3]};
}

std::string FormatRpy(const Rpy &rpy) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.9g,%.9g,%.9g", rpy.roll, rpy.pitch, rpy.yaw);
  return buf;
}

Mat3 RotationFromRpy(const Rpy &rpy) {
  const double cr = std::cos(rpy.roll), sr = std::sin(rpy.roll);
  const double cp = std::cos(rpy.pitch), sp = std::sin(rpy.pitch);
  const double cy = std::cos(rpy.yaw), sy = std::sin(rpy.yaw);
  const Mat3 rx = {{{1, 0, 0}, {0, cr, -sr}, {0, sr, cr}}};
  const Mat3 ry = {{{cp, 0, sp}, {0, 1, 0}, {-sp, 0, cp}}};
  const Mat3 rz = {{{cy, -sy, 0}, {sy, cy, 0}, {0, 0, 1}}};
  return Multiply(rz, Multiply(ry, rx));
}

Mat3 ViewFromDevice() {
  return {{{0, 1, 0}, {0, 0, 1}, {1, 0, 0}}};
}

Mat3 WarpMatrix(const Intrinsics &camera, const Intrinsics &model, const Rpy &rpy) {
  const Mat3 v = ViewFromDevice();
  const Mat3 view_rot = Multiply(v, Multiply(RotationFromRpy(rpy), Transpose(v)));
  // K_model is upper-triangular with positive focal lengths, so its inverse is written out.
  const Mat3 k_model_inv = {{{1.0 / model.fx, 0, -model.cx / model.fx},
                             {0, 1.0 / model.fy, -model.cy / model.fy},
                             {0, 0, 1}}};
  return Multiply(camera.K(), Multiply(view_rot, k_model_inv));
}

Mat3 ChromaMatrix(const Mat3 &m) {
  const Mat3 s = {{{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 1}}};
  const Mat3 s_inv = {{{2, 0, 0}, {0, 2, 0}, {0, 0, 1}}};
  return Multiply(s, Multiply(m, s_inv));
}

}  // namespace op::drive
