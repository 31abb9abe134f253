#include "common/gstopcamerasettings.h"

#include <string>

GType gst_op_device_type_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {{GST_OP_DEVICE_TYPE_AUTO, "from the frame size", "auto"},
                                      {GST_OP_DEVICE_TYPE_TICI, "comma 3 (1928x1208)", "tici"},
                                      {GST_OP_DEVICE_TYPE_TIZI, "comma 3X (1928x1208)", "tizi"},
                                      {GST_OP_DEVICE_TYPE_MICI, "comma four (1344x760)", "mici"},
                                      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstOpDeviceType", values));
  return type;
}

op::StatusOr<op::drive::Intrinsics> gst_op_camera_settings_resolve(
    GstOpDeviceType device, op::drive::CameraRole role,
    const std::optional<op::drive::Intrinsics> &intrinsics, int width, int height) {
  using op::drive::DeviceType;
  if (intrinsics)
    return *intrinsics;
  std::optional<DeviceType> type;
  switch (device) {
    case GST_OP_DEVICE_TYPE_AUTO:
      break;
    case GST_OP_DEVICE_TYPE_TICI:
      type = DeviceType::kTici;
      break;
    case GST_OP_DEVICE_TYPE_TIZI:
      type = DeviceType::kTizi;
      break;
    case GST_OP_DEVICE_TYPE_MICI:
      type = DeviceType::kMici;
      break;
  }
  auto k = op::drive::PresetIntrinsics(type, role, width, height);
  if (k.ok())
    return k;
  // The drive layer's message is for developers; the user is told which property to set.
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  const std::string fix = ": set the \"intrinsics\" property (\"fx,fy,cx,cy\") for this camera";
  if (!type)
    return op::Status(k.status().code(), "No camera preset for " + size + " frames" + fix);
  const op::drive::FrameSize sensor = op::drive::SensorSize(*type);
  return op::Status(k.status().code(),
                    std::string("device-type ") + op::drive::DeviceTypeName(*type) + " has " +
                        std::to_string(sensor.width) + "x" + std::to_string(sensor.height) +
                        " frames, these are " + size + fix);
}
