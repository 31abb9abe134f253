#include "op/gstopbufferpool.h"

#include <string>
#include <vector>

#include "op/gstopmemory.h"
#include "op/gstoptensor.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_buffer_pool_debug);
#define GST_CAT_DEFAULT gst_op_buffer_pool_debug

struct GstOpBufferPoolPrivate {
  bool is_video = false;
  GstVideoInfo info;         // video: format, size and the layout buffers get
  std::vector<gsize> sizes;  // bytes of each memory of a buffer
};

struct _GstOpBufferPool {
  GstBufferPool parent;
  GstOpContext *ctx;
  GstAllocator *allocator;
  GstOpBufferPoolPrivate *priv;
};

G_DEFINE_TYPE(GstOpBufferPool, gst_op_buffer_pool, GST_TYPE_BUFFER_POOL)

static const gchar **GetOptions(GstBufferPool *) {
  static const gchar *options[] = {GST_BUFFER_POOL_OPTION_VIDEO_META, nullptr};
  return options;
}

static gint RoundUp(gint v, gint to) {
  return (v + to - 1) / to * to;
}

gboolean gst_op_video_info_set_camera_layout(GstVideoInfo *info) {
  if (GST_VIDEO_INFO_FORMAT(info) != GST_VIDEO_FORMAT_NV12)
    return FALSE;
  gint stride = RoundUp(GST_VIDEO_INFO_WIDTH(info), 128);
  gint y_rows = RoundUp(GST_VIDEO_INFO_HEIGHT(info), 32);
  gint uv_rows = y_rows / 2;
  info->stride[0] = info->stride[1] = stride;
  info->offset[0] = 0;
  info->offset[1] = static_cast<gsize>(stride) * y_rows;
  info->size = info->offset[1] + static_cast<gsize>(stride) * uv_rows;
  return TRUE;
}

gboolean gst_op_video_info_same_layout(const GstVideoInfo *a, const GstVideoInfo *b) {
  if (GST_VIDEO_INFO_FORMAT(a) != GST_VIDEO_INFO_FORMAT(b) ||
      GST_VIDEO_INFO_WIDTH(a) != GST_VIDEO_INFO_WIDTH(b) ||
      GST_VIDEO_INFO_HEIGHT(a) != GST_VIDEO_INFO_HEIGHT(b))
    return FALSE;
  for (guint i = 0; i < GST_VIDEO_INFO_N_PLANES(a); i++)
    if (a->stride[i] != b->stride[i] || a->offset[i] != b->offset[i])
      return FALSE;
  return TRUE;
}

void gst_buffer_pool_config_set_op_camera_layout(GstStructure *config) {
  gst_structure_set(config, "op-camera-layout", G_TYPE_BOOLEAN, TRUE, nullptr);
}

void gst_buffer_pool_config_set_op_video_layout(GstStructure *config, const GstVideoInfo *info) {
  gst_structure_set(config, "op-layout-size", G_TYPE_UINT64, (guint64)info->size, nullptr);
  for (guint i = 0; i < GST_VIDEO_MAX_PLANES; i++) {
    std::string stride = "op-stride" + std::to_string(i), offset = "op-offset" + std::to_string(i);
    gst_structure_set(config, stride.c_str(), G_TYPE_INT, info->stride[i], offset.c_str(),
                      G_TYPE_UINT64, (guint64)info->offset[i], nullptr);
  }
}

guint gst_op_video_info_plane_rows(const GstVideoInfo *info, guint plane) {
  gint comp[GST_VIDEO_MAX_COMPONENTS];
  gst_video_format_info_component(info->finfo, plane, comp);
  return GST_VIDEO_INFO_COMP_HEIGHT(info, comp[0]);
}

gsize gst_op_video_info_plane_row_bytes(const GstVideoInfo *info, guint plane) {
  gint comp[GST_VIDEO_MAX_COMPONENTS];
  gst_video_format_info_component(info->finfo, plane, comp);
  return static_cast<gsize>(GST_VIDEO_INFO_COMP_WIDTH(info, comp[0])) *
         GST_VIDEO_INFO_COMP_PSTRIDE(info, comp[0]);
}

// Whether every plane's rows fit in `size` bytes and a row holds the plane's visible bytes.
static bool LayoutFits(const GstVideoInfo *info, gsize size) {
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(info); p++) {
    gsize rows = gst_op_video_info_plane_rows(info, p);
    gsize row_bytes = gst_op_video_info_plane_row_bytes(info, p);
    if (info->stride[p] < 0 || static_cast<gsize>(info->stride[p]) < row_bytes)
      return false;
    if (rows && info->offset[p] + info->stride[p] * (rows - 1) + row_bytes > size)
      return false;
  }
  return true;
}

gboolean gst_op_video_info_from_buffer(const GstVideoInfo *caps_info, GstBuffer *buffer,
                                       GstVideoInfo *out) {
  GstVideoInfo info = *caps_info;
  gsize size = gst_buffer_get_size(buffer);
  GstVideoMeta *meta = gst_buffer_get_video_meta(buffer);
  if (meta) {
    if (meta->format != GST_VIDEO_INFO_FORMAT(caps_info) ||
        meta->width != (guint)GST_VIDEO_INFO_WIDTH(caps_info) ||
        meta->height != (guint)GST_VIDEO_INFO_HEIGHT(caps_info) ||
        meta->n_planes != GST_VIDEO_INFO_N_PLANES(caps_info))
      return FALSE;
    for (guint p = 0; p < meta->n_planes; p++) {
      info.stride[p] = meta->stride[p];
      info.offset[p] = meta->offset[p];
    }
  }
  info.size = size;
  if (!LayoutFits(&info, size))
    return FALSE;
  *out = info;
  return TRUE;
}

// Applies an explicit layout from the config to `info`; fails if it does not fit the frame.
static bool ReadExplicitLayout(GstOpBufferPool *self, const GstStructure *config,
                               GstVideoInfo *info) {
  guint64 size = 0;
  if (!gst_structure_get_uint64(config, "op-layout-size", &size))
    return true;  // none asked
  GstVideoInfo want = *info;
  want.size = size;
  for (guint i = 0; i < GST_VIDEO_MAX_PLANES; i++) {
    std::string stride = "op-stride" + std::to_string(i), offset = "op-offset" + std::to_string(i);
    guint64 off = 0;
    if (!gst_structure_get_int(config, stride.c_str(), &want.stride[i]) ||
        !gst_structure_get_uint64(config, offset.c_str(), &off)) {
      GST_ERROR_OBJECT(self, "layout of plane %u missing from the config", i);
      return false;
    }
    want.offset[i] = off;
  }
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(info); p++) {
    // The last row of a plane must fit, and a row must hold the plane's visible bytes.
    gint comp[GST_VIDEO_MAX_COMPONENTS];
    gst_video_format_info_component(info->finfo, p, comp);
    gint rows = GST_VIDEO_INFO_COMP_HEIGHT(info, comp[0]);
    gsize row_bytes = GST_VIDEO_INFO_PLANE_STRIDE(info, p);  // packed stride >= visible bytes
    if (want.stride[p] < (gint)GST_VIDEO_INFO_COMP_WIDTH(info, comp[0]) *
                             GST_VIDEO_INFO_COMP_PSTRIDE(info, comp[0]) ||
        want.offset[p] + (gsize)want.stride[p] * (rows - 1) +
                MIN(row_bytes, (gsize)want.stride[p]) >
            want.size) {
      GST_ERROR_OBJECT(self,
                       "plane %u: stride %d, offset %" G_GSIZE_FORMAT
                       " do not fit %d rows in %" G_GSIZE_FORMAT " bytes",
                       p, want.stride[p], want.offset[p], rows, want.size);
      return false;
    }
  }
  *info = want;
  return true;
}

static gboolean SetConfig(GstBufferPool *pool, GstStructure *config) {
  auto *self = GST_OP_BUFFER_POOL(pool);
  GstOpBufferPoolPrivate *priv = self->priv;
  GstCaps *caps = nullptr;
  guint size = 0, min = 0, max = 0;
  if (!gst_buffer_pool_config_get_params(config, &caps, &size, &min, &max) || !caps) {
    GST_ERROR_OBJECT(self, "config has no caps");
    return FALSE;
  }
  const GstStructure *s = gst_caps_get_structure(caps, 0);
  priv->sizes.clear();
  if (gst_op_structure_is_tensors(s)) {
    auto info = gst_op_tensor_info_from_caps(caps);
    if (!info.ok()) {
      GST_ERROR_OBJECT(self, "tensor caps %" GST_PTR_FORMAT ": %s", caps,
                       info.status().message().c_str());
      return FALSE;
    }
    priv->is_video = false;
    for (const GstOpTensorDesc &t : info->tensors)
      priv->sizes.push_back(t.bytes());
    size = info->bytes();
  } else {
    GstVideoInfo vinfo;
    if (!gst_video_info_from_caps(&vinfo, caps)) {
      GST_ERROR_OBJECT(self, "caps %" GST_PTR_FORMAT " are neither video nor tensors", caps);
      return FALSE;
    }
    gboolean camera = FALSE;
    if (gst_structure_get_boolean(config, "op-camera-layout", &camera) && camera &&
        !gst_op_video_info_set_camera_layout(&vinfo)) {
      GST_ERROR_OBJECT(self, "the camera layout is defined for NV12 only, not %s",
                       gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&vinfo)));
      return FALSE;
    }
    if (!ReadExplicitLayout(self, config, &vinfo))
      return FALSE;
    priv->is_video = true;
    priv->info = vinfo;
    priv->sizes.push_back(vinfo.size);
    size = vinfo.size;
  }
  GST_DEBUG_OBJECT(self, "caps %" GST_PTR_FORMAT ", %u bytes per buffer in %zu memories", caps,
                   size, priv->sizes.size());
  gst_buffer_pool_config_set_params(config, caps, size, min, max);
  gst_buffer_pool_config_set_allocator(config, self->allocator, nullptr);
  return GST_BUFFER_POOL_CLASS(gst_op_buffer_pool_parent_class)->set_config(pool, config);
}

static GstFlowReturn AllocBuffer(GstBufferPool *pool, GstBuffer **out,
                                 GstBufferPoolAcquireParams *) {
  auto *self = GST_OP_BUFFER_POOL(pool);
  GstOpBufferPoolPrivate *priv = self->priv;
  GstBuffer *buffer = gst_buffer_new();
  for (gsize bytes : priv->sizes) {
    op::Status status;
    GstMemory *mem = gst_op_allocator_alloc(self->allocator, bytes, &status);
    if (!mem) {
      GST_ERROR_OBJECT(self, "allocating %" G_GSIZE_FORMAT " bytes: %s", bytes,
                       status.ToString().c_str());
      gst_buffer_unref(buffer);
      return GST_FLOW_ERROR;
    }
    gst_buffer_append_memory(buffer, mem);
  }
  if (priv->is_video) {
    GstVideoInfo info = priv->info;  // the meta API takes non-const arrays
    gst_buffer_add_video_meta_full(buffer, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&info),
                                   GST_VIDEO_INFO_WIDTH(&info), GST_VIDEO_INFO_HEIGHT(&info),
                                   GST_VIDEO_INFO_N_PLANES(&info), info.offset, info.stride);
  }
  *out = buffer;
  return GST_FLOW_OK;
}

static void gst_op_buffer_pool_finalize(GObject *object) {
  auto *self = GST_OP_BUFFER_POOL(object);
  GST_DEBUG_OBJECT(self, "finalize");
  gst_clear_object(&self->allocator);
  gst_clear_object(&self->ctx);
  delete self->priv;
  G_OBJECT_CLASS(gst_op_buffer_pool_parent_class)->finalize(object);
}

static void gst_op_buffer_pool_class_init(GstOpBufferPoolClass *klass) {
  G_OBJECT_CLASS(klass)->finalize = gst_op_buffer_pool_finalize;
  GstBufferPoolClass *pool_class = GST_BUFFER_POOL_CLASS(klass);
  pool_class->get_options = GetOptions;
  pool_class->set_config = SetConfig;
  pool_class->alloc_buffer = AllocBuffer;
  GST_DEBUG_CATEGORY_INIT(gst_op_buffer_pool_debug, "opbufferpool", 0, "OpenCL buffer pool");
}

static void gst_op_buffer_pool_init(GstOpBufferPool *self) {
  self->priv = new GstOpBufferPoolPrivate();
  gst_video_info_init(&self->priv->info);
}

GstBufferPool *gst_op_buffer_pool_new(GstOpContext *ctx) {
  g_return_val_if_fail(GST_IS_OP_CONTEXT(ctx), nullptr);
  auto *self = GST_OP_BUFFER_POOL(g_object_new(GST_TYPE_OP_BUFFER_POOL, nullptr));
  gst_object_ref_sink(self);
  self->ctx = GST_OP_CONTEXT(gst_object_ref(ctx));
  self->allocator = gst_op_allocator_new(ctx);
  return GST_BUFFER_POOL_CAST(self);
}

GstOpContext *gst_op_buffer_pool_get_context(GstBufferPool *pool) {
  g_return_val_if_fail(GST_IS_OP_BUFFER_POOL(pool), nullptr);
  return GST_OP_BUFFER_POOL(pool)->ctx;
}

gboolean gst_op_buffer_pool_is_on(GstBufferPool *pool, GstOpContext *ctx) {
  if (!pool || !ctx || !GST_IS_OP_BUFFER_POOL(pool))
    return FALSE;
  GstOpContext *own = GST_OP_BUFFER_POOL(pool)->ctx;
  return own == ctx ||
         gst_op_context_get_device(own)->context() == gst_op_context_get_device(ctx)->context();
}

gboolean gst_op_buffer_pool_get_video_info(GstBufferPool *pool, GstVideoInfo *info) {
  g_return_val_if_fail(GST_IS_OP_BUFFER_POOL(pool), FALSE);
  auto *self = GST_OP_BUFFER_POOL(pool);
  if (!self->priv->is_video)
    return FALSE;
  *info = self->priv->info;
  return TRUE;
}

// ---- the output-pool decision --------------------------------------------------------------

// A pool configured for `caps`, or null when it refuses the config; *size is what it computed.
static GstBufferPool *Configured(GstBufferPool *pool, GstCaps *caps, guint min, guint max,
                                 const GstOpPoolConfigure &configure, guint *size) {
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 0, min, max);
  if (configure)
    configure(caps, config);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    return nullptr;
  }
  config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_get_params(config, nullptr, size, nullptr, nullptr);
  gst_structure_free(config);
  return pool;
}

GstBufferPool *gst_op_buffer_pool_new_configured(GstOpContext *ctx, GstCaps *caps, guint min,
                                                 guint max, const GstOpPoolConfigure &configure,
                                                 guint *size) {
  return Configured(gst_op_buffer_pool_new(ctx), caps, min, max, configure, size);
}

gboolean gst_op_decide_output_pool(GstElement *element, GstOpContext *ctx, GstQuery *query,
                                   guint min_buffers, const GstOpPoolConfigure &configure) {
  GstCaps *caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  if (!caps || !ctx)
    return FALSE;
  const guint n = gst_query_get_n_allocation_pools(query);
  guint min = min_buffers, max = 0, size = 0;
  GstBufferPool *pool = nullptr;
  for (guint i = 0; i < n && !pool; i++) {
    GstBufferPool *candidate = nullptr;
    guint cmin = 0, cmax = 0;
    gst_query_parse_nth_allocation_pool(query, i, &candidate, nullptr, &cmin, &cmax);
    if (candidate && gst_op_buffer_pool_is_on(candidate, ctx)) {
      pool = candidate;
      min = MAX(min_buffers, cmin);
      max = cmax;
    } else if (candidate) {
      gst_object_unref(candidate);
    }
  }
  // Made at activation, before the first frame, so that frames in flight find a free buffer.
  min = MAX(min, kGstOpPoolWorkingSet);
  if (max > 0 && min > max)
    min = max;
  if (pool) {
    GST_DEBUG_OBJECT(element, "reusing downstream pool %" GST_PTR_FORMAT, pool);
    pool = Configured(pool, caps, min, max, configure, &size);
    if (!pool)
      GST_DEBUG_OBJECT(element, "downstream pool refused our config, making our own");
  }
  if (!pool)
    pool = gst_op_buffer_pool_new_configured(ctx, caps, min, max, configure, &size);
  if (!pool) {
    GST_ELEMENT_ERROR(element, RESOURCE, SETTINGS, ("Could not configure an OpenCL buffer pool"),
                      ("caps %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  if (n > 0)
    gst_query_set_nth_allocation_pool(query, 0, pool, size, min, max);
  else
    gst_query_add_allocation_pool(query, pool, size, min, max);
  gst_object_unref(pool);
  return TRUE;
}
