// GstOpBufferPool: buffers of GstOpMemory for one GstOpContext.
//
// Video caps (video/x-raw, NV12 and the other single-buffer formats GstVideoInfo knows): one
// memory per frame holding every plane, with a GstVideoMeta carrying strides and plane offsets.
// The layout is GstVideoInfo's packed one unless the config says otherwise:
//   gst_buffer_pool_config_set_op_camera_layout()  stride = width rounded up to 128, Y height
//                                                  rounded up to 32 (openpilot's camera layout)
//   gst_buffer_pool_config_set_op_video_layout()   any explicit strides and offsets
// Tensor caps (application/x-op-tensors): one memory per tensor, in caps order.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <functional>

#include "op/gstopcontext.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_BUFFER_POOL (gst_op_buffer_pool_get_type())
G_DECLARE_FINAL_TYPE(GstOpBufferPool, gst_op_buffer_pool, GST, OP_BUFFER_POOL, GstBufferPool)

G_END_DECLS

// A pool allocating on `ctx`. (transfer full)
GstBufferPool *gst_op_buffer_pool_new(GstOpContext *ctx);
GstOpContext *gst_op_buffer_pool_get_context(GstBufferPool *pool);  // (transfer none)
// Whether `pool` is a GstOpBufferPool on the device of `ctx` (the pool reuse rule).
gboolean gst_op_buffer_pool_is_on(GstBufferPool *pool, GstOpContext *ctx);

// Adds what an element asks of its pool beyond caps and buffer counts (e.g. the camera layout
// or the video meta option) to `config`.
using GstOpPoolConfigure = std::function<void(GstCaps *caps, GstStructure *config)>;

// A new pool on `ctx` configured for `caps`, `min`/`max` buffers and `configure`; *size is the
// buffer size it computed. NULL when the pool refuses the config. (transfer full)
GstBufferPool *gst_op_buffer_pool_new_configured(GstOpContext *ctx, GstCaps *caps, guint min,
                                                 guint max, const GstOpPoolConfigure &configure,
                                                 guint *size);

// Buffers an output pool makes when it is activated: the working set of a stream (two frames on
// the device, one being produced, one waiting in a consumer's input), so that a pool does not
// grow while frames flow. It still grows beyond it when a consumer holds more (a deep queue, an
// application collecting buffers) rather than make its producer wait.
inline constexpr guint kGstOpPoolWorkingSet = 6;

// The output-pool decision of every OpenCL element (decide_allocation): the first pool in
// `query` that is a GstOpBufferPool on `ctx` is reused with downstream's buffer counts (the
// minimum raised to `min_buffers` and to kGstOpPoolWorkingSet, within downstream's maximum);
// otherwise, or when that pool refuses the config (it is
// active), a new one on `ctx` is made. The pool is configured for the query's caps and
// `configure`, and goes first in the query with the size it computed. Returns FALSE after
// posting an element error naming the caps when no pool takes the config.
gboolean gst_op_decide_output_pool(GstElement *element, GstOpContext *ctx, GstQuery *query,
                                   guint min_buffers, const GstOpPoolConfigure &configure = {});

// Sets `info` to openpilot's camera layout for its format and size (NV12: stride = width
// rounded up to 128, Y plane height rounded up to 32, UV plane right after it). Returns FALSE
// for formats other than NV12 and leaves `info` unchanged.
gboolean gst_op_video_info_set_camera_layout(GstVideoInfo *info);

// Asks the pool for the camera layout of the config's caps.
void gst_buffer_pool_config_set_op_camera_layout(GstStructure *config);
// Asks the pool for the strides, offsets and size of `info` (its format and size must match
// the config's caps; the pool checks).
void gst_buffer_pool_config_set_op_video_layout(GstStructure *config, const GstVideoInfo *info);
// The layout the pool will use (after set_config): caps, strides, offsets and size.
gboolean gst_op_buffer_pool_get_video_info(GstBufferPool *pool, GstVideoInfo *info);

// Whether `a` and `b` have the same format, size, strides and plane offsets.
gboolean gst_op_video_info_same_layout(const GstVideoInfo *a, const GstVideoInfo *b);

// The layout of `buffer`: `caps_info` with the strides, offsets and size of its GstVideoMeta
// when it has one (else the caps' packed layout, with size = the buffer's). Returns FALSE when
// the meta disagrees with the caps' format or size, or the planes do not fit the buffer.
gboolean gst_op_video_info_from_buffer(const GstVideoInfo *caps_info, GstBuffer *buffer,
                                       GstVideoInfo *out);
// Rows and visible bytes per row of plane `plane` (what a copy of the plane moves).
guint gst_op_video_info_plane_rows(const GstVideoInfo *info, guint plane);
gsize gst_op_video_info_plane_row_bytes(const GstVideoInfo *info, guint plane);
