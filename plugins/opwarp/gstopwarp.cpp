/**
 * SECTION:element-opwarp
 *
 * Turns NV12 camera frames into the input openpilot's driving networks expect: the calibration
 * and the camera intrinsics give the warp matrix, each frame is warped (nearest neighbour, round
 * half to even, clamp to edge) into six 128×256 planes (four luma phases, U, V), the element
 * keeps the last five prepared frames on the device and emits frame t−4 then frame t as one
 * uint8 tensor (1,12,128,256) named after `model-input`. Everything runs on the pipeline's
 * OpenCL queue; the output carries the completion event. Frames in system memory are uploaded
 * once; NV12 in `memory:DMABuf` is imported zero-copy where the device has a dmabuf import
 * extension (as in opclupload), else uploaded like system memory after one warning. The output
 * falls back to system memory when downstream needs it. Timestamps and
 * the provenance meta (GstOpFrameMeta) are kept; the meta records whether a calibration was
 * seen and the time spent here, and a road camera's frames carry this element's frame clock (the
 * newest road frame id that has arrived, from which opmsgsink fills modelV2.frameAge). With a
 * live source the element keeps at most two frames on the device: a frame that arrives while two
 * earlier ones are unfinished there (their networks included) is dropped before its upload,
 * posted as a QoS message and counted in `dropped`; the road and wide warps feeding one opvision
 * share its count, a pair of twins (capture times within 25 ms) being one frame, and drop twins
 * together; it leaves a gap in the frame ids that
 * opvision counts as openpilot's modeld does (frameDropPerc). Non-live pipelines warp every
 * frame. A frame without a meta gets its frame id from the buffer offset only where that numbers
 * frames (offset_end = offset + 1, as cameras set it), else from a counter: byte offsets (filesrc,
 * rawvideoparse) are not ids.
 *
 * ## Example
 * |[
 * gst-launch-1.0 filesrc location=road.nv12 ! \
 *     rawvideoparse format=nv12 width=1928 height=1208 framerate=20/1 ! \
 *     opwarp rpy="0,0.02,-0.01" ! filesink location=img.bin
 * ]|
 *
 * ## Properties
 * - `model-input` (`img` | `big_img`, default `img`): the network input to prepare; `img` uses
 *   the medmodel frame, `big_img` the sbigmodel frame. Also names the output tensor.
 * - `camera` (`auto` | `road` | `wide`, default `auto`): whose preset intrinsics to use; `auto`
 *   is road for `img` and wide for `big_img`.
 * - `device-type` (`auto` | `tici` | `tizi` | `mici`, default `auto`): the camera presets;
 *   `auto` goes by the frame size (1928×1208 tici, 1344×760 mici).
 * - `intrinsics` (string, default ""): "fx,fy,cx,cy" in pixels for any other camera (then any
 *   frame size works); overrides the presets.
 * - `rpy` (string, default "", changeable while PLAYING): the calibration "roll,pitch,yaw" in
 *   radians. Until one is given (here or by an "op-calibration" event) the warp uses zeros and
 *   the meta says the calibration was not seen. A malformed string is refused with a warning
 *   and the previous value stays; "" clears it.
 * - `device` (string, default "auto"): the OpenCL device, when no context is shared yet.
 * - read-only statistics: `frames` (warped) and `dropped` (live frames dropped because two
 *   frames were on the device).
 *
 * Latency queries add the longest processing time measured so far (frame arrival to output
 * complete on the device) to the minimum, and twice that (the two frames a live pipeline may
 * have on the device) to the maximum; live is upstream's. A new maximum is announced with a
 * LATENCY message.
 */
#include "opwarp/gstopwarp.h"

#include <gst/video/video.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/gstopcamerasettings.h"
#include "common/gstopevents.h"
#include "drive/camera.h"
#include "drive/frame_track.h"
#include "drive/warp.h"
#include "op/gstoperror.h"
#include "op/gstopbufferpool.h"
#include "op/gstopframetimer.h"
#include "op/gstoplatency.h"
#include "op/gstoplive.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"
#include "op/gstopref.h"
#include "op/gstopupload.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_warp_debug);
#define GST_CAT_DEFAULT gst_op_warp_debug

using op::drive::CameraRole;
using op::drive::ModelFrame;

// ---- Enums --------------------------------------------------------------------------------

enum GstOpWarpModelInput { GST_OP_WARP_MODEL_INPUT_IMG, GST_OP_WARP_MODEL_INPUT_BIG_IMG };
enum GstOpWarpCamera { GST_OP_WARP_CAMERA_AUTO, GST_OP_WARP_CAMERA_ROAD, GST_OP_WARP_CAMERA_WIDE };

static GType gst_op_warp_model_input_get_type() {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_OP_WARP_MODEL_INPUT_IMG, "img: road camera, medmodel frame", "img"},
      {GST_OP_WARP_MODEL_INPUT_BIG_IMG, "big_img: wide camera, sbigmodel frame", "big_img"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstOpWarpModelInput", values));
  return type;
}

static GType gst_op_warp_camera_get_type() {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_OP_WARP_CAMERA_AUTO, "road for img, wide for big_img", "auto"},
      {GST_OP_WARP_CAMERA_ROAD, "the road (narrow) camera", "road"},
      {GST_OP_WARP_CAMERA_WIDE, "the wide camera", "wide"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstOpWarpCamera", values));
  return type;
}

// ---- Element state ------------------------------------------------------------------------

enum {
  PROP_0,
  PROP_MODEL_INPUT,
  PROP_CAMERA,
  PROP_DEVICE_TYPE,
  PROP_INTRINSICS,
  PROP_RPY,
  PROP_FRAMES,
  PROP_DROPPED,
};

namespace {

// What the properties and events set; read by the streaming thread. Guarded by Impl::lock.
struct Settings {
  GstOpWarpModelInput model_input = GST_OP_WARP_MODEL_INPUT_IMG;
  GstOpWarpCamera camera = GST_OP_WARP_CAMERA_AUTO;
  GstOpDeviceType device_type = GST_OP_DEVICE_TYPE_AUTO;
  std::string intrinsics_string;
  std::optional<op::drive::Intrinsics> intrinsics;
  std::string rpy_string;
  op::drive::Rpy rpy;
  bool calibration_seen = false;
  uint64_t calibration_version = 0;  // bumped on every change, so the matrix is rebuilt once
};

// Per-caps device state, built in set_caps and dropped in stop(). Streaming thread only.
struct Stream {
  GstVideoInfo caps_info;
  bool dmabuf = false;  // memory:DMABuf caps: frames go through the uploader's import
  op::drive::Intrinsics camera;
  ModelFrame model = ModelFrame::kMedmodel;
  CameraRole role = CameraRole::kRoad;
  std::unique_ptr<op::drive::Warper> warper;
  uint64_t applied_version = UINT64_MAX;
  op::cl::MemHandle staging;  // system-memory frames are uploaded here (allocated once)
  size_t staging_bytes = 0;
  std::unique_ptr<GstOpUploader> uploader;  // imports or writes them, made with the first one
  op::cl::EventHandle staging_event;        // the last upload, alive while a wait list names it
  op::cl::MemHandle download;               // the output for system-memory buffers (allocated once)
  uint64_t frames = 0;
  op::drive::FrameIdSource id_source = op::drive::FrameIdSource::kCounter;
};

struct Impl {
  std::mutex lock;  // guards settings
  Settings settings;
  GstOpSettingWarnings warnings;  // refused settings, kept until start without a bus
  std::mutex stream_lock;         // guards stream (streaming thread vs flush events and stop)
  Stream stream;
  GstOpKeepAlive imports;  // imported DMABuf inputs whose frames are still on the device
  // Processing latency: from a frame's arrival to its output being complete on the device,
  // measured by `timer` (declared after it: the timer's drain ends its callbacks first).
  GstOpLatencyReporter latency;
  // The newest road frame id that has arrived here; every road frame's meta holds a reference
  // (modelV2.frameAge downstream).
  GstOpFrameClock *clock = gst_op_frame_clock_new();
  GstOpFrameTimer timer;
  // Whether upstream is live (asked in set_caps, refreshed by every latency query): only then
  // are frames dropped to bound the frames on the device.
  std::atomic<bool> live{false};
  std::atomic<guint64> frames{0}, dropped{0};
  // Live frames on the device, from the warp until the device finished what downstream enqueued
  // for them (their networks). A reference: buffers still out hold theirs. Our own, or the one
  // the consumer downstream shares between the cameras it pairs (asked in set_caps once per
  // start: `shared`); `producer` is our index in it. Streaming thread (and Close).
  GstOpFrameGate *gate = GstOpFrameGate::New();
  bool gate_asked = false;
  int producer = 0;
  // Caps this element refused, each told once per start as an element error: basetransform asks
  // again for every buffer, and a burst of the same error only buries it.
  std::atomic<bool> caps_refused{false};
  // The warp program's build, started at NULL→READY beside the networks' loads (see
  // ChangeState); joined at READY→NULL.
  std::thread prebuild;
  ~Impl() {
    if (prebuild.joinable())
      prebuild.join();
    gate->Unref();
    gst_op_frame_clock_unref(clock);
  }
};

const char *ModelInputName(GstOpWarpModelInput m) {
  return m == GST_OP_WARP_MODEL_INPUT_BIG_IMG ? "big_img" : "img";
}

}  // namespace

struct _GstOpWarp {
  GstOpBaseFilter parent;
  Impl *impl;
};

G_DEFINE_TYPE(GstOpWarp, gst_op_warp, GST_TYPE_OP_BASE_FILTER)
GST_ELEMENT_REGISTER_DEFINE(opwarp, "opwarp", GST_RANK_NONE, GST_TYPE_OP_WARP)

// OpenCL memory first, then system memory, then DMABuf (imported zero-copy where the device can,
// else uploaded like system memory).
#define SINK_CAPS                                                          \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_OP_CL, "NV12") \
  "; " GST_VIDEO_CAPS_MAKE("NV12") "; " GST_VIDEO_CAPS_MAKE_WITH_FEATURES( \
      GST_OP_CAPS_FEATURE_MEMORY_DMABUF, "NV12")
#define SRC_CAPS \
  GST_OP_TENSOR_CAPS_NAME "(" GST_CAPS_FEATURE_MEMORY_OP_CL "); " GST_OP_TENSOR_CAPS_NAME

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(SINK_CAPS));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(SRC_CAPS));

// The output tensor for the current model input (system memory; features added by the caller).
static GstOpTensorInfo OutputInfo(GstOpWarpModelInput m) {
  GstOpTensorInfo info;
  GstOpTensorDesc d;
  d.name = ModelInputName(m);
  d.type = GstOpTensorType::kUint8;
  d.dims = {1, 2 * op::drive::kChannelsPerFrame, op::drive::kPlaneRows, op::drive::kPlaneCols};
  info.tensors.push_back(d);
  return info;
}

// ---- Properties ---------------------------------------------------------------------------

// Warnings about settings made before the element had a bus are posted now.
static gboolean Open(GstOpBaseFilter *base, GstOpContext *) {
  auto *self = GST_OP_WARP(base);
  self->impl->warnings.Post(GST_ELEMENT(self));
  self->impl->live = false;
  self->impl->frames = 0;
  self->impl->dropped = 0;
  return TRUE;
}

static void SetRpyString(GstOpWarp *self, const char *value) {
  Impl &impl = *self->impl;
  const std::string text = value ? value : "";
  op::drive::Rpy rpy;
  const GstOpSettingChange change =
      gst_op_camera_settings_parse_rpy(GST_ELEMENT(self), impl.warnings, text, &rpy);
  if (change == GstOpSettingChange::kRefused)
    return;
  std::lock_guard<std::mutex> guard(impl.lock);
  impl.settings.rpy_string = text;
  impl.settings.rpy = rpy;
  impl.settings.calibration_seen = change == GstOpSettingChange::kSet;
  impl.settings.calibration_version++;
}

static void SetIntrinsicsString(GstOpWarp *self, const char *value) {
  Impl &impl = *self->impl;
  const std::string text = value ? value : "";
  op::drive::Intrinsics k;
  const GstOpSettingChange change =
      gst_op_camera_settings_parse_intrinsics(GST_ELEMENT(self), impl.warnings, text, &k);
  if (change == GstOpSettingChange::kRefused)
    return;
  std::lock_guard<std::mutex> guard(impl.lock);
  impl.settings.intrinsics_string = text;
  impl.settings.intrinsics = change == GstOpSettingChange::kSet ? std::optional(k) : std::nullopt;
}

static void SetProperty(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_WARP(object);
  Impl &impl = *self->impl;
  switch (prop_id) {
    case PROP_MODEL_INPUT: {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.model_input = GstOpWarpModelInput(g_value_get_enum(value));
      break;
    }
    case PROP_CAMERA: {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.camera = GstOpWarpCamera(g_value_get_enum(value));
      break;
    }
    case PROP_DEVICE_TYPE: {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.device_type = GstOpDeviceType(g_value_get_enum(value));
      break;
    }
    case PROP_INTRINSICS:
      SetIntrinsicsString(self, g_value_get_string(value));
      break;
    case PROP_RPY:
      SetRpyString(self, g_value_get_string(value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void GetProperty(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_WARP(object);
  Impl &impl = *self->impl;
  std::lock_guard<std::mutex> guard(impl.lock);
  switch (prop_id) {
    case PROP_MODEL_INPUT:
      g_value_set_enum(value, impl.settings.model_input);
      break;
    case PROP_CAMERA:
      g_value_set_enum(value, impl.settings.camera);
      break;
    case PROP_DEVICE_TYPE:
      g_value_set_enum(value, impl.settings.device_type);
      break;
    case PROP_INTRINSICS:
      g_value_set_string(value, impl.settings.intrinsics_string.c_str());
      break;
    case PROP_RPY:
      g_value_set_string(value, impl.settings.rpy_string.c_str());
      break;
    case PROP_FRAMES:
      g_value_set_uint64(value, impl.frames);
      break;
    case PROP_DROPPED:
      g_value_set_uint64(value, impl.dropped);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

// ---- Caps ---------------------------------------------------------------------------------

static GstCaps *TransformCaps(GstBaseTransform *trans, GstPadDirection direction, GstCaps *caps,
                              GstCaps *filter) {
  auto *self = GST_OP_WARP(trans);
  GstCaps *out;
  if (direction == GST_PAD_SINK) {
    GstOpWarpModelInput model;
    {
      std::lock_guard<std::mutex> guard(self->impl->lock);
      model = self->impl->settings.model_input;
    }
    GstCaps *tensor = gst_op_tensor_info_to_caps(OutputInfo(model));
    out = gst_op_caps_with_both_memories(tensor);
    gst_caps_unref(tensor);
  } else {
    // Any NV12 frame can become the tensor; the size is checked in set_caps.
    GstCaps *video = gst_static_pad_template_get_caps(&sink_template);
    out = gst_caps_copy(video);
    gst_caps_unref(video);
  }
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full(filter, out, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(out);
    out = tmp;
  }
  GST_DEBUG_OBJECT(trans, "%s %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
                   direction == GST_PAD_SINK ? "sink" : "src", caps, out);
  return out;
}

static op::drive::Nv12Layout LayoutOf(const GstVideoInfo &info) {
  op::drive::Nv12Layout l;
  l.width = GST_VIDEO_INFO_WIDTH(&info);
  l.height = GST_VIDEO_INFO_HEIGHT(&info);
  l.y_offset = GST_VIDEO_INFO_PLANE_OFFSET(&info, 0);
  l.y_stride = size_t(GST_VIDEO_INFO_PLANE_STRIDE(&info, 0));
  l.uv_offset = GST_VIDEO_INFO_PLANE_OFFSET(&info, 1);
  l.uv_stride = size_t(GST_VIDEO_INFO_PLANE_STRIDE(&info, 1));
  return l;
}

static gboolean SetCaps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  auto *self = GST_OP_WARP(trans);
  Impl &impl = *self->impl;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, incaps) ||
      GST_VIDEO_INFO_FORMAT(&info) != GST_VIDEO_FORMAT_NV12) {
    if (!impl.caps_refused.exchange(true))
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("opwarp takes NV12 video"),
                        ("caps %" GST_PTR_FORMAT, incaps));
    return FALSE;
  }
  const int w = GST_VIDEO_INFO_WIDTH(&info), h = GST_VIDEO_INFO_HEIGHT(&info);
  Settings settings;
  {
    std::lock_guard<std::mutex> guard(impl.lock);
    settings = impl.settings;
  }

  const ModelFrame model = settings.model_input == GST_OP_WARP_MODEL_INPUT_BIG_IMG
                               ? ModelFrame::kSbigmodel
                               : ModelFrame::kMedmodel;
  CameraRole role = model == ModelFrame::kSbigmodel ? CameraRole::kWide : CameraRole::kRoad;
  if (settings.camera == GST_OP_WARP_CAMERA_ROAD)
    role = CameraRole::kRoad;
  if (settings.camera == GST_OP_WARP_CAMERA_WIDE)
    role = CameraRole::kWide;

  auto resolved =
      gst_op_camera_settings_resolve(settings.device_type, role, settings.intrinsics, w, h);
  if (!resolved.ok()) {
    if (!impl.caps_refused.exchange(true))
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("%s", resolved.status().message().c_str()),
                        ("caps %" GST_PTR_FORMAT, incaps));
    return FALSE;
  }
  const op::drive::Intrinsics camera = *resolved;
  GST_INFO_OBJECT(self, "%s camera, intrinsics %g,%g,%g,%g%s", op::drive::CameraRoleName(role),
                  camera.fx, camera.fy, camera.cx, camera.cy,
                  settings.intrinsics ? "" : " (presets)");

  GstOpContext *ctx = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self));
  if (!ctx) {
    GST_ELEMENT_ERROR(self, LIBRARY, INIT, ("No OpenCL context"), (nullptr));
    return FALSE;
  }
  auto warper = op::drive::Warper::Create(gst_op_context_get_device(ctx),
                                          gst_op_context_get_queue(ctx), LayoutOf(info));
  if (!warper.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, warper.status(), LIBRARY, INIT,
                                ("Could not prepare the warp on the OpenCL device"));
    return FALSE;
  }
  if (!op::drive::WarpIsBitExact(*gst_op_context_get_device(ctx)))
    GST_ELEMENT_WARNING(self, LIBRARY, SETTINGS,
                        ("The OpenCL device has no correctly rounded float division: the warp "
                         "may differ from openpilot's by a pixel at rounding boundaries"),
                        (nullptr));

  std::lock_guard<std::mutex> guard(impl.stream_lock);
  Stream &st = impl.stream;
  // Frames in flight may still read the old warper's buffers: the queue is in order, and the
  // handles keep the OpenCL objects alive until those commands finish.
  st.caps_info = info;
  st.dmabuf = gst_op_caps_is_dmabuf(incaps);
  st.camera = camera;
  st.model = model;
  st.role = role;
  st.warper = std::move(warper).value();
  st.applied_version = UINT64_MAX;
  impl.live = gst_op_upstream_is_live(GST_BASE_TRANSFORM_SINK_PAD(trans));
  if (!impl.gate_asked) {
    // A consumer that pairs two cameras (opvision) shares one gate between their warps, so that
    // twins are dropped, or let onto the device, together; otherwise the gate is our own.
    impl.gate_asked = true;
    if (GstOpFrameGate *shared = gst_op_frame_gate_query_peer(GST_BASE_TRANSFORM_SRC_PAD(trans))) {
      impl.gate->Unref();
      impl.gate = shared;
    }
    impl.producer = impl.gate->AddProducer();
  }
  GST_DEBUG_OBJECT(self, "in %" GST_PTR_FORMAT ", out %" GST_PTR_FORMAT "%s", incaps, outcaps,
                   impl.live ? " (live)" : "");
  return TRUE;
}

static gboolean TransformSize(GstBaseTransform *trans, GstPadDirection direction, GstCaps *caps,
                              gsize size, GstCaps *othercaps, gsize *othersize) {
  if (direction == GST_PAD_SINK) {
    *othersize = op::drive::kModelInputBytes;
    return TRUE;
  }
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, othercaps))
    return FALSE;
  *othersize = GST_VIDEO_INFO_SIZE(&info);
  return TRUE;
}

// ---- Events -------------------------------------------------------------------------------

static gboolean SinkEvent(GstBaseTransform *trans, GstEvent *event) {
  auto *self = GST_OP_WARP(trans);
  Impl &impl = *self->impl;
  gdouble roll, pitch, yaw;
  if (gst_op_calibration_event_parse(event, &roll, &pitch, &yaw)) {
    const op::drive::Rpy rpy{roll, pitch, yaw};
    {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.rpy = rpy;
      impl.settings.rpy_string = op::drive::FormatRpy(rpy);
      impl.settings.calibration_seen = true;
      impl.settings.calibration_version++;
    }
    GST_DEBUG_OBJECT(self, "calibration event: %s", op::drive::FormatRpy(rpy).c_str());
    g_object_notify(G_OBJECT(self), "rpy");
  } else if (GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_DOWNSTREAM &&
             gst_event_has_name(event, GST_OP_CALIBRATION_EVENT_NAME)) {
    GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                        ("Ignoring a calibration event without finite roll, pitch and yaw"),
                        ("%" GST_PTR_FORMAT, gst_event_get_structure(event)));
  } else if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
    // After a seek the frames before it are not the context of the frames after it.
    std::lock_guard<std::mutex> guard(impl.stream_lock);
    if (impl.stream.warper) {
      op::Status s = impl.stream.warper->Reset();
      if (!s.ok())
        GST_WARNING_OBJECT(self, "history reset failed: %s", s.ToString().c_str());
    }
  }
  return GST_BASE_TRANSFORM_CLASS(gst_op_warp_parent_class)->sink_event(trans, event);
}

// ---- Frames -------------------------------------------------------------------------------

static GstOpUploader *Uploader(GstOpWarp *self, GstOpContext *ctx) {
  Stream &st = self->impl->stream;
  if (!st.uploader)
    st.uploader = std::make_unique<GstOpUploader>(GST_ELEMENT(self), ctx, false);
  return st.uploader.get();
}

// Makes the input frame available as a cl_mem: OpenCL memory of our context is used in place
// (its last writer joins `wait`), a DMABuf frame the device can import becomes such memory
// (`imported`, which the caller keeps until the warp has read it), anything else is uploaded
// once into the staging buffer. `layout` gets offsets relative to the returned cl_mem; `frame`
// is the frame's own layout (for the imported buffer's GstVideoMeta).
static op::StatusOr<cl_mem> InputFrame(GstOpWarp *self, GstOpContext *ctx, GstBuffer *inbuf,
                                       const GstVideoInfo &frame, op::drive::Nv12Layout *layout,
                                       op::cl::EventList *wait, GstOpRef<GstBuffer> *imported) {
  Stream &st = self->impl->stream;
  if (st.dmabuf) {
    // Null where the device has no import extension (the uploader warns once) or the frame is
    // not one dmabuf memory: then it is uploaded below like system memory.
    OP_ASSIGN_OR_RETURN(GstBuffer * wrapped, Uploader(self, ctx)->Import(inbuf, frame));
    if (wrapped) {
      *imported = GstOpRef<GstBuffer>(wrapped);
      inbuf = wrapped;
    }
  }
  const size_t needed = layout->MinBytes();
  GstMemory *mem = gst_buffer_n_memory(inbuf) == 1 ? gst_buffer_peek_memory(inbuf, 0) : nullptr;
  if (mem && gst_is_op_memory_on(mem, ctx)) {
    GstMapInfo info;
    if (!gst_op_memory_map_cl(mem, &info, GST_MAP_READ))
      return op::Internal("could not map the input frame's OpenCL memory");
    cl_mem cl_frame = gst_op_map_info_get_cl_mem(&info);
    gst_memory_unmap(mem, &info);
    op::cl::EventHandle writer = gst_op_memory_get_write_event(mem);
    if (!wait->Add(writer.get()))
      return op::Internal("too many events to wait for");
    layout->y_offset += mem->offset;
    layout->uv_offset += mem->offset;
    return cl_frame;
  }

  if (!st.staging || st.staging_bytes < needed) {
    // Once per layout: the first system-memory frame, or one with a larger layout.
    OP_ASSIGN_OR_RETURN(st.staging, gst_op_context_get_device(ctx)->CreateBuffer(needed));
    st.staging_bytes = needed;
  }
  auto written = Uploader(self, ctx)->WriteBuffer(inbuf, needed, st.staging.get(), *wait);
  if (!written.ok())
    return written.status();
  if (!wait->Add(written->get()))
    return op::Internal("too many events to wait for");
  // The in-order queue keeps the write alive until it ran; the list only needs its handle now.
  st.staging_event = std::move(written).value();
  return st.staging.get();
}

// The frame id of a buffer without a frame meta: its offset where that numbers frames (a
// camera), else the count of frames since the caps. Byte offsets (filesrc, rawvideoparse) would
// look like huge gaps and stop evaluation downstream, so they are never taken for ids.
static guint32 FrameIdFor(GstOpWarp *self, Stream &st, GstBuffer *inbuf) {
  const op::drive::FrameIdSource source = op::drive::ChooseFrameIdSource(
      false, GST_BUFFER_OFFSET_IS_VALID(inbuf), GST_BUFFER_OFFSET(inbuf),
      GST_BUFFER_OFFSET_END_IS_VALID(inbuf), GST_BUFFER_OFFSET_END(inbuf));
  if (st.frames == 0 || source != st.id_source)
    GST_DEBUG_OBJECT(self, "frame ids from the %s", op::drive::FrameIdSourceName(source));
  st.id_source = source;
  return source == op::drive::FrameIdSource::kBufferOffset ? guint32(GST_BUFFER_OFFSET(inbuf))
                                                           : guint32(st.frames);
}

static gboolean Query(GstBaseTransform *trans, GstPadDirection direction, GstQuery *query) {
  auto *parent = GST_BASE_TRANSFORM_CLASS(gst_op_warp_parent_class);
  if (GST_QUERY_TYPE(query) != GST_QUERY_LATENCY || direction != GST_PAD_SRC)
    return parent->query(trans, direction, query);
  if (!parent->query(trans, direction, query))
    return FALSE;
  gboolean live = FALSE;
  gst_query_parse_latency(query, &live, nullptr, nullptr);
  GST_OP_WARP(trans)->impl->live = live;
  const GstOpLatencyReporter &latency = GST_OP_WARP(trans)->impl->latency;
  latency.AddTo(query);
  GST_DEBUG_OBJECT(trans, "latency: upstream + %" GST_TIME_FORMAT, GST_TIME_ARGS(latency.max()));
  return TRUE;
}

// Device output: the warp writes the output tensor in place, and the output's (and an OpenCL
// input's) last-user event is the warp's; nothing waits on the host. `first` and `last` get the
// frame's first and last warp command (the frame meta keeps them for its own device time).
static op::Status WarpToDevice(GstOpWarp *self, GstOpContext *ctx, cl_mem frame, GstBuffer *inbuf,
                               GstBuffer *outbuf, cl_mem out, gsize out_offset,
                               op::cl::EventList &wait, int64_t start_ns,
                               op::cl::EventHandle *first, op::cl::EventHandle *last) {
  Impl &impl = *self->impl;
  Stream &st = impl.stream;
  GstMemory *out_mem = gst_buffer_peek_memory(outbuf, 0);
  op::cl::EventHandle previous = gst_op_memory_get_write_event(out_mem);
  wait.Add(previous.get());
  OP_ASSIGN_OR_RETURN(op::cl::EventHandle done,
                      st.warper->Process(frame, out, out_offset, wait, first));
  *last = done;
  OP_RETURN_IF_ERROR(gst_op_context_get_queue(ctx).Flush());
  gst_op_buffer_set_write_event(outbuf, done.get());
  // The input is only read, but marking our event on it makes whoever reuses or maps it next
  // wait until the warp has read it (memories track one event, their last user).
  GstMemory *in_mem = gst_buffer_peek_memory(inbuf, 0);
  if (frame != st.staging.get() && gst_is_op_memory_on(in_mem, ctx))
    gst_op_memory_set_write_event(in_mem, done.get());
  // The latency is known once the device is done with the frame.
  impl.timer.Track(done.get(), start_ns);
  return op::Status::Ok();
}

// System-memory output: warp into our own device buffer, then read it back. `first` and `last`
// as for WarpToDevice.
static op::Status WarpToSystem(GstOpWarp *self, GstOpContext *ctx, cl_mem frame, GstBuffer *outbuf,
                               const op::cl::EventList &wait, int64_t start_ns,
                               op::cl::EventHandle *first, op::cl::EventHandle *last) {
  Impl &impl = *self->impl;
  Stream &st = impl.stream;
  if (!st.download) {
    OP_ASSIGN_OR_RETURN(st.download,
                        gst_op_context_get_device(ctx)->CreateBuffer(op::drive::kModelInputBytes));
  }
  GstMapInfo map;
  if (!gst_buffer_map(outbuf, &map, GST_MAP_WRITE))
    return op::IoError("could not map the output buffer");
  op::Status s = op::Status::Ok();
  if (map.size < op::drive::kModelInputBytes) {
    s = op::Internal("output buffer of " + std::to_string(map.size) + " bytes");
  } else {
    op::cl::Queue &queue = gst_op_context_get_queue(ctx);
    auto done = st.warper->Process(frame, st.download.get(), 0, wait, first);
    if (done.ok())
      *last = *done;
    auto read = done.ok() ? queue.Read(st.download.get(), 0, op::drive::kModelInputBytes, map.data,
                                       {done->get()})
                          : op::StatusOr<op::cl::EventHandle>(done.status());
    // A host wait on purpose: system memory goes downstream as soon as we return, and nothing
    // there knows about OpenCL events.
    s = read.ok() ? op::cl::WaitForEvent(read->get()) : read.status();
    if (s.ok())
      impl.latency.NoteAndPost(GST_ELEMENT(self), GstOpFrameTimer::Now() - start_ns);
  }
  gst_buffer_unmap(outbuf, &map);
  return s;
}

static void ReleaseImported(void *buffer, cl_int) {
  gst_buffer_unref(static_cast<GstBuffer *>(buffer));
}

// The frame's admission onto the device (live pipelines): the gate's slot, given back unless the
// frame was tracked (a frame that fails on its way does not hold a place).
struct Admission {
  GstOpFrameGate *gate = nullptr;
  int slot = -1;
  ~Admission() {
    if (gate && slot >= 0)
      gate->Cancel(slot);
  }
};

// A live frame finds two frames on the device (their networks not finished), or is the twin of
// another camera's frame that was dropped: it is dropped before any upload or device work, and
// counted; its id still advances the counter, so that the gap is visible downstream. Caller
// holds stream_lock. Otherwise *admission holds its place on the device.
static bool DropForInFlight(GstOpWarp *self, GstBuffer *inbuf, Admission *admission) {
  Impl &impl = *self->impl;
  if (!impl.live)
    return false;
  // Twins are matched by running time: the cameras' PTS are on the pipeline's clock.
  const GstSegment &segment = GST_BASE_TRANSFORM(self)->segment;
  const GstClockTime pts = GST_BUFFER_PTS(inbuf);
  const GstClockTime time = segment.format == GST_FORMAT_TIME && GST_CLOCK_TIME_IS_VALID(pts)
                                ? gst_segment_to_running_time(&segment, GST_FORMAT_TIME, pts)
                                : GST_CLOCK_TIME_NONE;
  const int slot = impl.gate->Admit(impl.producer, time, int(kGstOpMaxFramesInFlight));
  if (slot >= 0) {
    admission->gate = impl.gate;
    admission->slot = slot;
    return false;
  }
  impl.stream.frames++;
  const guint64 dropped = ++impl.dropped;
  GST_DEBUG_OBJECT(self, "no room on the device: dropping the frame at %" GST_TIME_FORMAT,
                   GST_TIME_ARGS(pts));
  gst_op_post_qos_drop(GST_ELEMENT(self), &segment, inbuf, impl.frames, dropped);
  return true;
}

static GstFlowReturn Transform(GstBaseTransform *trans, GstBuffer *inbuf, GstBuffer *outbuf) {
  auto *self = GST_OP_WARP(trans);
  Impl &impl = *self->impl;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t start_ns = GstOpFrameTimer::Now();
  GstOpContext *ctx = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self));
  std::lock_guard<std::mutex> stream_guard(impl.stream_lock);
  Stream &st = impl.stream;
  if (!ctx || !st.warper) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("opwarp received a frame before its caps"),
                      (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  Admission admission;
  if (DropForInFlight(self, inbuf, &admission))
    return GST_BASE_TRANSFORM_FLOW_DROPPED;

  // The frame's own layout (GstVideoMeta strides and offsets), checked against its size.
  GstVideoInfo vinfo;
  const gsize in_size = gst_buffer_get_size(inbuf);
  const bool meta_ok = gst_op_video_info_from_buffer(&st.caps_info, inbuf, &vinfo);
  op::drive::Nv12Layout layout = LayoutOf(meta_ok ? vinfo : st.caps_info);
  if (op::Status valid = layout.Validate(); !valid.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, valid, STREAM, FORMAT, ("Input frame layout is unusable"));
    return GST_FLOW_ERROR;
  }
  if (!meta_ok || in_size < layout.MinBytes()) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Input frame is smaller than its caps say"),
                      ("%" G_GSIZE_FORMAT " bytes; %dx%d NV12 with Y stride %zu and UV offset "
                       "%zu needs %zu",
                       in_size, layout.width, layout.height, layout.y_stride, layout.uv_offset,
                       layout.MinBytes()));
    return GST_FLOW_ERROR;
  }

  // The calibration, rebuilt into the matrix only when it changed.
  bool calibration_seen;
  {
    std::lock_guard<std::mutex> guard(impl.lock);
    calibration_seen = impl.settings.calibration_seen;
    if (st.applied_version != impl.settings.calibration_version) {
      st.warper->SetMatrix(op::drive::WarpMatrix(st.camera, op::drive::ModelIntrinsics(st.model),
                                                 impl.settings.rpy));
      st.applied_version = impl.settings.calibration_version;
    }
  }

  op::cl::EventList wait;
  GstOpRef<GstBuffer> imported;  // a DMABuf frame imported zero-copy: read in place of inbuf
  auto frame =
      InputFrame(self, ctx, inbuf, meta_ok ? vinfo : st.caps_info, &layout, &wait, &imported);
  GstBuffer *source = imported ? imported.get() : inbuf;
  op::Status s = frame.ok() ? st.warper->SetLayout(layout) : frame.status();
  if (!s.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, s, RESOURCE, FAILED, ("Could not read the input frame"));
    return GST_FLOW_ERROR;
  }

  // This frame's warp commands: the meta keeps them so its own device time can be read later.
  op::cl::EventHandle warp_first, warp_last;
  GstMemory *out_mem =
      gst_buffer_n_memory(outbuf) == 1 ? gst_buffer_peek_memory(outbuf, 0) : nullptr;
  if (out_mem && gst_is_op_memory_on(out_mem, ctx)) {
    GstMapInfo info;
    if (!gst_op_memory_map_cl(out_mem, &info, GST_MAP_WRITE)) {
      GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not map the output tensor"), (nullptr));
      return GST_FLOW_ERROR;
    }
    cl_mem out = gst_op_map_info_get_cl_mem(&info);
    gst_memory_unmap(out_mem, &info);
    s = WarpToDevice(self, ctx, *frame, source, outbuf, out, out_mem->offset, wait, start_ns,
                     &warp_first, &warp_last);
  } else {
    s = WarpToSystem(self, ctx, *frame, outbuf, wait, start_ns, &warp_first, &warp_last);
  }
  if (!s.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, s, RESOURCE, FAILED,
                                ("Could not warp the frame on the OpenCL device"));
    return GST_FLOW_ERROR;
  }
  // The camera may refill an imported frame's dmabuf once it has it back: the wrapper, which
  // holds the input, goes when the device has read it.
  if (imported)
    impl.imports.OnComplete(warp_last.get(), ReleaseImported, imported.release());

  // Provenance: upstream's meta was copied with the buffer's metadata; a source without one
  // gets a frame id (FrameIdFor) and the PTS as end-of-frame time.
  const bool had_meta = gst_buffer_get_op_frame_meta(inbuf) != nullptr;
  GstOpFrameMeta *meta = gst_buffer_get_or_add_op_frame_meta(outbuf);
  if (!had_meta) {
    const guint32 id = FrameIdFor(self, st, inbuf);
    const guint64 eof = GST_BUFFER_PTS_IS_VALID(inbuf) ? GST_BUFFER_PTS(inbuf) : 0;
    if (st.role == CameraRole::kWide) {
      meta->wide_frame_id = id;
      meta->wide_eof_ns = eof;
    } else {
      meta->road_frame_id = id;
      meta->road_eof_ns = eof;
    }
  }
  meta->calibration_seen = calibration_seen;
  if (st.role != CameraRole::kWide) {
    // This frame has arrived: frames already in the pipeline are now that much older.
    gst_op_frame_clock_note(impl.clock, meta->road_frame_id);
    gst_op_frame_meta_set_clock(meta, impl.clock);
  }
  if (admission.slot >= 0) {
    admission.gate->Track(outbuf, ctx, admission.slot);
    admission.slot = -1;  // tracked: the buffer's release ends it
  }
  gst_op_frame_meta_set_stage_events(meta, GST_OP_STAGE_WARP, warp_first.get(), warp_last.get());
  meta->stage_ns[GST_OP_STAGE_WARP] = guint64(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  st.frames++;
  impl.frames++;
  return GST_FLOW_OK;
}

// Waits until the device released every uploaded input, then drops the device state.
static void Close(GstOpBaseFilter *base) {
  auto *self = GST_OP_WARP(base);
  Impl &impl = *self->impl;
  GstOpContext *ctx = gst_op_base_filter_get_context(base);
  // Stopping: the frames in flight must finish before their buffers and our memory go.
  if (ctx)
    (void)gst_op_context_get_queue(ctx).Finish();
  impl.timer.Drain();
  impl.imports.Drain();
  // A fresh gate for the next start: the old one, and with it the context, lives on only while
  // buffers from this run still hold it.
  std::lock_guard<std::mutex> guard(impl.stream_lock);
  impl.gate->Unref();
  impl.gate = GstOpFrameGate::New();
  impl.gate_asked = false;
  impl.producer = 0;
  impl.caps_refused = false;
  impl.stream = Stream();  // its uploader waits until the device gave back every input
  gst_video_info_init(&impl.stream.caps_info);
}

static GstStateChangeReturn ChangeState(GstElement *element, GstStateChange transition) {
  auto *self = GST_OP_WARP(element);
  Impl &impl = *self->impl;
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !impl.prebuild.joinable()) {
    // The context now, as opvision and oppolicy make theirs (a device that cannot be opened is
    // an error here, once), and the warp program builds while the networks load: with empty
    // caches it took 0.3 s after them, when the first frame's caps came, on the way to the
    // first message. A build failure is left to set_caps, which builds again and reports it.
    if (!gst_op_base_filter_ensure_context(GST_OP_BASE_FILTER(self)))
      return GST_STATE_CHANGE_FAILURE;
    std::shared_ptr<op::cl::Device> device =
        gst_op_context_get_device(gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self)));
    if (device)
      impl.prebuild = std::thread([device] { (void)op::drive::PrebuildWarpProgram(*device); });
  }
  GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(gst_op_warp_parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_READY_TO_NULL && impl.prebuild.joinable())
    impl.prebuild.join();
  return ret;
}

static void Finalize(GObject *object) {
  delete GST_OP_WARP(object)->impl;
  G_OBJECT_CLASS(gst_op_warp_parent_class)->finalize(object);
}

static void gst_op_warp_class_init(GstOpWarpClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstOpBaseFilterClass *filter_class = GST_OP_BASE_FILTER_CLASS(klass);

  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  gobject_class->finalize = Finalize;
  element_class->change_state = ChangeState;

  const auto ready =
      GParamFlags(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  g_object_class_install_property(
      gobject_class, PROP_MODEL_INPUT,
      g_param_spec_enum("model-input", "Model input",
                        "The network input to prepare (img: medmodel frame, big_img: sbigmodel "
                        "frame); also the name of the output tensor",
                        gst_op_warp_model_input_get_type(), GST_OP_WARP_MODEL_INPUT_IMG, ready));
  g_object_class_install_property(
      gobject_class, PROP_CAMERA,
      g_param_spec_enum("camera", "Camera",
                        "Whose preset intrinsics to use (auto: road for img, wide for big_img)",
                        gst_op_warp_camera_get_type(), GST_OP_WARP_CAMERA_AUTO, ready));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE_TYPE,
      g_param_spec_enum("device-type", "Device type",
                        "Camera presets of the comma device (auto: from the frame size, "
                        "1928x1208 tici, 1344x760 mici)",
                        GST_TYPE_OP_DEVICE_TYPE, GST_OP_DEVICE_TYPE_AUTO, ready));
  g_object_class_install_property(
      gobject_class, PROP_INTRINSICS,
      g_param_spec_string("intrinsics", "Intrinsics",
                          "\"fx,fy,cx,cy\" in pixels for a camera without presets (any frame "
                          "size); empty: the presets",
                          "", ready));
  g_object_class_install_property(
      gobject_class, PROP_RPY,
      g_param_spec_string(
          "rpy", "Calibration",
          "\"roll,pitch,yaw\" in radians (liveCalibration.rpyCalib); empty: not "
          "calibrated yet (warps with zeros, meta says not seen)",
          "", GParamFlags(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  gst_op_install_stat(gobject_class, PROP_FRAMES, "frames", "Frames warped since the start");
  gst_op_install_stat(gobject_class, PROP_DROPPED, "dropped",
                      "Frames of a live source dropped before upload because two frames (or "
                      "pairs) were on the device, or the other camera's twin was dropped");

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "openpilot model-input warp", "Filter/Converter/Video/Scaler/Hardware",
      "Warps NV12 camera frames with the calibration into openpilot's 6x128x256 model planes on "
      "an OpenCL device and emits frames t-4 and t as one (1,12,128,256) uint8 tensor",
      "gst-op developers");

  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->transform_caps = TransformCaps;
  trans_class->set_caps = SetCaps;
  trans_class->transform_size = TransformSize;
  trans_class->sink_event = SinkEvent;
  trans_class->query = Query;
  trans_class->transform = Transform;
  filter_class->open = Open;
  filter_class->close = Close;

  gst_type_mark_as_plugin_api(gst_op_warp_model_input_get_type(), GstPluginAPIFlags(0));
  gst_type_mark_as_plugin_api(gst_op_warp_camera_get_type(), GstPluginAPIFlags(0));
  gst_type_mark_as_plugin_api(GST_TYPE_OP_DEVICE_TYPE, GstPluginAPIFlags(0));
  GST_DEBUG_CATEGORY_INIT(gst_op_warp_debug, "opwarp", 0, "openpilot model-input warp");
}

static void gst_op_warp_init(GstOpWarp *self) {
  self->impl = new Impl();
  self->impl->timer.ReportTo(&self->impl->latency, GST_ELEMENT(self));
  gst_video_info_init(&self->impl->stream.caps_info);
}
