#include "common/gstopevents.h"

#include <cmath>
#include <string>

// ---- Calibration event --------------------------------------------------------------------

GstEvent *gst_op_calibration_event_new(gdouble roll, gdouble pitch, gdouble yaw) {
  return gst_event_new_custom(
      GST_EVENT_CUSTOM_DOWNSTREAM,
      gst_structure_new(GST_OP_CALIBRATION_EVENT_NAME, "roll", G_TYPE_DOUBLE, roll, "pitch",
                        G_TYPE_DOUBLE, pitch, "yaw", G_TYPE_DOUBLE, yaw, nullptr));
}

gboolean gst_op_calibration_event_parse(GstEvent *event, gdouble *roll, gdouble *pitch,
                                        gdouble *yaw) {
  if (!event || GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_DOWNSTREAM)
    return FALSE;
  const GstStructure *s = gst_event_get_structure(event);
  if (!s || !gst_structure_has_name(s, GST_OP_CALIBRATION_EVENT_NAME))
    return FALSE;
  gdouble r = 0, p = 0, y = 0;
  if (!gst_structure_get_double(s, "roll", &r) || !gst_structure_get_double(s, "pitch", &p) ||
      !gst_structure_get_double(s, "yaw", &y) || !std::isfinite(r) || !std::isfinite(p) ||
      !std::isfinite(y))
    return FALSE;
  if (roll)
    *roll = r;
  if (pitch)
    *pitch = p;
  if (yaw)
    *yaw = y;
  return TRUE;
}

// ---- Driving-settings event ---------------------------------------------------------------

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

// Writes `value` of enum `type` as its nick, or as a number when it is not one of its values.
static void SetEnumField(GstStructure *s, const char *field, GType type, gint value) {
  GEnumClass *klass = static_cast<GEnumClass *>(g_type_class_ref(type));
  GEnumValue *v = g_enum_get_value(klass, value);
  if (v)
    gst_structure_set(s, field, G_TYPE_STRING, v->value_nick, nullptr);
  else
    gst_structure_set(s, field, G_TYPE_INT, value, nullptr);
  g_type_class_unref(klass);
}

GstEvent *gst_op_driving_settings_event_new(gint desire, gint traffic_convention) {
  GstStructure *s = gst_structure_new_empty(GST_OP_DRIVING_SETTINGS_EVENT_NAME);
  if (desire >= 0)
    SetEnumField(s, "desire", GST_TYPE_OP_DESIRE, desire);
  if (traffic_convention >= 0)
    SetEnumField(s, "traffic-convention", GST_TYPE_OP_TRAFFIC_CONVENTION, traffic_convention);
  return gst_event_new_custom(GST_EVENT_CUSTOM_BOTH, s);
}

// Reads an enum field given as nick or number; false with *error when it is neither.
static gboolean ReadEnumField(const GstStructure *s, const char *field, GType type, gint *out,
                              std::string *error) {
  GEnumClass *klass = static_cast<GEnumClass *>(g_type_class_ref(type));
  gboolean ok = FALSE;
  const GValue *v = gst_structure_get_value(s, field);
  if (G_VALUE_HOLDS_STRING(v)) {
    const char *nick = g_value_get_string(v);
    GEnumValue *ev = nick ? g_enum_get_value_by_nick(klass, nick) : nullptr;
    if (ev) {
      *out = ev->value;
      ok = TRUE;
    } else if (error) {
      *error = std::string(field) + " \"" + (nick ? nick : "") + "\" is not one of its values";
    }
  } else if (G_VALUE_HOLDS_INT(v)) {
    GEnumValue *ev = g_enum_get_value(klass, g_value_get_int(v));
    if (ev) {
      *out = ev->value;
      ok = TRUE;
    } else if (error) {
      *error = std::string(field) + " " + std::to_string(g_value_get_int(v)) +
               " is not one of its values";
    }
  } else if (error) {
    *error = std::string(field) + " is neither a string nor an int";
  }
  g_type_class_unref(klass);
  return ok;
}

gboolean gst_op_driving_settings_event_parse(GstEvent *event, gboolean *has_desire,
                                             op::drive::Desire *desire, gboolean *has_traffic,
                                             op::drive::TrafficConvention *traffic,
                                             std::string *error) {
  if (GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_BOTH &&
      GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_UPSTREAM &&
      GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_DOWNSTREAM)
    return FALSE;
  const GstStructure *s = gst_event_get_structure(event);
  if (!s || !gst_structure_has_name(s, GST_OP_DRIVING_SETTINGS_EVENT_NAME))
    return FALSE;
  *has_desire = gst_structure_has_field(s, "desire");
  *has_traffic = gst_structure_has_field(s, "traffic-convention");
  gint d = 0, t = 0;
  if (*has_desire && !ReadEnumField(s, "desire", GST_TYPE_OP_DESIRE, &d, error))
    return FALSE;
  if (*has_traffic &&
      !ReadEnumField(s, "traffic-convention", GST_TYPE_OP_TRAFFIC_CONVENTION, &t, error))
    return FALSE;
  *desire = static_cast<op::drive::Desire>(d);
  *traffic = static_cast<op::drive::TrafficConvention>(t);
  return TRUE;
}
