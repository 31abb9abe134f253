/**
 * SECTION:element-opvision
 *
 * Runs openpilot's vision network on the OpenCL device. The road tensor arrives on `img`, the
 * wide tensor on the request pad `big_img`; they are paired by capture time (start-of-frame from
 * GstOpFrameMeta where both frames have one, else PTS) as openpilot's receive loop pairs them
 * (pairing.h): a road buffer less than 25 ms after the previous pair's wide buffer is passed over,
 * wide buffers 25 ms or more older than the road buffer are dropped, the next wide buffer pairs,
 * and a pair more than `max-skew` apart is still run, counted and warned about (rate-limited).
 * Without `big_img` the road tensor feeds both inputs (single camera); when the wide stream ends,
 * or a live deadline passes without a wide buffer, the road frame runs alone too.
 *
 * Road frames are counted as openpilot's modeld counts them (drive/frame_track.h: last id 0 at
 * start, so a live camera's first frame is only warped); a frame whose road frame id follows a
 * gap is not evaluated (`skip-after-drop`), as openpilot does after a drop, and the output's
 * frame meta carries the drop count and openpilot's filtered frameDropPerc. The output is the
 * network's output tensor(s) in device memory with the model's output slices in the caps,
 * timestamps and GstOpFrameMeta of the road buffer, the wide frame's ids filled in, this frame's
 * first and last device commands (their profiling times, read downstream once the output is
 * complete, are the frame's own vision time) and the stage time of the last frame the device
 * finished (the element never waits for the device).
 *
 * A single combined network (driving_supercombo: inputs img, big_img, features_buffer,
 * desire_pulse, traffic_convention) is run with the temporal queues of gst/drive kept on the
 * device, fed by the `desire` and `traffic-convention` properties or the "op-driving-settings"
 * event; `opvision ! opmsgsink` is then the whole model.
 *
 * Setting `model` while PLAYING loads the new network in the background and swaps it in at a
 * frame boundary; when its output slices differ the source caps are renegotiated. A model that
 * fails to load, or whose inputs do not fit the negotiated caps, leaves the old one running and
 * posts a warning.
 *
 * ## Example
 * |[
 * gst-launch-1.0 filesrc location=road.hevc ! decodebin ! opwarp role=road ! v.img \
 *     filesrc location=wide.hevc ! decodebin ! opwarp role=wide ! v.big_img \
 *     opvision name=v model=driving_vision.onnx ! oppolicy model=driving_policy.onnx ! \
 *     opmsgsink location=out.rlog
 * ]|
 *
 * ## Properties
 * - `model` (string): an ONNX model (compiled on first use, cached on disk) or a compiled .opm;
 *   mutable while PLAYING.
 * - `device` (string, default "auto"), `precision` (auto, fp32, fp16, int8): READY only.
 * - `skip-after-drop` (bool, default true), `max-skew` (ns, default 10 ms).
 * - `desire`, `traffic-convention`: the policy settings of a combined network (mutable live).
 * - `dump-inputs` (string, READY only): a debug mode that writes every run's network inputs to
 *   this folder as `<input>-<frame>.npy`, the calibration data of `opc quantize`. It waits for
 *   the device and writes files on the frame path; unset (the default), nothing of it runs.
 * - read-only statistics: `frames`, `skipped`, `out-of-sync`, `dropped-wide`, `dropped-road`,
 *   `qos-dropped`, `mean-time` and `max-time` (submission to device completion per frame,
 *   queueing included, ms), `device-time` (first kernel's start to last kernel's end, ms).
 */
#include "gstopvision.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drive/frame_track.h"
#include "drive/temporal.h"
#include "common/gstopevents.h"
#include "common/net/driving_settings.h"
#include "common/net/input_dump.h"
#include "common/net/model_slot.h"
#include "op/gstoperror.h"
#include "op/gstopframetimer.h"
#include "op/gstopbasefilter.h"
#include "op/gstopbufferpool.h"
#include "op/gstoplatency.h"
#include "op/gstoplive.h"
#include "op/gstopmemory.h"
#include "op/gstopref.h"
#include "op/gstoptensor.h"
#include "op/gstopupload.h"
#include "opvision/pairing.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_vision_debug);
#define GST_CAT_DEFAULT gst_op_vision_debug

#define TENSOR_CAPS \
  GST_OP_TENSOR_CAPS_NAME "(" GST_CAPS_FEATURE_MEMORY_OP_CL "); " GST_OP_TENSOR_CAPS_NAME

static GstStaticPadTemplate img_template =
    GST_STATIC_PAD_TEMPLATE("img", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(TENSOR_CAPS));
// A request pad, so that a pipeline without a wide camera has no pad the aggregator waits on.
static GstStaticPadTemplate big_img_template =
    GST_STATIC_PAD_TEMPLATE("big_img", GST_PAD_SINK, GST_PAD_REQUEST, GST_STATIC_CAPS(TENSOR_CAPS));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(TENSOR_CAPS));

enum {
  PROP_0,
  PROP_MODEL,
  PROP_DEVICE,
  PROP_PRECISION,
  PROP_SKIP_AFTER_DROP,
  PROP_MAX_SKEW,
  PROP_DESIRE,
  PROP_TRAFFIC_CONVENTION,
  PROP_DUMP_INPUTS,
  PROP_FRAMES,
  PROP_SKIPPED,
  PROP_OUT_OF_SYNC,
  PROP_DROPPED_WIDE,
  PROP_DROPPED_ROAD,
  PROP_QOS_DROPPED,
  PROP_MEAN_TIME,
  PROP_MAX_TIME,
  PROP_DEVICE_TIME,
  PROP_ACTIVE_MODEL,
};

#define DEFAULT_DEVICE "auto"
#define DEFAULT_SKIP_AFTER_DROP TRUE
#define DEFAULT_MAX_SKEW (10 * GST_MSECOND)
// At most one out-of-sync warning per this many microseconds (the count keeps growing).
#define SKEW_WARNING_INTERVAL_US (5 * G_USEC_PER_SEC)

namespace {

using op::net::DeviceTensor;
using op::net::ModelSlot;
using op::net::Network;

// Which model input each stream feeds, and the temporal queues of a combined network.
struct ModelPlan {
  int img = -1, big_img = -1, features = -1, desire = -1, traffic = -1;
  bool combined() const { return features >= 0; }
  int hidden_tensor = -1;  // output tensor holding the hidden_state slice (combined only)
  int64_t hidden_start = 0, hidden_end = 0;
  op::drive::TemporalShape shape;
};

op::StatusOr<ModelPlan> PlanModel(const Network &net) {
  ModelPlan plan;
  const GstOpTensorInfo &in = net.inputs();
  for (size_t i = 0; i < in.tensors.size(); i++) {
    const std::string &name = in.tensors[i].name;
    int *slot = name == "img"                  ? &plan.img
                : name == "big_img"            ? &plan.big_img
                : name == "features_buffer"    ? &plan.features
                : name == "desire_pulse"       ? &plan.desire
                : name == "traffic_convention" ? &plan.traffic
                                               : nullptr;
    if (!slot)
      return op::InvalidArgument("model input \"" + name +
                                 "\" is none of img, big_img, features_buffer, desire_pulse, "
                                 "traffic_convention");
    *slot = int(i);
  }
  if (plan.img < 0 || plan.big_img < 0)
    return op::InvalidArgument("the model lacks input \"" +
                               std::string(plan.img < 0 ? "img" : "big_img") +
                               "\" (a vision model has inputs img and big_img)");
  for (int idx : {plan.img, plan.big_img})
    if (in.tensors[idx].type != GstOpTensorType::kUint8)
      return op::InvalidArgument("model input \"" + in.tensors[idx].name +
                                 "\" is not uint8 (camera tensors are uint8)");
  const int temporal = (plan.features >= 0) + (plan.desire >= 0) + (plan.traffic >= 0);
  if (temporal == 0)
    return plan;
  if (temporal != 3)
    return op::InvalidArgument(
        "a combined model needs all of features_buffer, desire_pulse and traffic_convention");
  OP_ASSIGN_OR_RETURN(
      plan.shape, op::net::TemporalInputShape(in, plan.features, plan.desire, plan.traffic, true));
  const GstOpTensorSlice *hidden = net.outputs().FindSlice("hidden_state");
  if (!hidden)
    return op::InvalidArgument("a combined model needs an output slice \"hidden_state\"");
  if (hidden->end - hidden->start != plan.shape.width)
    return op::InvalidArgument("output slice hidden_state is " +
                               std::to_string(hidden->end - hidden->start) +
                               " wide, features_buffer wants " + std::to_string(plan.shape.width));
  plan.hidden_tensor = net.outputs().Find(hidden->tensor);
  if (plan.hidden_tensor < 0 ||
      net.outputs().tensors[plan.hidden_tensor].type != GstOpTensorType::kFloat32)
    return op::InvalidArgument("the hidden_state slice is not of a float32 output");
  // A slice runs over the last axis; with a leading batch of 1 that is a float offset.
  plan.hidden_start = hidden->start;
  plan.hidden_end = hidden->end;
  return plan;
}

struct Stats {
  std::atomic<guint64> frames{0}, skipped{0}, out_of_sync{0}, dropped_wide{0}, dropped_road{0},
      qos_dropped{0};
};

struct Impl {
  // Settings (object lock).
  std::string device = DEFAULT_DEVICE;
  gboolean skip_after_drop = DEFAULT_SKIP_AFTER_DROP;
  guint64 max_skew = DEFAULT_MAX_SKEW;
  op::drive::Desire desire = op::drive::Desire::kNone;
  op::drive::TrafficConvention traffic = op::drive::TrafficConvention::kRightHand;

  ModelSlot model;
  op::net::InputDump dump;  // dump-inputs (READY only)
  std::shared_ptr<GstOpFrameTimer> timer = std::make_shared<GstOpFrameTimer>();
  Stats stats;

  // Between start() and stop(); the context also answers queries from other threads.
  GstOpContext *ctx = nullptr;
  ModelPlan plan;
  std::unique_ptr<op::drive::TemporalQueues> queues;
  op::cl::EventHandle features_ready;  // last PushFeatures: the next run reads its output

  // Negotiated inputs (srcpad task thread).
  bool have_img_caps = false, have_big_caps = false;
  GstOpTensorInfo img_info, big_info;
  op::cl::MemHandle img_staging, big_staging;  // for system-memory inputs, made once
  // The running network's tensors as cl_mems, sized when a network is adopted (start, swap).
  std::vector<cl_mem> inputs, outputs;
  std::unique_ptr<GstOpUploader> uploader;  // writes system-memory inputs into them
  GstOpTensorInfo out_info;

  // Per stream.
  op::drive::FrameTracker drops;    // modeld's drop accounting over the received road frames
  bool resync_ids = false;          // after a flush: the next id continues the count, no drop
  bool have_previous_wide = false;  // pairing: a pair was run since the start or the flush
  // That pair's wide frame: its start-of-frame time (0: none) and its PTS (PairTimes).
  GstClockTime previous_wide_sof = 0, previous_wide_pts = 0;
  guint32 unevaluated_in_a_row = 0;
  bool warned_ids = false;
  bool segment_sent = false;
  bool warned_wide_ended = false;
  gint64 last_skew_warning = 0;
  GstClockTime earliest_time = GST_CLOCK_TIME_NONE;  // QoS (object lock)
  GstOpLatencyReporter latency;                      // streaming thread and latency queries
  // Handed to the warps upstream (the frame-gate query), so that a live pair is dropped or
  // let onto the device as one frame. A new one per start (object lock).
  GstOpFrameGate *gate = nullptr;
};

}  // namespace

struct _GstOpVision {
  GstAggregator parent;
  GstAggregatorPad *img_pad;
  GstAggregatorPad *big_pad;  // null until requested
  Impl *impl;
};

#define gst_op_vision_parent_class parent_class
G_DEFINE_TYPE(GstOpVision, gst_op_vision, GST_TYPE_AGGREGATOR);
GST_ELEMENT_REGISTER_DEFINE(opvision, "opvision", GST_RANK_NONE, GST_TYPE_OP_VISION);

// ---- helpers ------------------------------------------------------------------------------

// A buffer's start-of-frame time from its GstOpFrameMeta (0: none).
static GstClockTime StartOfFrame(GstBuffer *buf, bool wide) {
  GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(buf);
  if (!m)
    return 0;
  guint64 sof = wide ? m->wide_sof_ns : m->road_sof_ns;
  if (sof == 0)
    sof = wide ? m->road_sof_ns : m->wide_sof_ns;  // a wide-only warp fills the road fields
  return sof;
}

// Capture time of a buffer of `role`: its camera's start-of-frame from the meta, else PTS.
static GstClockTime CaptureTime(GstBuffer *buf, bool wide) {
  const GstClockTime sof = StartOfFrame(buf, wide);
  return sof != 0 ? sof : GST_BUFFER_PTS(buf);
}

// The capture times the pairing compares, on one clock: the start-of-frame times where the road
// buffer, the wide one (when present) and the previous pair's wide frame all have one, else the
// PTS of all three. A replay whose log has the road camera's states but not the wide one's has
// start-of-frame times (the camera's boot clock) on one side only: against the other side's PTS
// every wide frame would look seconds old.
static void PairTimes(Impl *impl, GstBuffer *img, GstBuffer *big, op::vision::PairInput *pin) {
  const GstClockTime img_sof = StartOfFrame(img, false);
  const GstClockTime big_sof = big ? StartOfFrame(big, true) : 1;
  const bool sof =
      img_sof != 0 && big_sof != 0 && (!impl->have_previous_wide || impl->previous_wide_sof != 0);
  pin->main_ns = int64_t(sof ? img_sof : GST_BUFFER_PTS(img));
  pin->wide_ns = big ? int64_t(sof ? big_sof : GST_BUFFER_PTS(big)) : 0;
  pin->previous_wide_ns = int64_t(sof ? impl->previous_wide_sof : impl->previous_wide_pts);
}

static bool WideLinked(GstOpVision *self) {
  GST_OBJECT_LOCK(self);
  const bool linked = self->big_pad && gst_pad_is_linked(GST_PAD(self->big_pad));
  GST_OBJECT_UNLOCK(self);
  return linked;
}

// Whether the negotiated inputs fit `net`'s plan; the message names the mismatched input.
static op::Status CheckCaps(GstOpVision *self, const Network &net, const ModelPlan &plan) {
  Impl *impl = self->impl;
  const GstOpTensorInfo &in = net.inputs();
  if (impl->have_img_caps) {
    OP_RETURN_IF_ERROR(op::net::CheckInput(in.tensors[plan.img], impl->img_info, "img"));
    if (!WideLinked(self))  // the road tensor feeds big_img too
      OP_RETURN_IF_ERROR(
          op::net::CheckInput(in.tensors[plan.big_img], impl->img_info, "img (as big_img)"));
  }
  if (impl->have_big_caps)
    OP_RETURN_IF_ERROR(op::net::CheckInput(in.tensors[plan.big_img], impl->big_info, "big_img"));
  return op::Status::Ok();
}

// The cl_mem arrays of one run, sized for the running network (allocates only when it grew).
static void SizeTensorArrays(Impl *impl) {
  Network *net = impl->model.current();
  impl->inputs.assign(net->inputs().tensors.size(), nullptr);
  impl->outputs.assign(net->outputs().tensors.size(), nullptr);
}

// What a network needs before it runs (at start or a model swap, not per frame).
struct Prepared {
  ModelPlan plan;
  std::unique_ptr<op::drive::TemporalQueues> queues;  // a combined network's
};

// Whether `net` is a vision or combined model that fits the negotiated inputs, and the
// temporal queues a combined one needs.
static op::Status Prepare(GstOpVision *self, const Network &net, Prepared *out) {
  OP_ASSIGN_OR_RETURN(out->plan, PlanModel(net));
  OP_RETURN_IF_ERROR(CheckCaps(self, net, out->plan));
  if (!out->plan.combined())
    return op::Status::Ok();
  OP_ASSIGN_OR_RETURN(out->queues, op::drive::TemporalQueues::Create(
                                       gst_op_context_get_device(self->impl->ctx),
                                       gst_op_context_get_queue(self->impl->ctx), out->plan.shape));
  return op::Status::Ok();
}

static void Commit(Impl *impl, Prepared &&next) {
  impl->plan = next.plan;
  impl->queues = std::move(next.queues);
  impl->features_ready.reset();
  SizeTensorArrays(impl);
}

// At a frame boundary: takes a network loaded in the background if it fits.
static void AdoptPendingModel(GstOpVision *self) {
  Impl *impl = self->impl;
  Prepared next;
  const ModelSlot::Swap swap = impl->model.AdoptPending(
      [&](const Network &net) { return Prepare(self, net, &next); }, impl->out_info);
  if (swap != ModelSlot::Swap::kNone)
    Commit(impl, std::move(next));
  if (swap == ModelSlot::Swap::kNewOutputs) {
    gst_pad_mark_reconfigure(GST_AGGREGATOR_SRC_PAD(self));
    if (!gst_aggregator_negotiate(GST_AGGREGATOR(self)))
      GST_WARNING_OBJECT(self, "renegotiation after the model swap failed");
  }
}

static void ReportSkew(GstOpVision *self, gint64 skew_ns) {
  Impl *impl = self->impl;
  guint64 n = ++impl->stats.out_of_sync;
  gint64 now = g_get_monotonic_time();
  if (impl->last_skew_warning && now - impl->last_skew_warning < SKEW_WARNING_INTERVAL_US)
    return;
  impl->last_skew_warning = now;
  GST_ELEMENT_WARNING(
      self, STREAM, FAILED, ("Road and wide frames are out of sync."),
      ("a pair %.1f ms apart (max-skew %.1f ms); %" G_GUINT64_FORMAT " such pairs so far",
       skew_ns / 1e6, impl->max_skew / 1e6, n));
}

static void UpdateLatency(GstOpVision *self) {
  Impl *impl = self->impl;
  const GstClockTime measured = impl->timer->stats().max_ns;
  if (impl->latency.Note(measured))
    gst_aggregator_set_latency(GST_AGGREGATOR(self), measured, impl->latency.max_in_flight());
}

// One frame's failure: what the element says (the error's text) and why (the Status).
struct FrameError {
  op::Status status;
  const char *what = nullptr;
};

// The camera tensors as cl_mems in impl->inputs: OpenCL memory in place, system memory
// uploaded into buffers made on first need and kept. *ready gets what the run must wait for.
static FrameError BindInputs(GstOpVision *self, GstBuffer *img, GstBuffer *big,
                             op::cl::EventList *ready, DeviceTensor *road, DeviceTensor *wide) {
  Impl *impl = self->impl;
  GstOpContext *ctx = impl->ctx;
  const GstOpTensorInfo &in = impl->model.current()->inputs();
  if (gst_buffer_n_memory(img) != 1 || gst_buffer_n_memory(big) != 1)
    return {op::InvalidArgument("a camera tensor buffer must hold exactly one memory"),
            "Malformed input buffer."};
  auto staging = [&](op::cl::MemHandle &h, size_t bytes) -> cl_mem {
    if (!h) {
      auto b = gst_op_context_get_device(ctx)->CreateBuffer(bytes, CL_MEM_READ_ONLY);
      if (b.ok())
        h = std::move(b).value();
    }
    return h.get();
  };
  GstMemory *img_mem = gst_buffer_peek_memory(img, 0);
  GstMemory *big_mem = gst_buffer_peek_memory(big, 0);
  const size_t img_bytes = in.tensors[impl->plan.img].bytes();
  const size_t big_bytes = in.tensors[impl->plan.big_img].bytes();
  auto r = op::net::DeviceInput(
      ctx, impl->uploader.get(), img_mem, img_bytes,
      gst_is_op_memory_on(img_mem, ctx) ? nullptr : staging(impl->img_staging, img_bytes));
  if (!r.ok())
    return {r.status(), "Could not read the img tensor."};
  *road = std::move(r).value();
  if (big != img) {
    auto w = op::net::DeviceInput(
        ctx, impl->uploader.get(), big_mem, big_bytes,
        gst_is_op_memory_on(big_mem, ctx) ? nullptr : staging(impl->big_staging, big_bytes));
    if (!w.ok())
      return {w.status(), "Could not read the big_img tensor."};
    *wide = std::move(w).value();
  } else {
    *wide = *road;
  }
  if (road->offset != 0 || wide->offset != 0)
    return {op::Unsupported("input tensors at a non-zero offset in their buffer"),
            "Unsupported input memory layout."};
  impl->inputs[impl->plan.img] = road->mem;
  impl->inputs[impl->plan.big_img] = wide->mem;
  ready->Add(road->ready.get());
  ready->Add(wide->ready.get());
  return {};
}

// An output buffer from the negotiated pool, its tensors' cl_mems in impl->outputs.
static FrameError AcquireOutputs(GstOpVision *self, GstOpRef<GstBuffer> *outbuf,
                                 GstFlowReturn *ret) {
  Impl *impl = self->impl;
  GstOpRef<GstBufferPool> pool(gst_aggregator_get_buffer_pool(GST_AGGREGATOR(self)));
  if (!pool)
    return {op::Internal("no output buffer pool after negotiation"), "No output pool."};
  // GstAggregator stores the decided pool but leaves activating it to the subclass.
  if (!gst_buffer_pool_is_active(pool.get()) && !gst_buffer_pool_set_active(pool.get(), TRUE))
    return {op::Internal("the output buffer pool refused to activate"), "No output pool."};
  *ret = gst_buffer_pool_acquire_buffer(pool.get(), outbuf->out(), nullptr);
  if (*ret != GST_FLOW_OK)
    return {};
  if (gst_buffer_n_memory(outbuf->get()) != impl->outputs.size())
    return {op::Unsupported("an output buffer that does not match the model's outputs"),
            "Unsupported model outputs."};
  for (size_t i = 0; i < impl->outputs.size(); i++) {
    GstMapInfo map;
    GstMemory *m = gst_buffer_peek_memory(outbuf->get(), i);
    if (!gst_op_memory_map_cl(m, &map, GST_MAP_WRITE))
      return {op::Internal("output memory is not OpenCL memory"), "Bad output pool."};
    impl->outputs[i] = gst_op_map_info_get_cl_mem(&map);
    gst_memory_unmap(m, &map);
  }
  return {};
}

// Enqueues the frame: for a combined network the desire push before the run and the hidden
// state's push into the feature queue after it. *done gets the run's event, *first its first
// kernel's.
static FrameError Enqueue(GstOpVision *self, op::cl::EventList &wait, op::cl::EventHandle *done,
                          op::cl::EventHandle *first) {
  Impl *impl = self->impl;
  op::cl::Queue &queue = gst_op_context_get_queue(impl->ctx);
  wait.Add(impl->features_ready.get());
  op::cl::EventHandle desire_done;
  if (impl->plan.combined()) {
    GST_OBJECT_LOCK(self);
    const op::drive::Desire desire = impl->desire;
    const op::drive::TrafficConvention traffic = impl->traffic;
    GST_OBJECT_UNLOCK(self);
    auto d = impl->queues->PushDesire(queue, desire, traffic);
    if (!d.ok())
      return {d.status(), "Could not update the desire queue."};
    desire_done = std::move(d).value();
    wait.Add(desire_done.get());
    wait.Add(impl->queues->ready_event());
    impl->inputs[impl->plan.features] = impl->queues->features();
    impl->inputs[impl->plan.desire] = impl->queues->desire_pulse();
    impl->inputs[impl->plan.traffic] = impl->queues->traffic_convention();
  }
  if (impl->dump.enabled()) {
    // Debug mode only (dump-inputs): a host wait and file writes on the frame path.
    op::Status st =
        impl->dump.Write(queue, impl->model.current()->inputs(), impl->inputs.data(), wait);
    if (!st.ok())
      return {st, "Could not dump the network inputs."};
  }
  auto run =
      impl->model.current()->Run(queue, impl->inputs.data(), impl->outputs.data(), wait, first);
  if (!run.ok())
    return {run.status(), "Running the vision network failed."};
  if (impl->plan.combined()) {
    // After the run: this frame's hidden state enters the queue for the next frame.
    auto f = impl->queues->PushFeatures(queue, impl->outputs[impl->plan.hidden_tensor],
                                        size_t(impl->plan.hidden_start),
                                        size_t(impl->plan.hidden_end), {run->get()});
    if (!f.ok())
      return {f.status(), "Could not update the feature queue."};
    impl->features_ready = std::move(f).value();
  }
  *done = std::move(run).value();
  return {};
}

// The output's timestamps and metas are the road frame's; the provenance meta gets the wide
// frame's fields and this stage's time.
static void StampMeta(GstOpVision *self, GstBuffer *outbuf, GstBuffer *img, GstBuffer *big,
                      const op::cl::EventHandle &first, const op::cl::EventHandle &done) {
  Impl *impl = self->impl;
  gst_buffer_copy_into(outbuf, img, GST_BUFFER_COPY_METADATA, 0, -1);
  GstOpFrameMeta *meta = gst_buffer_get_or_add_op_frame_meta(outbuf);
  if (big != img) {
    if (GstOpFrameMeta *wm = gst_buffer_get_op_frame_meta(big)) {
      // A wide-role warp may fill either field set; take whichever it filled.
      const bool wide_fields = wm->wide_sof_ns != 0 || wm->wide_frame_id != 0;
      meta->wide_frame_id = wide_fields ? wm->wide_frame_id : wm->road_frame_id;
      meta->wide_sof_ns = wide_fields ? wm->wide_sof_ns : wm->road_sof_ns;
      meta->wide_eof_ns = wide_fields ? wm->wide_eof_ns : wm->road_eof_ns;
    }
  } else if (meta->wide_frame_id == 0 && meta->wide_sof_ns == 0) {
    meta->wide_frame_id = meta->road_frame_id;
    meta->wide_sof_ns = meta->road_sof_ns;
    meta->wide_eof_ns = meta->road_eof_ns;
  }
  const GstOpStage stage = impl->plan.combined() ? GST_OP_STAGE_POLICY : GST_OP_STAGE_VISION;
  // The last completed frame's time (the element never waits), and this frame's own commands,
  // whose device time is read downstream once the output is complete.
  meta->stage_ns[stage] = impl->timer->stats().stage_ns();
  gst_op_frame_meta_set_stage_events(meta, stage, first.get(), done.get());
}

// Runs the network on one pair and returns the output buffer (or a flow error after posting).
static GstFlowReturn RunFrame(GstOpVision *self, GstBuffer *img, GstBuffer *big, GstBuffer **out) {
  Impl *impl = self->impl;
  const int64_t t0 = GstOpFrameTimer::Now();
  auto fail = [&](const FrameError &e) {
    GST_OP_ELEMENT_ERROR_STATUS(self, e.status, STREAM, FAILED, ("%s", e.what));
    return GST_FLOW_ERROR;
  };
  op::cl::EventList wait;
  DeviceTensor road, wide;
  if (FrameError e = BindInputs(self, img, big, &wait, &road, &wide); e.what)
    return fail(e);
  GstOpRef<GstBuffer> outbuf;
  GstFlowReturn ret = GST_FLOW_OK;
  if (FrameError e = AcquireOutputs(self, &outbuf, &ret); e.what)
    return fail(e);
  if (ret != GST_FLOW_OK) {
    GST_DEBUG_OBJECT(self, "no output buffer: %s", gst_flow_get_name(ret));
    return ret;
  }
  op::cl::EventHandle done, first;
  if (FrameError e = Enqueue(self, wait, &done, &first); e.what)
    return fail(e);
  gst_op_buffer_set_write_event(outbuf.get(), done.get());
  // Submit now: the next element's wait on this event must not sit behind an unflushed queue.
  (void)gst_op_context_get_queue(impl->ctx).Flush();
  impl->timer->Track(done.get(), t0, first.get());
  StampMeta(self, outbuf.get(), img, big, first, done);
  // A live frame stays on the device until the policy network has enqueued its work on this
  // output too (a combined network is the last one: its frame ends when its input goes).
  if (!impl->plan.combined())
    gst_op_frame_gate_forward(img, outbuf.get());
  *out = outbuf.release();
  return GST_FLOW_OK;
}

// ---- GstAggregator ------------------------------------------------------------------------

static gboolean Start(GstAggregator *agg) {
  auto *self = GST_OP_VISION(agg);
  Impl *impl = self->impl;
  GST_OBJECT_LOCK(self);
  std::string device = impl->device;
  GST_OBJECT_UNLOCK(self);
  if (!gst_op_ensure_context(GST_ELEMENT(self), device.c_str(), &impl->ctx))
    return FALSE;
  Prepared next;
  if (!impl->model.Start(gst_op_context_get_device(impl->ctx), "vision",
                         "a vision or combined driving model",
                         [&](const Network &net) { return Prepare(self, net, &next); })) {
    gst_clear_object(&impl->ctx);
    return FALSE;
  }
  Commit(impl, std::move(next));
  impl->uploader = std::make_unique<GstOpUploader>(GST_ELEMENT(self), impl->ctx, false);
  impl->timer->Reset();
  impl->drops.Reset();
  impl->resync_ids = false;
  impl->have_previous_wide = false;
  impl->unevaluated_in_a_row = 0;
  impl->warned_ids = false;
  impl->segment_sent = false;
  impl->warned_wide_ended = false;
  impl->latency.Reset();
  // A fresh gate: the old one (and the context it holds) lives on only in buffers still out.
  GstOpFrameGate *gate = GstOpFrameGate::New();
  GST_OBJECT_LOCK(self);
  std::swap(gate, impl->gate);
  GST_OBJECT_UNLOCK(self);
  if (gate)
    gate->Unref();
  GST_INFO_OBJECT(self, "running %s", impl->model.current()->Describe().c_str());
  return TRUE;
}

static gboolean Stop(GstAggregator *agg) {
  auto *self = GST_OP_VISION(agg);
  Impl *impl = self->impl;
  if (impl->ctx) {
    // Not the frame path: the device must be done with our buffers and callbacks before they go.
    (void)gst_op_context_get_queue(impl->ctx).Finish();
  }
  impl->timer->Drain();
  impl->uploader.reset();  // waits until the device has given back every input it read
  GST_INFO_OBJECT(self, "%s", impl->timer->Summary().c_str());
  impl->queues.reset();
  impl->features_ready.reset();
  impl->model.Close();
  impl->img_staging.reset();
  impl->big_staging.reset();
  impl->have_img_caps = impl->have_big_caps = false;
  impl->out_info = GstOpTensorInfo();
  GST_OBJECT_LOCK(self);
  GstOpContext *ctx = impl->ctx;
  impl->ctx = nullptr;
  // The gate holds the context too: buffers still out keep it, we do not.
  GstOpFrameGate *gate = impl->gate;
  impl->gate = nullptr;
  GST_OBJECT_UNLOCK(self);
  if (gate)
    gate->Unref();
  if (ctx)
    gst_object_unref(ctx);
  return TRUE;
}

static GstStateChangeReturn ChangeState(GstElement *element, GstStateChange transition) {
  auto *self = GST_OP_VISION(element);
  Impl *impl = self->impl;
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !impl->model.path().empty()) {
    // The model starts loading now, next to the other networks of the pipeline; start() takes it
    // (and keeps the context made here).
    GST_OBJECT_LOCK(self);
    std::string device = impl->device;
    GST_OBJECT_UNLOCK(self);
    if (!gst_op_ensure_context(element, device.c_str(), &impl->ctx))
      return GST_STATE_CHANGE_FAILURE;
    impl->model.Preload(gst_op_context_get_device(impl->ctx));
  }
  GstStateChangeReturn ret = GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_READY_TO_NULL ||
      (transition == GST_STATE_CHANGE_NULL_TO_READY && ret == GST_STATE_CHANGE_FAILURE)) {
    impl->model.Close();  // a preload start() never took, and its context
    gst_op_clear_context(element, &impl->ctx);
  }
  return ret;
}

static GstFlowReturn Flush(GstAggregator *agg) {
  auto *self = GST_OP_VISION(agg);
  Impl *impl = self->impl;
  impl->resync_ids = true;
  impl->have_previous_wide = false;
  impl->segment_sent = false;
  GST_OBJECT_LOCK(self);
  impl->earliest_time = GST_CLOCK_TIME_NONE;
  GST_OBJECT_UNLOCK(self);
  // A flush is a jump in time: the history of the old position means nothing at the new one.
  if (impl->queues) {
    auto r = impl->queues->Reset(gst_op_context_get_queue(impl->ctx), {impl->features_ready.get()});
    if (r.ok())
      impl->features_ready = std::move(r).value();
  }
  return GST_FLOW_OK;
}

static gboolean HandleSettingsEvent(GstOpVision *self, GstEvent *event) {
  return gst_op_apply_driving_settings_event(GST_ELEMENT(self), event, &self->impl->desire,
                                             &self->impl->traffic);
}

static gboolean SinkEvent(GstAggregator *agg, GstAggregatorPad *pad, GstEvent *event) {
  auto *self = GST_OP_VISION(agg);
  Impl *impl = self->impl;
  if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps *caps = nullptr;
    gst_event_parse_caps(event, &caps);
    auto info = gst_op_tensor_info_from_caps(caps);
    const bool is_img = pad == self->img_pad;
    if (!info.ok()) {
      GST_OP_ELEMENT_ERROR_STATUS(self, info.status(), STREAM, FORMAT,
                                  ("Pad %s got tensor caps it cannot read.", GST_PAD_NAME(pad)));
      gst_event_unref(event);
      return FALSE;
    }
    if (is_img) {
      impl->img_info = *info;
      impl->have_img_caps = true;
    } else {
      impl->big_info = *info;
      impl->have_big_caps = true;
    }
    if (Network *net = impl->model.current()) {
      op::Status fit = CheckCaps(self, *net, impl->plan);
      if (!fit.ok()) {
        GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                          ("The model \"%s\" does not fit the input tensors: %s",
                           impl->model.path().c_str(), fit.message().c_str()),
                          ("caps %" GST_PTR_FORMAT, caps));
        gst_event_unref(event);
        return FALSE;
      }
    }
    // Our source caps come from the model, not from the inputs: the base class must not
    // forward these.
    gst_event_unref(event);
    return TRUE;
  }
  if (GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_DOWNSTREAM ||
      GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_BOTH)
    HandleSettingsEvent(self, event);  // and let it go on downstream (oppolicy uses it too)
  return GST_AGGREGATOR_CLASS(parent_class)->sink_event(agg, pad, event);
}

static gboolean SrcEvent(GstAggregator *agg, GstEvent *event) {
  auto *self = GST_OP_VISION(agg);
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_QOS: {
      GstQOSType type;
      gdouble proportion;
      GstClockTimeDiff diff;
      GstClockTime timestamp;
      gst_event_parse_qos(event, &type, &proportion, &diff, &timestamp);
      GST_OBJECT_LOCK(self);
      // A frame whose running time is before this cannot be shown in time: drop it before any
      // device work (diff > 0 means downstream is late by that much).
      self->impl->earliest_time = diff > 0 && GST_CLOCK_TIME_IS_VALID(timestamp)
                                      ? timestamp + 2 * diff
                                      : GST_CLOCK_TIME_NONE;
      GST_OBJECT_UNLOCK(self);
      break;
    }
    case GST_EVENT_CUSTOM_UPSTREAM:
    case GST_EVENT_CUSTOM_BOTH:
      HandleSettingsEvent(self, event);
      break;
    default:
      break;
  }
  return GST_AGGREGATOR_CLASS(parent_class)->src_event(agg, event);
}

static gboolean AnswerContextQuery(GstOpVision *self, GstQuery *query) {
  if (GST_QUERY_TYPE(query) != GST_QUERY_CONTEXT)
    return FALSE;
  GST_OBJECT_LOCK(self);
  GstOpContext *ctx = self->impl->ctx ? GST_OP_CONTEXT(gst_object_ref(self->impl->ctx)) : nullptr;
  GST_OBJECT_UNLOCK(self);
  gboolean answered = gst_op_handle_context_query(GST_ELEMENT(self), query, ctx);
  if (ctx)
    gst_object_unref(ctx);
  return answered;
}

static gboolean SrcQuery(GstAggregator *agg, GstQuery *query) {
  auto *self = GST_OP_VISION(agg);
  if (AnswerContextQuery(self, query))
    return TRUE;
  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    // Completion callbacks may have raised the measurement since the last frame: answer with
    // the current one (the base class adds what set_latency holds to the upstream latency).
    GstOpLatencyReporter &latency = self->impl->latency;
    latency.Note(self->impl->timer->stats().max_ns);
    gst_aggregator_set_latency(agg, latency.max(), latency.max_in_flight());
  }
  return GST_AGGREGATOR_CLASS(parent_class)->src_query(agg, query);
}

static gboolean SinkQuery(GstAggregator *agg, GstAggregatorPad *pad, GstQuery *query) {
  auto *self = GST_OP_VISION(agg);
  if (AnswerContextQuery(self, query))
    return TRUE;
  if (GST_QUERY_TYPE(query) == GST_QUERY_CUSTOM) {
    // The warps upstream share one frame gate, so that live twins are dropped together.
    GST_OBJECT_LOCK(self);
    const gboolean answered = gst_op_frame_gate_query_answer(query, self->impl->gate);
    GST_OBJECT_UNLOCK(self);
    if (answered)
      return TRUE;
  }
  if (GST_QUERY_TYPE(query) == GST_QUERY_ALLOCATION) {
    // Upstream may write our inputs in OpenCL memory of the shared context; we keep its meta.
    gst_query_add_allocation_meta(query, GST_OP_FRAME_META_API_TYPE, nullptr);
  }
  return GST_AGGREGATOR_CLASS(parent_class)->sink_query(agg, pad, query);
}

static void SetContext(GstElement *element, GstContext *context) {
  auto *self = GST_OP_VISION(element);
  GST_OBJECT_LOCK(self);
  std::string device = self->impl->device;
  GST_OBJECT_UNLOCK(self);
  gst_op_handle_set_context(element, context, device.c_str(), &self->impl->ctx);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

static GstFlowReturn UpdateSrcCaps(GstAggregator *agg, GstCaps *downstream, GstCaps **ret) {
  auto *self = GST_OP_VISION(agg);
  Network *net = self->impl->model.current();
  if (!net)
    return GST_AGGREGATOR_FLOW_NEED_DATA;
  GstCaps *tensors = gst_op_tensor_info_to_caps(net->outputs());
  GstCaps *ours = gst_op_caps_with_both_memories(tensors);
  gst_caps_unref(tensors);
  *ret = gst_caps_intersect_full(ours, downstream, GST_CAPS_INTERSECT_FIRST);
  gst_caps_unref(ours);
  if (gst_caps_is_empty(*ret)) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("Downstream does not accept the output tensors of the model."),
                      ("downstream accepts %" GST_PTR_FORMAT, downstream));
    gst_clear_caps(ret);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  return GST_FLOW_OK;
}

static gboolean NegotiatedSrcCaps(GstAggregator *agg, GstCaps *caps) {
  auto *self = GST_OP_VISION(agg);
  auto info = gst_op_tensor_info_from_caps(caps);
  if (!info.ok())
    return FALSE;
  self->impl->out_info = *info;
  return GST_AGGREGATOR_CLASS(parent_class)->negotiated_src_caps(agg, caps);
}

// Outputs always live in OpenCL memory of our context, whatever the caps feature: a system
// memory consumer maps them (zero-copy on unified-memory devices).
static gboolean DecideAllocation(GstAggregator *agg, GstQuery *query) {
  auto *self = GST_OP_VISION(agg);
  return gst_op_decide_output_pool(GST_ELEMENT(self), self->impl->ctx, query, 2);
}

static GstAggregatorPad *CreateNewPad(GstAggregator *agg, GstPadTemplate *templ,
                                      const gchar *req_name, const GstCaps *caps) {
  auto *self = GST_OP_VISION(agg);
  if (g_strcmp0(GST_PAD_TEMPLATE_NAME_TEMPLATE(templ), "big_img") != 0)
    return nullptr;
  GST_OBJECT_LOCK(self);
  const bool exists = self->big_pad != nullptr;
  GST_OBJECT_UNLOCK(self);
  if (exists) {
    GST_WARNING_OBJECT(self, "big_img is already requested");
    return nullptr;
  }
  auto *pad =
      GST_AGGREGATOR_PAD(g_object_new(GST_TYPE_AGGREGATOR_PAD, "name", "big_img", "direction",
                                      GST_PAD_SINK, "template", templ, nullptr));
  GST_OBJECT_LOCK(self);
  self->big_pad = pad;
  GST_OBJECT_UNLOCK(self);
  return pad;
}

static void ReleasePad(GstElement *element, GstPad *pad) {
  auto *self = GST_OP_VISION(element);
  GST_OBJECT_LOCK(self);
  if (GST_AGGREGATOR_PAD(pad) == self->big_pad)
    self->big_pad = nullptr;
  GST_OBJECT_UNLOCK(self);
  GST_ELEMENT_CLASS(parent_class)->release_pad(element, pad);
}

// Steps modeld's drop accounting with a received road frame (frame_track.h) and says on the
// bus when the ids themselves look wrong, so a bad id never stops evaluation silently.
static op::drive::FrameStep CountFrame(GstOpVision *self, GstBuffer *img) {
  Impl *impl = self->impl;
  GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(img);
  // Without provenance the frames are taken as consecutive.
  const guint32 id = m ? m->road_frame_id : impl->drops.last_id() + 1;
  if (impl->resync_ids) {
    impl->drops.ContinueAt(id);
    impl->resync_ids = false;
  }
  const guint32 last = impl->drops.last_id();
  const op::drive::FrameStep step = impl->drops.Step(id);
  impl->unevaluated_in_a_row = step.evaluate ? 0 : impl->unevaluated_in_a_row + 1;
  std::string why;
  if (step.went_backwards)
    why = "the road frame id went back from " + std::to_string(last) + " to " + std::to_string(id) +
          " (a restarted source?); counted as no drop";
  else if (step.implausible_gap)
    why = "the road frame id jumped from " + std::to_string(last) + " to " + std::to_string(id) +
          ": frame not evaluated; are the source's ids frame numbers?";
  else if (impl->unevaluated_in_a_row == 10)
    why = "10 road frames in a row followed a frame-id gap and were not evaluated (last id " +
          std::to_string(id) + "); the source's frame ids skip";
  if (!why.empty() && !impl->warned_ids) {
    impl->warned_ids = true;  // once per stream: a source that does this does it every frame
    GST_ELEMENT_WARNING(self, STREAM, FAILED, ("Unexpected road frame ids: %s.", why.c_str()),
                        (nullptr));
  } else if (!why.empty()) {
    GST_DEBUG_OBJECT(self, "%s", why.c_str());
  }
  return step;
}

// Pairs the road buffer `img` with a wide one: drops wide buffers too old for it (counted) and
// returns what to do. *big gets the wide partner when one is present.
static op::vision::PairDecision Pair(GstOpVision *self, GstBuffer *img, GstAggregatorPad *big_pad,
                                     gboolean timeout, guint64 max_skew, GstOpRef<GstBuffer> *big) {
  op::vision::PairDecision decision;
  for (;;) {
    op::vision::PairInput pin;
    pin.main_ns = int64_t(CaptureTime(img, false));
    pin.wide_linked = big_pad && gst_pad_is_linked(GST_PAD(big_pad));
    if (pin.wide_linked) {
      *big = GstOpRef<GstBuffer>(gst_aggregator_pad_peek_buffer(big_pad));
      pin.wide_present = bool(*big);
      pin.wide_ended = !*big && gst_aggregator_pad_is_eos(big_pad);
      pin.timed_out = timeout;
      pin.have_previous_wide = self->impl->have_previous_wide;
      PairTimes(self->impl, img, big->get(), &pin);
    }
    decision = op::vision::DecidePair(pin, int64_t(max_skew));
    if (decision.action != op::vision::PairAction::kDropWide)
      break;
    GST_LOG_OBJECT(self, "dropping a wide buffer %.1f ms older than the road one",
                   (pin.main_ns - pin.wide_ns) / 1e6);
    self->impl->stats.dropped_wide++;
    big->reset();
    gst_aggregator_pad_drop_buffer(big_pad);
  }
  GST_LOG_OBJECT(self, "road %" GST_TIME_FORMAT ": %s", GST_TIME_ARGS(CaptureTime(img, false)),
                 op::vision::PairActionName(decision.action));
  return decision;
}

// Whether the paired road frame is left out: when QoS says it cannot arrive in time (before any
// device work), or after a gap in the road frame ids (openpilot: warp only). A frame dropped for
// QoS is, like a road frame without a wide partner, one modeld never received: it is not counted,
// and the next frame counts it as dropped. Every other frame steps modeld's drop accounting
// (CountFrame); *step gets that step.
static bool SkipFrame(GstOpVision *self, GstBuffer *img, gboolean skip_after_drop,
                      GstClockTime earliest, op::drive::FrameStep *step) {
  Impl *impl = self->impl;
  const GstSegment *seg = &self->img_pad->segment;
  // A source without time (filesrc alone sends a byte segment) has no running time to be late.
  const GstClockTime rt =
      seg->format == GST_FORMAT_TIME
          ? gst_segment_to_running_time(seg, GST_FORMAT_TIME, GST_BUFFER_PTS(img))
          : GST_CLOCK_TIME_NONE;
  if (GST_CLOCK_TIME_IS_VALID(earliest) && GST_CLOCK_TIME_IS_VALID(rt) && rt < earliest) {
    impl->stats.qos_dropped++;
    GST_DEBUG_OBJECT(self, "QoS: dropping a frame at %" GST_TIME_FORMAT, GST_TIME_ARGS(rt));
    return true;
  }
  *step = CountFrame(self, img);
  if (step->evaluate || !skip_after_drop)
    return false;
  impl->stats.skipped++;
  GST_DEBUG_OBJECT(self, "%u frames dropped before road frame %u: not evaluated", step->dropped,
                   impl->drops.last_id());
  return true;
}

// Runs the pair and pushes the output.
static GstFlowReturn Emit(GstOpVision *self, GstBuffer *img, GstBuffer *big,
                          const op::drive::FrameStep &step) {
  Impl *impl = self->impl;
  GstAggregator *agg = GST_AGGREGATOR(self);
  if (!impl->segment_sent) {
    gst_aggregator_update_segment(agg, &self->img_pad->segment);
    impl->segment_sent = true;
  }
  GstBuffer *out = nullptr;
  GstFlowReturn ret = RunFrame(self, img, big, &out);
  if (ret != GST_FLOW_OK)
    return ret;
  // The drops as modeld counts them over every received road frame, skipped ones included.
  GstOpFrameMeta *meta = gst_buffer_get_or_add_op_frame_meta(out);
  meta->dropped = step.dropped;
  meta->drops_counted = TRUE;
  meta->frame_drop_perc = step.frame_drop_perc;
  impl->stats.frames++;
  GstAggregatorPad *srcpad = GST_AGGREGATOR_PAD(GST_AGGREGATOR_SRC_PAD(agg));
  if (GST_BUFFER_PTS_IS_VALID(out))
    srcpad->segment.position =
        GST_BUFFER_PTS(out) + (GST_BUFFER_DURATION_IS_VALID(out) ? GST_BUFFER_DURATION(out) : 0);
  ret = gst_aggregator_finish_buffer(agg, out);
  UpdateLatency(self);
  return ret;
}

static GstFlowReturn Aggregate(GstAggregator *agg, gboolean timeout) {
  auto *self = GST_OP_VISION(agg);
  Impl *impl = self->impl;
  AdoptPendingModel(self);

  GstOpRef<GstBuffer> img(gst_aggregator_pad_peek_buffer(self->img_pad));
  if (!img)
    return gst_aggregator_pad_is_eos(self->img_pad) ? GST_FLOW_EOS : GST_AGGREGATOR_FLOW_NEED_DATA;

  GST_OBJECT_LOCK(self);
  auto big_pad = GstOpRef<GstAggregatorPad>::Ref(self->big_pad);
  const guint64 max_skew = impl->max_skew;
  const gboolean skip_after_drop = impl->skip_after_drop;
  const GstClockTime earliest = impl->earliest_time;
  GST_OBJECT_UNLOCK(self);

  GstOpRef<GstBuffer> big;
  const op::vision::PairDecision decision =
      Pair(self, img.get(), big_pad.get(), timeout, max_skew, &big);
  switch (decision.action) {
    case op::vision::PairAction::kWait:
      return GST_AGGREGATOR_FLOW_NEED_DATA;
    case op::vision::PairAction::kDropMain:
      GST_LOG_OBJECT(self, "dropping a road buffer with no wide partner");
      impl->stats.dropped_road++;
      gst_aggregator_pad_drop_buffer(self->img_pad);
      return GST_FLOW_OK;
    case op::vision::PairAction::kMainAlone:
      if (big_pad && gst_pad_is_linked(GST_PAD(big_pad.get())) && !impl->warned_wide_ended &&
          !timeout) {
        impl->warned_wide_ended = true;
        GST_ELEMENT_WARNING(self, STREAM, FAILED,
                            ("The wide camera stream ended; the road frames feed both inputs."),
                            (nullptr));
      }
      break;
    case op::vision::PairAction::kPair:
      if (decision.out_of_sync)
        ReportSkew(self, decision.skew_ns);
      impl->have_previous_wide = true;
      impl->previous_wide_sof = StartOfFrame(big.get(), true);
      impl->previous_wide_pts = GST_BUFFER_PTS(big.get());
      break;
    case op::vision::PairAction::kDropWide:
      break;  // handled in Pair
  }
  // Both buffers of the pair are consumed from here on, whatever happens to the frame.
  gst_aggregator_pad_drop_buffer(self->img_pad);
  if (big)
    gst_aggregator_pad_drop_buffer(big_pad.get());

  GstFlowReturn ret = GST_FLOW_OK;
  op::drive::FrameStep step;
  if (!SkipFrame(self, img.get(), skip_after_drop, earliest, &step))
    ret = Emit(self, img.get(), big ? big.get() : img.get(), step);
  GST_LOG_OBJECT(self, "aggregate: %s", gst_flow_get_name(ret));
  return ret;
}

// ---- GObject ------------------------------------------------------------------------------

static void SetProperty(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_VISION(object);
  Impl *impl = self->impl;
  switch (prop_id) {
    case PROP_MODEL:
      impl->model.SetPath(g_value_get_string(value) ? g_value_get_string(value) : "");
      break;
    case PROP_DEVICE:
      gst_op_set_device(GST_ELEMENT(self), g_value_get_string(value), &impl->device, &impl->ctx);
      break;
    case PROP_PRECISION:
      impl->model.SetPrecision(static_cast<op::net::Precision>(g_value_get_enum(value)));
      break;
    case PROP_DUMP_INPUTS:  // READY only: the streaming thread reads it without a lock
      impl->dump.set_dir(g_value_get_string(value) ? g_value_get_string(value) : "");
      break;
    case PROP_SKIP_AFTER_DROP:
      GST_OBJECT_LOCK(self);
      impl->skip_after_drop = g_value_get_boolean(value);
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_MAX_SKEW:
      GST_OBJECT_LOCK(self);
      impl->max_skew = g_value_get_uint64(value);
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_DESIRE:
      GST_OBJECT_LOCK(self);
      impl->desire = static_cast<op::drive::Desire>(g_value_get_enum(value));
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_TRAFFIC_CONVENTION:
      GST_OBJECT_LOCK(self);
      impl->traffic = static_cast<op::drive::TrafficConvention>(g_value_get_enum(value));
      GST_OBJECT_UNLOCK(self);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void GetProperty(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_VISION(object);
  Impl *impl = self->impl;
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string(value, impl->model.path().c_str());
      break;
    case PROP_DEVICE:
      GST_OBJECT_LOCK(self);
      g_value_set_string(value, impl->device.c_str());
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_PRECISION:
      g_value_set_enum(value, int(impl->model.precision()));
      break;
    case PROP_SKIP_AFTER_DROP:
      GST_OBJECT_LOCK(self);
      g_value_set_boolean(value, impl->skip_after_drop);
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_MAX_SKEW:
      GST_OBJECT_LOCK(self);
      g_value_set_uint64(value, impl->max_skew);
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_DESIRE:
      GST_OBJECT_LOCK(self);
      g_value_set_enum(value, int(impl->desire));
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_TRAFFIC_CONVENTION:
      GST_OBJECT_LOCK(self);
      g_value_set_enum(value, int(impl->traffic));
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_DUMP_INPUTS:
      g_value_set_string(value, impl->dump.dir().c_str());
      break;
    case PROP_FRAMES:
      g_value_set_uint64(value, impl->stats.frames);
      break;
    case PROP_SKIPPED:
      g_value_set_uint64(value, impl->stats.skipped);
      break;
    case PROP_OUT_OF_SYNC:
      g_value_set_uint64(value, impl->stats.out_of_sync);
      break;
    case PROP_DROPPED_WIDE:
      g_value_set_uint64(value, impl->stats.dropped_wide);
      break;
    case PROP_DROPPED_ROAD:
      g_value_set_uint64(value, impl->stats.dropped_road);
      break;
    case PROP_QOS_DROPPED:
      g_value_set_uint64(value, impl->stats.qos_dropped);
      break;
    case PROP_MEAN_TIME:
    case PROP_MAX_TIME:
    case PROP_DEVICE_TIME:
      gst_op_frame_timer_get_property(*impl->timer, PROP_MEAN_TIME, prop_id, value);
      break;
    case PROP_ACTIVE_MODEL:
      g_value_set_string(value, impl->model.current_path().c_str());
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void Finalize(GObject *object) {
  auto *self = GST_OP_VISION(object);
  gst_clear_object(&self->impl->ctx);
  if (self->impl->gate)
    self->impl->gate->Unref();
  delete self->impl;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_op_vision_class_init(GstOpVisionClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstAggregatorClass *agg_class = GST_AGGREGATOR_CLASS(klass);

  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  gobject_class->finalize = Finalize;

  const auto rw_playing =
      (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  const auto rw_ready =
      (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model",
                          "The vision (or combined) network: an ONNX file, compiled on first use "
                          "and cached, or a compiled .opm. Setting it while PLAYING swaps the "
                          "network at a frame boundary once the new one has loaded",
                          "", rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE,
      g_param_spec_string("device", "Device",
                          "OpenCL device: \"auto\", \"gpu\", \"cpu\", \"P:D\" or a name substring",
                          DEFAULT_DEVICE, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_PRECISION,
      g_param_spec_enum("precision", "Precision",
                        "Precision the network is compiled for (int8 needs a quantized model)",
                        GST_TYPE_OP_PRECISION, int(op::net::Precision::kAuto), rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_SKIP_AFTER_DROP,
      g_param_spec_boolean("skip-after-drop", "Skip after drop",
                           "Do not evaluate a frame whose road frame id follows a gap (openpilot "
                           "warps it but runs no network)",
                           DEFAULT_SKIP_AFTER_DROP, rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_MAX_SKEW,
      g_param_spec_uint64("max-skew", "Maximum skew",
                          "Road and wide capture times further apart than this (ns) are counted "
                          "and warned about as out of sync; the pair still runs",
                          0, G_MAXUINT64, DEFAULT_MAX_SKEW, rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_DESIRE,
      g_param_spec_enum("desire", "Desire",
                        "The driver's desire (combined network only); a change is a pulse",
                        GST_TYPE_OP_DESIRE, int(op::drive::Desire::kNone), rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_TRAFFIC_CONVENTION,
      g_param_spec_enum("traffic-convention", "Traffic convention",
                        "Which side traffic keeps to (combined network only)",
                        GST_TYPE_OP_TRAFFIC_CONVENTION,
                        int(op::drive::TrafficConvention::kRightHand), rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_DUMP_INPUTS,
      g_param_spec_string("dump-inputs", "Dump inputs",
                          "Debug: write every run's network inputs to this folder as "
                          "<input>-<frame>.npy (calibration data; waits for the device per frame)",
                          "", rw_ready));
  gst_op_install_stat(gobject_class, PROP_FRAMES, "frames", "Frames the network ran on");
  gst_op_install_stat(gobject_class, PROP_SKIPPED, "skipped",
                      "Frames not evaluated after a frame drop");
  gst_op_install_stat(gobject_class, PROP_OUT_OF_SYNC, "out-of-sync",
                      "Pairs further apart than max-skew (still run)");
  gst_op_install_stat(gobject_class, PROP_DROPPED_WIDE, "dropped-wide",
                      "Wide buffers dropped as too old for any road buffer");
  gst_op_install_stat(gobject_class, PROP_DROPPED_ROAD, "dropped-road",
                      "Road buffers dropped for having no wide buffer within 25 ms");
  gst_op_install_stat(gobject_class, PROP_QOS_DROPPED, "qos-dropped", "Frames dropped for QoS");
  gst_op_frame_timer_install_properties(gobject_class, PROP_MEAN_TIME);

  g_object_class_install_property(
      gobject_class, PROP_ACTIVE_MODEL,
      g_param_spec_string("active-model", "Active model",
                          "The file the running network came from (differs from model while a "
                          "new one loads, or after one failed to load)",
                          "", (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_add_static_pad_template_with_gtype(element_class, &img_template,
                                                       GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_add_static_pad_template_with_gtype(element_class, &big_img_template,
                                                       GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_add_static_pad_template_with_gtype(element_class, &src_template,
                                                       GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_set_static_metadata(
      element_class, "openpilot vision network", "Filter/Tensor/Hardware",
      "Pairs the road and wide camera tensors by capture time and runs the driving vision "
      "network (or a combined network) on an OpenCL device",
      "gst-op");

  element_class->set_context = SetContext;
  element_class->change_state = ChangeState;
  element_class->release_pad = ReleasePad;
  agg_class->start = Start;
  agg_class->stop = Stop;
  agg_class->flush = Flush;
  agg_class->aggregate = Aggregate;
  agg_class->sink_event = SinkEvent;
  agg_class->src_event = SrcEvent;
  agg_class->sink_query = SinkQuery;
  agg_class->src_query = SrcQuery;
  agg_class->update_src_caps = UpdateSrcCaps;
  agg_class->negotiated_src_caps = NegotiatedSrcCaps;
  agg_class->decide_allocation = DecideAllocation;
  agg_class->create_new_pad = CreateNewPad;
  // Deadline-based aggregation when live: a wide camera that stops cannot stall the road one.
  agg_class->get_next_time = gst_aggregator_simple_get_next_time;

  GST_DEBUG_CATEGORY_INIT(gst_op_vision_debug, "opvision", 0, "openpilot vision network");
}

static void gst_op_vision_init(GstOpVision *self) {
  self->impl = new Impl();
  self->impl->model.SetOwner(GST_ELEMENT(self));
  GstPadTemplate *templ = gst_element_class_get_pad_template(GST_ELEMENT_GET_CLASS(self), "img");
  self->img_pad =
      GST_AGGREGATOR_PAD(g_object_new(GST_TYPE_AGGREGATOR_PAD, "name", "img", "direction",
                                      GST_PAD_SINK, "template", templ, nullptr));
  gst_element_add_pad(GST_ELEMENT(self), GST_PAD(self->img_pad));
  self->big_pad = nullptr;
}
