// What a route's log says about each camera frame and the car, for a replay: the cameras' frame
// ids and start/end-of-frame times (roadCameraState, wideRoadCameraState), the car's speed
// (carState.vEgo) and the steering delay (liveDelay.lateralDelay), in stream time (ns since the
// first roadCameraState, the road video's first frame).
//
// The replay attaches the k-th camera state to the k-th decoded frame as its GstOpFrameMeta, so
// the elements see the camera's own frame ids (a gap in them is a drop), and sets opmsgsink's
// `v-ego` and `lat-delay` just before it renders each frame, to the values last logged at or
// before that frame's time (openpilot's modeld reads the latest carState and liveDelay the same
// way).
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

#include "cl/status.h"

namespace opreplay {

struct CameraFrame {
  guint32 frame_id = 0;
  guint64 sof_ns = 0, eof_ns = 0;  // the camera's clock, as logged
};

template <typename T>
struct Timed {
  guint64 time_ns = 0;  // stream time from which the value holds
  T value{};
};

struct RouteState {
  std::vector<CameraFrame> road, wide;
  std::vector<Timed<float>> v_ego;         // carState.vEgo, m/s, only changes kept
  std::vector<Timed<float>> lat_delay;     // liveDelay.lateralDelay, s, only changes kept
  size_t car_states = 0, live_delays = 0;  // messages read
};

// Reads the log at `path` (rlog, rlog.zst or rlog.bz2); errors name the file and the reason.
op::StatusOr<RouteState> ReadRouteState(const std::string &path);

// Attaches the logged camera state to each decoded frame (probe on a decoder's src pad). Frames
// beyond the log's keep no meta (opwarp then counts them).
void AddCameraStateProbe(GstElement *decoder, const std::vector<CameraFrame> *frames, bool wide);

// Sets opmsgsink's car state from the log before it renders each frame (probe on its sink pad).
struct CarStateFeed {
  const RouteState *state = nullptr;
  GstElement *sink = nullptr;
  size_t next_v = 0, next_delay = 0;
  guint64 updates = 0;
};
void AddCarStateProbe(GstElement *sink, CarStateFeed *feed);

}  // namespace opreplay
