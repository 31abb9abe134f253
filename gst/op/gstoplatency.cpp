#include "op/gstoplatency.h"

#include "op/gstoplive.h"

bool GstOpLatencyReporter::Note(GstClockTime ns) {
  GstClockTime max = max_.load();
  while (ns > max && !max_.compare_exchange_weak(max, ns)) {
  }
  GstClockTime announced = announced_.load();
  return ns > announced + announced / 4 && announced_.compare_exchange_strong(announced, ns);
}

void GstOpLatencyReporter::NoteAndPost(GstElement *element, GstClockTime ns) {
  if (!Note(ns))
    return;
  GST_DEBUG_OBJECT(element, "processing latency grew to %" GST_TIME_FORMAT, GST_TIME_ARGS(ns));
  gst_element_post_message(element, gst_message_new_latency(GST_OBJECT(element)));
}

void GstOpLatencyReporter::AddTo(GstQuery *query) const {
  gboolean live = FALSE;
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;
  gst_query_parse_latency(query, &live, &min, &max);
  const GstClockTime ours = max_.load();  // one reading for both figures
  gst_query_set_latency(query, live, min + ours,
                        GST_CLOCK_TIME_IS_VALID(max) ? max + kGstOpMaxFramesInFlight * ours : max);
}

GstClockTime GstOpLatencyReporter::max_in_flight() const {
  return kGstOpMaxFramesInFlight * max_.load();
}

void GstOpLatencyReporter::Reset() {
  max_ = 0;
  announced_ = 0;
}

void gst_op_install_stat(GObjectClass *klass, guint id, const char *name, const char *blurb) {
  g_object_class_install_property(
      klass, id,
      g_param_spec_uint64(name, name, blurb, 0, G_MAXUINT64, 0,
                          (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));
}
