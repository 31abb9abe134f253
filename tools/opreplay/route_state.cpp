#include "route_state.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "drive/log_io.h"
#include "op/gstoptensor.h"

namespace opreplay {

namespace {

// Keeps only changes: openpilot logs carState at 100 Hz and liveDelay at 4 Hz with mostly the
// same values.
void AddChange(std::vector<Timed<float>> *series, guint64 mono, float value) {
  if (!std::isfinite(value))
    return;
  if (series->empty() || series->back().value != value)
    series->push_back({mono, value});
}

// Only changes matter; openpilot publishes the same calibration at 4 Hz.
void AddCalibration(std::vector<CalibrationAt> *changes, const CalibrationAt &c) {
  if (changes->empty() || changes->back().rpy.roll != c.rpy.roll ||
      changes->back().rpy.pitch != c.rpy.pitch || changes->back().rpy.yaw != c.rpy.yaw)
    changes->push_back(c);
}

template <typename T>
void ToStreamTime(std::vector<T> *series, guint64 t0) {
  for (auto &v : *series)
    v.time_ns = v.time_ns > t0 ? v.time_ns - t0 : 0;
}

}  // namespace

op::StatusOr<RouteState> ReadRouteState(const std::string &path) {
  auto log = op::drive::ReadLog(path);
  if (!log.ok())
    return log.status();
  RouteState state;
  std::optional<guint64> first_event, first_frame;
  op::Status st = op::drive::VisitEvents(*log, [&](size_t, op::msg::Event::Reader event) {
    const guint64 mono = event.getLogMonoTime();
    if (!first_event)
      first_event = mono;
    switch (event.which()) {
      case op::msg::Event::ROAD_CAMERA_STATE:
      case op::msg::Event::WIDE_ROAD_CAMERA_STATE: {
        const bool wide = event.which() == op::msg::Event::WIDE_ROAD_CAMERA_STATE;
        auto f = wide ? event.getWideRoadCameraState() : event.getRoadCameraState();
        if (!wide && !first_frame)
          first_frame = mono;
        (wide ? state.wide : state.road)
            .push_back({f.getFrameId(), f.getTimestampSof(), f.getTimestampEof()});
        break;
      }
      case op::msg::Event::CAR_STATE:
        state.car_states++;
        AddChange(&state.v_ego, mono, event.getCarState().getVEgo());
        break;
      case op::msg::Event::LIVE_DELAY:
        state.live_delays++;
        AddChange(&state.lat_delay, mono, event.getLiveDelay().getLateralDelay());
        break;
      case op::msg::Event::CAR_PARAMS:
        state.car_params++;
        AddChange(&state.long_delay, mono, event.getCarParams().getLongitudinalActuatorDelay());
        break;
      case op::msg::Event::LIVE_CALIBRATION: {
        auto cal = event.getLiveCalibration();
        auto rpy = cal.getRpyCalib();
        if (rpy.size() != 3)
          break;
        op::drive::Rpy r{rpy[0], rpy[1], rpy[2]};
        if (!std::isfinite(r.roll) || !std::isfinite(r.pitch) || !std::isfinite(r.yaw))
          break;
        if (cal.getHeight().size() >= 1 && std::isfinite(cal.getHeight()[0]))
          state.height = cal.getHeight()[0];
        AddCalibration(&state.calibration, {mono, r});
        break;
      }
      default:
        break;
    }
  });
  if (!st.ok())
    return st;
  const guint64 t0 = first_frame ? *first_frame : first_event.value_or(0);
  ToStreamTime(&state.v_ego, t0);
  ToStreamTime(&state.lat_delay, t0);
  ToStreamTime(&state.long_delay, t0);
  ToStreamTime(&state.calibration, t0);
  return state;
}

void AppendState(const RouteState &next, guint64 offset_ns, RouteState *into) {
  for (const auto &v : next.v_ego)
    AddChange(&into->v_ego, v.time_ns + offset_ns, v.value);
  for (const auto &d : next.lat_delay)
    AddChange(&into->lat_delay, d.time_ns + offset_ns, d.value);
  for (const auto &d : next.long_delay)
    AddChange(&into->long_delay, d.time_ns + offset_ns, d.value);
  for (const auto &c : next.calibration)
    AddCalibration(&into->calibration, {c.time_ns + offset_ns, c.rpy});
  if (next.height)
    into->height = next.height;
  into->car_states += next.car_states;
  into->live_delays += next.live_delays;
  into->car_params += next.car_params;
}

namespace {

struct CameraProbe {
  const std::vector<CameraFrame> *frames;
  bool wide;
  size_t next = 0;
};

GstPadProbeReturn OnCameraFrame(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *probe = static_cast<CameraProbe *>(data);
  if (probe->next >= probe->frames->size())
    return GST_PAD_PROBE_OK;
  const CameraFrame &f = (*probe->frames)[probe->next++];
  if (!f.logged)
    return GST_PAD_PROBE_OK;
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  buf = gst_buffer_make_writable(buf);
  GST_PAD_PROBE_INFO_DATA(info) = buf;
  GstOpFrameMeta *meta = gst_buffer_get_or_add_op_frame_meta(buf);
  if (probe->wide) {
    meta->wide_frame_id = f.frame_id;
    meta->wide_sof_ns = f.sof_ns;
    meta->wide_eof_ns = f.eof_ns;
  } else {
    meta->road_frame_id = f.frame_id;
    meta->road_sof_ns = f.sof_ns;
    meta->road_eof_ns = f.eof_ns;
  }
  return GST_PAD_PROBE_OK;
}

// The value of `series` at `t` (the last change at or before it); advances *next.
const Timed<float> *At(const std::vector<Timed<float>> &series, size_t *next, guint64 t) {
  while (*next < series.size() && series[*next].time_ns <= t)
    (*next)++;
  return *next > 0 ? &series[*next - 1] : nullptr;
}

GstPadProbeReturn OnSinkFrame(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *feed = static_cast<CarStateFeed *>(data);
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!GST_BUFFER_PTS_IS_VALID(buf))
    return GST_PAD_PROBE_OK;
  const guint64 t = GST_BUFFER_PTS(buf);
  const size_t v_before = feed->next_v, d_before = feed->next_delay, l_before = feed->next_long;
  const Timed<float> *v = At(feed->state->v_ego, &feed->next_v, t);
  const Timed<float> *d = At(feed->state->lat_delay, &feed->next_delay, t);
  const Timed<float> *l = At(feed->state->long_delay, &feed->next_long, t);
  // Only when a new value came in: the properties are the sink's live settings.
  if (v && feed->next_v != v_before) {
    // openpilot takes max(vEgo, 0); the property's range ends at 100 m/s.
    g_object_set(feed->sink, "v-ego", std::clamp(gdouble(v->value), 0.0, 100.0), nullptr);
    feed->updates++;
  }
  if (d && feed->next_delay != d_before) {
    g_object_set(feed->sink, "lat-delay", std::clamp(gdouble(d->value), 0.0, 5.0), nullptr);
    feed->updates++;
  }
  if (l && feed->next_long != l_before) {
    g_object_set(feed->sink, "long-delay", std::clamp(gdouble(l->value), 0.0, 5.0), nullptr);
    feed->updates++;
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace

void AddCameraStateProbe(GstElement *decoder, const std::vector<CameraFrame> *frames, bool wide) {
  GstPad *pad = gst_element_get_static_pad(decoder, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, OnCameraFrame, new CameraProbe{frames, wide},
                    [](gpointer p) { delete static_cast<CameraProbe *>(p); });
  gst_object_unref(pad);
}

void AddCarStateProbe(GstElement *sink, CarStateFeed *feed) {
  feed->sink = sink;
  GstPad *pad = gst_element_get_static_pad(sink, "sink");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, OnSinkFrame, feed, nullptr);
  gst_object_unref(pad);
}

}  // namespace opreplay
