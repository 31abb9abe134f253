/**
 * SECTION:element-opcldownload
 *
 * Copies NV12 frames and tensor streams from OpenCL memory (`memory:OpCLMemory`) back to system
 * memory. The copy waits for the producer's event through the OpenCL wait list, and the element
 * waits for the copy itself, because downstream reads the bytes as soon as it gets the buffer.
 * Frames keep their layout (strides and plane offsets, in a GstVideoMeta) when downstream
 * accepts GstVideoMeta, and are repacked otherwise. Tensors come out as one memory per tensor.
 * Timestamps, flags and metas (GstOpFrameMeta) are kept. System-memory input passes through.
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
 */
#include "gstopcldownload.h"

#include <gst/video/video.h>

#include <vector>

#include "op/gstoperror.h"
#include "op/gstopbufferpool.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_cl_download_debug);
#define GST_CAT_DEFAULT gst_op_cl_download_debug

#define OP_CL_CAPS_STR                                                                            \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_OP_CL, "NV12")                        \
  "; " GST_VIDEO_CAPS_MAKE("NV12") "; " GST_OP_TENSOR_CAPS_NAME "(" GST_CAPS_FEATURE_MEMORY_OP_CL \
                                   "); " GST_OP_TENSOR_CAPS_NAME

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(OP_CL_CAPS_STR));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(OP_CL_CAPS_STR));

// ---- a system-memory pool with one memory per tensor ----------------------------------------

#define GST_TYPE_OP_TENSOR_HOST_POOL (gst_op_tensor_host_pool_get_type())
G_DECLARE_FINAL_TYPE(GstOpTensorHostPool, gst_op_tensor_host_pool, GST, OP_TENSOR_HOST_POOL,
                     GstBufferPool)

struct _GstOpTensorHostPool {
  GstBufferPool parent;
  std::vector<gsize> *sizes;
};

G_DEFINE_TYPE(GstOpTensorHostPool, gst_op_tensor_host_pool, GST_TYPE_BUFFER_POOL)

static GstFlowReturn TensorPoolAlloc(GstBufferPool *pool, GstBuffer **out,
                                     GstBufferPoolAcquireParams *) {
  auto *self = GST_OP_TENSOR_HOST_POOL(pool);
  GstBuffer *buffer = gst_buffer_new();
  for (gsize bytes : *self->sizes)
    gst_buffer_append_memory(buffer, gst_allocator_alloc(nullptr, bytes, nullptr));
  *out = buffer;
  return GST_FLOW_OK;
}

static void TensorPoolFinalize(GObject *object) {
  delete GST_OP_TENSOR_HOST_POOL(object)->sizes;
  G_OBJECT_CLASS(gst_op_tensor_host_pool_parent_class)->finalize(object);
}

static void gst_op_tensor_host_pool_class_init(GstOpTensorHostPoolClass *klass) {
  G_OBJECT_CLASS(klass)->finalize = TensorPoolFinalize;
  GST_BUFFER_POOL_CLASS(klass)->alloc_buffer = TensorPoolAlloc;
}

static void gst_op_tensor_host_pool_init(GstOpTensorHostPool *self) {
  self->sizes = new std::vector<gsize>();
}

// ---- the element --------------------------------------------------------------------------

namespace {
struct Impl {
  bool is_video = false;
  GstVideoInfo caps_info;
  GstOpTensorInfo tensors;
  bool downstream_video_meta = false;  // downstream reads strides from GstVideoMeta
  GstBufferPool *pool = nullptr;       // system-memory output buffers
  GstVideoInfo pool_layout;            // video: the layout of the pool's buffers
};
}  // namespace

struct _GstOpClDownload {
  GstOpBaseFilter parent;
  Impl *impl;
};

G_DEFINE_TYPE(GstOpClDownload, gst_op_cl_download, GST_TYPE_OP_BASE_FILTER)
GST_ELEMENT_REGISTER_DEFINE(opcldownload, "opcldownload", GST_RANK_NONE, GST_TYPE_OP_CL_DOWNLOAD)

// Download offers system memory first and OpenCL memory (passthrough) after it; upstream may
// give OpenCL memory for any output, system memory only for system output.
static GstCaps *TransformCaps(GstBaseTransform *trans, GstPadDirection direction, GstCaps *caps,
                              GstCaps *filter) {
  GstCaps *out;
  if (direction == GST_PAD_SINK) {
    out = gst_op_caps_converted(trans, caps, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY);
  } else {
    GstCaps *op, *sys;
    gst_op_caps_split_by_memory(caps, &op, &sys);
    out = gst_op_caps_with_both_memories(sys);
    gst_caps_unref(sys);
    out = gst_caps_merge(out, op);
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

static void DropPool(Impl &st) {
  if (st.pool)
    gst_buffer_pool_set_active(st.pool, FALSE);
  gst_clear_object(&st.pool);
}

static gboolean SetCaps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  auto *self = GST_OP_CL_DOWNLOAD(trans);
  Impl &st = *self->impl;
  DropPool(st);
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
  gst_base_transform_set_passthrough(trans, gst_caps_is_equal(incaps, outcaps));
  return TRUE;
}

static gboolean DecideAllocation(GstBaseTransform *trans, GstQuery *query) {
  auto *self = GST_OP_CL_DOWNLOAD(trans);
  GstCaps *caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  if (gst_op_caps_is_op_memory(caps))  // passthrough of OpenCL memory
    return GST_BASE_TRANSFORM_CLASS(gst_op_cl_download_parent_class)
        ->decide_allocation(trans, query);
  self->impl->downstream_video_meta =
      gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  // Output buffers come from our own pool, laid out like the input; a downstream pool could
  // only give the packed layout.
  while (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_remove_nth_allocation_pool(query, 0);
  GST_DEBUG_OBJECT(self, "downstream %s GstVideoMeta",
                   self->impl->downstream_video_meta ? "accepts" : "does not accept");
  return TRUE;
}

static GstBufferPool *MakePool(GstOpClDownload *self, gsize size) {
  Impl &st = *self->impl;
  GstBufferPool *pool;
  if (st.is_video) {
    pool = gst_buffer_pool_new();
  } else {
    pool = GST_BUFFER_POOL(g_object_new(GST_TYPE_OP_TENSOR_HOST_POOL, nullptr));
    gst_object_ref_sink(pool);
    for (const GstOpTensorDesc &t : st.tensors.tensors)
      GST_OP_TENSOR_HOST_POOL(pool)->sizes->push_back(t.bytes());
  }
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, nullptr, size, 2, 0);
  if (!gst_buffer_pool_set_config(pool, config) || !gst_buffer_pool_set_active(pool, TRUE)) {
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}

static GstFlowReturn PrepareOutputBuffer(GstBaseTransform *trans, GstBuffer *inbuf,
                                         GstBuffer **outbuf) {
  auto *self = GST_OP_CL_DOWNLOAD(trans);
  Impl &st = *self->impl;
  if (gst_base_transform_is_passthrough(trans)) {
    *outbuf = inbuf;
    return GST_FLOW_OK;
  }
  if (st.is_video) {
    GstVideoInfo layout;
    if (!gst_op_video_info_from_buffer(&st.caps_info, inbuf, &layout)) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Input frame does not match its caps"),
                        ("%" G_GSIZE_FORMAT " bytes or its video meta do not fit %dx%d %s",
                         gst_buffer_get_size(inbuf), GST_VIDEO_INFO_WIDTH(&st.caps_info),
                         GST_VIDEO_INFO_HEIGHT(&st.caps_info), GST_VIDEO_INFO_NAME(&st.caps_info)));
      return GST_FLOW_ERROR;
    }
    if (!st.downstream_video_meta)
      layout = st.caps_info;  // repack
    if (!st.pool || !gst_op_video_info_same_layout(&st.pool_layout, &layout) ||
        st.pool_layout.size != layout.size) {
      DropPool(st);
      st.pool = MakePool(self, layout.size);
      st.pool_layout = layout;
    }
  } else if (!st.pool) {
    st.pool = MakePool(self, st.tensors.bytes());
  }
  if (!st.pool) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Could not make a system-memory pool"), (nullptr));
    return GST_FLOW_ERROR;
  }
  GstFlowReturn ret = gst_buffer_pool_acquire_buffer(st.pool, outbuf, nullptr);
  if (ret != GST_FLOW_OK)
    return ret;
  if (st.is_video && !gst_buffer_get_video_meta(*outbuf)) {
    GstVideoInfo &l = st.pool_layout;
    GstVideoMeta *meta = gst_buffer_add_video_meta_full(
        *outbuf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&l), GST_VIDEO_INFO_WIDTH(&l),
        GST_VIDEO_INFO_HEIGHT(&l), GST_VIDEO_INFO_N_PLANES(&l), l.offset, l.stride);
    // Stays with the pooled buffer, whose layout never changes.
    meta->meta.flags = (GstMetaFlags)(meta->meta.flags | GST_META_FLAG_POOLED);
  }
  GST_BASE_TRANSFORM_GET_CLASS(trans)->copy_metadata(trans, inbuf, *outbuf);
  return GST_FLOW_OK;
}

static GstFlowReturn Fail(GstOpClDownload *self, const op::Status &status) {
  GST_OP_ELEMENT_ERROR_STATUS(self, status, RESOURCE, READ,
                              ("Could not download from the OpenCL device"));
  return GST_FLOW_ERROR;
}

// The cl_mem and byte offset of memory `idx` of `buffer`, which must be ours.
static op::Status DeviceRegion(GstBuffer *buffer, guint idx, cl_mem *mem, gsize *offset) {
  GstMemory *m = gst_buffer_peek_memory(buffer, idx);
  GstMapInfo info;
  if (!gst_op_memory_map_cl(m, &info, GST_MAP_READ))
    return op::InvalidArgument("input memory " + std::to_string(idx) +
                               " is not OpenCL memory although the caps say so");
  *mem = gst_op_map_info_get_cl_mem(&info);
  *offset = m->offset;
  gst_memory_unmap(m, &info);
  return op::Status::Ok();
}

static op::StatusOr<op::cl::EventHandle> EnqueueReads(GstOpClDownload *self, op::cl::Queue &queue,
                                                      GstBuffer *inbuf, GstBuffer *outbuf,
                                                      std::vector<GstMapInfo> &maps) {
  Impl &st = *self->impl;
  op::cl::EventList wait;
  if (!gst_op_buffer_add_write_events(inbuf, &wait))
    return op::Internal("too many producer events to wait for");
  op::cl::EventHandle last;
  if (st.is_video) {
    if (gst_buffer_n_memory(inbuf) != 1)
      return op::InvalidArgument("an OpenCL frame must be one memory, not " +
                                 std::to_string(gst_buffer_n_memory(inbuf)));
    cl_mem mem;
    gsize base;
    OP_RETURN_IF_ERROR(DeviceRegion(inbuf, 0, &mem, &base));
    GstVideoInfo in_layout, out_layout;
    gst_op_video_info_from_buffer(&st.caps_info, inbuf, &in_layout);
    gst_op_video_info_from_buffer(&st.caps_info, outbuf, &out_layout);
    GstMapInfo out;
    if (!gst_buffer_map(outbuf, &out, GST_MAP_WRITE))
      return op::IoError("could not map the output buffer");
    maps.push_back(out);
    if (gst_op_video_info_same_layout(&in_layout, &out_layout)) {
      OP_ASSIGN_OR_RETURN(
          last, queue.Read(mem, base, MIN(in_layout.size, out_layout.size), out.data, wait));
    } else {
      for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&in_layout); p++) {
        OP_ASSIGN_OR_RETURN(last,
                            queue.ReadRect(mem, base + in_layout.offset[p], in_layout.stride[p],
                                           out.data + out_layout.offset[p], out_layout.stride[p],
                                           gst_op_video_info_plane_row_bytes(&in_layout, p),
                                           gst_op_video_info_plane_rows(&in_layout, p), wait));
      }
    }
    return last;
  }
  size_t n = st.tensors.tensors.size();
  if (gst_buffer_n_memory(inbuf) != n)
    return op::InvalidArgument("the input has " + std::to_string(gst_buffer_n_memory(inbuf)) +
                               " memories for " + std::to_string(n) + " tensors");
  for (size_t i = 0; i < n; i++) {
    gsize bytes = st.tensors.tensors[i].bytes();
    if (gst_buffer_peek_memory(inbuf, i)->size < bytes)
      return op::InvalidArgument("tensor \"" + st.tensors.tensors[i].name + "\" has " +
                                 std::to_string(gst_buffer_peek_memory(inbuf, i)->size) +
                                 " bytes, the caps say " + std::to_string(bytes));
    cl_mem mem;
    gsize base;
    OP_RETURN_IF_ERROR(DeviceRegion(inbuf, i, &mem, &base));
    GstMapInfo out;
    if (!gst_buffer_map_range(outbuf, i, 1, &out, GST_MAP_WRITE))
      return op::IoError("could not map output tensor " + std::to_string(i));
    maps.push_back(out);
    OP_ASSIGN_OR_RETURN(last, queue.Read(mem, base, bytes, out.data, wait));
  }
  return last;
}

static GstFlowReturn Transform(GstBaseTransform *trans, GstBuffer *inbuf, GstBuffer *outbuf) {
  auto *self = GST_OP_CL_DOWNLOAD(trans);
  GstOpContext *ctx = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(self));
  op::cl::Queue &queue = gst_op_context_get_queue(ctx);
  std::vector<GstMapInfo> maps;
  auto last = EnqueueReads(self, queue, inbuf, outbuf, maps);
  // The one host wait of the element: downstream reads these bytes as soon as it has the
  // buffer, so they must be there. (On an in-order queue the last read implies the others.)
  op::Status done = last.ok() ? op::cl::WaitForEvent(last->get()) : last.status();
  if (!done.ok())
    (void)queue.Finish();  // no read may still target the output
  for (GstMapInfo &map : maps)
    gst_buffer_unmap(outbuf, &map);
  if (!done.ok())
    return Fail(self, done);
  return GST_FLOW_OK;
}

static void Close(GstOpBaseFilter *base) {
  DropPool(*GST_OP_CL_DOWNLOAD(base)->impl);
}

static void Finalize(GObject *object) {
  auto *self = GST_OP_CL_DOWNLOAD(object);
  DropPool(*self->impl);
  delete self->impl;
  G_OBJECT_CLASS(gst_op_cl_download_parent_class)->finalize(object);
}

static void gst_op_cl_download_class_init(GstOpClDownloadClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstOpBaseFilterClass *filter_class = GST_OP_BASE_FILTER_CLASS(klass);

  gobject_class->finalize = Finalize;
  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "OpenCL downloader", "Filter/Video/Downloader",
      "Copies NV12 frames and tensors from OpenCL memory back to system memory",
      "gst-op developers");

  trans_class->passthrough_on_same_caps = TRUE;
  trans_class->transform_caps = TransformCaps;
  trans_class->set_caps = SetCaps;
  trans_class->decide_allocation = DecideAllocation;
  trans_class->prepare_output_buffer = PrepareOutputBuffer;
  trans_class->transform = Transform;
  filter_class->close = Close;

  GST_DEBUG_CATEGORY_INIT(gst_op_cl_download_debug, "opcldownload", 0, "OpenCL download");
}

static void gst_op_cl_download_init(GstOpClDownload *self) {
  self->impl = new Impl();
  gst_video_info_init(&self->impl->caps_info);
  gst_video_info_init(&self->impl->pool_layout);
}
