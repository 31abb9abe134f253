/**
 * SECTION:element-opmsgsink
 *
 * Turns a driving model's raw outputs into openpilot's driving messages: parses the output
 * slices (mixtures, multi-hypothesis selection, sigmoid, softmax), computes the action from the
 * plan and the car's state, and fills `modelV2`, `drivingModelData` and `cameraOdometry` Events
 * that openpilot's tools read (schemas/log.capnp). Each message goes to a log file, to ZMQ
 * PUB sockets on openpilot's bridge ports, and/or to the `message` signal.
 *
 * Input: one `application/x-op-tensors` stream (system or OpenCL memory) whose `slices` name
 * the outputs (the policy element's vision + policy outputs, or a combined network's output).
 * A slice that the chosen services need and the caps lack fails negotiation, naming the slice.
 * Frame provenance (frame ids, end-of-frame time, calibration, drops, time per stage) comes from
 * GstOpFrameMeta. frameAge is how many road frames newer than this one have reached the
 * pipeline's opwarp when the messages are filled (its frame clock in the meta; 0 without one).
 * frameDropPerc is the one opvision counted over every road frame it received
 * (skipped ones included); without that, this element filters the meta's drop counts itself and
 * a frame that follows a drop produces no messages, like openpilot's modeld. cameraOdometry is
 * valid when a calibration was seen and no frame was dropped just before.
 *
 * ## Example
 * |[
 * gst-launch-1.0 ... ! oppolicy ! opmsgsink location=rlog.zst v-ego=20
 * ]|
 *
 * ## Properties
 * - `location` (string, none): the log file; `.zst` gets one zstd stream (level 10, like
 *   openpilot's `rlog.zst`), anything else plain flat-array framing. Messages are flushed whole
 *   after every frame, so a pipeline that dies leaves a log whose messages all decode.
 * - `services` (string, "all"): comma-separated subset of modelV2, drivingModelData,
 *   cameraOdometry.
 * - `emit-signals` (bool, false): emit `message` (service name, GBytes) for every message.
 * - `v-ego` (float, m/s), `lat-delay`, `long-delay` (float, s), `lane-change-state`,
 *   `lane-change-direction`: the car's state; change them while PLAYING.
 * - `timestamps` (clock | stream, clock): logMonoTime from the monotonic clock, or the
 *   buffer PTS (modelExecutionTime then counts only the stage times of the meta, not this
 *   element's own parse time). Either way logMonoTime increases from frame to frame: a frame
 *   without a PTS, or with one before the previous frame's, gets a time 1 ns after the previous
 *   frame's (stream mode shifts the later PTS by the same amount), and the element posts one
 *   warning per kind per run naming the frame and the PTS.
 * - `deterministic` (bool, false): write modelExecutionTime and frameAge as 0 instead of the
 *   measured time and the frames that arrived meanwhile (both depend on how fast the device ran);
 *   with timestamps=stream, two runs over the same buffers write the same bytes.
 * - `publish` (bool, false): ZMQ PUB sockets on tcp://127.0.0.1 at openpilot's bridge ports
 *   (modelV2 58537, drivingModelData 49244, cameraOdometry 50972).
 * - `messages` (guint64, read-only): messages produced since start.
 */
#include "gstopmsgsink.h"

#include <capnp/message.h>
#include <kj/exception.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#ifdef OP_HAVE_ZMQ
#include <zmq.h>
#endif

#include "drive/fill.h"
#include "drive/frame_track.h"
#include "drive/log_io.h"
#include "drive/parse.h"
#include "op/gstoperror.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_msg_sink_debug);
#define GST_CAT_DEFAULT gst_op_msg_sink_debug

using namespace op::drive;

enum {
  PROP_0,
  PROP_LOCATION,
  PROP_SERVICES,
  PROP_EMIT_SIGNALS,
  PROP_V_EGO,
  PROP_LAT_DELAY,
  PROP_LONG_DELAY,
  PROP_LANE_CHANGE_STATE,
  PROP_LANE_CHANGE_DIRECTION,
  PROP_TIMESTAMPS,
  PROP_PUBLISH,
  PROP_DETERMINISTIC,
  PROP_MESSAGES,
};

enum { SIGNAL_MESSAGE, LAST_SIGNAL };
static guint signals[LAST_SIGNAL];

#define SINK_CAPS_STR \
  GST_OP_TENSOR_CAPS_NAME "(" GST_CAPS_FEATURE_MEMORY_OP_CL "); " GST_OP_TENSOR_CAPS_NAME

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(SINK_CAPS_STR));

namespace {

constexpr Service kServices[3] = {kServiceModelV2, kServiceDrivingModelData,
                                  kServiceCameraOdometry};
// The first segment of every message: large enough for modelV2 (about 8 KB), reused.
constexpr size_t kScratchWords = 4096;

struct Settings {
  std::string location;
  std::string services = "all";
  bool emit_signals = false;
  CarSettings car;
  GstOpMsgSinkTimestamps timestamps = GST_OP_MSG_SINK_TIMESTAMPS_CLOCK;
  bool publish = false;
  bool deterministic = false;
};

// Keeps logMonoTime increasing whatever the buffer timestamps do, and says once per kind when
// they misbehave. Reset at start.
struct LogClock {
  bool have_previous = false;
  uint64_t previous_log_ns = 0;  // the last frame's logMonoTime
  bool have_pts = false;
  GstClockTime previous_pts = 0;       // the last frame's PTS (one without PTS leaves it)
  uint64_t shift_ns = 0;               // added to the PTS in stream mode after it went backwards
  std::atomic<bool> restarted{false};  // a flush or a new segment may move the PTS back
  bool warned_no_pts = false;
  bool warned_backwards = false;

  void Reset() {
    have_previous = have_pts = warned_no_pts = warned_backwards = false;
    previous_log_ns = previous_pts = shift_ns = 0;
    restarted = false;
  }
};

// What one set of caps decided: where each tensor's floats go in one contiguous array the
// parser reads, and the parser built from the slices.
struct CapsState {
  GstOpTensorInfo info;
  std::vector<size_t> base;  // offset of each tensor in `raw`, in floats
  std::vector<float> raw;
  std::vector<uint16_t> half;  // a float16 tensor before conversion
  std::optional<OutputParser> parser;
};

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

struct Impl {
  std::mutex lock;  // guards settings (properties may change from any thread)
  Settings settings;

  // Streaming state: set up in start(), per caps in set_caps(), dropped in stop().
  unsigned services = kAllServices;
  bool emit_signals = false;
  std::unique_ptr<LogWriter> writer;
  std::unique_ptr<CapsState> caps;
  GstCaps *rejected_caps = nullptr;  // the last caps set_caps refused (their error is posted)
  MessageFiller filler;
  FrameDropFilter drop_filter;
  ParsedOutputs parsed;
  std::vector<uint8_t> bytes;
  std::vector<capnp::word> scratch = std::vector<capnp::word>(kScratchWords);
  uint32_t frames_without_meta = 0;
  LogClock log_clock;
  guint64 messages = 0;  // read by the `messages` property: under `lock`
#ifdef OP_HAVE_ZMQ
  void *zmq_context = nullptr;
  void *zmq_sockets[3] = {};
#endif
};

struct _GstOpMsgSink {
  GstBaseSink parent;
  Impl *impl;
};

G_DEFINE_TYPE(GstOpMsgSink, gst_op_msg_sink, GST_TYPE_BASE_SINK)
GST_ELEMENT_REGISTER_DEFINE(opmsgsink, "opmsgsink", GST_RANK_NONE, GST_TYPE_OP_MSG_SINK)

static GType gst_op_msg_sink_timestamps_get_type() {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    static const GEnumValue values[] = {
        {GST_OP_MSG_SINK_TIMESTAMPS_CLOCK, "The monotonic clock (live use)", "clock"},
        {GST_OP_MSG_SINK_TIMESTAMPS_STREAM, "The buffer PTS (reproducible replays)", "stream"},
        {0, nullptr, nullptr}};
    GType t = g_enum_register_static("GstOpMsgSinkTimestamps", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}

static GType gst_op_lane_change_state_get_type() {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    static const GEnumValue values[] = {{0, "Off", "off"},
                                        {1, "Before the lane change", "pre-lane-change"},
                                        {2, "Lane change starting", "lane-change-starting"},
                                        {3, "Lane change finishing", "lane-change-finishing"},
                                        {0, nullptr, nullptr}};
    GType t = g_enum_register_static("GstOpLaneChangeState", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}

static GType gst_op_lane_change_direction_get_type() {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    static const GEnumValue values[] = {
        {0, "None", "none"}, {1, "Left", "left"}, {2, "Right", "right"}, {0, nullptr, nullptr}};
    GType t = g_enum_register_static("GstOpLaneChangeDirection", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}

static void SetProperty(GObject *object, guint id, const GValue *value, GParamSpec *pspec) {
  GstOpMsgSink *self = GST_OP_MSG_SINK(object);
  std::lock_guard<std::mutex> guard(self->impl->lock);
  Settings &s = self->impl->settings;
  switch (id) {
    case PROP_LOCATION: {
      const char *v = g_value_get_string(value);
      s.location = v ? v : "";
      break;
    }
    case PROP_SERVICES: {
      const char *v = g_value_get_string(value);
      s.services = v ? v : "all";
      break;
    }
    case PROP_EMIT_SIGNALS:
      s.emit_signals = g_value_get_boolean(value);
      break;
    case PROP_V_EGO:
      s.car.v_ego = g_value_get_float(value);
      break;
    case PROP_LAT_DELAY:
      s.car.lat_delay = g_value_get_float(value);
      break;
    case PROP_LONG_DELAY:
      s.car.long_delay = g_value_get_float(value);
      break;
    case PROP_LANE_CHANGE_STATE:
      s.car.lane_change_state = static_cast<op::msg::LaneChangeState>(g_value_get_enum(value));
      break;
    case PROP_LANE_CHANGE_DIRECTION:
      s.car.lane_change_direction =
          static_cast<op::msg::LaneChangeDirection>(g_value_get_enum(value));
      break;
    case PROP_TIMESTAMPS:
      s.timestamps = static_cast<GstOpMsgSinkTimestamps>(g_value_get_enum(value));
      break;
    case PROP_PUBLISH:
      s.publish = g_value_get_boolean(value);
      break;
    case PROP_DETERMINISTIC:
      s.deterministic = g_value_get_boolean(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
  }
}

static void GetProperty(GObject *object, guint id, GValue *value, GParamSpec *pspec) {
  GstOpMsgSink *self = GST_OP_MSG_SINK(object);
  std::lock_guard<std::mutex> guard(self->impl->lock);
  const Settings &s = self->impl->settings;
  switch (id) {
    case PROP_LOCATION:
      g_value_set_string(value, s.location.empty() ? nullptr : s.location.c_str());
      break;
    case PROP_SERVICES:
      g_value_set_string(value, s.services.c_str());
      break;
    case PROP_EMIT_SIGNALS:
      g_value_set_boolean(value, s.emit_signals);
      break;
    case PROP_V_EGO:
      g_value_set_float(value, s.car.v_ego);
      break;
    case PROP_LAT_DELAY:
      g_value_set_float(value, s.car.lat_delay);
      break;
    case PROP_LONG_DELAY:
      g_value_set_float(value, s.car.long_delay);
      break;
    case PROP_LANE_CHANGE_STATE:
      g_value_set_enum(value, static_cast<int>(s.car.lane_change_state));
      break;
    case PROP_LANE_CHANGE_DIRECTION:
      g_value_set_enum(value, static_cast<int>(s.car.lane_change_direction));
      break;
    case PROP_TIMESTAMPS:
      g_value_set_enum(value, s.timestamps);
      break;
    case PROP_PUBLISH:
      g_value_set_boolean(value, s.publish);
      break;
    case PROP_DETERMINISTIC:
      g_value_set_boolean(value, s.deterministic);
      break;
    case PROP_MESSAGES:
      g_value_set_uint64(value, self->impl->messages);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
  }
}

static void ClosePublisher(Impl *impl) {
#ifdef OP_HAVE_ZMQ
  for (void *&socket : impl->zmq_sockets) {
    if (socket)
      zmq_close(socket);
    socket = nullptr;
  }
  if (impl->zmq_context)
    zmq_ctx_term(impl->zmq_context);
  impl->zmq_context = nullptr;
#else
  (void)impl;
#endif
}

static gboolean OpenPublisher(GstOpMsgSink *self) {
#ifdef OP_HAVE_ZMQ
  Impl *impl = self->impl;
  impl->zmq_context = zmq_ctx_new();
  if (!impl->zmq_context) {
    GST_ELEMENT_ERROR(self, LIBRARY, INIT, ("Could not start ZMQ for publishing."),
                      ("zmq_ctx_new: %s", zmq_strerror(zmq_errno())));
    return FALSE;
  }
  for (int i = 0; i < 3; i++) {
    if (!(impl->services & kServices[i]))
      continue;
    const char *name = ServiceName(kServices[i]);
    std::string endpoint = "tcp://127.0.0.1:" + std::to_string(BridgePort(name));
    void *socket = zmq_socket(impl->zmq_context, ZMQ_PUB);
    int linger = 0;  // stop() must not wait for subscribers that went away
    if (socket)
      zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
    if (!socket || zmq_bind(socket, endpoint.c_str()) != 0) {
      GST_ELEMENT_ERROR(
          self, RESOURCE, OPEN_WRITE,
          ("Could not publish %s on %s; is another publisher running?", name, endpoint.c_str()),
          ("zmq_bind: %s", zmq_strerror(zmq_errno())));
      if (socket)
        zmq_close(socket);
      ClosePublisher(impl);
      return FALSE;
    }
    impl->zmq_sockets[i] = socket;
    GST_INFO_OBJECT(self, "publishing %s on %s", name, endpoint.c_str());
  }
  return TRUE;
#else
  GST_ELEMENT_ERROR(self, LIBRARY, INIT, ("This build has no ZMQ support; set publish=false."),
                    ("built without libzmq (meson option zmq)"));
  return FALSE;
#endif
}

static gboolean Start(GstBaseSink *sink) {
  GstOpMsgSink *self = GST_OP_MSG_SINK(sink);
  Impl *impl = self->impl;
  Settings settings;
  {
    std::lock_guard<std::mutex> guard(impl->lock);
    settings = impl->settings;
    impl->messages = 0;
  }
  auto services = ParseServices(settings.services);
  if (!services.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, services.status(), RESOURCE, SETTINGS,
                                ("Invalid services \"%s\".", settings.services.c_str()));
    return FALSE;
  }
  impl->services = *services;
  impl->filler.Reset();
  impl->drop_filter.Reset();
  impl->frames_without_meta = 0;
  impl->log_clock.Reset();
  if (!settings.location.empty()) {
    auto writer = LogWriter::Open(settings.location);
    if (!writer.ok()) {
      GST_OP_ELEMENT_ERROR_STATUS(
          self, writer.status(), RESOURCE, OPEN_WRITE,
          ("Could not open log file \"%s\" for writing.", settings.location.c_str()));
      return FALSE;
    }
    impl->writer = std::move(*writer);
  }
  if (settings.publish && !OpenPublisher(self)) {
    impl->writer.reset();
    return FALSE;
  }
  return TRUE;
}

static gboolean Stop(GstBaseSink *sink) {
  GstOpMsgSink *self = GST_OP_MSG_SINK(sink);
  Impl *impl = self->impl;
  gboolean ok = TRUE;
  if (impl->writer) {
    // Ends the zstd stream: a stop mid-stream still leaves a complete log.
    op::Status st = impl->writer->Close();
    if (!st.ok()) {
      GST_OP_ELEMENT_ERROR_STATUS(self, st, RESOURCE, CLOSE, ("Could not finish the log file."));
      ok = FALSE;
    }
    impl->writer.reset();
  }
  ClosePublisher(impl);
  impl->caps.reset();
  gst_caps_replace(&impl->rejected_caps, nullptr);
  return ok;
}

// Builds the per-caps state, or posts an error naming what is wrong and returns FALSE.
static gboolean ConfigureCaps(GstOpMsgSink *self, GstCaps *caps) {
  Impl *impl = self->impl;
  auto info = gst_op_tensor_info_from_caps(caps);
  if (!info.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, info.status(), CORE, NEGOTIATION,
                                ("The input is not a tensor stream opmsgsink reads."));
    return FALSE;
  }
  auto state = std::make_unique<CapsState>();
  state->info = *info;
  size_t total = 0;
  for (const GstOpTensorDesc &t : state->info.tensors) {
    if (t.type != GstOpTensorType::kFloat32 && t.type != GstOpTensorType::kFloat16) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("The network output must be floats."),
                        ("tensor \"%s\" is %s, not float32 or float16", t.name.c_str(),
                         gst_op_tensor_type_to_string(t.type)));
      return FALSE;
    }
    state->base.push_back(total);
    total += static_cast<size_t>(t.elements());
  }
  SliceTable table;
  for (const GstOpTensorSlice &s : state->info.slices) {
    int index = s.tensor.empty() ? 0 : state->info.Find(s.tensor);
    if (index < 0)
      continue;  // validated by the caps parser
    const GstOpTensorDesc &t = state->info.tensors[index];
    // Slices run along the last axis; with more than one row they would not be contiguous.
    if (t.elements() != t.dims.back()) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("The network output has an unexpected shape."),
                        ("slice \"%s\" of tensor \"%s\": only (1, ..., N) tensors are sliced",
                         s.name.c_str(), t.name.c_str()));
      return FALSE;
    }
    table.push_back({s.name, state->base[index] + static_cast<size_t>(s.start),
                     state->base[index] + static_cast<size_t>(s.end)});
  }
  auto parser = OutputParser::Create(table, total, impl->services);
  if (!parser.ok()) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("The network output lacks what the requested messages need: %s",
                       parser.status().message().c_str()),
                      ("%s; caps %" GST_PTR_FORMAT, parser.status().ToString().c_str(), caps));
    return FALSE;
  }
  state->parser.emplace(std::move(*parser));
  state->raw.resize(total);
  impl->caps = std::move(state);
  GST_DEBUG_OBJECT(self, "reading %zu floats in %zu tensors", total,
                   impl->caps->info.tensors.size());
  return TRUE;
}

static gboolean SetCaps(GstBaseSink *sink, GstCaps *caps) {
  Impl *impl = GST_OP_MSG_SINK(sink)->impl;
  // Upstream offers the same caps again with every buffer; one error about them is enough.
  if (impl->rejected_caps && gst_caps_is_equal(impl->rejected_caps, caps))
    return FALSE;
  if (ConfigureCaps(GST_OP_MSG_SINK(sink), caps)) {
    gst_caps_replace(&impl->rejected_caps, nullptr);
    return TRUE;
  }
  gst_caps_replace(&impl->rejected_caps, caps);
  return FALSE;
}

// Copies every tensor of the buffer into the contiguous float array.
static GstFlowReturn GatherTensors(GstOpMsgSink *self, GstBuffer *buffer, CapsState *state) {
  const auto &tensors = state->info.tensors;
  if (gst_buffer_n_memory(buffer) != tensors.size()) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("A buffer does not match its caps."),
                      ("%u memories for %zu tensors", gst_buffer_n_memory(buffer), tensors.size()));
    return GST_FLOW_ERROR;
  }
  for (size_t i = 0; i < tensors.size(); i++) {
    // Read through the queue, not host-mapped: opoverlay may read the same buffer from a tee.
    op::Status read = gst_op_tensor_read_floats(gst_buffer_peek_memory(buffer, i), tensors[i],
                                                state->raw.data() + state->base[i], &state->half);
    if (!read.ok()) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Could not read a tensor."),
                        ("tensor \"%s\": %s", tensors[i].name.c_str(), read.ToString().c_str()));
      return GST_FLOW_ERROR;
    }
  }
  return GST_FLOW_OK;
}

// This frame's own time upstream: the device time of each stage's commands for this frame
// (readable once the frame's output is complete, which reading the tensors waited for); a stage
// without them (no profiling, or an element that records none) counts its meta stage time.
static uint64_t FrameDeviceNs(const GstOpFrameMeta *meta) {
  uint64_t ns = 0;
  for (int s = 0; s < GST_OP_STAGE_COUNT; s++) {
    if (s == GST_OP_STAGE_PARSE)
      continue;
    const guint64 device = gst_op_frame_meta_device_ns(meta, GstOpStage(s));
    ns += device ? device : meta->stage_ns[s];
  }
  return ns;
}

// Says once per run when the buffers' PTS misbehave, naming the frame and the PTS: a frame
// without one, or one earlier than the previous frame's (not after a flush or a new segment,
// where a seek may move it back).
static void CheckPts(GstOpMsgSink *self, GstBuffer *buffer, uint32_t frame_id) {
  LogClock &c = self->impl->log_clock;
  if (!GST_BUFFER_PTS_IS_VALID(buffer)) {
    if (!c.warned_no_pts) {
      c.warned_no_pts = true;
      GST_ELEMENT_WARNING(
          self, STREAM, FORMAT,
          ("Frame %u has no PTS; logMonoTime is kept increasing without it.", frame_id),
          ("frame %u, PTS none (reported once per run)", frame_id));
    }
    return;
  }
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  const bool restarted = c.restarted.exchange(false);
  if (c.have_pts && pts < c.previous_pts && !restarted && !c.warned_backwards) {
    c.warned_backwards = true;
    GST_ELEMENT_WARNING(
        self, STREAM, FORMAT,
        ("Frame %u has PTS %" GST_TIME_FORMAT ", before the previous frame's %" GST_TIME_FORMAT
         "; logMonoTime stays increasing.",
         frame_id, GST_TIME_ARGS(pts), GST_TIME_ARGS(c.previous_pts)),
        ("frame %u, PTS %" G_GUINT64_FORMAT " ns after %" G_GUINT64_FORMAT
         " ns (reported once per run)",
         frame_id, pts, c.previous_pts));
  }
  c.have_pts = true;
  c.previous_pts = pts;
}

// logMonoTime of this frame's messages, always after the previous frame's (docs/messages.md):
// clock mode, the monotonic clock; stream mode, the PTS plus the shift that earlier backward
// jumps needed, or without a PTS the end-of-frame time; either at least 1 ns after the previous.
static uint64_t NextLogTime(LogClock &c, GstBuffer *buffer, const FrameInfo &frame, bool stream,
                            uint64_t now_ns) {
  uint64_t t;
  if (!stream)
    t = now_ns;
  else if (GST_BUFFER_PTS_IS_VALID(buffer))
    t = GST_BUFFER_PTS(buffer) + c.shift_ns;
  else
    t = frame.timestamp_eof;
  if (c.have_previous && t <= c.previous_log_ns) {
    const uint64_t next = c.previous_log_ns + 1;
    if (stream && GST_BUFFER_PTS_IS_VALID(buffer))
      c.shift_ns += next - t;  // later frames keep their spacing
    t = next;
  }
  c.have_previous = true;
  c.previous_log_ns = t;
  return t;
}

static GstFlowReturn Render(GstBaseSink *sink, GstBuffer *buffer) {
  GstOpMsgSink *self = GST_OP_MSG_SINK(sink);
  Impl *impl = self->impl;
  CapsState *state = impl->caps.get();
  if (!state)
    return GST_FLOW_NOT_NEGOTIATED;
  const uint64_t parse_start = MonotonicNs();

  Settings settings;
  {
    std::lock_guard<std::mutex> guard(impl->lock);
    settings = impl->settings;
  }

  FrameInfo frame;
  GstOpFrameMeta *meta = gst_buffer_get_op_frame_meta(buffer);
  uint64_t upstream_ns = 0;
  if (meta) {
    frame.frame_id = meta->road_frame_id;
    frame.frame_id_extra = meta->wide_frame_id;
    frame.dropped_frames = meta->dropped;
    frame.timestamp_eof = meta->road_eof_ns;
    frame.calibration_seen = meta->calibration_seen;
  } else {
    // Without provenance the frames are counted; nothing says a calibration was seen.
    frame.frame_id = frame.frame_id_extra = impl->frames_without_meta++;
    if (GST_BUFFER_PTS_IS_VALID(buffer))
      frame.timestamp_eof = GST_BUFFER_PTS(buffer);
  }
  CheckPts(self, buffer, frame.frame_id);
  if (meta && meta->drops_counted) {
    // Counted upstream over every received frame, the ones it did not evaluate included; a
    // frame after a drop arrives here only when upstream chose to evaluate it anyway.
    frame.frame_drop_perc = meta->frame_drop_perc;
  } else {
    impl->drop_filter.Update(frame.dropped_frames);
    frame.frame_drop_perc = impl->drop_filter.Percent();
  }
  if (frame.dropped_frames > 0 && !(meta && meta->drops_counted)) {
    // openpilot warps such a frame but neither runs the networks nor publishes.
    GST_LOG_OBJECT(self, "frame %u follows %u dropped frames: no messages", frame.frame_id,
                   frame.dropped_frames);
    return GST_FLOW_OK;
  }

  GstFlowReturn ret = GatherTensors(self, buffer, state);
  if (ret != GST_FLOW_OK)
    return ret;
  guint32 newest = 0;
  if (meta) {
    upstream_ns = FrameDeviceNs(meta);  // the tensors are read: the frame's commands are done
    // The road frames that reached the pipeline (opwarp) since this one, as the messages are
    // filled (openpilot: the latest roadCameraState when it fills them).
    if (gst_op_frame_clock_newest(meta->clock, &newest))
      frame.frame_age = op::drive::FrameAge(newest, frame.frame_id);
  }
  op::Status st = state->parser->Parse(state->raw.data(), state->raw.size(), &impl->parsed);
  if (!st.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, st, STREAM, FORMAT, ("Could not parse the network output."));
    return GST_FLOW_ERROR;
  }
  const FrameDecisions decisions = impl->filler.Step(impl->parsed, frame, settings.car);
  // Stream mode counts only the upstream times (carried in the meta); clock mode adds this
  // element's own parse time. Measured device times differ from run to run: `deterministic`
  // writes 0 instead, so that a replay of the same buffers in stream mode writes the same bytes.
  const bool stream = settings.timestamps == GST_OP_MSG_SINK_TIMESTAMPS_STREAM;
  const uint64_t now = MonotonicNs();
  frame.log_mono_time = NextLogTime(impl->log_clock, buffer, frame, stream, now);
  if (settings.deterministic) {
    frame.model_execution_time = 0;
    frame.frame_age = 0;  // how many frames arrived meanwhile depends on the device's speed
  } else if (stream) {
    frame.model_execution_time = static_cast<float>(upstream_ns * 1e-9);
  } else {
    frame.model_execution_time = static_cast<float>((upstream_ns + (now - parse_start)) * 1e-9);
  }

  for (int i = 0; i < 3; i++) {
    const Service service = kServices[i];
    if (!(impl->services & service))
      continue;
    // Cap'n Proto reports a bug of ours as an exception; it must not leave the element.
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
      std::fill(impl->scratch.begin(), impl->scratch.end(), capnp::word());
      capnp::MallocMessageBuilder message(kj::arrayPtr(impl->scratch.data(), impl->scratch.size()));
      auto event = message.initRoot<op::msg::Event>();
      if (service == kServiceModelV2)
        MessageFiller::FillModelV2(event, impl->parsed, frame, settings.car, decisions);
      else if (service == kServiceDrivingModelData)
        MessageFiller::FillDrivingModelData(event, impl->parsed, frame, settings.car, decisions);
      else
        MessageFiller::FillCameraOdometry(event, impl->parsed, frame);
      SerializeFlat(message, &impl->bytes);
    });
    KJ_IF_MAYBE (e, failure) {
      GST_ELEMENT_ERROR(self, LIBRARY, FAILED,
                        ("Could not build a %s message.", ServiceName(service)),
                        ("%s", e->getDescription().cStr()));
      return GST_FLOW_ERROR;
    }
    if (impl->writer) {
      st = impl->writer->Write(impl->bytes.data(), impl->bytes.size());
      if (!st.ok()) {
        GST_OP_ELEMENT_ERROR_STATUS(self, st, RESOURCE, WRITE,
                                    ("Could not write to the log file."));
        return GST_FLOW_ERROR;
      }
    }
#ifdef OP_HAVE_ZMQ
    if (impl->zmq_sockets[i] &&
        zmq_send(impl->zmq_sockets[i], impl->bytes.data(), impl->bytes.size(), ZMQ_DONTWAIT) < 0)
      GST_WARNING_OBJECT(self, "publishing %s failed: %s", ServiceName(service),
                         zmq_strerror(zmq_errno()));
#endif
    if (settings.emit_signals) {
      GBytes *bytes = g_bytes_new(impl->bytes.data(), impl->bytes.size());
      g_signal_emit(self, signals[SIGNAL_MESSAGE], 0, ServiceName(service), bytes);
      g_bytes_unref(bytes);
    }
    std::lock_guard<std::mutex> guard(impl->lock);
    impl->messages++;
  }
  if (impl->writer) {
    // Whole frames reach the file: a pipeline that dies leaves only complete messages.
    st = impl->writer->Flush();
    if (!st.ok()) {
      GST_OP_ELEMENT_ERROR_STATUS(self, st, RESOURCE, WRITE, ("Could not write to the log file."));
      return GST_FLOW_ERROR;
    }
  }
  return GST_FLOW_OK;
}

static gboolean Event(GstBaseSink *sink, GstEvent *event) {
  // After a seek the PTS may start again from an earlier time: not a stream going backwards.
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP || GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT)
    GST_OP_MSG_SINK(sink)->impl->log_clock.restarted = true;
  return GST_BASE_SINK_CLASS(gst_op_msg_sink_parent_class)->event(sink, event);
}

static void Finalize(GObject *object) {
  GstOpMsgSink *self = GST_OP_MSG_SINK(object);
  ClosePublisher(self->impl);
  gst_caps_replace(&self->impl->rejected_caps, nullptr);
  delete self->impl;
  G_OBJECT_CLASS(gst_op_msg_sink_parent_class)->finalize(object);
}

static void gst_op_msg_sink_init(GstOpMsgSink *self) {
  self->impl = new Impl();
  // Messages are made as buffers arrive; there is nothing to present at a clock time.
  gst_base_sink_set_sync(GST_BASE_SINK(self), FALSE);
}

static void gst_op_msg_sink_class_init(GstOpMsgSinkClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseSinkClass *sink_class = GST_BASE_SINK_CLASS(klass);

  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  gobject_class->finalize = Finalize;

  const auto ready =
      (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  const auto live =
      (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      gobject_class, PROP_LOCATION,
      g_param_spec_string("location", "Location",
                          "Log file to write (.zst: one zstd stream at level 10; else plain)",
                          nullptr, ready));
  g_object_class_install_property(
      gobject_class, PROP_SERVICES,
      g_param_spec_string("services", "Services",
                          "Messages to produce: all, or a comma-separated subset of modelV2, "
                          "drivingModelData, cameraOdometry",
                          "all", ready));
  g_object_class_install_property(
      gobject_class, PROP_EMIT_SIGNALS,
      g_param_spec_boolean("emit-signals", "Emit signals",
                           "Emit the message signal for every message", FALSE, live));
  g_object_class_install_property(
      gobject_class, PROP_V_EGO,
      g_param_spec_float("v-ego", "Ego speed", "The car's speed (m/s)", 0.0f, 100.0f, 0.0f, live));
  g_object_class_install_property(
      gobject_class, PROP_LAT_DELAY,
      g_param_spec_float("lat-delay", "Lateral delay", "The steering actuator delay (s)", 0.0f,
                         5.0f, 0.0f, live));
  g_object_class_install_property(
      gobject_class, PROP_LONG_DELAY,
      g_param_spec_float("long-delay", "Longitudinal delay", "The longitudinal actuator delay (s)",
                         0.0f, 5.0f, 0.0f, live));
  g_object_class_install_property(
      gobject_class, PROP_LANE_CHANGE_STATE,
      g_param_spec_enum("lane-change-state", "Lane change state",
                        "The lane change state copied into the messages",
                        gst_op_lane_change_state_get_type(), 0, live));
  g_object_class_install_property(
      gobject_class, PROP_LANE_CHANGE_DIRECTION,
      g_param_spec_enum("lane-change-direction", "Lane change direction",
                        "The lane change direction copied into the messages",
                        gst_op_lane_change_direction_get_type(), 0, live));
  g_object_class_install_property(
      gobject_class, PROP_TIMESTAMPS,
      g_param_spec_enum("timestamps", "Timestamps", "Where logMonoTime comes from",
                        gst_op_msg_sink_timestamps_get_type(), GST_OP_MSG_SINK_TIMESTAMPS_CLOCK,
                        ready));
  g_object_class_install_property(
      gobject_class, PROP_PUBLISH,
      g_param_spec_boolean("publish", "Publish",
                           "Publish on ZMQ PUB sockets at 127.0.0.1 on openpilot's bridge ports",
                           FALSE, ready));
  g_object_class_install_property(
      gobject_class, PROP_DETERMINISTIC,
      g_param_spec_boolean("deterministic", "Deterministic",
                           "Write modelExecutionTime and frameAge as 0 instead of what was "
                           "measured, so that two timestamps=stream runs over the same input "
                           "write the same bytes",
                           FALSE, ready));
  g_object_class_install_property(
      gobject_class, PROP_MESSAGES,
      g_param_spec_uint64("messages", "Messages", "Messages produced since start", 0, G_MAXUINT64,
                          0, (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  /**
   * GstOpMsgSink::message:
   * @sink: the element
   * @service: "modelV2", "drivingModelData" or "cameraOdometry"
   * @bytes: one Event in flat-array framing
   *
   * Emitted for every message when emit-signals is true, from the streaming thread.
   */
  signals[SIGNAL_MESSAGE] =
      g_signal_new("message", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, nullptr, nullptr,
                   nullptr, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_BYTES);

  gst_element_class_set_static_metadata(
      element_class, "openpilot driving messages", "Sink/Metadata",
      "Parses a driving model's raw outputs into openpilot's modelV2, drivingModelData and "
      "cameraOdometry messages, written to a log, published on ZMQ or signalled",
      "gst-op");
  gst_element_class_add_static_pad_template(element_class, &sink_template);

  sink_class->start = GST_DEBUG_FUNCPTR(Start);
  sink_class->stop = GST_DEBUG_FUNCPTR(Stop);
  sink_class->set_caps = GST_DEBUG_FUNCPTR(SetCaps);
  sink_class->render = GST_DEBUG_FUNCPTR(Render);
  sink_class->event = GST_DEBUG_FUNCPTR(Event);

  gst_type_mark_as_plugin_api(gst_op_msg_sink_timestamps_get_type(), (GstPluginAPIFlags)0);
  GST_DEBUG_CATEGORY_INIT(gst_op_msg_sink_debug, "opmsgsink", 0, "openpilot driving messages");
}
