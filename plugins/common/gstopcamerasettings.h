// The camera settings opwarp and opoverlay share: the `device-type` enum and the resolution of
// the camera model (intrinsics) for a frame size from `device-type`, the camera and `intrinsics`.
// The maths is gst/drive's (PresetIntrinsics); this is only the GEnum and the user's wording.
#pragma once

#include <gst/gst.h>

#include <optional>

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
