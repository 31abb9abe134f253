#include "op/gstopcontext.h"

#include <string>

GST_DEBUG_CATEGORY_STATIC(gst_op_context_debug);
#define GST_CAT_DEFAULT gst_op_context_debug
// Context negotiation logs to GStreamer's own category, like every other library does.
GST_DEBUG_CATEGORY_STATIC(op_cat_context);

struct GstOpContextPrivate {
  std::shared_ptr<op::cl::Device> device;
  op::cl::Queue queue;
  std::string spec;
};

struct _GstOpContext {
  GstObject parent;
  GstOpContextPrivate *priv;
};

G_DEFINE_TYPE(GstOpContext, gst_op_context, GST_TYPE_OBJECT)

static void gst_op_context_finalize(GObject *object) {
  GstOpContext *self = GST_OP_CONTEXT(object);
  GST_DEBUG_OBJECT(self, "closing device %s", self->priv->spec.c_str());
  delete self->priv;
  G_OBJECT_CLASS(gst_op_context_parent_class)->finalize(object);
}

// The helpers below may run before the class exists (a foreign context, an early query).
static void InitDebug() {
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    GST_DEBUG_CATEGORY_INIT(gst_op_context_debug, "opcontext", 0, "OpenCL context sharing");
    GST_DEBUG_CATEGORY_GET(op_cat_context, "GST_CONTEXT");
    g_once_init_leave(&once, 1);
  }
}

static void gst_op_context_class_init(GstOpContextClass *klass) {
  G_OBJECT_CLASS(klass)->finalize = gst_op_context_finalize;
  InitDebug();
}

static void gst_op_context_init(GstOpContext *self) {
  self->priv = new GstOpContextPrivate();
}

op::StatusOr<GstOpContext *> gst_op_context_new_for_device(std::shared_ptr<op::cl::Device> device) {
  if (!device)
    return op::InvalidArgument("no device to wrap in a GstOpContext");
  // Profiling costs little and lets elements report per-stage device times in GstOpFrameMeta.
  OP_ASSIGN_OR_RETURN(op::cl::Queue queue, op::cl::Queue::Create(*device, true));
  auto *self = GST_OP_CONTEXT(g_object_new(GST_TYPE_OP_CONTEXT, nullptr));
  gst_object_ref_sink(self);
  self->priv->spec = device->spec();
  self->priv->device = std::move(device);
  self->priv->queue = std::move(queue);
  GST_INFO_OBJECT(self, "opened \"%s\": %s", self->priv->spec.c_str(),
                  self->priv->device->caps().Describe().c_str());
  return self;
}

op::StatusOr<GstOpContext *> gst_op_context_new(const gchar *device) {
  const char *spec = device ? device : "auto";
  auto opened = op::cl::Device::Open(spec);
  if (!opened.ok())
    return opened.status();
  return gst_op_context_new_for_device(std::move(opened).value());
}

const gchar *gst_op_context_get_device_string(GstOpContext *ctx) {
  return ctx->priv->spec.c_str();
}

const std::shared_ptr<op::cl::Device> &gst_op_context_get_device(GstOpContext *ctx) {
  return ctx->priv->device;
}

op::cl::Queue &gst_op_context_get_queue(GstOpContext *ctx) {
  return ctx->priv->queue;
}

static bool IsAnyDevice(const gchar *device) {
  return !device || !*device || g_str_equal(device, "auto");
}

gboolean gst_op_context_matches(GstOpContext *ctx, const gchar *device) {
  g_return_val_if_fail(GST_IS_OP_CONTEXT(ctx), FALSE);
  if (IsAnyDevice(device) || ctx->priv->spec == device)
    return TRUE;
  // Different strings may still name the same device ("0:0" and "pthread").
  auto sel = op::cl::SelectDevice(device);
  return sel.ok() && sel->info.device == ctx->priv->device->id();
}

GstContext *gst_context_new_op_context(GstOpContext *ctx) {
  g_return_val_if_fail(GST_IS_OP_CONTEXT(ctx), nullptr);
  GstContext *context = gst_context_new(GST_OP_CONTEXT_TYPE, TRUE);
  GstStructure *s = gst_context_writable_structure(context);
  gst_structure_set(s, "context", GST_TYPE_OP_CONTEXT, ctx, "device", G_TYPE_STRING,
                    ctx->priv->spec.c_str(), nullptr);
  return context;
}

GstOpContext *gst_context_get_op_context(GstContext *context) {
  if (!context || g_strcmp0(gst_context_get_context_type(context), GST_OP_CONTEXT_TYPE) != 0)
    return nullptr;
  GstOpContext *ctx = nullptr;
  const GstStructure *s = gst_context_get_structure(context);
  if (!gst_structure_get(s, "context", GST_TYPE_OP_CONTEXT, &ctx, nullptr))
    return nullptr;
  return ctx;
}

namespace {
struct Refusal {
  std::string offered, asked, source;
};
}  // namespace

static void PostRefusal(GstElement *element, gpointer data) {
  auto *r = static_cast<Refusal *>(data);
  GST_ELEMENT_WARNING(element, RESOURCE, SETTINGS,
                      ("Not sharing the OpenCL context of device \"%s\" (this element asked for "
                       "\"%s\")",
                       r->offered.c_str(), r->asked.c_str()),
                      ("context from %s refused", r->source.c_str()));
}

// Takes `candidate` into *ctx when it suits `device`; refuses otherwise, with a warning message.
// From set_context the message is posted from another thread: a bin calls set_context holding
// its own object lock while it handles a need-context message, and posting there takes that
// lock again (the pipeline hung). Consumes the reference to `candidate`.
static gboolean AdoptContext(GstElement *element, GstOpContext *candidate, const gchar *device,
                             GstOpContext **ctx, const char *source, bool post_now) {
  if (!gst_op_context_matches(candidate, device)) {
    GST_CAT_WARNING_OBJECT(op_cat_context, element,
                           "refusing the OpenCL context for device \"%s\" from %s: this element "
                           "asked for device \"%s\"",
                           gst_op_context_get_device_string(candidate), source, device);
    auto *r = new Refusal{gst_op_context_get_device_string(candidate), device, source};
    if (post_now) {
      PostRefusal(element, r);
      delete r;
    } else {
      gst_element_call_async(element, PostRefusal, r,
                             [](gpointer data) { delete static_cast<Refusal *>(data); });
    }
    gst_object_unref(candidate);
    return FALSE;
  }
  GST_OBJECT_LOCK(element);
  if (*ctx) {
    GST_OBJECT_UNLOCK(element);
    gst_object_unref(candidate);
    return TRUE;
  }
  *ctx = candidate;
  GST_OBJECT_UNLOCK(element);
  GST_CAT_INFO_OBJECT(op_cat_context, element,
                      "using OpenCL context %" GST_PTR_FORMAT " (device \"%s\") from %s", candidate,
                      gst_op_context_get_device_string(candidate), source);
  return TRUE;
}

gboolean gst_op_handle_set_context(GstElement *element, GstContext *context, const gchar *device,
                                   GstOpContext **ctx) {
  g_return_val_if_fail(GST_IS_ELEMENT(element), FALSE);
  g_return_val_if_fail(ctx != nullptr, FALSE);
  InitDebug();
  GstOpContext *candidate = gst_context_get_op_context(context);
  if (!candidate)
    return FALSE;
  GST_OBJECT_LOCK(element);
  bool have = *ctx != nullptr;
  GST_OBJECT_UNLOCK(element);
  if (have) {
    gst_object_unref(candidate);
    return TRUE;
  }
  AdoptContext(element, candidate, device, ctx, "set_context", false);
  return TRUE;
}

gboolean gst_op_handle_context_query(GstElement *element, GstQuery *query, GstOpContext *ctx) {
  g_return_val_if_fail(GST_IS_ELEMENT(element), FALSE);
  if (GST_QUERY_TYPE(query) != GST_QUERY_CONTEXT || !ctx)
    return FALSE;
  InitDebug();
  const gchar *type = nullptr;
  if (!gst_query_parse_context_type(query, &type) || g_strcmp0(type, GST_OP_CONTEXT_TYPE) != 0)
    return FALSE;
  GstContext *context = gst_context_new_op_context(ctx);
  gst_query_set_context(query, context);
  gst_context_unref(context);
  GST_CAT_DEBUG_OBJECT(op_cat_context, element, "answered a context query with %" GST_PTR_FORMAT,
                       ctx);
  return TRUE;
}

namespace {
struct PeerSearch {
  GstQuery *query;
  const gchar *device;
  GstOpContext **ctx;
};
}  // namespace

static gboolean QueryPeer(GstElement *element, GstPad *pad, gpointer user_data) {
  auto *search = static_cast<PeerSearch *>(user_data);
  if (!gst_pad_peer_query(pad, search->query))
    return TRUE;  // keep looking
  GstContext *context = nullptr;
  gst_query_parse_context(search->query, &context);
  GstOpContext *candidate = gst_context_get_op_context(context);
  if (!candidate)
    return TRUE;
  const char *where = GST_PAD_IS_SRC(pad) ? "downstream" : "upstream";
  return !AdoptContext(element, candidate, search->device, search->ctx, where, true);
}

void gst_op_clear_context(GstElement *element, GstOpContext **ctx) {
  GST_OBJECT_LOCK(element);
  GstOpContext *old = *ctx;
  *ctx = nullptr;
  GST_OBJECT_UNLOCK(element);
  if (old)
    gst_object_unref(old);
}

void gst_op_set_device(GstElement *element, const gchar *value, std::string *device,
                       GstOpContext **ctx) {
  const std::string now = value && *value ? value : "auto";
  GstOpContext *early = nullptr;
  GST_OBJECT_LOCK(element);
  const bool unstarted =
      GST_STATE(element) <= GST_STATE_READY && GST_STATE_PENDING(element) == GST_STATE_VOID_PENDING;
  if (now != *device && unstarted)
    std::swap(early, *ctx);
  *device = now;
  GST_OBJECT_UNLOCK(element);
  if (early)
    gst_object_unref(early);
}

gboolean gst_op_ensure_context(GstElement *element, const gchar *device, GstOpContext **ctx) {
  g_return_val_if_fail(GST_IS_ELEMENT(element), FALSE);
  g_return_val_if_fail(ctx != nullptr, FALSE);
  InitDebug();
  const gchar *spec = device && *device ? device : "auto";
  auto have = [&]() {
    GST_OBJECT_LOCK(element);
    bool set = *ctx != nullptr;
    GST_OBJECT_UNLOCK(element);
    return set;
  };
  if (have())
    return TRUE;

  // Downstream first, then upstream, like every GStreamer context user.
  GstQuery *query = gst_query_new_context(GST_OP_CONTEXT_TYPE);
  PeerSearch search{query, spec, ctx};
  gst_element_foreach_src_pad(element, QueryPeer, &search);
  if (!have())
    gst_element_foreach_sink_pad(element, QueryPeer, &search);
  gst_query_unref(query);
  if (have())
    return TRUE;

  // The application or a bin may answer synchronously through set_context.
  GST_CAT_DEBUG_OBJECT(op_cat_context, element, "posting need-context for %s", GST_OP_CONTEXT_TYPE);
  gst_element_post_message(element,
                           gst_message_new_need_context(GST_OBJECT(element), GST_OP_CONTEXT_TYPE));
  if (have())
    return TRUE;

  auto created = gst_op_context_new(spec);
  if (!created.ok()) {
    const op::Status &st = created.status();
    if (st.code() == op::StatusCode::kNotFound)
      GST_ELEMENT_ERROR(element, RESOURCE, NOT_FOUND,
                        ("OpenCL device \"%s\" not found; set the device property to auto, cpu, "
                         "gpu, P:D or a device-name substring",
                         spec),
                        ("%s", st.ToString().c_str()));
    else
      GST_ELEMENT_ERROR(element, LIBRARY, INIT, ("Could not open OpenCL device \"%s\"", spec),
                        ("%s", st.ToString().c_str()));
    return FALSE;
  }
  GstOpContext *fresh = created.value();
  const std::string &fallback = gst_op_context_get_device(fresh)->fallback();
  if (!fallback.empty())
    GST_ELEMENT_WARNING(element, RESOURCE, SETTINGS, ("%s", fallback.c_str()),
                        ("device \"%s\"", spec));
  GST_OBJECT_LOCK(element);
  if (*ctx) {  // set concurrently while we were opening
    GST_OBJECT_UNLOCK(element);
    gst_object_unref(fresh);
    return TRUE;
  }
  *ctx = fresh;
  GST_OBJECT_UNLOCK(element);

  GST_CAT_INFO_OBJECT(op_cat_context, element, "created %" GST_PTR_FORMAT " for device \"%s\"",
                      fresh, spec);
  GstContext *context = gst_context_new_op_context(fresh);
  gst_element_set_context(element, context);
  gst_element_post_message(element, gst_message_new_have_context(GST_OBJECT(element), context));
  return TRUE;
}
