// opreplay: replays a route folder laid out like openpilot's through the whole pipeline and leaves
// the driving messages, a video with the predictions drawn in and a contact sheet.
//
//   opreplay [options] ROUTE_DIR
//
// ROUTE_DIR holds fcamera.hevc (road camera), optionally ecamera.hevc (wide camera) and
// optionally a log (rlog, rlog.zst or rlog.bz2). Or it is a route of openpilot's segments
// <route>--<n> (the folder holding them, or the prefix DIR/<route>), replayed as one drive; see
// route.h and docs/fleet.md. Exit status 3: replayed, but a segment was missing or broken. From
// the log (each segment's, joined in route time: route_state.h, route.h) come the calibration
// (liveCalibration.rpyCalib, sent to opwarp and opoverlay as an "op-calibration" event in stream
// order whenever it changes; without one, --rpy gives it), the cameras' frame ids and times
// (attached to the decoded frames) and the car's state (carState.vEgo, liveDelay.lateralDelay,
// carParams.longitudinalActuatorDelay, set on opmsgsink; without them, --v-ego, --lat-delay and
// --long-delay). The camera presets come from the
// frame size (opwarp's device-type=auto). Writes OUT/rlog.zst, OUT/overlay.mkv and
// OUT/contact-sheet.png, shows progress on stderr and prints a summary on stdout, saying where
// each of these values came from. Run with --help for the options.
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cl/program_cache.h"
#include "common/gstopevents.h"
#include "drive/camera.h"
#include "drive/log_io.h"
#include "op/gstopcontext.h"
#include "op/gstoptensor.h"
#include "route.h"

namespace {

using op::drive::Rpy;

// When opreplay started: the summary's "first message" counts from here (static initialisation,
// after the dynamic linker and before main).
const std::chrono::steady_clock::time_point g_started = std::chrono::steady_clock::now();

struct Options {
  std::string route;
  std::string out = "out";
  std::string vision, policy, supercombo;
  std::string device = "auto";
  std::string precision = "auto";
  std::string rpy;           // --rpy: the calibration when the route has no log
  std::string ground_truth;  // --ground-truth: a synthetic drive's groundtruth.json
  std::string dump_inputs;   // --dump-inputs: the networks' inputs as .npy (calibration data)
  // The car's state when the route has no log (or the log lacks it).
  double v_ego = 0.0, lat_delay = 0.0, long_delay = 0.0;
  bool single_camera = false;
  bool video = true;
  guint64 max_frames = 0;  // 0: the whole route
  double realtime = 0.0;   // --realtime[=RATE]: frames released at their times / RATE; 0: off
};

// A calibration that holds from `time_ns` (stream time: ns since the route's first frame) on.
using CalibrationChange = opreplay::CalibrationAt;

const char *kUsage =
    "usage: opreplay [options] ROUTE_DIR\n"
    "\n"
    "Replays ROUTE_DIR (fcamera.hevc, optional ecamera.hevc, optional rlog / rlog.zst /\n"
    "rlog.bz2) through opwarp → opvision → oppolicy → opmsgsink and opoverlay. ROUTE_DIR may\n"
    "also be a route of segment folders <route>--<n> (the folder holding them, or DIR/<route>):\n"
    "its segments are replayed in order as one drive; a missing or broken segment is reported,\n"
    "the model's state starts anew after it, and the exit status is 3.\n"
    "\n"
    "  --out DIR            output folder (default: out)\n"
    "  --vision FILE        vision network (ONNX or .opm)\n"
    "  --policy FILE        policy network\n"
    "  --supercombo FILE    a combined network instead of --vision/--policy\n"
    "  --device DEV         OpenCL device: auto, gpu, cpu, P:D or a name part (default auto)\n"
    "  --precision P        auto, fp32, fp16 or int8 (default auto: int8 for a quantized\n"
    "                       model, else fp16 where the device computes in half)\n"
    "  --single-camera      use only fcamera.hevc (it also serves as the wide input)\n"
    "  --rpy R,P,Y          calibration in radians when the route has no log\n"
    "  --ground-truth FILE  draw a synthetic drive's ground truth (groundtruth.json) in yellow\n"
    "  --max-frames N       stop after N road frames\n"
    "  --v-ego V            the car's speed in m/s when the log has no carState (default 0)\n"
    "  --lat-delay S        steering delay in s when the log has no liveDelay (default 0)\n"
    "  --long-delay S       longitudinal actuator delay in s when the log has no carParams\n"
    "                       (default 0)\n"
    "  --no-video           write neither the overlay video nor the contact sheet\n"
    "  --realtime[=RATE]    behave like a live camera: release each frame at its capture time\n"
    "                       (RATE times real time, default 1) and answer as a live source, so\n"
    "                       opwarp drops frames when the device falls behind (counted in the\n"
    "                       summary and in modelV2.frameDropPerc); with both cameras a pair\n"
    "                       is dropped together\n"
    "  --dump-inputs DIR    write every run's network inputs to DIR as <input>-<frame>.npy\n"
    "                       (calibration data for opc quantize; slow: waits per frame)\n";

bool FileExists(const std::string &path) {
  return g_file_test(path.c_str(), G_FILE_TEST_IS_REGULAR);
}

// Quotes a value for gst_parse_launch (paths may hold spaces).
std::string Quote(const std::string &s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q + "\"";
}

// ---- Running ------------------------------------------------------------------------------

// --realtime: the cameras' frames are released at their capture times (PTS), RATE times faster
// than real time. Each camera's first frame goes at once (the networks need both cameras' for
// their first run) and the others wait until the networks are up (Ready): a first run compiles
// the networks, and a camera started then would see all its first frames dropped. Ready comes
// with the first output of the networks, or as soon as they consumed a frame without running
// (WatchFirstRun): a first road frame that follows an id gap is not evaluated, and a first wide
// frame too old for the first road frame is dropped; waiting for an output then would wait for
// frames that wait for it, and the pipeline, still prerolling, has no clock to time out on. From
// then on the clock runs from the next frame either camera releases. A frame that is already
// late goes at once: like a camera's, it does not wait for the pipeline.
struct RealtimeClock {
  double rate = 0.0;  // 0: off, every frame goes as soon as it is decoded
  std::mutex lock;
  std::condition_variable ready_cv;
  bool ready = false, started = false;
  std::chrono::steady_clock::time_point origin;
  GstClockTime origin_pts = 0;

  void WaitFor(GstClockTime pts, bool camera_first) {
    if (rate <= 0.0 || camera_first || !GST_CLOCK_TIME_IS_VALID(pts))
      return;
    std::chrono::steady_clock::time_point due;
    {
      std::unique_lock<std::mutex> guard(lock);
      ready_cv.wait(guard, [this] { return ready; });
      if (!started) {
        started = true;
        origin = std::chrono::steady_clock::now();
        origin_pts = pts;
      }
      const double after_ns = pts > origin_pts ? double(pts - origin_pts) / rate : 0.0;
      due = origin + std::chrono::nanoseconds(gint64(after_ns));
    }
    std::this_thread::sleep_until(due);
  }

  // The first frame came out of the networks, they consumed one without running, or the replay
  // ends: the frames go.
  void Ready() {
    std::lock_guard<std::mutex> guard(lock);
    ready = true;
    ready_cv.notify_all();
  }
  bool is_ready() {
    std::lock_guard<std::mutex> guard(lock);
    return ready;
  }
};

// --realtime: the decoders' latency answer says live, as a camera's does, so opwarp (which asks
// upstream) bounds the frames on the device and drops the rest. Runs after the decoder answered.
GstPadProbeReturn LiveLatencyProbe(GstPad *, GstPadProbeInfo *info, gpointer) {
  GstQuery *query = GST_PAD_PROBE_INFO_QUERY(info);
  if (GST_QUERY_TYPE(query) != GST_QUERY_LATENCY)
    return GST_PAD_PROBE_OK;
  gboolean live = FALSE;
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;
  gst_query_parse_latency(query, &live, &min, &max);
  gst_query_set_latency(query, TRUE, min, max);
  return GST_PAD_PROBE_OK;
}

// One camera's calibration feed: a probe on its decoder's output sends an op-calibration event
// before the first frame at or after each change's time, so opwarp (and, through the tee,
// opoverlay) switch at exactly that frame.
struct CameraFeed {
  const char *name = "";
  const std::vector<CalibrationChange> *changes = nullptr;
  size_t next = 0;
  guint64 frames = 0;
  guint64 max_frames = 0;
  bool ended = false;
  std::vector<std::string> *report = nullptr;  // "frame N: rpy" lines, road camera only
  int width = 0, height = 0;                   // of the decoded frames
  RealtimeClock *clock = nullptr;              // --realtime: when frames are released
};

GstPadProbeReturn FeedProbe(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
  auto *feed = static_cast<CameraFeed *>(data);
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  if (feed->ended)
    return GST_PAD_PROBE_DROP;
  if (feed->max_frames && feed->frames >= feed->max_frames) {
    // Enough frames: end this camera's stream here; what the decoder still sends is dropped.
    feed->ended = true;
    gst_pad_push_event(pad, gst_event_new_eos());
    return GST_PAD_PROBE_DROP;
  }
  if (feed->width == 0) {
    GstCaps *caps = gst_pad_get_current_caps(pad);
    GstVideoInfo vi;
    if (caps && gst_video_info_from_caps(&vi, caps)) {
      feed->width = GST_VIDEO_INFO_WIDTH(&vi);
      feed->height = GST_VIDEO_INFO_HEIGHT(&vi);
    }
    if (caps)
      gst_caps_unref(caps);
  }
  const GstClockTime pts = GST_BUFFER_PTS(buf);
  // --realtime: the decoder's thread waits for the frame's capture time (the only wait per
  // frame, and the point of the option); without it this returns at once.
  if (feed->clock)
    feed->clock->WaitFor(pts, feed->frames == 0);
  while (feed->changes && feed->next < feed->changes->size() && GST_CLOCK_TIME_IS_VALID(pts) &&
         (*feed->changes)[feed->next].time_ns <= pts) {
    const Rpy &r = (*feed->changes)[feed->next].rpy;
    GstEvent *ev = gst_event_new_custom(
        GST_EVENT_CUSTOM_DOWNSTREAM,
        gst_structure_new(GST_OP_CALIBRATION_EVENT_NAME, "roll", G_TYPE_DOUBLE, r.roll, "pitch",
                          G_TYPE_DOUBLE, r.pitch, "yaw", G_TYPE_DOUBLE, r.yaw, nullptr));
    gst_pad_push_event(pad, ev);
    if (feed->report)
      feed->report->push_back("frame " + std::to_string(feed->frames) + " (" +
                              std::to_string(pts / GST_MSECOND) +
                              " ms): rpy = " + op::drive::FormatRpy(r));
    feed->next++;
  }
  feed->frames++;
  return GST_PAD_PROBE_OK;
}

// Per-stage device times from the frame meta of every evaluated frame (warp, vision, policy).
struct StageTimes {
  std::mutex lock;
  guint64 frames = 0;
  guint64 ns[GST_OP_STAGE_COUNT] = {};
  // The frame-drop percentage the messages publish (modelV2.frameDropPerc): the last and the
  // largest.
  double drop_perc_last = 0.0, drop_perc_max = 0.0;
  RealtimeClock *clock = nullptr;  // --realtime: told when the first frame is out
};

GstPadProbeReturn StageProbe(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *times = static_cast<StageTimes *>(data);
  if (times->clock)
    times->clock->Ready();
  GstOpFrameMeta *meta = gst_buffer_get_op_frame_meta(GST_PAD_PROBE_INFO_BUFFER(info));
  if (meta) {
    std::lock_guard<std::mutex> guard(times->lock);
    times->frames++;
    for (int s = 0; s < GST_OP_STAGE_COUNT; s++)
      times->ns[s] += meta->stage_ns[s];
    times->drop_perc_last = meta->frame_drop_perc;
    times->drop_perc_max = std::max(times->drop_perc_max, double(meta->frame_drop_perc));
  }
  return GST_PAD_PROBE_OK;
}

// The contact sheet: thumbnails of evenly spread frames of the overlay video. Frames arrive
// without knowing how many will come, so every `step`-th is kept, and when too many are kept
// every other one is dropped and the step doubles.
constexpr int kSheetColumns = 4, kSheetRows = 3, kSheetCells = kSheetColumns * kSheetRows;
struct ContactSheet {
  int width = 0, height = 0;  // of a thumbnail
  guint64 seen = 0, step = 1;
  std::vector<std::pair<guint64, std::vector<uint8_t>>> kept;  // frame index, RGB thumbnail
};

// fakesink's handoff: a BGRx frame of the overlay video.
void OnSheetFrame(GstElement *, GstBuffer *buf, GstPad *pad, gpointer data) {
  auto *sheet = static_cast<ContactSheet *>(data);
  const guint64 index = sheet->seen++;
  if (index % sheet->step != 0)
    return;
  GstCaps *caps = gst_pad_get_current_caps(pad);
  GstVideoInfo info;
  const bool ok = caps && gst_video_info_from_caps(&info, caps);
  if (caps)
    gst_caps_unref(caps);
  GstVideoFrame frame;
  if (!ok || !gst_video_frame_map(&frame, &info, buf, GST_MAP_READ))
    return;
  // Half size by 2×2 box filter, BGRx → RGB.
  const int w = GST_VIDEO_FRAME_WIDTH(&frame) / 2, h = GST_VIDEO_FRAME_HEIGHT(&frame) / 2;
  const int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0);
  const auto *src = static_cast<const uint8_t *>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
  std::vector<uint8_t> thumb(size_t(w) * h * 3);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) {
        const uint8_t *p = src + size_t(2 * y) * stride + 8 * x + c;
        const int sum = p[0] + p[4] + p[stride] + p[stride + 4];
        thumb[(size_t(y) * w + x) * 3 + (2 - c)] = uint8_t((sum + 2) / 4);
      }
  gst_video_frame_unmap(&frame);
  sheet->width = w;
  sheet->height = h;
  sheet->kept.emplace_back(index, std::move(thumb));
  if (sheet->kept.size() >= 2 * kSheetCells) {
    std::vector<std::pair<guint64, std::vector<uint8_t>>> half;
    for (size_t i = 0; i < sheet->kept.size(); i += 2)
      half.push_back(std::move(sheet->kept[i]));
    sheet->kept = std::move(half);
    sheet->step *= 2;
  }
}

// Lays out up to kSheetCells evenly spread thumbnails and encodes them with pngenc.
op::Status WriteContactSheet(const ContactSheet &sheet, const std::string &path) {
  if (sheet.kept.empty())
    return op::NotFound("no overlay frames to put on the contact sheet");
  const int n = std::min<int>(kSheetCells, sheet.kept.size());
  const int cols = std::min(n, kSheetColumns), rows = (n + cols - 1) / cols;
  const int gap = 4, W = cols * sheet.width + (cols + 1) * gap,
            H = rows * sheet.height + (rows + 1) * gap;
  const int stride = (W * 3 + 3) & ~3;  // GStreamer's RGB rows are 4-byte aligned
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, size_t(stride) * H, nullptr);
  GstMapInfo map;
  gst_buffer_map(buf, &map, GST_MAP_WRITE);
  std::memset(map.data, 24, map.size);
  for (int i = 0; i < n; i++) {
    const size_t pick = sheet.kept.size() == 1 ? 0 : size_t(i) * (sheet.kept.size() - 1) / (n - 1);
    const std::vector<uint8_t> &t = sheet.kept[pick].second;
    const int x0 = gap + (i % cols) * (sheet.width + gap),
              y0 = gap + (i / cols) * (sheet.height + gap);
    for (int y = 0; y < sheet.height; y++)
      std::memcpy(map.data + size_t(y0 + y) * stride + size_t(x0) * 3,
                  t.data() + size_t(y) * sheet.width * 3, size_t(sheet.width) * 3);
  }
  gst_buffer_unmap(buf, &map);

  GError *error = nullptr;
  const std::string desc =
      "appsrc name=src ! videoconvert ! pngenc ! filesink location=" + Quote(path);
  GstElement *pipe = gst_parse_launch(desc.c_str(), &error);
  if (!pipe) {
    std::string msg = error ? error->message : "unknown";
    g_clear_error(&error);
    gst_buffer_unref(buf);
    return op::NotFound("cannot build the PNG writer: " + msg);
  }
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipe), "src");
  GstCaps *caps =
      gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "RGB", "width", G_TYPE_INT, W,
                          "height", G_TYPE_INT, H, "framerate", GST_TYPE_FRACTION, 0, 1, nullptr);
  g_object_set(src, "caps", caps, "format", GST_FORMAT_TIME, nullptr);
  gst_caps_unref(caps);
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  GstFlowReturn flow = GST_FLOW_OK;
  g_signal_emit_by_name(src, "push-buffer", buf, &flow);
  gst_buffer_unref(buf);
  g_signal_emit_by_name(src, "end-of-stream", &flow);
  GstBus *bus = gst_element_get_bus(pipe);
  GstMessage *msg = gst_bus_timed_pop_filtered(bus, 60 * GST_SECOND,
                                               GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  op::Status st;
  if (!msg || GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
    st = op::IoError("writing " + path + " failed");
  if (msg)
    gst_message_unref(msg);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(pipe);
  return st;
}

struct Run {
  GMainLoop *loop = nullptr;
  GstElement *pipeline = nullptr;
  GstElement *vision = nullptr, *policy = nullptr, *sink = nullptr, *overlay = nullptr;
  GstElement *road_warp = nullptr, *wide_warp = nullptr;
  std::chrono::steady_clock::time_point start;
  CameraFeed road, wide;
  bool failed = false;
  bool tty = false;
};

// The networks post "op-compile-progress" from the thread that loads them, while the pipeline
// starts and before the main loop runs: shown from the bus's sync handler.
GstBusSyncReply OnBusSync(GstBus *, GstMessage *msg, gpointer data) {
  const GstStructure *s = gst_message_get_structure(msg);
  guint done = 0, total = 0;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ELEMENT && s &&
      gst_structure_has_name(s, "op-compile-progress") &&
      gst_structure_get_uint(s, "done", &done) && gst_structure_get_uint(s, "total", &total)) {
    const char *model = gst_structure_get_string(s, "model");
    static_cast<op::cl::ProgressLine *>(data)->Update(model ? model : "?", done, total);
  }
  return GST_BUS_PASS;
}

// opmsgsink's "message" signal: the first message's time since opreplay started, then the
// signal is turned off (no copy of every message for the rest of the run).
void OnFirstMessage(GstElement *sink, const gchar *, GBytes *, gpointer data) {
  auto *first = static_cast<std::atomic<double> *>(data);
  double none = -1.0;
  first->compare_exchange_strong(
      none, std::chrono::duration<double>(std::chrono::steady_clock::now() - g_started).count());
  g_object_set(sink, "emit-signals", FALSE, nullptr);
}

gboolean OnBus(GstBus *, GstMessage *msg, gpointer data) {
  auto *run = static_cast<Run *>(data);
  switch (GST_MESSAGE_TYPE(msg)) {
    case GST_MESSAGE_ERROR: {
      GError *err = nullptr;
      gchar *debug = nullptr;
      gst_message_parse_error(msg, &err, &debug);
      std::fprintf(stderr, "\nopreplay: error from %s: %s\n  %s\n", GST_OBJECT_NAME(msg->src),
                   err->message, debug ? debug : "");
      g_error_free(err);
      g_free(debug);
      run->failed = true;
      g_main_loop_quit(run->loop);
      break;
    }
    case GST_MESSAGE_WARNING: {
      GError *err = nullptr;
      gst_message_parse_warning(msg, &err, nullptr);
      std::fprintf(stderr, "\nopreplay: warning from %s: %s\n", GST_OBJECT_NAME(msg->src),
                   err->message);
      g_error_free(err);
      break;
    }
    case GST_MESSAGE_EOS:
      g_main_loop_quit(run->loop);
      break;
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

guint64 Stat(GstElement *e, const char *name) {
  guint64 v = 0;
  if (e && g_object_class_find_property(G_OBJECT_GET_CLASS(e), name))
    g_object_get(e, name, &v, nullptr);
  return v;
}

double StatMs(GstElement *e, const char *name) {
  double v = 0;
  if (e && g_object_class_find_property(G_OBJECT_GET_CLASS(e), name))
    g_object_get(e, name, &v, nullptr);
  return v;
}

gboolean OnProgress(gpointer data) {
  auto *run = static_cast<Run *>(data);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run->start).count();
  std::fprintf(stderr,
               "%sopreplay: %" G_GUINT64_FORMAT " frames in, %" G_GUINT64_FORMAT
               " evaluated, %.1f fps, %.0f s%s",
               run->tty ? "\r" : "", run->road.frames, Stat(run->vision, "frames"),
               secs > 0 ? run->road.frames / secs : 0.0, secs, run->tty ? "" : "\n");
  return G_SOURCE_CONTINUE;
}

// --realtime, until the clock is ready: the networks consumed a frame without an output (a road
// frame skipped after an id gap, left out for QoS or passed over by the pairing, a wide frame
// too old for its road frame): their first run cannot be waited for any longer. Polled from the
// main loop, which runs while the pipeline prerolls; ends once the clock is ready.
struct FirstRunWatch {
  GstElement *vision = nullptr;
  RealtimeClock *clock = nullptr;
  bool done = false;  // the source removed itself
};

gboolean WatchFirstRun(gpointer data) {
  auto *watch = static_cast<FirstRunWatch *>(data);
  guint64 consumed = 0;
  if (!watch->clock->is_ready()) {
    for (const char *stat : {"skipped", "qos-dropped", "dropped-road", "dropped-wide"})
      consumed += Stat(watch->vision, stat);
    if (consumed == 0)
      return G_SOURCE_CONTINUE;
    watch->clock->Ready();
  }
  watch->done = true;
  return G_SOURCE_REMOVE;
}

int ParseArgs(int argc, char **argv, Options *o) {
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&](std::string *dst) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "opreplay: %s needs a value\n%s", a.c_str(), kUsage);
        return false;
      }
      *dst = argv[++i];
      return true;
    };
    std::string frames;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--out") {
      if (!value(&o->out))
        return 2;
    } else if (a == "--vision") {
      if (!value(&o->vision))
        return 2;
    } else if (a == "--policy") {
      if (!value(&o->policy))
        return 2;
    } else if (a == "--supercombo") {
      if (!value(&o->supercombo))
        return 2;
    } else if (a == "--device") {
      if (!value(&o->device))
        return 2;
    } else if (a == "--precision") {
      if (!value(&o->precision))
        return 2;
    } else if (a == "--rpy") {
      if (!value(&o->rpy))
        return 2;
    } else if (a == "--ground-truth") {
      if (!value(&o->ground_truth))
        return 2;
    } else if (a == "--dump-inputs") {
      if (!value(&o->dump_inputs))
        return 2;
    } else if (a == "--max-frames") {
      if (!value(&frames))
        return 2;
      guint64 n = 0;
      if (!g_ascii_string_to_unsigned(frames.c_str(), 10, 1, G_MAXUINT64, &n, nullptr)) {
        std::fprintf(stderr, "opreplay: --max-frames '%s' is not a positive whole number\n",
                     frames.c_str());
        return 2;
      }
      o->max_frames = n;
    } else if (a == "--v-ego" || a == "--lat-delay" || a == "--long-delay") {
      std::string text;
      if (!value(&text))
        return 2;
      const std::string *v = &text;
      char *end = nullptr;
      const double x = std::strtod(v->c_str(), &end);
      const double max = a == "--v-ego" ? 100.0 : 5.0;
      if (end == v->c_str() || *end || !std::isfinite(x) || x < 0 || x > max) {
        std::fprintf(stderr, "opreplay: %s takes a number from 0 to %g, not \"%s\"\n", a.c_str(),
                     max, v->c_str());
        return 2;
      }
      (a == "--v-ego" ? o->v_ego : a == "--lat-delay" ? o->lat_delay : o->long_delay) = x;
    } else if (a == "--single-camera") {
      o->single_camera = true;
    } else if (a == "--no-video") {
      o->video = false;
    } else if (a == "--realtime") {
      o->realtime = 1.0;
    } else if (a.rfind("--realtime=", 0) == 0) {
      const std::string text = a.substr(std::strlen("--realtime="));
      char *end = nullptr;
      const double x = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !std::isfinite(x) || x < 0.01 || x > 1000) {
        std::fprintf(stderr,
                     "opreplay: --realtime=RATE takes a rate from 0.01 to 1000 (times real "
                     "time), not \"%s\"\n",
                     text.c_str());
        return 2;
      }
      o->realtime = x;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "opreplay: unknown option %s\n%s", a.c_str(), kUsage);
      return 2;
    } else if (o->route.empty()) {
      o->route = a;
    } else {
      std::fprintf(stderr, "opreplay: one route folder only\n%s", kUsage);
      return 2;
    }
  }
  if (o->route.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (o->supercombo.empty() && (o->vision.empty() || o->policy.empty())) {
    std::fprintf(stderr, "opreplay: give --vision and --policy, or --supercombo\n");
    return 2;
  }
  if (o->precision != "auto" && o->precision != "fp32" && o->precision != "fp16" &&
      o->precision != "int8") {
    std::fprintf(stderr, "opreplay: --precision is auto, fp32, fp16 or int8, not \"%s\"\n",
                 o->precision.c_str());
    return 2;
  }
  return -1;
}

// The OpenCL device, opened on a thread from the start of main: the platform's start-up (tens of
// milliseconds with PoCL, which loads its compiler) overlaps reading the route and GStreamer's
// plugin loading instead of following them in the first element's start. Every pipeline gets it
// as its "op.cl.context", so a segmented route opens the device once. When it cannot be opened,
// no context is set and the elements open the device themselves and post the error.
class EarlyDevice {
 public:
  explicit EarlyDevice(const std::string &spec)
      : opener_([this, spec] {
          auto opened = gst_op_context_new(spec.c_str());
          if (opened.ok())
            ctx_ = opened.value();
        }) {}
  ~EarlyDevice() {
    Wait();
    if (ctx_)
      gst_object_unref(ctx_);
  }
  EarlyDevice(const EarlyDevice &) = delete;
  EarlyDevice &operator=(const EarlyDevice &) = delete;

  // Sets the context on `pipeline` (its bin hands it to every element); says once where the
  // device choice fell back, as the elements would have.
  void Give(GstElement *pipeline) {
    Wait();
    if (!ctx_)
      return;
    const std::string &fallback = gst_op_context_get_device(ctx_)->fallback();
    if (!fallback.empty() && !warned_)
      std::fprintf(stderr, "opreplay: %s\n", fallback.c_str());
    warned_ = true;
    GstContext *context = gst_context_new_op_context(ctx_);
    gst_element_set_context(pipeline, context);
    gst_context_unref(context);
  }

 private:
  void Wait() {
    if (opener_.joinable())
      opener_.join();
  }
  GstOpContext *ctx_ = nullptr;
  bool warned_ = false;
  std::thread opener_;
};

// One continuous stream through the pipeline: a route folder, or one stretch of consecutive good
// segments of a segmented route (a fresh pipeline, so the model's state starts anew).
struct PartInput {
  std::string road_src, wide_src;  // gst_parse_launch sources of the HEVC byte streams
  bool two_cameras = false;
  const op::replay::Stretch *stretch = nullptr;  // set: the sources are the stretch's appsrcs
  const std::vector<CalibrationChange> *changes = nullptr;
  std::optional<double> height;
  // The logs' camera states and car state in stream time (route time for a stretch); empty
  // without a log.
  const opreplay::RouteState *state = nullptr;
  std::string rlog, video, sheet_png;
  guint64 max_frames = 0;
};

struct PartResult {
  bool failed = false;
  guint64 road_frames = 0, wide_frames = 0;
  guint64 evaluated = 0, skipped = 0, out_of_sync = 0, messages = 0;
  guint64 road_warped = 0, road_dropped = 0, wide_warped = 0, wide_dropped = 0;
  guint64 road_unpaired = 0, wide_unpaired = 0;  // passed over by opvision's pairing
  double drop_perc_last = 0.0, drop_perc_max = 0.0;
  double vision_ms = 0, policy_ms = 0, vision_wait_ms = 0, policy_wait_ms = 0;
  guint64 stage_frames = 0;
  guint64 stage_ns[GST_OP_STAGE_COUNT] = {};
  bool overlay = false;
  guint64 overlay_frames = 0, overlay_predictions = 0, overlay_held = 0;
  int width = 0, height = 0;
  std::vector<std::string> calibration_report;
  op::Status sheet_status = op::Status::Ok();
  double secs = 0;
  double first_message_s = -1.0;  // since opreplay started; < 0: none written
};

// opvision or oppolicy with the command line's model, device, precision and input dump; null
// where the plugin has no such element. (transfer full)
GstElement *MakeNet(const char *factory, const char *name, const std::string &model,
                    const Options &o) {
  GstElement *e = gst_element_factory_make(factory, name);
  if (!e)
    return nullptr;
  gst_object_ref_sink(e);
  g_object_set(e, "model", model.c_str(), "device", o.device.c_str(), nullptr);
  gst_util_set_object_arg(G_OBJECT(e), "precision", o.precision.c_str());
  if (!o.dump_inputs.empty())
    g_object_set(e, "dump-inputs", o.dump_inputs.c_str(), nullptr);
  return e;
}

void ReplayPart(const Options &o, const PartInput &in, EarlyDevice *device, PartResult *result) {
  const bool two_cameras = in.two_cameras;
  const std::vector<CalibrationChange> &changes = *in.changes;
  const std::string &rlog = in.rlog, &video = in.video, &sheet_png = in.sheet_png;
  // ---- The pipeline. The calibration goes in by event (FeedProbe), so no rpy property is set.
  const std::string dev = " device=" + Quote(o.device);
  const std::string nv12 = " ! videoconvert ! video/x-raw,format=NV12 ! ";
  std::string d;
  d += in.road_src + " ! h265parse ! avdec_h265 name=road_dec ! ";
  d += o.video ? "tee name=road_tee road_tee. ! queue" : "queue";
  d += nv12 + "opwarp name=road_warp" + dev + " ";
  if (two_cameras)
    d += in.wide_src + " ! h265parse ! avdec_h265 name=wide_dec ! queue" + nv12 +
         "opwarp name=wide_warp model-input=big_img" + dev + " ";
  auto num = [](double x) {  // locale-independent, as gst_parse reads it
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    return std::string(g_ascii_dtostr(buf, sizeof buf, x));
  };
  // The command line's car state; the log's values replace it frame by frame (route_state.h).
  d += "tee name=model_tee model_tee. ! queue ! opmsgsink name=sink sync=false "
       "timestamps=stream v-ego=" +
       num(o.v_ego) + " lat-delay=" + num(o.lat_delay) + " long-delay=" + num(o.long_delay) +
       " location=" + Quote(rlog) + " ";
  if (o.video) {
    // The video waits in its queue for the model's output of the same frame.
    d += "model_tee. ! queue ! overlay.model ";
    d += "road_tee. ! queue max-size-buffers=64 max-size-bytes=0 max-size-time=0 ! videoconvert "
         "! video/x-raw,format=BGRx ! overlay.video ";
    d += "opoverlay name=overlay";
    if (in.height)
      d += " camera-height=" + std::to_string(*in.height);
    if (!o.ground_truth.empty())
      d += " ground-truth=" + Quote(o.ground_truth);
    d += " ! videoscale ! video/x-raw,width=964,height=604 ! tee name=ov_tee ";
    d += "ov_tee. ! queue ! videoconvert ! jpegenc quality=85 ! matroskamux ! filesink "
         "sync=false location=" +
         Quote(video) + " ";
    d += "ov_tee. ! queue ! fakesink name=sheet sync=false signal-handoffs=true";
  }
  // ---- The networks first: made, given the device and set to READY before the rest of the
  // pipeline is parsed, they load their models on threads of their own (ModelSlot::Preload) while
  // GStreamer loads the decoders' plugin (libav and its libraries, about 90 ms here), instead of
  // after it. They join the pipeline once it is parsed (no nested bin: the decoders' side is both
  // upstream and downstream of them). An element that cannot get ready stays in NULL and fails
  // again, with its error on the bus, when the pipeline starts.
  const bool combined = !o.supercombo.empty();
  GstElement *nets[2] = {MakeNet("opvision", "net", combined ? o.supercombo : o.vision, o),
                         combined ? nullptr : MakeNet("oppolicy", "policy", o.policy, o)};
  const bool missing = !nets[0] || (!combined && !nets[1]);
  for (GstElement *net : nets)
    if (net && !missing) {
      device->Give(net);
      gst_element_set_state(net, GST_STATE_READY);
    }
  GError *error = nullptr;
  Run run;
  run.pipeline = missing ? nullptr : gst_parse_launch(d.c_str(), &error);
  if (!run.pipeline || error) {
    if (missing)
      std::fprintf(stderr, "opreplay: cannot build the pipeline: no element \"%s\"\n",
                   nets[0] ? "oppolicy" : "opvision");
    else
      std::fprintf(stderr, "opreplay: cannot build the pipeline: %s\n  %s\n",
                   error ? error->message : "?", d.c_str());
    // Our elements come from the project's plugin, which GStreamer finds only where told.
    if (missing ||
        (error && g_error_matches(error, GST_PARSE_ERROR, GST_PARSE_ERROR_NO_SUCH_ELEMENT) &&
         std::strstr(error->message, "\"op")))
      std::fprintf(stderr,
                   "opreplay: the project's elements are not found: set GST_PLUGIN_PATH "
                   "to the build's plugins folder (e.g. build/plugins)\n");
    g_clear_error(&error);
    if (run.pipeline)
      gst_object_unref(run.pipeline);
    for (GstElement *net : nets)
      if (net) {
        gst_element_set_state(net, GST_STATE_NULL);
        gst_object_unref(net);
      }
    result->failed = true;
    return;
  }
  GstBin *bin = GST_BIN(run.pipeline);
  device->Give(run.pipeline);
  {
    // The open ends: the warps into the vision network, the last network into the messages' tee.
    for (GstElement *net : nets)
      if (net) {
        gst_bin_add(bin, net);  // the bin holds it from here
        gst_object_unref(net);
      }
    GstElement *road_warp = gst_bin_get_by_name(bin, "road_warp");
    GstElement *wide_warp = gst_bin_get_by_name(bin, "wide_warp");
    GstElement *tee = gst_bin_get_by_name(bin, "model_tee");
    const bool linked =
        gst_element_link_pads(road_warp, "src", nets[0], "img") &&
        (!wide_warp || gst_element_link_pads(wide_warp, "src", nets[0], "big_img")) &&
        (combined || gst_element_link(nets[0], nets[1])) &&
        gst_element_link(combined ? nets[0] : nets[1], tee);
    for (GstElement *e : {road_warp, wide_warp, tee})
      if (e)
        gst_object_unref(e);
    if (!linked) {
      std::fprintf(stderr, "opreplay: cannot link the networks into the pipeline\n");
      gst_element_set_state(run.pipeline, GST_STATE_NULL);
      gst_object_unref(run.pipeline);
      result->failed = true;
      return;
    }
  }
  if (in.stretch) {
    // Before FeedProbe: the calibration changes are in route time.
    for (auto [src, dec, camera] :
         {std::tuple{"road_src", "road_dec", "road"}, std::tuple{"wide_src", "wide_dec", "wide"}}) {
      if (std::string(camera) == "wide" && !two_cameras)
        continue;
      op::Status st = op::replay::AttachStretchSource(bin, src, dec, *in.stretch, camera);
      if (!st.ok()) {
        std::fprintf(stderr, "opreplay: %s\n", st.ToString().c_str());
        gst_object_unref(run.pipeline);
        result->failed = true;
        return;
      }
    }
  }
  run.vision = gst_bin_get_by_name(bin, "net");
  run.policy = gst_bin_get_by_name(bin, "policy");
  run.sink = gst_bin_get_by_name(bin, "sink");
  run.overlay = gst_bin_get_by_name(bin, "overlay");
  run.road_warp = gst_bin_get_by_name(bin, "road_warp");
  run.wide_warp = gst_bin_get_by_name(bin, "wide_warp");

  std::vector<std::string> &calibration_report = result->calibration_report;
  run.road = {"road", &changes, 0, 0, in.max_frames, false, &calibration_report};
  run.wide = {"wide", &changes, 0, 0, in.max_frames, false, nullptr};
  RealtimeClock realtime;
  realtime.rate = o.realtime;
  for (auto [name, feed] : {std::pair{"road_dec", &run.road}, std::pair{"wide_dec", &run.wide}}) {
    GstElement *dec = gst_bin_get_by_name(bin, name);
    if (!dec)
      continue;
    GstPad *pad = gst_element_get_static_pad(dec, "src");
    if (o.realtime > 0) {
      feed->clock = &realtime;
      gst_pad_add_probe(
          pad, GstPadProbeType(GST_PAD_PROBE_TYPE_QUERY_UPSTREAM | GST_PAD_PROBE_TYPE_PULL),
          LiveLatencyProbe, nullptr, nullptr);
    }
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, FeedProbe, feed, nullptr);
    gst_object_unref(pad);
    gst_object_unref(dec);
  }
  // The log's camera frame ids and the car's state, in stream order (route_state.h). After the
  // stretch's shift probe: the car state's times are route times, as the shifted PTS.
  const opreplay::RouteState &route_state = *in.state;
  for (auto [name, frames, is_wide] : {std::tuple{"road_dec", &route_state.road, false},
                                       std::tuple{"wide_dec", &route_state.wide, true}}) {
    GstElement *dec = gst_bin_get_by_name(bin, name);
    if (dec && !frames->empty())
      opreplay::AddCameraStateProbe(dec, frames, is_wide);
    if (dec)
      gst_object_unref(dec);
  }
  opreplay::CarStateFeed car_feed{&route_state};
  if (!route_state.v_ego.empty() || !route_state.lat_delay.empty() ||
      !route_state.long_delay.empty())
    opreplay::AddCarStateProbe(run.sink, &car_feed);
  StageTimes times;
  if (o.realtime > 0)
    times.clock = &realtime;
  {
    GstElement *last = run.policy ? run.policy : run.vision;
    GstPad *pad = gst_element_get_static_pad(last, "src");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, StageProbe, &times, nullptr);
    gst_object_unref(pad);
  }
  std::atomic<double> first_message{-1.0};
  if (run.sink) {
    g_object_set(run.sink, "emit-signals", TRUE, nullptr);
    g_signal_connect(run.sink, "message", G_CALLBACK(OnFirstMessage), &first_message);
  }
  ContactSheet sheet;
  if (GstElement *fs = gst_bin_get_by_name(bin, "sheet")) {
    g_signal_connect(fs, "handoff", G_CALLBACK(OnSheetFrame), &sheet);
    gst_object_unref(fs);
  }

  run.loop = g_main_loop_new(nullptr, FALSE);
  run.tty = isatty(STDERR_FILENO);
  GstBus *bus = gst_pipeline_get_bus(GST_PIPELINE(run.pipeline));
  // One progress line for every segment's pipeline; it outlives their buses.
  static op::cl::ProgressLine compile_progress("opreplay");
  gst_bus_set_sync_handler(bus, OnBusSync, &compile_progress, nullptr);
  const guint watch = gst_bus_add_watch(bus, OnBus, &run);
  gst_object_unref(bus);
  run.start = std::chrono::steady_clock::now();
  const guint progress = g_timeout_add(run.tty ? 500 : 5000, OnProgress, &run);
  FirstRunWatch first_run{run.vision, &realtime};
  const guint first_run_watch = o.realtime > 0 ? g_timeout_add(20, WatchFirstRun, &first_run) : 0;
  if (gst_element_set_state(run.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    std::fprintf(stderr, "opreplay: the pipeline did not start\n");
    run.failed = true;
    // An element that refuses to start (a model it cannot load, a precision the model cannot
    // run at) says why on the bus, which no main loop will now dispatch: print it here.
    GstBus *failed_bus = gst_pipeline_get_bus(GST_PIPELINE(run.pipeline));
    while (GstMessage *msg = gst_bus_pop(failed_bus)) {
      OnBus(failed_bus, msg, &run);
      gst_message_unref(msg);
    }
    gst_object_unref(failed_bus);
  } else {
    g_main_loop_run(run.loop);
  }
  g_source_remove(progress);
  g_source_remove(watch);
  if (first_run_watch && !first_run.done)
    g_source_remove(first_run_watch);
  realtime.Ready();  // no decoder thread may still wait when the pipeline stops
  OnProgress(&run);
  std::fputs("\n", stderr);
  result->secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run.start).count();

  // Statistics are read before stopping: a restart resets them.
  result->evaluated = Stat(run.vision, "frames");
  result->skipped = Stat(run.vision, "skipped");
  result->out_of_sync = Stat(run.vision, "out-of-sync");
  result->messages = Stat(run.sink, "messages");
  result->first_message_s = first_message.load();
  result->road_warped = Stat(run.road_warp, "frames");
  result->road_dropped = Stat(run.road_warp, "dropped");
  result->wide_warped = Stat(run.wide_warp, "frames");
  result->wide_dropped = Stat(run.wide_warp, "dropped");
  result->road_unpaired = Stat(run.vision, "dropped-road");
  result->wide_unpaired = Stat(run.vision, "dropped-wide");
  result->vision_ms = StatMs(run.vision, "device-time");
  result->policy_ms = StatMs(run.policy, "device-time");
  result->vision_wait_ms = StatMs(run.vision, "mean-time");
  result->policy_wait_ms = StatMs(run.policy, "mean-time");
  gst_element_set_state(run.pipeline, GST_STATE_NULL);

  if (o.video && !run.failed)
    result->sheet_status = WriteContactSheet(sheet, sheet_png);
  result->failed = run.failed;
  result->road_frames = run.road.frames;
  result->wide_frames = run.wide.frames;
  result->width = run.road.width;
  result->height = run.road.height;
  {
    std::lock_guard<std::mutex> guard(times.lock);
    result->stage_frames = times.frames;
    for (int s = 0; s < GST_OP_STAGE_COUNT; s++)
      result->stage_ns[s] = times.ns[s];
    result->drop_perc_last = times.drop_perc_last;
    result->drop_perc_max = times.drop_perc_max;
  }
  if (run.overlay) {
    result->overlay = true;
    result->overlay_frames = Stat(run.overlay, "frames");
    result->overlay_predictions = Stat(run.overlay, "predictions");
    result->overlay_held = Stat(run.overlay, "held");
  }
  for (GstElement *e :
       {run.vision, run.policy, run.sink, run.overlay, run.road_warp, run.wide_warp})
    if (e)
      gst_object_unref(e);
  gst_object_unref(run.pipeline);
  g_main_loop_unref(run.loop);
}

// Adds a stretch's result to the route's: counts add up, per-frame times are weighted by the
// frames they are means of.
void Accumulate(const PartResult &part, PartResult *total) {
  const double before = double(total->evaluated), now = double(part.evaluated);
  auto mean = [&](double a, double b) {
    return before + now > 0 ? (a * before + b * now) / (before + now) : 0.0;
  };
  total->vision_ms = mean(total->vision_ms, part.vision_ms);
  total->policy_ms = mean(total->policy_ms, part.policy_ms);
  total->vision_wait_ms = mean(total->vision_wait_ms, part.vision_wait_ms);
  total->policy_wait_ms = mean(total->policy_wait_ms, part.policy_wait_ms);
  total->failed = total->failed || part.failed;
  total->road_frames += part.road_frames;
  total->wide_frames += part.wide_frames;
  total->evaluated += part.evaluated;
  total->skipped += part.skipped;
  total->out_of_sync += part.out_of_sync;
  total->messages += part.messages;
  if (total->first_message_s < 0)
    total->first_message_s = part.first_message_s;
  total->road_warped += part.road_warped;
  total->road_dropped += part.road_dropped;
  total->wide_warped += part.wide_warped;
  total->wide_dropped += part.wide_dropped;
  total->road_unpaired += part.road_unpaired;
  total->wide_unpaired += part.wide_unpaired;
  total->drop_perc_last = part.drop_perc_last;
  total->drop_perc_max = std::max(total->drop_perc_max, part.drop_perc_max);
  total->stage_frames += part.stage_frames;
  for (int s = 0; s < GST_OP_STAGE_COUNT; s++)
    total->stage_ns[s] += part.stage_ns[s];
  total->overlay = total->overlay || part.overlay;
  total->overlay_frames += part.overlay_frames;
  total->overlay_predictions += part.overlay_predictions;
  total->overlay_held += part.overlay_held;
  if (total->width == 0) {
    total->width = part.width;
    total->height = part.height;
  }
  total->calibration_report.insert(total->calibration_report.end(), part.calibration_report.begin(),
                                   part.calibration_report.end());
  if (total->sheet_status.ok())
    total->sheet_status = part.sheet_status;
  total->secs += part.secs;
}

// Appends the file FROM to the file TO and removes FROM. Logs are zstd streams (or plain
// framing) that stay valid when put back to back.
op::Status AppendFile(const std::string &from, const std::string &to) {
  gchar *bytes = nullptr;
  gsize size = 0;
  if (!g_file_get_contents(from.c_str(), &bytes, &size, nullptr))
    return op::IoError("cannot read " + from);
  std::FILE *f = std::fopen(to.c_str(), "ab");
  const bool ok = f && std::fwrite(bytes, 1, size, f) == size;
  if (f && std::fclose(f) != 0)
    f = nullptr;
  g_free(bytes);
  if (!ok || !f)
    return op::IoError("cannot append to " + to);
  g_remove(from.c_str());
  return op::Status::Ok();
}

}  // namespace

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  Options o;
  const int parsed = ParseArgs(argc, argv, &o);
  if (parsed >= 0)
    return parsed;
  EarlyDevice device(o.device);

  // ---- The route: a folder with the camera files, or segments <route>--<n>.
  auto opened = op::replay::OpenRoute(o.route);
  if (!opened.ok()) {
    std::fprintf(stderr, "opreplay: %s\n", opened.status().message().c_str());
    return 1;
  }
  const op::replay::Route &route = *opened;
  const std::vector<op::replay::Stretch> stretches = op::replay::Stretches(route);
  if (!route.segmented && !route.segments[0].error.empty()) {
    std::fprintf(stderr, "opreplay: %s\n", route.segments[0].error.c_str());
    return 1;
  }
  if (stretches.empty()) {
    std::fprintf(stderr, "opreplay: no segment of %s can be replayed\n", o.route.c_str());
    for (const op::replay::Segment &s : route.segments)
      std::fprintf(stderr, "  segment %d: %s\n", s.number, s.error.c_str());
    return 1;
  }
  const std::string road = o.route + "/fcamera.hevc", wide = o.route + "/ecamera.hevc";
  const bool two_cameras =
      !o.single_camera && (route.segmented ? stretches[0].wide : FileExists(wide));
  // What the logs say, per stretch in route time (a route folder is one stretch of one segment).
  // OpenRoute read each segment's log once, when it checked the segment.
  std::vector<opreplay::RouteState> states;
  bool from_log = false;
  for (const op::replay::Stretch &stretch : stretches) {
    states.push_back(op::replay::StretchState(stretch));
    from_log = from_log || !states.back().calibration.empty();
  }
  if (from_log) {
    if (!o.rpy.empty())
      std::fprintf(stderr, "opreplay: the log's calibration is used; --rpy is ignored\n");
  } else if (!o.rpy.empty()) {
    auto rpy = op::drive::ParseRpy(o.rpy);
    if (!rpy.ok()) {
      std::fprintf(stderr, "opreplay: --rpy: %s\n", rpy.status().message().c_str());
      return 2;
    }
    // From the start of every stretch.
    for (size_t i = 0; i < stretches.size(); i++)
      states[i].calibration.push_back({stretches[i].first_frame() * op::replay::kFrameNs, *rpy});
  } else {
    std::fprintf(stderr,
                 "opreplay: no calibration (no liveCalibration in a log and no --rpy): the "
                 "model runs uncalibrated and its messages say valid=false\n");
  }
  if (g_mkdir_with_parents(o.out.c_str(), 0755) != 0) {
    std::fprintf(stderr, "opreplay: cannot create %s: %s\n", o.out.c_str(), g_strerror(errno));
    return 1;
  }
  const std::string rlog = o.out + "/rlog.zst", video = o.out + "/overlay.mkv",
                    sheet_png = o.out + "/contact-sheet.png";

  PartResult total;
  if (!route.segmented) {
    PartInput in;
    in.road_src = "filesrc location=" + Quote(road);
    in.wide_src = "filesrc location=" + Quote(wide);
    in.two_cameras = two_cameras;
    in.changes = &states[0].calibration;
    in.height = states[0].height;
    in.state = &states[0];
    in.rlog = rlog;
    in.video = video;
    in.sheet_png = sheet_png;
    in.max_frames = o.max_frames;
    ReplayPart(o, in, &device, &total);
  } else {
    // One pipeline per stretch; each writes its own log, appended to the route's in order. The
    // first stretch writes the video and contact sheet, later ones overlay-<n>.mkv (n: the
    // stretch's first segment).
    g_remove(rlog.c_str());
    for (size_t i = 0; i < stretches.size() && !total.failed; i++) {
      const op::replay::Stretch &stretch = stretches[i];
      if (o.max_frames && total.road_frames >= o.max_frames)
        break;
      PartInput in;
      in.road_src = op::replay::StretchSourceDescription("road_src");
      in.wide_src = op::replay::StretchSourceDescription("wide_src");
      in.two_cameras = !o.single_camera && stretch.wide;
      in.stretch = &stretch;
      in.changes = &states[i].calibration;
      in.height = states[i].height;
      in.state = &states[i];
      const std::string n = std::to_string(stretch.segments.front()->number);
      in.rlog = o.out + "/rlog.part-" + n + ".zst";
      in.video = i == 0 ? video : o.out + "/overlay-" + n + ".mkv";
      in.sheet_png = i == 0 ? sheet_png : o.out + "/contact-sheet-" + n + ".png";
      in.max_frames = o.max_frames ? o.max_frames - total.road_frames : 0;
      PartResult part;
      ReplayPart(o, in, &device, &part);
      Accumulate(part, &total);
      op::Status st = AppendFile(in.rlog, rlog);
      if (!st.ok()) {
        std::fprintf(stderr, "opreplay: %s\n", st.ToString().c_str());
        total.failed = true;
      }
    }
  }
  const double secs = total.secs;
  // Nothing ran (the pipeline could not be built or started): the error is printed, and a
  // summary would only name files that were never written.
  if (total.failed && total.road_frames == 0 && total.messages == 0)
    return 1;

  // ---- The summary.
  std::printf("opreplay summary\n");
  if (route.segmented) {
    size_t good = 0;
    for (const op::replay::Segment &s : route.segments)
      good += s.error.empty();
    std::printf("  route            %s (%zu segments, %zu replayed in %zu stretch%s, %s)\n",
                o.route.c_str(), route.segments.size(), good, stretches.size(),
                stretches.size() == 1 ? "" : "es",
                two_cameras ? "road + wide cameras" : "road camera only");
    for (const op::replay::Segment &s : route.segments)
      std::printf("  segment %-8d %s\n", s.number,
                  s.error.empty() ? (std::to_string(s.frames) + " frames from frame " +
                                     std::to_string(s.first_frame) +
                                     (s.log.empty() ? ", no log" : ", log " + s.log))
                                        .c_str()
                                  : ("not replayed: " + s.error).c_str());
  } else {
    const std::string &log = route.segments[0].log;
    std::printf("  route            %s (%s%s)\n", o.route.c_str(),
                two_cameras ? "road + wide cameras" : "road camera only",
                log.empty() ? ", no log" : (", log " + log).c_str());
  }
  // Where a kind of logged value came from: "the log" (a route folder) or the replayed segments
  // whose logs hold it; empty when none does.
  size_t replayed = 0, without = 0;  // of the last sources() call
  auto sources = [&](bool (*has)(const opreplay::RouteState &)) {
    std::string list;
    size_t n = 0;
    replayed = 0;
    for (const op::replay::Stretch &stretch : stretches)
      for (const op::replay::Segment *s : stretch.segments) {
        replayed++;
        if (!has(s->state))
          continue;
        list += (n++ ? ", " : "") + std::to_string(s->number);
      }
    without = replayed - n;
    if (n == 0)
      return std::string();
    if (!route.segmented)
      return std::string("the log");
    std::string from = std::string(n == 1 ? "the log of segment " : "the logs of segments ") + list;
    if (n < replayed)
      from += " (" + std::to_string(replayed - n) + " replayed segment(s) without)";
    return from;
  };
  size_t calibrations = 0;
  for (const opreplay::RouteState &st : states)
    calibrations += st.calibration.size();
  const std::string calibration_from =
      sources([](const opreplay::RouteState &s) { return !s.calibration.empty(); });
  std::printf("  calibration      %s\n",
              calibrations == 0 ? "none (uncalibrated)"
                                : (std::to_string(calibrations) + " value(s), from " +
                                   (from_log ? calibration_from : std::string("--rpy")))
                                      .c_str());
  for (const std::string &line : total.calibration_report)
    std::printf("                   %s\n", line.c_str());
  if (total.width > 0) {
    // The elements choose the presets the same way (device-type=auto).
    auto type = op::drive::DeviceTypeFromFrameSize(total.width, total.height);
    std::printf("  camera           %dx%d: %s\n", total.width, total.height,
                type.ok() ? (std::string(op::drive::DeviceTypeName(*type)) + " presets").c_str()
                          : "no preset (the elements need intrinsics)");
  }
  const std::string ids_from =
      sources([](const opreplay::RouteState &s) { return !s.road.empty(); });
  std::printf("  frame ids        %s\n",
              ids_from.empty()  ? "counted by opwarp (no camera states in a log)"
              : route.segmented ? ("from the camera states in " + ids_from +
                                   (without ? "; opwarp counts the others' frames" : ""))
                                      .c_str()
                                : "from the log's camera states");
  size_t car_states = 0, live_delays = 0, car_params = 0;
  for (const opreplay::RouteState &st : states) {
    car_states += st.car_states;
    live_delays += st.live_delays;
    car_params += st.car_params;
  }
  auto car_line = [&](const char *what, const std::string &from, size_t logged, double cli) {
    if (!from.empty())
      std::printf("  %-16s from %s (%zu messages)\n", what, from.c_str(), logged);
    else
      std::printf("  %-16s %g, from the command line\n", what, cli);
  };
  car_line("v-ego", sources([](const opreplay::RouteState &s) { return !s.v_ego.empty(); }),
           car_states, o.v_ego);
  car_line("lat-delay", sources([](const opreplay::RouteState &s) { return !s.lat_delay.empty(); }),
           live_delays, o.lat_delay);
  car_line("long-delay",
           sources([](const opreplay::RouteState &s) { return !s.long_delay.empty(); }), car_params,
           o.long_delay);
  std::printf("  frames in        %" G_GUINT64_FORMAT " road", total.road_frames);
  if (two_cameras)
    std::printf(", %" G_GUINT64_FORMAT " wide", total.wide_frames);
  std::printf("\n  warped           %" G_GUINT64_FORMAT " road", total.road_warped);
  if (two_cameras)
    std::printf(", %" G_GUINT64_FORMAT " wide", total.wide_warped);
  std::printf("\n  dropped          %" G_GUINT64_FORMAT " road", total.road_dropped);
  if (two_cameras)
    std::printf(", %" G_GUINT64_FORMAT " wide", total.wide_dropped);
  std::printf(" (%s)\n", o.realtime > 0 ? "by opwarp: the device fell behind the live frames"
                                        : "none: not live, every frame is processed");
  if (two_cameras)
    std::printf("  unpaired         %" G_GUINT64_FORMAT " road, %" G_GUINT64_FORMAT
                " wide (warped, passed over by the pairing)\n",
                total.road_unpaired, total.wide_unpaired);
  std::printf("  evaluated        %" G_GUINT64_FORMAT "\n", total.evaluated);
  std::printf("  frameDropPerc    %.2f last, %.2f largest (published in modelV2)\n",
              total.drop_perc_last, total.drop_perc_max);
  std::printf("  skipped          %" G_GUINT64_FORMAT " (after a frame drop)\n", total.skipped);
  std::printf("  out-of-sync      %" G_GUINT64_FORMAT " pairs\n", total.out_of_sync);
  std::printf("  messages         %" G_GUINT64_FORMAT "\n", total.messages);
  if (total.first_message_s >= 0)
    std::printf("  first message    %.3f s after opreplay started\n", total.first_message_s);
  std::printf("  speed            %.2f frames/s (%.1f s)", secs > 0 ? total.road_frames / secs : 0,
              secs);
  if (o.realtime > 0)
    std::printf(", frames released in real time × %g", o.realtime);
  std::printf("\n");
  {
    const double n = total.stage_frames ? double(total.stage_frames) : 1.0;
    std::printf(
        "  ms per frame     warp %.2f, vision %.2f, policy %.2f (frame meta); device time: "
        "vision %.2f, policy %.2f; submission to completion: vision %.2f, policy %.2f\n",
        total.stage_ns[GST_OP_STAGE_WARP] / n / 1e6, total.stage_ns[GST_OP_STAGE_VISION] / n / 1e6,
        total.stage_ns[GST_OP_STAGE_POLICY] / n / 1e6, total.vision_ms, total.policy_ms,
        total.vision_wait_ms, total.policy_wait_ms);
  }
  if (total.overlay)
    std::printf("  overlay          %" G_GUINT64_FORMAT " frames, %" G_GUINT64_FORMAT
                " with their prediction, %" G_GUINT64_FORMAT " held\n",
                total.overlay_frames, total.overlay_predictions, total.overlay_held);
  std::printf("  log              %s\n", rlog.c_str());
  if (o.video) {
    std::printf("  video            %s\n", video.c_str());
    std::printf("  contact sheet    %s%s\n", sheet_png.c_str(),
                total.sheet_status.ok()
                    ? ""
                    : (" (not written: " + total.sheet_status.message() + ")").c_str());
  }
  if (total.failed || !total.sheet_status.ok())
    return 1;
  // Replayed, but not all of it: a missing or broken segment.
  return stretches.size() == 1 && stretches[0].segments.size() == route.segments.size() ? 0 : 3;
}
