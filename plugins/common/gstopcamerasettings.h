// The camera settings opwarp and opoverlay share: the `device-type` enum, the resolution of the
// camera model (intrinsics) for a frame size from `device-type`, the camera and `intrinsics`, and
// the parsing of the `rpy` and `intrinsics` strings with the warning a refused one gets.
// The maths is gst/drive's (PresetIntrinsics, ParseRpy); this is the GObject side and the user's
// wording.
#pragma once

#include <gst/gst.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drive/camera.h"

G_BEGIN_DECLS

typedef enum {
  GST_OP_DEVICE_TYPE_AUTO,
  GST_OP_DEVICE_TYPE_TICI,
  GST_OP_DEVICE_TYPE_TIZI,
  GST_OP_DEVICE_TYPE_MICI,
} GstOpDeviceType;

#define GST_TYPE_OP_DEVICE_TYPE (gst_op_device_type_get_type())
GType gst_op_device_type_get_type(void);

G_END_DECLS

// The camera model of width×height frames: `intrinsics` when set (any size), else the presets of
// `device` (auto: by the frame size) for camera `role`. On failure the Status message is the
// user-facing text for GST_ELEMENT_ERROR: it names the "intrinsics" property to set.
op::StatusOr<op::drive::Intrinsics> gst_op_camera_settings_resolve(
    GstOpDeviceType device, op::drive::CameraRole role,
    const std::optional<op::drive::Intrinsics> &intrinsics, int width, int height);

// Warnings about refused settings (RESOURCE/SETTINGS). An element without a bus yet (gst-launch
// sets properties while parsing the pipeline) keeps them until Post() at start, so none is lost.
class GstOpSettingWarnings {
 public:
  void Warn(GstElement *element, const std::string &text, const std::string &debug);
  // start(): posts what was kept.
  void Post(GstElement *element);

 private:
  std::mutex lock_;
  std::vector<std::pair<std::string, std::string>> deferred_;
};

// What a settings string did: cleared the setting (""), set it, or was refused with a warning
// (the previous value stays).
enum class GstOpSettingChange { kCleared, kSet, kRefused };

// The `rpy` property: "roll,pitch,yaw" in radians.
GstOpSettingChange gst_op_camera_settings_parse_rpy(GstElement *element,
                                                    GstOpSettingWarnings &warnings,
                                                    const std::string &text, op::drive::Rpy *rpy);
// The `intrinsics` property: "fx,fy,cx,cy" in pixels.
GstOpSettingChange gst_op_camera_settings_parse_intrinsics(GstElement *element,
                                                           GstOpSettingWarnings &warnings,
                                                           const std::string &text,
                                                           op::drive::Intrinsics *intrinsics);
