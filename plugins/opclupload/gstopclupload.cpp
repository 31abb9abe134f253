/**
 * SECTION:element-opclupload
 *
 * Copies system-memory NV12 frames and tensor streams into OpenCL memory
 * (`memory:OpCLMemory`), once, keeping the frame layout: a camera-style padded frame (stride
 * 2048, UV plane at 2,490,368 for 1928×1208) stays padded, a packed one stays packed. The copy
 * is enqueued on the pipeline's shared OpenCL queue; the output buffer carries its event, and
 * the input buffer is released when the device has read it, so the streaming thread does not
 * wait for the transfer. Timestamps, flags and metas (GstOpFrameMeta) are kept. Input that is
 * already in OpenCL memory passes through.
 *
 * NV12 in `memory:DMABuf` (a GstVideoMeta is required) is imported zero-copy when the device has
 * cl_qcom_dmabuf_host_ptr, cl_khr_external_memory_dma_buf or cl_arm_import_memory (each camera
 * buffer once); otherwise it is uploaded like system memory, with one warning. On discrete GPUs
 * uploads go through pinned staging buffers (docs/memory-and-sync.md).
 *
 * ## Example
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=30 ! \
 *     video/x-raw,format=NV12,width=1928,height=1208 ! opclupload ! opcldownload ! fakesink
 * ]|
 *
 * ## Properties
 * - `device` (string, default "auto"): the OpenCL device; see docs/devices.md. Elements of one
 *   pipeline with agreeing device strings share one context.
 * - `force-staging` (boolean, default false; debug only): upload through the pinned staging
 *   buffers of discrete GPUs even on a unified-memory device, to test that path on PoCL.
 * - `stats` (GstStructure, read-only): uploads, staged-uploads, imported-frames, dmabuf-imports,
 *   staging-buffers, staging-waits, fallback-warnings (since the element started).
 */
#include "gstopclupload.h"

#include <gst/video/video.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "op/gstoperror.h"
#include "op/gstopbufferpool.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"
#include "op/gstopupload.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_cl_upload_debug);
#define GST_CAT_DEFAULT gst_op_cl_upload_debug

// OpenCL memory first, then system memory, then DMABuf (imported or uploaded; passed through
// when downstream takes it).
#define OP_CL_CAPS_STR                                                             \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_OP_CL, "NV12")         \
  "; " GST_VIDEO_CAPS_MAKE("NV12") "; " GST_VIDEO_CAPS_MAKE_WITH_FEATURES(         \
      GST_OP_CAPS_FEATURE_MEMORY_DMABUF, "NV12") "; " GST_OP_TENSOR_CAPS_NAME      \
                                                 "(" GST_CAPS_FEATURE_MEMORY_OP_CL \
                                                 "); " GST_OP_TENSOR_CAPS_NAME

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(OP_CL_CAPS_STR));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(OP_CL_CAPS_STR));

namespace {
struct Impl {
  // Negotiated input.
  bool is_video = false;
  bool dmabuf = false;  // memory:DMABuf video
  GstVideoInfo caps_info;
  GstOpTensorInfo tensors;
  // The pool output frames come from, laid out like the input (replaced when it changes).
  GstBufferPool *pool = nullptr;

  // Imports and uploads, made per caps (set_caps) and dropped in stop().
  // Guards uploader, stats and force_staging. Recursive: a bus sync handler may read `stats`
  // on the streaming thread while the uploader posts its warning.
  std::recursive_mutex uploader_lock;
  std::unique_ptr<GstOpUploader> uploader;
  GstOpUploadStats stats;  // what earlier uploaders of this run did
  bool force_staging = false;
  bool imported = false;  // the current output buffer is the imported input: nothing to copy
  std::vector<GstOpUploader::Region> regions;  // the current buffer's writes (streaming thread)
};
}  // namespace

struct _GstOpClUpload {
  GstOpBaseFilter parent;
  Impl *impl;
};

enum { PROP_0, PROP_FORCE_STAGING, PROP_STATS };

G_DEFINE_TYPE(GstOpClUpload, gst_op_cl_upload, GST_TYPE_OP_BASE_FILTER)
GST_ELEMENT_REGISTER_DEFINE(opclupload, "opclupload", GST_RANK_NONE, GST_TYPE_OP_CL_UPLOAD)

// Upload keeps OpenCL memory when it already has it (passthrough) and otherwise offers
// OpenCL memory first; downstream asking for system memory gets the input unchanged.
static GstCaps *TransformCaps(GstBaseTransform *trans, GstPadDirection direction, GstCaps *caps,
                              GstCaps *filter) {
  GstCaps *out;
  if (direction == GST_PAD_SINK) {
    out = gst_op_caps_converted(trans, caps, GST_CAPS_FEATURE_MEMORY_OP_CL);
  } else {
    // What upstream may give for this output: OpenCL output comes from either memory.
    GstCaps *op, *sys;
    gst_op_caps_split_by_memory(caps, &op, &sys);
    out = gst_op_caps_with_both_memories(op);
    // Video frames may also come as DMABuf (after both, as the conventions order them).
    GstCaps *video = gst_caps_new_empty();
    for (guint i = 0; i < gst_caps_get_size(op); i++)
      if (gst_structure_has_name(gst_caps_get_structure(op, i), "video/x-raw"))
        video = gst_caps_merge(video, gst_caps_copy_nth(op, i));
    out = gst_caps_merge(out, gst_op_caps_with_feature(video, GST_OP_CAPS_FEATURE_MEMORY_DMABUF));
    gst_caps_unref(video);
    gst_caps_unref(op);
    out = gst_caps_merge(out, sys);
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

static void AddStats(GstOpUploadStats &sum, const GstOpUploadStats &s) {
  sum.uploads += s.uploads;
  sum.staged_uploads += s.staged_uploads;
  sum.imported_frames += s.imported_frames;
  sum.dmabuf_imports += s.dmabuf_imports;
  sum.staging_buffers += s.staging_buffers;
  sum.staging_waits += s.staging_waits;
  sum.fallback_warnings += s.fallback_warnings;
}

static gboolean SetCaps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  auto *self = GST_OP_CL_UPLOAD(trans);
  Impl &st = *self->impl;
  const GstStructure *s = gst_caps_get_structure(incaps, 0);
  if (gst_op_structure_is_tensors(s)) {
    auto info = gst_op_tensor_info_from_caps(incaps);
    if (!info.ok()) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Malformed tensor caps"),
                        ("%s", info.status().message().c_str()));
      return FALSE;
    }
    st.is_video = false;
    st.tensors = std::move(info).value();
  } else {
    if (!gst_video_info_from_caps(&st.caps_info, incaps)) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Unusable video caps"),
                        ("%" GST_PTR_FORMAT, incaps));
      return FALSE;
    }
    st.is_video = true;
  }
  st.dmabuf = st.is_video && gst_op_caps_is_dmabuf(incaps);
  {
    // Per caps: a new uploader (the old one waits for its staging writes as it goes).
    std::lock_guard<std::recursive_mutex> guard(st.uploader_lock);
    if (st.uploader)
      AddStats(st.stats, st.uploader->stats());
    st.uploader = std::make_unique<GstOpUploader>(
        GST_ELEMENT(self), gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self)),
        st.force_staging);
    if (st.stats.fallback_warnings > 0)
      st.uploader->MarkFallbackWarned();  // said once per run, not once per caps
  }
  gst_base_transform_set_passthrough(trans, gst_caps_is_equal(incaps, outcaps));
  GST_DEBUG_OBJECT(self, "%s, passthrough %d", st.is_video ? "video" : "tensors",
                   gst_caps_is_equal(incaps, outcaps));
  return TRUE;
}

static void ReplacePool(Impl &st, GstBufferPool *pool) {
  if (st.pool && st.pool != pool)
    gst_buffer_pool_set_active(st.pool, FALSE);
  gst_clear_object(&st.pool);
  st.pool = pool;
}

static gboolean DecideAllocation(GstBaseTransform *trans, GstQuery *query) {
  auto *self = GST_OP_CL_UPLOAD(trans);
  if (!GST_BASE_TRANSFORM_CLASS(gst_op_cl_upload_parent_class)->decide_allocation(trans, query))
    return FALSE;
  GstBufferPool *pool = nullptr;
  if (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_parse_nth_allocation_pool(query, 0, &pool, nullptr, nullptr, nullptr);
  ReplacePool(*self->impl, pool);  // GstBaseTransform activates it
  return TRUE;
}

// A pool of ours laid out like `layout`, active. NULL after an element error.
static GstBufferPool *PoolForLayout(GstOpClUpload *self, const GstVideoInfo &layout) {
  GstOpContext *ctx = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self));
  GstBufferPool *pool = gst_op_buffer_pool_new(ctx);
  GstCaps *caps = gst_video_info_to_caps(&layout);
  gst_caps_set_features_simple(caps, gst_caps_features_new(GST_CAPS_FEATURE_MEMORY_OP_CL, nullptr));
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, layout.size, 2, 0);
  gst_buffer_pool_config_set_op_video_layout(config, &layout);
  gst_caps_unref(caps);
  if (!gst_buffer_pool_set_config(pool, config) || !gst_buffer_pool_set_active(pool, TRUE)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Could not make an OpenCL pool for the input"),
                      ("stride %d/%d, UV offset %" G_GSIZE_FORMAT ", %" G_GSIZE_FORMAT " bytes",
                       layout.stride[0], layout.stride[1], layout.offset[1], layout.size));
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}

static GstFlowReturn PrepareOutputBuffer(GstBaseTransform *trans, GstBuffer *inbuf,
                                         GstBuffer **outbuf) {
  auto *self = GST_OP_CL_UPLOAD(trans);
  Impl &st = *self->impl;
  if (gst_base_transform_is_passthrough(trans)) {
    *outbuf = inbuf;
    return GST_FLOW_OK;
  }
  st.imported = false;
  if (st.is_video) {
    if (st.dmabuf && !gst_buffer_get_video_meta(inbuf)) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("DMABuf frame without a GstVideoMeta"),
                        ("strides and plane offsets of DMABuf input must come in a GstVideoMeta"));
      return GST_FLOW_ERROR;
    }
    GstVideoInfo layout;
    if (!gst_op_video_info_from_buffer(&st.caps_info, inbuf, &layout)) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Input frame does not match its caps"),
                        ("%" G_GSIZE_FORMAT " bytes or its video meta do not fit %dx%d %s",
                         gst_buffer_get_size(inbuf), GST_VIDEO_INFO_WIDTH(&st.caps_info),
                         GST_VIDEO_INFO_HEIGHT(&st.caps_info), GST_VIDEO_INFO_NAME(&st.caps_info)));
      return GST_FLOW_ERROR;
    }
    if (st.dmabuf) {
      std::lock_guard<std::recursive_mutex> guard(st.uploader_lock);
      auto imported = st.uploader->Import(inbuf, layout);
      if (!imported.ok()) {
        GST_OP_ELEMENT_ERROR_STATUS(self, imported.status(), RESOURCE, READ,
                                    ("Could not import a DMABuf frame"));
        return GST_FLOW_ERROR;
      }
      if (*imported) {
        *outbuf = *imported;
        st.imported = true;
        GST_BASE_TRANSFORM_GET_CLASS(trans)->copy_metadata(trans, inbuf, *outbuf);
        return GST_FLOW_OK;
      }
    }
    GstVideoInfo have;
    bool fits = st.pool && GST_IS_OP_BUFFER_POOL(st.pool) &&
                gst_op_buffer_pool_get_video_info(st.pool, &have) &&
                gst_op_video_info_same_layout(&have, &layout) && have.size >= layout.size;
    if (!fits) {
      // Happens once per layout (the first frame, or a source that changes its padding).
      GST_INFO_OBJECT(self, "input layout: strides %d/%d, UV offset %" G_GSIZE_FORMAT,
                      layout.stride[0], layout.stride[1], layout.offset[1]);
      GstBufferPool *pool = PoolForLayout(self, layout);
      if (!pool)
        return GST_FLOW_ERROR;
      ReplacePool(st, pool);
    }
  } else if (!st.pool) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("No buffer pool was negotiated"), (nullptr));
    return GST_FLOW_ERROR;
  }
  // GstBaseTransform activates the negotiated pool lazily, in its own prepare_output_buffer.
  if (!gst_buffer_pool_is_active(st.pool) && !gst_buffer_pool_set_active(st.pool, TRUE)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Could not activate the OpenCL buffer pool"),
                      (nullptr));
    return GST_FLOW_ERROR;
  }
  GstFlowReturn ret = gst_buffer_pool_acquire_buffer(st.pool, outbuf, nullptr);
  if (ret != GST_FLOW_OK)
    return ret;
  GST_BASE_TRANSFORM_GET_CLASS(trans)->copy_metadata(trans, inbuf, *outbuf);
  return GST_FLOW_OK;
}

static GstFlowReturn Fail(GstOpClUpload *self, const op::Status &status, const char *what) {
  GST_OP_ELEMENT_ERROR_STATUS(self, status, RESOURCE, WRITE,
                              ("Could not upload the %s to the OpenCL device", what));
  return GST_FLOW_ERROR;
}

// Enqueues the copies of `source`'s mapped input into `outbuf` through the uploader, which
// keeps the input until the device has read it; returns the last event.
static op::StatusOr<op::cl::EventHandle> EnqueueCopies(GstOpClUpload *self, GstBuffer *outbuf,
                                                       std::unique_ptr<GstOpUploadSource> source) {
  const GstOpUploadSource &pending = *source;
  Impl &st = *self->impl;
  op::cl::EventList wait;
  gst_op_buffer_add_write_events(outbuf, &wait);
  // One region per plane or tensor, in a vector that keeps its capacity between frames.
  std::vector<GstOpUploader::Region> &regions = st.regions;
  regions.clear();
  if (st.is_video) {
    GstVideoInfo in_layout, out_layout;
    gst_op_video_info_from_buffer(&st.caps_info, pending.buffer, &in_layout);
    if (!gst_op_video_info_from_buffer(&st.caps_info, outbuf, &out_layout))
      return op::Internal("the output buffer does not fit the caps");
    GstMapInfo dst;
    if (!gst_op_memory_map_cl(gst_buffer_peek_memory(outbuf, 0), &dst, GST_MAP_WRITE))
      return op::Internal("the output buffer is not OpenCL memory");
    cl_mem mem = gst_op_map_info_get_cl_mem(&dst);
    gsize base = gst_buffer_peek_memory(outbuf, 0)->offset;
    gst_memory_unmap(gst_buffer_peek_memory(outbuf, 0), &dst);
    const guint8 *src = pending.maps[0].data;
    if (gst_op_video_info_same_layout(&in_layout, &out_layout)) {
      // The same layout: one linear copy of the whole frame, padding included.
      GstOpUploader::Region r;
      r.dst = mem;
      r.dst_offset = base;
      r.src = src;
      r.bytes = MIN(in_layout.size, out_layout.size);
      regions.push_back(r);
    } else {
      for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&in_layout); p++) {
        GstOpUploader::Region r;
        r.dst = mem;
        r.dst_offset = base + out_layout.offset[p];
        r.dst_pitch = out_layout.stride[p];
        r.src = src + in_layout.offset[p];
        r.src_pitch = in_layout.stride[p];
        r.row_bytes = gst_op_video_info_plane_row_bytes(&in_layout, p);
        r.rows = gst_op_video_info_plane_rows(&in_layout, p);
        regions.push_back(r);
      }
    }
  } else {
    // Tensors: pending.maps holds either one map per tensor or one map of everything.
    gsize offset = 0;
    for (size_t i = 0; i < st.tensors.tensors.size(); i++) {
      gsize bytes = st.tensors.tensors[i].bytes();
      const guint8 *src =
          pending.maps.size() == 1 ? pending.maps[0].data + offset : pending.maps[i].data;
      offset += bytes;
      GstMemory *out_mem = gst_buffer_peek_memory(outbuf, i);
      GstMapInfo dst;
      if (!gst_op_memory_map_cl(out_mem, &dst, GST_MAP_WRITE))
        return op::Internal("output tensor " + std::to_string(i) + " is not OpenCL memory");
      GstOpUploader::Region r;
      r.dst = gst_op_map_info_get_cl_mem(&dst);
      r.dst_offset = out_mem->offset;
      r.src = src;
      r.bytes = bytes;
      gst_memory_unmap(out_mem, &dst);
      regions.push_back(r);
    }
  }
  std::lock_guard<std::recursive_mutex> guard(st.uploader_lock);
  if (!st.uploader)
    return op::Internal("no caps were set before the first buffer");
  return st.uploader->Write(regions, wait, std::move(source));
}

// Maps the input for reading into `source`; checks its size against the caps.
static op::Status MapInput(GstOpClUpload *self, GstBuffer *inbuf, GstOpUploadSource &source) {
  Impl &st = *self->impl;
  auto map_range = [&](guint idx, gint length) { return source.MapRange(idx, length); };
  // A frame in several memories is merged by the map (GstVideoMeta offsets are buffer offsets).
  if (st.is_video)
    return map_range(0, -1);
  guint n = gst_buffer_n_memory(inbuf);
  size_t tensors = st.tensors.tensors.size();
  bool per_tensor = n == tensors;
  for (guint i = 0; per_tensor && i < n; i++)
    per_tensor = gst_buffer_peek_memory(inbuf, i)->size == st.tensors.tensors[i].bytes();
  if (!per_tensor) {
    // Also accepted: all tensors back to back, however the memories split them.
    if (gst_buffer_get_size(inbuf) != st.tensors.bytes())
      return op::InvalidArgument(
          "the input buffer has " + std::to_string(gst_buffer_get_size(inbuf)) + " bytes in " +
          std::to_string(n) + " memories; the caps say " + std::to_string(st.tensors.bytes()) +
          " bytes in " + std::to_string(tensors) + " tensors");
    return map_range(0, -1);
  }
  for (guint i = 0; i < n; i++)
    OP_RETURN_IF_ERROR(map_range(i, 1));
  return op::Status::Ok();
}

static GstFlowReturn Transform(GstBaseTransform *trans, GstBuffer *inbuf, GstBuffer *outbuf) {
  auto *self = GST_OP_CL_UPLOAD(trans);
  Impl &st = *self->impl;
  if (st.imported) {
    st.imported = false;  // prepare_output_buffer made outbuf from the input itself
    return GST_FLOW_OK;
  }
  GstOpContext *ctx = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self));
  op::cl::Queue &queue = gst_op_context_get_queue(ctx);
  auto source = std::make_unique<GstOpUploadSource>(inbuf);
  op::Status mapped = MapInput(self, inbuf, *source);
  if (!mapped.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, mapped, STREAM, FORMAT,
                                ("Input buffer does not match its caps"));
    return GST_FLOW_ERROR;
  }
  auto last = EnqueueCopies(self, outbuf, std::move(source));
  op::Status flushed = last.ok() ? queue.Flush() : last.status();
  if (!flushed.ok())
    return Fail(self, flushed, st.is_video ? "frame" : "tensors");
  gst_op_buffer_set_write_event(outbuf, last->get());
  return GST_FLOW_OK;
}

// Dropping the uploader waits until the device has released every input buffer.
static void Close(GstOpBaseFilter *base) {
  auto *self = GST_OP_CL_UPLOAD(base);
  Impl &st = *self->impl;
  GstOpContext *ctx = gst_op_base_filter_get_context(base);
  if (ctx)
    (void)gst_op_context_get_queue(ctx).Finish();
  {
    std::lock_guard<std::recursive_mutex> uploader_guard(st.uploader_lock);
    if (st.uploader)
      AddStats(st.stats, st.uploader->stats());
    st.uploader.reset();
  }
  ReplacePool(st, nullptr);
}

// Counting starts again with each run.
static gboolean Open(GstOpBaseFilter *base, GstOpContext *) {
  Impl &st = *GST_OP_CL_UPLOAD(base)->impl;
  std::lock_guard<std::recursive_mutex> guard(st.uploader_lock);
  st.stats = GstOpUploadStats();
  return TRUE;
}

static void SetProperty(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  Impl &st = *GST_OP_CL_UPLOAD(object)->impl;
  switch (prop_id) {
    case PROP_FORCE_STAGING: {
      std::lock_guard<std::recursive_mutex> guard(st.uploader_lock);
      st.force_staging = g_value_get_boolean(value);
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void GetProperty(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec) {
  Impl &st = *GST_OP_CL_UPLOAD(object)->impl;
  std::lock_guard<std::recursive_mutex> guard(st.uploader_lock);
  switch (prop_id) {
    case PROP_FORCE_STAGING:
      g_value_set_boolean(value, st.force_staging);
      break;
    case PROP_STATS: {
      GstOpUploadStats sum = st.stats;
      if (st.uploader)
        AddStats(sum, st.uploader->stats());
      g_value_take_boxed(value, gst_op_upload_stats_to_structure(sum));
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void Finalize(GObject *object) {
  auto *self = GST_OP_CL_UPLOAD(object);
  gst_clear_object(&self->impl->pool);
  delete self->impl;
  G_OBJECT_CLASS(gst_op_cl_upload_parent_class)->finalize(object);
}

static void gst_op_cl_upload_class_init(GstOpClUploadClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstOpBaseFilterClass *filter_class = GST_OP_BASE_FILTER_CLASS(klass);

  gobject_class->finalize = Finalize;
  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  g_object_class_install_property(
      gobject_class, PROP_FORCE_STAGING,
      g_param_spec_boolean(
          "force-staging", "Force staging (debug)",
          "Debug only: upload through pinned staging buffers, as on discrete GPUs, even when the "
          "device shares memory with the host (tests that path on PoCL)",
          FALSE,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "Uploads, staged uploads, imported DMABuf frames, dmabuf imports, "
                         "staging buffers created, waits for a staging slot and fallback "
                         "warnings since the element started",
                         GST_TYPE_STRUCTURE,
                         (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));
  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "OpenCL uploader", "Filter/Video/Uploader",
      "Copies NV12 frames and tensors from system memory into OpenCL memory, keeping their layout",
      "gst-op developers");

  trans_class->passthrough_on_same_caps = TRUE;
  trans_class->transform_caps = TransformCaps;
  trans_class->set_caps = SetCaps;
  trans_class->decide_allocation = DecideAllocation;
  trans_class->prepare_output_buffer = PrepareOutputBuffer;
  trans_class->transform = Transform;
  filter_class->open = Open;
  filter_class->close = Close;

  GST_DEBUG_CATEGORY_INIT(gst_op_cl_upload_debug, "opclupload", 0, "OpenCL upload");
}

static void gst_op_cl_upload_init(GstOpClUpload *self) {
  self->impl = new Impl();
  gst_video_info_init(&self->impl->caps_info);
}
