#include "common/net/driving_settings.h"

GType gst_op_desire_get_type(void) {
  static gsize type = 0;
  static const GEnumValue values[] = {
      {int(op::drive::Desire::kNone), "No desire", "none"},
      {int(op::drive::Desire::kTurnLeft), "Turn left", "turn-left"},
      {int(op::drive::Desire::kTurnRight), "Turn right", "turn-right"},
      {int(op::drive::Desire::kLaneChangeLeft), "Lane change to the left", "lane-change-left"},
      {int(op::drive::Desire::kLaneChangeRight), "Lane change to the right", "lane-change-right"},
      {int(op::drive::Desire::kKeepLeft), "Keep left", "keep-left"},
      {int(op::drive::Desire::kKeepRight), "Keep right", "keep-right"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstOpDesire", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}

GType gst_op_traffic_convention_get_type(void) {
  static gsize type = 0;
  static const GEnumValue values[] = {
      {int(op::drive::TrafficConvention::kRightHand), "Right-hand traffic (left-hand-drive cars)",
       "right-hand"},
      {int(op::drive::TrafficConvention::kLeftHand), "Left-hand traffic (right-hand-drive cars)",
       "left-hand"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstOpTrafficConvention", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}
