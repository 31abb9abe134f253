// What a route's log says about each camera frame and the car, for a replay: the cameras' frame
// ids and start/end-of-frame times (roadCameraState, wideRoadCameraState), the car's speed
// (carState.vEgo), the steering delay (liveDelay.lateralDelay), the longitudinal actuator delay
// (carParams.longitudinalActuatorDelay) and the calibration
// (liveCalibration), in stream time (ns since the first roadCameraState, the road video's first
// frame). This is opreplay's only log parser: route.cpp reads each segment's log with it once,
// when it checks the segment, and shifts the segments' states into route time (StretchState).
//
// The replay attaches the k-th camera state to the k-th decoded frame as its GstOpFrameMeta, so
// the elements see the camera's own frame ids (a gap in them is a drop), and sets opmsgsink's
// `v-ego`, `lat-delay` and `long-delay` just before it renders each frame, to the values last
// logged at or before that frame's time (openpilot's modeld reads the latest carState and
// liveDelay the same way, and the car's parameters once at start).
#pragma once

#include <gst/gst.h>

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "drive/camera.h"

namespace opreplay {

struct CameraFrame {
  guint32 frame_id = 0;
  guint64 sof_ns = 0, eof_ns = 0;  // the camera's clock, as logged
  bool logged = true;              // false: a frame the log has no state for (no meta attached)
};

// A calibration (liveCalibration.rpyCalib) that holds from `time_ns` on.
struct CalibrationAt {
  guint64 time_ns = 0;
  op::drive::Rpy rpy;
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
  std::vector<Timed<float>> long_delay;    // carParams.longitudinalActuatorDelay, s, changes
  std::vector<CalibrationAt> calibration;  // liveCalibration.rpyCalib, only changes kept
  std::optional<double> height;            // the last liveCalibration.height
  size_t car_states = 0, live_delays = 0, car_params = 0;  // messages read
};

// Appends `next` (times already shifted by the caller's `offset_ns`) to `into`, keeping only
// changes; used to join the segments of a route.
void AppendState(const RouteState &next, guint64 offset_ns, RouteState *into);

// Reads the log at `path` (rlog, rlog.zst or rlog.bz2); errors name the file and the reason.
op::StatusOr<RouteState> ReadRouteState(const std::string &path);

// Attaches the logged camera state to each decoded frame (probe on a decoder's src pad). Frames
// beyond the log's keep no meta (opwarp then counts them).
void AddCameraStateProbe(GstElement *decoder, const std::vector<CameraFrame> *frames, bool wide);

// Sets opmsgsink's car state from the log before it renders each frame (probe on its sink pad).
struct CarStateFeed {
  const RouteState *state = nullptr;
  GstElement *sink = nullptr;
  size_t next_v = 0, next_delay = 0, next_long = 0;
  guint64 updates = 0;
};
void AddCarStateProbe(GstElement *sink, CarStateFeed *feed);

}  // namespace opreplay
