#include "op/gstopbasefilter.h"

#include <gst/video/video.h>

#include "op/gstopbufferpool.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_base_filter_debug);
#define GST_CAT_DEFAULT gst_op_base_filter_debug

#define DEFAULT_DEVICE "auto"

enum { PROP_0, PROP_DEVICE };

namespace {
// C++ state; the GObject private struct only points at it.
struct Impl {
  std::string device = DEFAULT_DEVICE;  // guarded by the object lock
  GstOpContext *ctx = nullptr;          // guarded by the object lock; set in start()
};
}  // namespace

typedef struct {
  Impl *impl;
} GstOpBaseFilterPrivate;

G_DEFINE_ABSTRACT_TYPE_WITH_PRIVATE(GstOpBaseFilter, gst_op_base_filter, GST_TYPE_BASE_TRANSFORM)

static Impl &ImplOf(GstOpBaseFilter *self) {
  return *static_cast<GstOpBaseFilterPrivate *>(gst_op_base_filter_get_instance_private(self))
              ->impl;
}

GstOpContext *gst_op_base_filter_get_context(GstOpBaseFilter *self) {
  g_return_val_if_fail(GST_IS_OP_BASE_FILTER(self), nullptr);
  GST_OBJECT_LOCK(self);
  GstOpContext *ctx = ImplOf(self).ctx;
  GST_OBJECT_UNLOCK(self);
  return ctx;
}

std::string gst_op_base_filter_get_device(GstOpBaseFilter *self) {
  GST_OBJECT_LOCK(self);
  std::string device = ImplOf(self).device;
  GST_OBJECT_UNLOCK(self);
  return device;
}

// Caps helpers ----------------------------------------------------------------------------

gboolean gst_op_caps_is_op_memory(const GstCaps *caps) {
  if (!caps || gst_caps_is_empty(caps) || gst_caps_is_any(caps))
    return FALSE;
  GstCapsFeatures *f = gst_caps_get_features(caps, 0);
  return f && gst_caps_features_contains(f, GST_CAPS_FEATURE_MEMORY_OP_CL);
}

GstCaps *gst_op_caps_with_feature(const GstCaps *caps, const char *feature) {
  GstCaps *out = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(caps); i++) {
    GstStructure *s = gst_structure_copy(gst_caps_get_structure(caps, i));
    gst_caps_append_structure_full(out, s, gst_caps_features_new(feature, nullptr));
  }
  return out;
}

GstCaps *gst_op_caps_with_both_memories(const GstCaps *caps) {
  GstCaps *out = gst_op_caps_with_feature(caps, GST_CAPS_FEATURE_MEMORY_OP_CL);
  return gst_caps_merge(out, gst_op_caps_with_feature(caps, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY));
}

GstCaps *gst_op_caps_converted(GstBaseTransform *trans, const GstCaps *caps, const char *feature) {
  GstCaps *out = gst_op_caps_with_feature(caps, feature);
  // Only a linked peer can say: an unlinked pad accepts anything, which would hide the input
  // caps from link-time checks.
  bool converted_only = false;
  GstPad *peer = gst_pad_get_peer(GST_BASE_TRANSFORM_SRC_PAD(trans));
  if (peer) {
    converted_only = gst_caps_is_fixed(caps) && !gst_caps_is_equal(out, caps) &&
                     gst_pad_query_accept_caps(peer, out);
    gst_object_unref(peer);
  }
  if (!converted_only)
    out = gst_caps_merge(out, gst_caps_copy(caps));
  return out;
}

void gst_op_caps_split_by_memory(const GstCaps *caps, GstCaps **op, GstCaps **other) {
  *op = gst_caps_new_empty();
  *other = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(caps); i++) {
    GstCapsFeatures *f = gst_caps_get_features(caps, i);
    GstCaps *one = gst_caps_copy_nth(caps, i);
    if (f && gst_caps_features_contains(f, GST_CAPS_FEATURE_MEMORY_OP_CL))
      *op = gst_caps_merge(*op, one);
    else
      *other = gst_caps_merge(*other, one);
  }
}

// GObject ----------------------------------------------------------------------------------

static void SetProperty(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_BASE_FILTER(object);
  switch (prop_id) {
    case PROP_DEVICE:
      gst_op_set_device(GST_ELEMENT(self), g_value_get_string(value), &ImplOf(self).device,
                        &ImplOf(self).ctx);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void GetProperty(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_BASE_FILTER(object);
  switch (prop_id) {
    case PROP_DEVICE:
      g_value_set_string(value, gst_op_base_filter_get_device(self).c_str());
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void Finalize(GObject *object) {
  auto *self = GST_OP_BASE_FILTER(object);
  Impl *impl = &ImplOf(self);
  gst_clear_object(&impl->ctx);
  delete impl;
  G_OBJECT_CLASS(gst_op_base_filter_parent_class)->finalize(object);
}

// GstElement / GstBaseTransform -----------------------------------------------------------

static void SetContext(GstElement *element, GstContext *context) {
  auto *self = GST_OP_BASE_FILTER(element);
  gst_op_handle_set_context(element, context, gst_op_base_filter_get_device(self).c_str(),
                            &ImplOf(self).ctx);
  GST_ELEMENT_CLASS(gst_op_base_filter_parent_class)->set_context(element, context);
}

gboolean gst_op_base_filter_ensure_context(GstOpBaseFilter *self) {
  std::string device = gst_op_base_filter_get_device(self);
  return gst_op_ensure_context(GST_ELEMENT(self), device.c_str(), &ImplOf(self).ctx);
}

static GstStateChangeReturn ChangeState(GstElement *element, GstStateChange transition) {
  GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(gst_op_base_filter_parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_READY_TO_NULL)
    gst_op_clear_context(element, &ImplOf(GST_OP_BASE_FILTER(element)).ctx);  // one made early
  return ret;
}

static gboolean Start(GstBaseTransform *trans) {
  auto *self = GST_OP_BASE_FILTER(trans);
  if (!gst_op_base_filter_ensure_context(self))
    return FALSE;
  auto *klass = GST_OP_BASE_FILTER_GET_CLASS(self);
  if (klass->open && !klass->open(self, gst_op_base_filter_get_context(self))) {
    GST_OBJECT_LOCK(self);
    gst_clear_object(&ImplOf(self).ctx);
    GST_OBJECT_UNLOCK(self);
    return FALSE;
  }
  return TRUE;
}

static gboolean Stop(GstBaseTransform *trans) {
  auto *self = GST_OP_BASE_FILTER(trans);
  auto *klass = GST_OP_BASE_FILTER_GET_CLASS(self);
  if (klass->close)
    klass->close(self);
  gst_op_clear_context(GST_ELEMENT(self), &ImplOf(self).ctx);
  return TRUE;
}

static gboolean Query(GstBaseTransform *trans, GstPadDirection direction, GstQuery *query) {
  auto *self = GST_OP_BASE_FILTER(trans);
  if (GST_QUERY_TYPE(query) == GST_QUERY_CONTEXT) {
    GST_OBJECT_LOCK(self);
    GstOpContext *ctx =
        ImplOf(self).ctx ? GST_OP_CONTEXT(gst_object_ref(ImplOf(self).ctx)) : nullptr;
    GST_OBJECT_UNLOCK(self);
    gboolean answered = gst_op_handle_context_query(GST_ELEMENT(self), query, ctx);
    if (ctx)
      gst_object_unref(ctx);
    if (answered)
      return TRUE;
  }
  return GST_BASE_TRANSFORM_CLASS(gst_op_base_filter_parent_class)->query(trans, direction, query);
}

static GstCaps *TransformCaps(GstBaseTransform *trans, GstPadDirection, GstCaps *caps,
                              GstCaps *filter) {
  GstCaps *out = gst_op_caps_with_both_memories(caps);
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full(filter, out, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(out);
    out = tmp;
  }
  GST_DEBUG_OBJECT(trans, "%" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT, caps, out);
  return out;
}

// What the base filter asks of every pool it makes or configures: the video meta option and
// the subclass's configure_pool.
static GstOpPoolConfigure PoolConfigure(GstOpBaseFilter *self) {
  return [self](GstCaps *caps, GstStructure *config) {
    gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
    auto *klass = GST_OP_BASE_FILTER_GET_CLASS(self);
    if (klass->configure_pool)
      klass->configure_pool(self, caps, config);
  };
}

// A configured pool of ours for `caps`, or NULL after logging why.
static GstBufferPool *MakePool(GstOpBaseFilter *self, GstCaps *caps, guint min, guint max,
                               guint *size) {
  GstOpContext *ctx = gst_op_base_filter_get_context(self);
  if (!ctx)
    return nullptr;
  GstBufferPool *pool =
      gst_op_buffer_pool_new_configured(ctx, caps, min, max, PoolConfigure(self), size);
  if (!pool)
    GST_WARNING_OBJECT(self, "pool refused caps %" GST_PTR_FORMAT, caps);
  return pool;
}

static gboolean ProposeAllocation(GstBaseTransform *trans, GstQuery *decide_query,
                                  GstQuery *query) {
  auto *self = GST_OP_BASE_FILTER(trans);
  // Passes through metas downstream accepts (and the whole query when in passthrough).
  if (!GST_BASE_TRANSFORM_CLASS(gst_op_base_filter_parent_class)
           ->propose_allocation(trans, decide_query, query))
    return FALSE;
  if (!decide_query)
    return TRUE;  // passthrough: downstream answered

  GstCaps *caps = nullptr;
  gboolean need_pool = FALSE;
  gst_query_parse_allocation(query, &caps, &need_pool);
  if (!caps)
    return FALSE;
  // We read strides and plane offsets from GstVideoMeta and keep our provenance meta.
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  gst_query_add_allocation_meta(query, GST_OP_FRAME_META_API_TYPE, nullptr);
  if (!gst_op_caps_is_op_memory(caps) || gst_query_get_n_allocation_pools(query) > 0)
    return TRUE;
  if (need_pool) {
    guint size = 0;
    GstBufferPool *pool = MakePool(self, caps, 0, 0, &size);
    if (!pool)
      return FALSE;
    gst_query_add_allocation_pool(query, pool, size, 0, 0);
    gst_object_unref(pool);
  }
  return TRUE;
}

static gboolean DecideAllocation(GstBaseTransform *trans, GstQuery *query) {
  auto *self = GST_OP_BASE_FILTER(trans);
  GstCaps *caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  if (!caps)
    return FALSE;
  auto *klass = GST_OP_BASE_FILTER_GET_CLASS(self);
  if (!klass->op_memory_output && !gst_op_caps_is_op_memory(caps))
    return GST_BASE_TRANSFORM_CLASS(gst_op_base_filter_parent_class)
        ->decide_allocation(trans, query);
  return gst_op_decide_output_pool(GST_ELEMENT(self), gst_op_base_filter_get_context(self), query,
                                   0, PoolConfigure(self));
}

static void gst_op_base_filter_class_init(GstOpBaseFilterClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);

  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  gobject_class->finalize = Finalize;

  g_object_class_install_property(
      gobject_class, PROP_DEVICE,
      g_param_spec_string(
          "device", "Device",
          "OpenCL device: \"auto\" (a GPU, Qualcomm then AMD then any, else the CPU), \"gpu\", "
          "\"cpu\", \"P:D\" (platform and device index as clinfo -l lists them) or a "
          "case-insensitive substring of the device, vendor or platform name. Elements of one "
          "pipeline share the device of the first one opened when their strings agree",
          DEFAULT_DEVICE,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));

  element_class->set_context = SetContext;
  element_class->change_state = ChangeState;
  trans_class->start = Start;
  trans_class->stop = Stop;
  trans_class->query = Query;
  trans_class->transform_caps = TransformCaps;
  trans_class->propose_allocation = ProposeAllocation;
  trans_class->decide_allocation = DecideAllocation;

  GST_DEBUG_CATEGORY_INIT(gst_op_base_filter_debug, "opbasefilter", 0, "OpenCL filter base");
  gst_type_mark_as_plugin_api(GST_TYPE_OP_BASE_FILTER, (GstPluginAPIFlags)0);
}

static void gst_op_base_filter_init(GstOpBaseFilter *self) {
  static_cast<GstOpBaseFilterPrivate *>(gst_op_base_filter_get_instance_private(self))->impl =
      new Impl();
}
