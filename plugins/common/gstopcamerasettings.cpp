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

// ---- settings strings ----------------------------------------------------------------------

void GstOpSettingWarnings::Warn(GstElement *element, const std::string &text,
                                const std::string &debug) {
  GST_WARNING_OBJECT(element, "%s (%s)", text.c_str(), debug.c_str());
  GstBus *bus = gst_element_get_bus(element);
  if (bus) {
    gst_object_unref(bus);
    GST_ELEMENT_WARNING(element, RESOURCE, SETTINGS, ("%s", text.c_str()), ("%s", debug.c_str()));
    return;
  }
  std::lock_guard<std::mutex> guard(lock_);
  deferred_.emplace_back(text, debug);
}

void GstOpSettingWarnings::Post(GstElement *element) {
  std::vector<std::pair<std::string, std::string>> warnings;
  {
    std::lock_guard<std::mutex> guard(lock_);
    warnings.swap(deferred_);
  }
  for (const auto &[text, debug] : warnings)
    GST_ELEMENT_WARNING(element, RESOURCE, SETTINGS, ("%s", text.c_str()), ("%s", debug.c_str()));
}

GstOpSettingChange gst_op_camera_settings_parse_rpy(GstElement *element,
                                                    GstOpSettingWarnings &warnings,
                                                    const std::string &text, op::drive::Rpy *rpy) {
  if (text.empty()) {
    *rpy = {};
    return GstOpSettingChange::kCleared;
  }
  auto parsed = op::drive::ParseRpy(text);
  if (!parsed.ok()) {
    warnings.Warn(element,
                  "Ignoring the calibration \"" + text +
                      "\": expected \"roll,pitch,yaw\" in radians; the previous calibration stays",
                  parsed.status().ToString());
    return GstOpSettingChange::kRefused;
  }
  *rpy = *parsed;
  return GstOpSettingChange::kSet;
}

GstOpSettingChange gst_op_camera_settings_parse_intrinsics(GstElement *element,
                                                           GstOpSettingWarnings &warnings,
                                                           const std::string &text,
                                                           op::drive::Intrinsics *intrinsics) {
  if (text.empty())
    return GstOpSettingChange::kCleared;
  auto parsed = op::drive::ParseIntrinsics(text);
  if (!parsed.ok()) {
    warnings.Warn(element,
                  "Ignoring the intrinsics \"" + text +
                      "\": expected \"fx,fy,cx,cy\" in pixels; the previous value stays",
                  parsed.status().ToString());
    return GstOpSettingChange::kRefused;
  }
  *intrinsics = *parsed;
  return GstOpSettingChange::kSet;
}
