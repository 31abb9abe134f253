// Routes laid out like openpilot's: a route is a sequence of segments, each a folder
// `<route>--<n>` (n = 0, 1, ...) holding fcamera.hevc, optionally ecamera.hevc and optionally a
// log (rlog, rlog.zst or rlog.bz2). opreplay replays a route's segments in order as one drive:
// consecutive good segments are one continuous stream (the model's temporal state carries over
// their boundaries); a missing or broken segment ends that stream, is reported, and the next good
// segment starts a new one with fresh state. See docs/fleet.md.
#pragma once

#include <gst/gst.h>

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "drive/camera.h"
#include "route_state.h"

namespace op::replay {

// openpilot's cameras run at 20 Hz; a segment's duration is its picture count at this rate.
constexpr guint64 kFrameNs = 50000000ull;
// A segment whose pictures cannot be counted (missing or broken) is assumed to be this long, as
// openpilot's one-minute segments are.
constexpr guint64 kNominalSegmentFrames = 1200;

struct Segment {
  int number = -1;             // n of <route>--<n>; 0 for a single segment folder
  std::string dir;             // the segment's folder
  std::string road;            // fcamera.hevc
  std::string wide;            // ecamera.hevc, empty when the segment has none
  std::string log;             // rlog / rlog.zst / rlog.bz2, empty when the segment has none
  guint64 frames = 0;          // pictures in the road stream (counted from the stream's slices)
  guint64 wide_frames = 0;     // pictures in the wide stream
  guint64 first_frame = 0;     // index of its first frame in the whole route
  std::string error;           // why the segment cannot be replayed; empty for a good segment
  opreplay::RouteState state;  // what its log says, in segment time; empty without a log
};

struct Route {
  std::string path;               // as given
  bool segmented = false;         // false: a single folder holding fcamera.hevc
  std::vector<Segment> segments;  // every number from the first to the last, missing ones too
};

// Consecutive good segments, replayed as one continuous stream.
struct Stretch {
  std::vector<const Segment *> segments;
  bool wide = false;  // every segment of the stretch has ecamera.hevc
  guint64 first_frame() const { return segments.front()->first_frame; }
  guint64 frames() const;
};

// Opens PATH as a route: a folder holding fcamera.hevc (one segment, not segmented); a folder
// holding segment folders `<name>--<n>` of one route; or a route prefix `DIR/NAME` whose
// segments are the folders `DIR/NAME--<n>`. Every segment is checked (its streams start with
// HEVC parameter sets and a key frame, its log reads: ReadRouteState, the only time it is read,
// keeps what it says in `state`) and its pictures counted; a segment that fails a check gets its
// `error`, a number missing between the first and the last is reported as missing. Fails when
// PATH is none of the three or has no segment at all.
StatusOr<Route> OpenRoute(const std::string &path);

// The stretches of good segments, in order.
std::vector<Stretch> Stretches(const Route &route);

// Checks an HEVC elementary stream (Annex B) and counts its pictures: it must start with a start
// code, hold VPS, SPS and PPS before its first picture, and that picture must be a key frame
// (IRAP). The error names the file and what is wrong.
StatusOr<guint64> CountHevcPictures(const std::string &path);

// What the logs of the stretch's segments say, joined in route time: an event at stream time t
// of a segment (ns since its log's first roadCameraState) is at first_frame * 50 ms + t. The
// camera states are one per frame of the stretch, in order: a segment's first `frames` states,
// and frames its log has no state for marked not logged, so that the k-th state stays the k-th
// decoded frame's across segment boundaries. Segments without a log contribute no value.
opreplay::RouteState StretchState(const Stretch &stretch);

// The source of one camera of a stretch for gst_parse_launch: an appsrc named NAME that
// AttachStretchSource feeds with the camera files of the stretch's segments, back to back.
std::string StretchSourceDescription(const std::string &name);

// Feeds the appsrc NAME of `bin` with CAMERA ("road" or "wide") of every segment of the stretch,
// and shifts the decoded frames of DECODER's source pad into route time: PTS + first_frame * 50
// ms and buffer offset = the frame's index in the route (opwarp's frame id), so that the frame
// ids and log times of later stretches continue the route's and show the gap before them. The
// stretch must outlive the pipeline.
Status AttachStretchSource(GstBin *bin, const std::string &name, const std::string &decoder,
                           const Stretch &stretch, const std::string &camera);

}  // namespace op::replay
