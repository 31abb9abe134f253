/**
 * SECTION:element-oppolicy
 *
 * Runs openpilot's policy network on the OpenCL device. It keeps the temporal inputs of the
 * contract (§4) on the device with gst/drive's TemporalQueues: the `hidden_state` slice of each
 * incoming vision output is copied device-to-device into a 100-frame history sampled every 4th
 * frame into features_buffer (1,25,512); the `desire` setting becomes rising-edge pulses
 * max-pooled over groups of 4 into desire_pulse (1,25,8); `traffic-convention` becomes
 * traffic_convention (1,2). Per frame it only enqueues kernels: no allocation, no compilation,
 * no host wait.
 *
 * The output carries the vision tensors (device copies) followed by the policy tensors, with
 * every slice of both in the caps, so the sink sees all of them; a policy tensor whose name the
 * vision output already uses is renamed "policy_<name>".
 *
 * `desire` and `traffic-convention` may change while PLAYING, by property or by the
 * "op-driving-settings" custom event (see drivingsettings.h) travelling either way. Setting
 * `model` while PLAYING loads the new network in the background and swaps it in at a buffer
 * boundary (renegotiating when its outputs differ); a model that fails to load keeps the old
 * one with a warning.
 *
 * ## Example
 * |[
 * gst-launch-1.0 ... ! opvision model=driving_vision.onnx ! \
 *     oppolicy model=driving_policy.onnx desire=lane-change-left ! opmsgsink location=out.rlog
 * ]|
 *
 * ## Properties
 * - `model` (string): ONNX (compiled on first use, cached) or .opm; mutable while PLAYING.
 * - `device` (from the base class), `precision` (auto, fp32, fp16, int8): READY only.
 * - `desire` (none, turn-left, …, keep-right), `traffic-convention` (right-hand, left-hand).
 * - `dump-inputs` (string, READY only): a debug mode that writes every run's network inputs to
 *   this folder as `<input>-<frame>.npy`, the calibration data of `opc quantize`. It waits for
 *   the device and writes files on the frame path; unset (the default), nothing of it runs.
 * - read-only statistics: `frames`, `mean-time`, `max-time` (submission to completion),
 *   `device-time` (first kernel's start to last kernel's end), all in ms.
 */
#include "gstoppolicy.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/gstopevents.h"
#include "common/net/driving_settings.h"
#include "common/net/input_dump.h"
#include "common/net/model_slot.h"
#include "op/gstoperror.h"
#include "op/gstopframetimer.h"
#include "op/gstopbufferpool.h"
#include "op/gstoplatency.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"
#include "op/gstopupload.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_policy_debug);
#define GST_CAT_DEFAULT gst_op_policy_debug

#define TENSOR_CAPS \
  GST_OP_TENSOR_CAPS_NAME "(" GST_CAPS_FEATURE_MEMORY_OP_CL "); " GST_OP_TENSOR_CAPS_NAME

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(TENSOR_CAPS));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(TENSOR_CAPS));

enum {
  PROP_0,
  PROP_MODEL,
  PROP_PRECISION,
  PROP_DESIRE,
  PROP_TRAFFIC_CONVENTION,
  PROP_DUMP_INPUTS,
  PROP_FRAMES,
  PROP_MEAN_TIME,
  PROP_MAX_TIME,
  PROP_DEVICE_TIME,
  PROP_ACTIVE_MODEL,
};

namespace {

using op::net::ModelSlot;
using op::net::Network;

// Which policy input each queue feeds.
struct PolicyPlan {
  int features = -1, desire = -1, traffic = -1;
  op::drive::TemporalShape shape;
};

op::StatusOr<PolicyPlan> PlanPolicy(const Network &net) {
  PolicyPlan plan;
  const GstOpTensorInfo &in = net.inputs();
  for (size_t i = 0; i < in.tensors.size(); i++) {
    const std::string &name = in.tensors[i].name;
    int *slot = name == "features_buffer"      ? &plan.features
                : name == "desire_pulse"       ? &plan.desire
                : name == "traffic_convention" ? &plan.traffic
                                               : nullptr;
    if (!slot)
      return op::InvalidArgument("model input \"" + name +
                                 "\" is none of features_buffer, desire_pulse, "
                                 "traffic_convention (is this a policy model?)");
    *slot = int(i);
  }
  if (plan.features < 0 || plan.desire < 0 || plan.traffic < 0)
    return op::InvalidArgument(
        "a policy model has the inputs features_buffer, desire_pulse and traffic_convention");
  OP_ASSIGN_OR_RETURN(
      plan.shape, op::net::TemporalInputShape(in, plan.features, plan.desire, plan.traffic, false));
  return plan;
}

// Where the hidden state is in the negotiated vision output.
struct HiddenSource {
  int tensor = -1;
  int64_t start = 0, end = 0;
};

op::StatusOr<HiddenSource> FindHidden(const GstOpTensorInfo &vision, const PolicyPlan &plan) {
  const GstOpTensorSlice *s = vision.FindSlice("hidden_state");
  if (!s)
    return op::InvalidArgument(
        "the input tensors have no slice \"hidden_state\" (is the input "
        "the output of a vision model?)");
  HiddenSource h;
  h.tensor = vision.Find(s->tensor);
  if (h.tensor < 0 || vision.tensors[h.tensor].type != GstOpTensorType::kFloat32)
    return op::InvalidArgument("the hidden_state slice is not of a float32 tensor");
  if (s->end - s->start != plan.shape.width)
    return op::InvalidArgument("input slice hidden_state is " + std::to_string(s->end - s->start) +
                               " wide, the model's features_buffer wants " +
                               std::to_string(plan.shape.width));
  h.start = s->start;
  h.end = s->end;
  return h;
}

struct Impl {
  op::drive::Desire desire = op::drive::Desire::kNone;  // object lock
  op::drive::TrafficConvention traffic = op::drive::TrafficConvention::kRightHand;

  ModelSlot model;
  op::net::InputDump dump;  // dump-inputs (READY only)
  std::shared_ptr<GstOpFrameTimer> timer = std::make_shared<GstOpFrameTimer>();
  std::atomic<guint64> frames{0};

  // Between open and close (streaming thread).
  GstOpContext *ctx = nullptr;  // owned by the base class
  PolicyPlan plan;
  std::unique_ptr<op::drive::TemporalQueues> queues;
  std::unique_ptr<GstOpUploader> uploader;  // system-memory inputs into the outputs
  // One run's tensors as cl_mems and its events, sized for the caps and the running network
  // (SizeTensorArrays): outputs = the vision tensors, then the policy's.
  std::vector<cl_mem> inputs, outputs;
  std::vector<op::cl::EventHandle> events;

  // Negotiated.
  bool have_caps = false;
  GstOpTensorInfo in_info, out_info;
  HiddenSource hidden;
  GstOpLatencyReporter latency;  // the longest device time of a frame
};

}  // namespace

struct _GstOpPolicy {
  GstOpBaseFilter parent;
  Impl *impl;
};

#define gst_op_policy_parent_class parent_class
G_DEFINE_TYPE(GstOpPolicy, gst_op_policy, GST_TYPE_OP_BASE_FILTER);
GST_ELEMENT_REGISTER_DEFINE(oppolicy, "oppolicy", GST_RANK_NONE, GST_TYPE_OP_POLICY);

// ---- GstOpBaseFilter ----------------------------------------------------------------------

// Sizes the per-run arrays for the negotiated inputs and the running network (allocates only
// when they grow: at caps time or a model swap, not per frame).
static void SizeTensorArrays(Impl *impl) {
  Network *net = impl->model.current();
  const size_t n_in = impl->in_info.tensors.size();
  impl->inputs.assign(net->inputs().tensors.size(), nullptr);
  impl->outputs.assign(n_in + net->outputs().tensors.size(), nullptr);
  impl->events.resize(n_in + 1);
}

// What a network needs before it runs (at start or a model swap, not per frame).
struct Prepared {
  PolicyPlan plan;
  std::unique_ptr<op::drive::TemporalQueues> queues;  // null: the running ones carry over
};

// Whether `net` is a policy model that fits the negotiated input, and its queues: new ones
// unless the running queues have its temporal shape (then the history carries over, as a
// driver would expect).
static op::Status Prepare(Impl *impl, const Network &net, Prepared *out) {
  OP_ASSIGN_OR_RETURN(out->plan, PlanPolicy(net));
  if (impl->have_caps)
    OP_RETURN_IF_ERROR(FindHidden(impl->in_info, out->plan).status());
  const op::drive::TemporalShape &now = impl->plan.shape, &next = out->plan.shape;
  if (impl->queues && next.steps == now.steps && next.width == now.width &&
      next.desire_width == now.desire_width)
    return op::Status::Ok();
  OP_ASSIGN_OR_RETURN(out->queues,
                      op::drive::TemporalQueues::Create(gst_op_context_get_device(impl->ctx),
                                                        gst_op_context_get_queue(impl->ctx), next));
  return op::Status::Ok();
}

static void Commit(Impl *impl, Prepared &&next) {
  impl->plan = next.plan;
  if (next.queues)
    impl->queues = std::move(next.queues);
  SizeTensorArrays(impl);
}

static gboolean Open(GstOpBaseFilter *filter, GstOpContext *ctx) {
  auto *self = GST_OP_POLICY(filter);
  Impl *impl = self->impl;
  impl->ctx = ctx;
  Prepared next;
  if (!impl->model.Start(gst_op_context_get_device(ctx), "policy", "a driving policy model",
                         [&](const Network &net) { return Prepare(impl, net, &next); })) {
    impl->ctx = nullptr;
    return FALSE;
  }
  Commit(impl, std::move(next));
  impl->uploader = std::make_unique<GstOpUploader>(GST_ELEMENT(self), ctx, false);
  impl->timer->Reset();
  impl->latency.Reset();
  GST_INFO_OBJECT(self, "running %s", impl->model.current()->Describe().c_str());
  return TRUE;
}

static void Close(GstOpBaseFilter *filter) {
  auto *self = GST_OP_POLICY(filter);
  Impl *impl = self->impl;
  if (impl->ctx)
    (void)gst_op_context_get_queue(impl->ctx).Finish();  // stop(): not the frame path
  impl->timer->Drain();
  impl->uploader.reset();  // waits until the device has given back every input it read
  GST_INFO_OBJECT(self, "%s", impl->timer->Summary().c_str());
  impl->queues.reset();
  impl->model.Close();
  impl->have_caps = false;
  impl->ctx = nullptr;
}

// ---- caps ---------------------------------------------------------------------------------

static GstCaps *TransformCaps(GstBaseTransform *trans, GstPadDirection direction, GstCaps *caps,
                              GstCaps *filter) {
  auto *self = GST_OP_POLICY(trans);
  Network *net = self->impl->model.current();
  GstCaps *out = nullptr;
  if (direction == GST_PAD_SRC || !net) {
    // Upstream of us any tensor stream will do; which fits is decided by its slices.
    out = gst_caps_from_string(TENSOR_CAPS);
  } else {
    out = gst_caps_new_empty();
    for (guint i = 0; i < gst_caps_get_size(caps); i++) {
      auto info = gst_op_tensor_info_from_structure(gst_caps_get_structure(caps, i));
      if (!info.ok())
        continue;  // not fixed yet: nothing to say about the output
      auto merged = op::net::ConcatTensorInfo(*info, net->outputs(), "policy");
      if (!merged.ok())
        continue;
      GstCaps *one = gst_op_tensor_info_to_caps(*merged);
      GstCaps *both = gst_op_caps_with_both_memories(one);
      gst_caps_unref(one);
      out = gst_caps_merge(out, both);
    }
    if (gst_caps_is_empty(out)) {
      gst_caps_unref(out);
      out = gst_caps_from_string(TENSOR_CAPS);
    }
  }
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full(filter, out, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(out);
    out = tmp;
  }
  GST_DEBUG_OBJECT(self, "%s %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
                   direction == GST_PAD_SINK ? "sink" : "src", caps, out);
  return out;
}

static gboolean SetCaps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  auto *self = GST_OP_POLICY(trans);
  Impl *impl = self->impl;
  auto in = gst_op_tensor_info_from_caps(incaps);
  auto out = gst_op_tensor_info_from_caps(outcaps);
  if (!in.ok() || !out.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, (in.ok() ? out.status() : in.status()), STREAM, FORMAT,
                                ("Unreadable tensor caps."));
    return FALSE;
  }
  auto hidden = FindHidden(*in, impl->plan);
  if (!hidden.ok()) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("The policy model \"%s\" does not fit the input tensors: %s",
                       impl->model.path().c_str(), hidden.status().message().c_str()),
                      ("caps %" GST_PTR_FORMAT, incaps));
    return FALSE;
  }
  if (out->tensors.size() != in->tensors.size() + impl->model.current()->outputs().tensors.size()) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Unexpected output caps."),
                      ("%" GST_PTR_FORMAT, outcaps));
    return FALSE;
  }
  impl->in_info = *in;
  impl->out_info = *out;
  impl->hidden = *hidden;
  impl->have_caps = true;
  SizeTensorArrays(impl);
  return TRUE;
}

// ---- data ---------------------------------------------------------------------------------

static gboolean HandleSettingsEvent(GstOpPolicy *self, GstEvent *event) {
  return gst_op_apply_driving_settings_event(GST_ELEMENT(self), event, &self->impl->desire,
                                             &self->impl->traffic);
}

static gboolean SinkEvent(GstBaseTransform *trans, GstEvent *event) {
  auto *self = GST_OP_POLICY(trans);
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_CUSTOM_DOWNSTREAM:
    case GST_EVENT_CUSTOM_BOTH:
      HandleSettingsEvent(self, event);  // and it goes on: the sink may log the settings
      break;
    case GST_EVENT_FLUSH_STOP:
      // A flush is a jump in time: the old history means nothing at the new position.
      if (self->impl->queues && self->impl->ctx) {
        auto r = self->impl->queues->Reset(gst_op_context_get_queue(self->impl->ctx));
        if (!r.ok())
          GST_WARNING_OBJECT(self, "resetting the queues failed: %s",
                             r.status().ToString().c_str());
      }
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

static gboolean SrcEvent(GstBaseTransform *trans, GstEvent *event) {
  auto *self = GST_OP_POLICY(trans);
  if (GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_UPSTREAM ||
      GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_BOTH)
    HandleSettingsEvent(self, event);  // and on upstream: opvision may run a combined model
  return GST_BASE_TRANSFORM_CLASS(parent_class)->src_event(trans, event);
}

static gboolean Query(GstBaseTransform *trans, GstPadDirection direction, GstQuery *query) {
  auto *self = GST_OP_POLICY(trans);
  if (direction == GST_PAD_SRC && GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    if (!gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(trans), query))
      return FALSE;
    // Completion callbacks may have raised the measurement since the last frame.
    self->impl->latency.Note(self->impl->timer->stats().max_ns);
    self->impl->latency.AddTo(query);
    return TRUE;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->query(trans, direction, query);
}

// At a buffer boundary, before the base class checks for renegotiation: takes a network loaded
// in the background if it fits, so a change of outputs renegotiates for this very buffer.
static GstFlowReturn SubmitInputBuffer(GstBaseTransform *trans, gboolean is_discont,
                                       GstBuffer *input) {
  auto *self = GST_OP_POLICY(trans);
  Impl *impl = self->impl;
  Prepared next;
  const ModelSlot::Swap swap =
      impl->model.AdoptPending([&](const Network &net) { return Prepare(impl, net, &next); },
                               impl->model.current()->outputs());
  if (swap != ModelSlot::Swap::kNone)
    Commit(impl, std::move(next));
  if (swap == ModelSlot::Swap::kNewOutputs)
    gst_base_transform_reconfigure_src(trans);
  return GST_BASE_TRANSFORM_CLASS(parent_class)->submit_input_buffer(trans, is_discont, input);
}

static GstFlowReturn PrepareOutputBuffer(GstBaseTransform *trans, GstBuffer *input,
                                         GstBuffer **outbuf) {
  auto *self = GST_OP_POLICY(trans);
  Impl *impl = self->impl;
  // The decided pool is an OpenCL one on our context whatever the caps (op_memory_output).
  GstBufferPool *pool = gst_base_transform_get_buffer_pool(trans);
  if (!pool || !gst_op_buffer_pool_is_on(pool, impl->ctx)) {
    gst_clear_object(&pool);
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("No OpenCL output buffer pool."), (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  // GstBaseTransform activates its pool only in its own prepare_output_buffer.
  if (!gst_buffer_pool_is_active(pool) && !gst_buffer_pool_set_active(pool, TRUE)) {
    gst_object_unref(pool);
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Could not activate the output buffer pool."),
                      (nullptr));
    return GST_FLOW_ERROR;
  }
  GstFlowReturn ret = gst_buffer_pool_acquire_buffer(pool, outbuf, nullptr);
  gst_object_unref(pool);
  if (ret != GST_FLOW_OK)
    return ret;
  // Timestamps, flags and metas (GstOpFrameMeta) of the input.
  if (!GST_BASE_TRANSFORM_CLASS(parent_class)->copy_metadata(trans, input, *outbuf)) {
    gst_clear_buffer(outbuf);
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

static GstFlowReturn Transform(GstBaseTransform *trans, GstBuffer *inbuf, GstBuffer *outbuf) {
  auto *self = GST_OP_POLICY(trans);
  Impl *impl = self->impl;
  const int64_t t0 = GstOpFrameTimer::Now();
  GstOpContext *ctx = impl->ctx;
  op::cl::Queue &queue = gst_op_context_get_queue(ctx);
  Network *net = impl->model.current();
  const size_t n_in = impl->in_info.tensors.size();
  const size_t n_pol = net->outputs().tensors.size();

  auto fail = [&](const op::Status &s, const char *what) {
    GST_OP_ELEMENT_ERROR_STATUS(self, s, STREAM, FAILED, ("%s", what));
    return GST_FLOW_ERROR;
  };
  if (gst_buffer_n_memory(inbuf) != n_in || gst_buffer_n_memory(outbuf) != n_in + n_pol)
    return fail(op::InvalidArgument("buffers do not hold one memory per tensor of their caps"),
                "Malformed buffer.");
  std::vector<cl_mem> &outputs = impl->outputs;
  std::vector<op::cl::EventHandle> &events = impl->events;
  if (outputs.size() != n_in + n_pol || events.size() != n_in + 1)
    return fail(op::Internal("tensor arrays not sized for the caps"), "Malformed buffer.");
  if (n_in + 1 > op::cl::EventList::kMax)
    return fail(op::Unsupported("more than " + std::to_string(op::cl::EventList::kMax - 1) +
                                " input tensors"),
                "Too many tensors.");
  for (size_t i = 0; i < n_in + n_pol; i++) {
    GstMapInfo map;
    GstMemory *m = gst_buffer_peek_memory(outbuf, i);
    if (!gst_op_memory_map_cl(m, &map, GST_MAP_WRITE))
      return fail(op::Internal("output memory is not OpenCL memory"), "Bad output pool.");
    outputs[i] = gst_op_map_info_get_cl_mem(&map);
    gst_memory_unmap(m, &map);
  }

  // The vision tensors go out unchanged, so the sink sees every slice: a device copy of an
  // OpenCL input, or the upload of a system-memory one written straight into the output. The
  // hidden state is then read from the output copy.
  op::cl::EventList done;
  size_t n_events = 0;
  for (size_t i = 0; i < n_in; i++) {
    GstMemory *m = gst_buffer_peek_memory(inbuf, i);
    const size_t bytes = impl->in_info.tensors[i].bytes();
    const bool on_device = gst_is_op_memory_on(m, ctx);
    auto src =
        op::net::DeviceInput(ctx, impl->uploader.get(), m, bytes, on_device ? nullptr : outputs[i]);
    if (!src.ok())
      return fail(src.status(), "Could not read an input tensor.");
    if (on_device) {
      auto copied = queue.Copy(src->mem, src->offset, outputs[i], 0, bytes, {src->ready.get()});
      if (!copied.ok())
        return fail(copied.status(), "Could not copy a vision tensor.");
      events[n_events] = std::move(copied).value();
    } else {
      events[n_events] = src->ready;  // the upload into the output
    }
    done.Add(events[n_events++].get());
  }
  cl_mem hidden_mem = outputs[impl->hidden.tensor];
  cl_event hidden_ready = events[impl->hidden.tensor].get();

  GST_OBJECT_LOCK(self);
  const op::drive::Desire desire = impl->desire;
  const op::drive::TrafficConvention traffic = impl->traffic;
  GST_OBJECT_UNLOCK(self);
  // Contract order: vision → enqueue hidden state and desire pulse → policy.
  auto f = impl->queues->PushFeatures(queue, hidden_mem, size_t(impl->hidden.start),
                                      size_t(impl->hidden.end),
                                      {hidden_ready, impl->queues->ready_event()});
  if (!f.ok())
    return fail(f.status(), "Could not update the feature queue.");
  auto d = impl->queues->PushDesire(queue, desire, traffic);
  if (!d.ok())
    return fail(d.status(), "Could not update the desire queue.");

  std::vector<cl_mem> &inputs = impl->inputs;
  inputs[impl->plan.features] = impl->queues->features();
  inputs[impl->plan.desire] = impl->queues->desire_pulse();
  inputs[impl->plan.traffic] = impl->queues->traffic_convention();
  if (impl->dump.enabled()) {
    // Debug mode only (dump-inputs): a host wait and file writes on the frame path.
    op::Status st = impl->dump.Write(queue, net->inputs(), inputs.data(), {f->get(), d->get()});
    if (!st.ok())
      return fail(st, "Could not dump the network inputs.");
  }
  op::cl::EventHandle first;
  auto run = net->Run(queue, inputs.data(), outputs.data() + n_in, {f->get(), d->get()}, &first);
  if (!run.ok())
    return fail(run.status(), "Running the policy network failed.");
  events[n_events] = std::move(run).value();
  done.Add(events[n_events++].get());
  auto all = queue.Marker(done);
  if (!all.ok())
    return fail(all.status(), "Could not mark the frame's completion.");
  gst_op_buffer_set_write_event(outbuf, all->get());
  (void)queue.Flush();
  impl->timer->Track(all->get(), t0, first.get(), events[n_events - 1].get());
  GstOpFrameMeta *meta = gst_buffer_get_or_add_op_frame_meta(outbuf);
  // This frame's own commands (the meta retains them) before the event array lets go of them.
  gst_op_frame_meta_set_stage_events(meta, GST_OP_STAGE_POLICY, first.get(),
                                     events[n_events - 1].get());
  for (op::cl::EventHandle &e : events)
    e.reset();

  meta->stage_ns[GST_OP_STAGE_POLICY] = impl->timer->stats().stage_ns();
  impl->frames++;

  impl->latency.NoteAndPost(GST_ELEMENT(self), impl->timer->stats().max_ns);
  return GST_FLOW_OK;
}

// ---- GObject ------------------------------------------------------------------------------

static void SetProperty(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_POLICY(object);
  Impl *impl = self->impl;
  switch (prop_id) {
    case PROP_MODEL:
      impl->model.SetPath(g_value_get_string(value) ? g_value_get_string(value) : "");
      break;
    case PROP_PRECISION:
      impl->model.SetPrecision(static_cast<op::net::Precision>(g_value_get_enum(value)));
      break;
    case PROP_DUMP_INPUTS:  // READY only: the streaming thread reads it without a lock
      impl->dump.set_dir(g_value_get_string(value) ? g_value_get_string(value) : "");
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
  auto *self = GST_OP_POLICY(object);
  Impl *impl = self->impl;
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string(value, impl->model.path().c_str());
      break;
    case PROP_PRECISION:
      g_value_set_enum(value, int(impl->model.precision()));
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
      g_value_set_uint64(value, impl->frames);
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

static GstStateChangeReturn ChangeState(GstElement *element, GstStateChange transition) {
  auto *self = GST_OP_POLICY(element);
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !self->impl->model.path().empty()) {
    // The model starts loading now, next to the other networks of the pipeline; start() takes it.
    if (!gst_op_base_filter_ensure_context(GST_OP_BASE_FILTER(self)))
      return GST_STATE_CHANGE_FAILURE;
    self->impl->model.Preload(
        gst_op_context_get_device(gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self))));
  }
  GstStateChangeReturn ret = GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_READY_TO_NULL ||
      (transition == GST_STATE_CHANGE_NULL_TO_READY && ret == GST_STATE_CHANGE_FAILURE))
    self->impl->model.Close();  // a preload start() never took
  return ret;
}

static void Finalize(GObject *object) {
  auto *self = GST_OP_POLICY(object);
  delete self->impl;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_op_policy_class_init(GstOpPolicyClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstOpBaseFilterClass *filter_class = GST_OP_BASE_FILTER_CLASS(klass);

  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  gobject_class->finalize = Finalize;

  const auto rw_playing =
      (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model",
                          "The policy network: an ONNX file, compiled on first use and cached, "
                          "or a compiled .opm. Setting it while PLAYING swaps the network at a "
                          "buffer boundary once the new one has loaded",
                          "", rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_PRECISION,
      g_param_spec_enum(
          "precision", "Precision",
          "Precision the network is compiled for (int8 needs a quantized model)",
          GST_TYPE_OP_PRECISION, int(op::net::Precision::kAuto),
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_DESIRE,
      g_param_spec_enum("desire", "Desire",
                        "The driver's desire; a change to a desire other than none is one pulse",
                        GST_TYPE_OP_DESIRE, int(op::drive::Desire::kNone), rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_TRAFFIC_CONVENTION,
      g_param_spec_enum("traffic-convention", "Traffic convention",
                        "Which side of the road traffic keeps to", GST_TYPE_OP_TRAFFIC_CONVENTION,
                        int(op::drive::TrafficConvention::kRightHand), rw_playing));
  g_object_class_install_property(
      gobject_class, PROP_DUMP_INPUTS,
      g_param_spec_string(
          "dump-inputs", "Dump inputs",
          "Debug: write every run's network inputs to this folder as <input>-<frame>.npy "
          "(calibration data; waits for the device per frame)",
          "", (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  gst_op_install_stat(gobject_class, PROP_FRAMES, "frames", "Frames the network ran on");
  gst_op_frame_timer_install_properties(gobject_class, PROP_MEAN_TIME);

  g_object_class_install_property(
      gobject_class, PROP_ACTIVE_MODEL,
      g_param_spec_string("active-model", "Active model",
                          "The file the running network came from (differs from model while a "
                          "new one loads, or after one failed to load)",
                          "", (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "openpilot policy network", "Filter/Tensor/Hardware",
      "Keeps openpilot's temporal inputs (hidden-state history, desire pulses, traffic "
      "convention) on an OpenCL device and runs the driving policy network",
      "gst-op");

  element_class->change_state = ChangeState;
  filter_class->open = Open;
  filter_class->close = Close;
  filter_class->op_memory_output = TRUE;
  trans_class->transform_caps = TransformCaps;
  trans_class->set_caps = SetCaps;
  trans_class->sink_event = SinkEvent;
  trans_class->src_event = SrcEvent;
  trans_class->query = Query;
  trans_class->submit_input_buffer = SubmitInputBuffer;
  trans_class->prepare_output_buffer = PrepareOutputBuffer;
  trans_class->transform = Transform;
  trans_class->passthrough_on_same_caps = FALSE;

  GST_DEBUG_CATEGORY_INIT(gst_op_policy_debug, "oppolicy", 0, "openpilot policy network");
}

static void gst_op_policy_init(GstOpPolicy *self) {
  self->impl = new Impl();
  self->impl->model.SetOwner(GST_ELEMENT(self));
  // Late frames are dropped before any device work when downstream asks (QoS events).
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), TRUE);
}
