// The custom events the elements understand, for applications and replays that drive them.
#pragma once

#include <gst/gst.h>

#include <string>

#include "drive/temporal.h"

G_BEGIN_DECLS

// The calibration event: a serialized custom downstream event (GST_EVENT_CUSTOM_DOWNSTREAM)
// whose structure is named "op-calibration" with the double fields "roll", "pitch" and "yaw"
// (radians, openpilot's liveCalibration.rpyCalib). opwarp applies it from the next frame on,
// exactly like setting its `rpy` property, and passes it downstream. Replays that read the
// calibration from a log send it in stream order with the frames.
#define GST_OP_CALIBRATION_EVENT_NAME "op-calibration"

// A new calibration event. (transfer full)
GstEvent *gst_op_calibration_event_new(gdouble roll, gdouble pitch, gdouble yaw);
// Reads a calibration event; FALSE for any other event or missing/non-finite fields.
gboolean gst_op_calibration_event_parse(GstEvent *event, gdouble *roll, gdouble *pitch,
                                        gdouble *yaw);

// The driving-settings event: the live policy inputs (desire, traffic convention). A
// GST_EVENT_CUSTOM_BOTH with structure "op-driving-settings" and optional fields
//   desire              string nick ("none", "turn-left", …) or int (the enum value)
//   traffic-convention  string nick ("right-hand", "left-hand") or int
// Sent downstream (in the data flow, so it applies from the next buffer on) or upstream from the
// sink side (applies at once). oppolicy and opvision (combined network) take it and let it go on.
#define GST_OP_DRIVING_SETTINGS_EVENT_NAME "op-driving-settings"

// The enums of its fields, also the network elements' `desire` and `traffic-convention`
// properties.
#define GST_TYPE_OP_DESIRE (gst_op_desire_get_type())
GType gst_op_desire_get_type(void);
#define GST_TYPE_OP_TRAFFIC_CONVENTION (gst_op_traffic_convention_get_type())
GType gst_op_traffic_convention_get_type(void);

G_END_DECLS

// A settings event; pass -1 to leave a setting out. (transfer full)
GstEvent *gst_op_driving_settings_event_new(gint desire, gint traffic_convention);

// Reads a settings event. Returns FALSE when `event` is not one; otherwise sets *has_desire /
// *has_traffic and the values present. A field with a value outside its enum makes it FALSE
// too, with *error (if given) naming the field.
gboolean gst_op_driving_settings_event_parse(GstEvent *event, gboolean *has_desire,
                                             op::drive::Desire *desire, gboolean *has_traffic,
                                             op::drive::TrafficConvention *traffic,
                                             std::string *error = nullptr);
