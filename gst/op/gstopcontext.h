// GstOpContext: one opened OpenCL device and its in-order queue, shared by every element of a
// pipeline through a GstContext of type "op.cl.context" (see docs/memory-and-sync.md).
//
// Elements do not open devices themselves: in start() they call gst_op_ensure_context(), which
// looks for a context already set on them, then asks downstream and upstream peers, then posts
// need-context, and only then opens the device and posts have-context. They answer context
// queries with gst_op_handle_context_query() and accept contexts with
// gst_op_handle_set_context(). A context for another device is refused with a warning.
#pragma once

#include <gst/gst.h>

#include <memory>
#include <string>

#include "cl/device.h"
#include "cl/queue.h"

G_BEGIN_DECLS

#define GST_OP_CONTEXT_TYPE "op.cl.context"

#define GST_TYPE_OP_CONTEXT (gst_op_context_get_type())
G_DECLARE_FINAL_TYPE(GstOpContext, gst_op_context, GST, OP_CONTEXT, GstObject)

G_END_DECLS

// Opens the device chosen by `device` ("auto", "cpu", "gpu", "P:D" or a name substring; see
// docs/devices.md) and creates its queue. (transfer full)
op::StatusOr<GstOpContext *> gst_op_context_new(const gchar *device);

// Wraps an already opened device (tests, tools that share a device with non-GStreamer code).
op::StatusOr<GstOpContext *> gst_op_context_new_for_device(std::shared_ptr<op::cl::Device> device);

// The device string the context was opened with ("auto" for an empty one).
const gchar *gst_op_context_get_device_string(GstOpContext *ctx);
const std::shared_ptr<op::cl::Device> &gst_op_context_get_device(GstOpContext *ctx);
// The context's in-order queue: everything that touches the context's memories is enqueued here,
// so commands on one buffer are ordered without host waits (docs/memory-and-sync.md).
op::cl::Queue &gst_op_context_get_queue(GstOpContext *ctx);

// Whether an element asking for `device` may use `ctx`: the same string, "auto"/empty (any
// device will do), or a string that selects the very same OpenCL device.
gboolean gst_op_context_matches(GstOpContext *ctx, const gchar *device);

// A GstContext of type GST_OP_CONTEXT_TYPE holding `ctx` (transfer full, persistent).
GstContext *gst_context_new_op_context(GstOpContext *ctx);
// The GstOpContext inside `context`, or NULL when it holds none. (transfer full)
GstOpContext *gst_context_get_op_context(GstContext *context);

// Makes *ctx valid for `element` (see the top of this file). Returns FALSE after posting an
// element error (LIBRARY/INIT or RESOURCE/NOT_FOUND naming the device string) on failure.
// Posts a warning when the device choice fell back (no GPU → CPU).
gboolean gst_op_ensure_context(GstElement *element, const gchar *device, GstOpContext **ctx);
// Takes *ctx out under the element's object lock and drops it (stop(), READY→NULL).
void gst_op_clear_context(GstElement *element, GstOpContext **ctx);
// A device property's setter (`value` null or empty: "auto"): stores the device string in
// *device under the element's object lock. When it changed while the element is in NULL or
// READY with no state change under way, a context opened early (at NULL→READY) for the old
// device is dropped, so that start() opens the new one; a started element keeps its context.
void gst_op_set_device(GstElement *element, const gchar *value, std::string *device,
                       GstOpContext **ctx);

// For GstElement::set_context: takes an "op.cl.context" for `device` into *ctx (if *ctx is not
// yet set). Returns TRUE when `context` was one of ours (accepted or refused), FALSE otherwise.
gboolean gst_op_handle_set_context(GstElement *element, GstContext *context, const gchar *device,
                                   GstOpContext **ctx);

// For pad/element query handlers: answers a GST_QUERY_CONTEXT of our type with `ctx`.
// Returns TRUE when the query was answered.
gboolean gst_op_handle_context_query(GstElement *element, GstQuery *query, GstOpContext *ctx);
