#include "common/net/driving_settings.h"

#include <string>

#include "common/gstopevents.h"

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

gboolean gst_op_apply_driving_settings_event(GstElement *element, GstEvent *event,
                                             op::drive::Desire *desire,
                                             op::drive::TrafficConvention *traffic) {
  gboolean has_d = FALSE, has_t = FALSE;
  op::drive::Desire d;
  op::drive::TrafficConvention t;
  std::string error;
  if (!gst_op_driving_settings_event_parse(event, &has_d, &d, &has_t, &t, &error)) {
    if (!error.empty())
      GST_WARNING_OBJECT(element, "ignoring a driving-settings event: %s", error.c_str());
    return FALSE;
  }
  GST_OBJECT_LOCK(element);
  if (has_d)
    *desire = d;
  if (has_t)
    *traffic = t;
  GST_OBJECT_UNLOCK(element);
  GST_DEBUG_OBJECT(element, "settings event: desire %s, traffic %s",
                   has_d ? op::drive::DesireName(d) : "(unchanged)",
                   has_t
                       ? (t == op::drive::TrafficConvention::kLeftHand ? "left-hand" : "right-hand")
                       : "(unchanged)");
  if (has_d)
    g_object_notify(G_OBJECT(element), "desire");
  if (has_t)
    g_object_notify(G_OBJECT(element), "traffic-convention");
  return TRUE;
}
