#include "common/net/driving_settings.h"

#include <string>

#include "common/gstopevents.h"

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
