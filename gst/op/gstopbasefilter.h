// GstOpBaseFilter: the base class of OpenCL filter elements (opclupload, opcldownload, opwarp).
//
// What it does for a subclass:
//   - the `device` property ("auto", "cpu", "gpu", "P:D" or a name substring; READY only);
//   - start(): gst_op_ensure_context() (sharing the pipeline's context), then the subclass's
//     open(); stop(): the subclass's close(), then drops the context;
//   - set_context / GST_QUERY_CONTEXT handling on both pads;
//   - transform_caps: for every structure, the memory:OpCLMemory version first and the system
//     memory one after it (override to change the media type, chain up for the features);
//   - propose_allocation: offers a GstOpBufferPool for OpCLMemory caps and accepts GstVideoMeta
//     and GstOpFrameMeta;
//   - decide_allocation: for OpCLMemory output (or any output when the class sets
//     op_memory_output), gst_op_decide_output_pool(): reuses the downstream pool only if it is
//     a GstOpBufferPool on the same context, else makes its own; other system memory output is
//     left to GstBaseTransform.
// Subclasses implement transform()/prepare_output_buffer() etc. as for any GstBaseTransform;
// everything they enqueue goes on gst_op_context_get_queue() of gst_op_base_filter_get_context().
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

#include <string>

#include "op/gstopcontext.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_BASE_FILTER (gst_op_base_filter_get_type())
G_DECLARE_DERIVABLE_TYPE(GstOpBaseFilter, gst_op_base_filter, GST, OP_BASE_FILTER, GstBaseTransform)

struct _GstOpBaseFilterClass {
  GstBaseTransformClass parent_class;

  // Called at the end of start(), once the context exists: build programs, create per-element
  // device state. Return FALSE after posting an element error. Optional.
  gboolean (*open)(GstOpBaseFilter *self, GstOpContext *ctx);
  // Called at the start of stop(), before the context is dropped: release device state (wait
  // for in-flight work first). Optional.
  void (*close)(GstOpBaseFilter *self);
  // Configures the pool decide_allocation/propose_allocation make for `caps` (already set with
  // caps, size and buffer counts); e.g. gst_buffer_pool_config_set_op_camera_layout(). Optional.
  void (*configure_pool)(GstOpBaseFilter *self, GstCaps *caps, GstStructure *config);
  // Outputs live in OpenCL memory of the context whatever the caps feature (a system-memory
  // consumer maps them): the output pool is always decided as for OpCLMemory caps.
  gboolean op_memory_output;

  gpointer _reserved[GST_PADDING];
};

G_END_DECLS

// The context (valid between start() and stop()). (transfer none)
GstOpContext *gst_op_base_filter_get_context(GstOpBaseFilter *self);
// The context before start(), for a subclass that starts device work at NULL→READY (a network
// loading while the rest of the pipeline starts): gst_op_ensure_context() as start() would do
// it; start() keeps it, and READY→NULL drops it when start() never ran. FALSE after posting an
// element error.
gboolean gst_op_base_filter_ensure_context(GstOpBaseFilter *self);
// The value of the device property.
std::string gst_op_base_filter_get_device(GstOpBaseFilter *self);

// Whether the first structure of `caps` has the memory:OpCLMemory feature.
gboolean gst_op_caps_is_op_memory(const GstCaps *caps);
// `caps` with every structure given memory:OpCLMemory first, then as system memory.
// (transfer full)
GstCaps *gst_op_caps_with_both_memories(const GstCaps *caps);
// `caps` with every structure set to `feature` (GST_CAPS_FEATURE_MEMORY_OP_CL or
// GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY). (transfer full)
GstCaps *gst_op_caps_with_feature(const GstCaps *caps, const char *feature);
// For a memory converter's sink-to-src transform: `caps` converted to `feature`, followed by
// `caps` themselves (passthrough) unless they are fixed and the linked downstream peer accepts
// the converted caps (GstBaseTransform tries passthrough first, so offering it would keep the
// data where it is). (transfer full)
GstCaps *gst_op_caps_converted(GstBaseTransform *trans, const GstCaps *caps, const char *feature);
// Splits `caps` into the structures with memory:OpCLMemory (*op) and all others (*other).
// (transfer full, both)
void gst_op_caps_split_by_memory(const GstCaps *caps, GstCaps **op, GstCaps **other);
