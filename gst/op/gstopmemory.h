// GstOpMemory: one OpenCL buffer (a whole NV12 frame or one tensor) as a GstMemory, and the
// GstOpAllocator that makes them for one GstOpContext.
//
// Maps:
//   - gst_op_memory_map_cl() (the GST_MAP_OP_CL flag): no host access; info->data is the cl_mem
//     itself (the region starts at mem->offset bytes into it). Enqueue work on the context's
//     queue with gst_op_memory_get_write_event() in its wait list, and after writing record
//     the new event with gst_op_memory_set_write_event().
//   - an ordinary gst_memory_map(): waits for the last writer's event, then maps the buffer on
//     the host (zero-copy on unified-memory devices). Unmapping after a write records the unmap
//     event as the new last writer.
// Memories shared with gst_memory_share() are views of the same cl_mem and share its last-writer
// event; gst_memory_copy() is a device copy that waits on the event instead of the host.
#pragma once

#include <gst/gst.h>

#include "cl/queue.h"
#include "op/gstopcontext.h"

G_BEGIN_DECLS

#define GST_OP_MEMORY_NAME "OpCLMemory"
// The caps feature of OpenCL memory, as in "video/x-raw(memory:OpCLMemory)".
#define GST_CAPS_FEATURE_MEMORY_OP_CL "memory:OpCLMemory"
// Map flag asking for the cl_mem instead of a host pointer. Every vendor library reuses this
// bit, so only pass it for memories gst_is_op_memory() accepts (gst_op_memory_map_cl() checks).
#define GST_MAP_OP_CL ((GstMapFlags)(GST_MAP_FLAG_LAST << 1))

#define GST_TYPE_OP_ALLOCATOR (gst_op_allocator_get_type())
G_DECLARE_FINAL_TYPE(GstOpAllocator, gst_op_allocator, GST, OP_ALLOCATOR, GstAllocator)

typedef struct _GstOpMemory GstOpMemory;
struct GstOpMemoryPrivate;
struct _GstOpMemory {
  GstMemory mem;
  GstOpMemoryPrivate *priv;
};

G_END_DECLS

// An allocator of OpenCL buffers on `ctx` (flags from the device's buffer policy). It keeps
// `ctx` alive, and every memory keeps its allocator alive. (transfer full)
GstAllocator *gst_op_allocator_new(GstOpContext *ctx);
GstOpContext *gst_op_allocator_get_context(GstAllocator *allocator);  // (transfer none)

// Allocates one buffer of `size` bytes. On failure returns NULL and sets *status (if given).
GstMemory *gst_op_allocator_alloc(GstAllocator *allocator, gsize size,
                                  op::Status *status = nullptr);

// Wraps an existing buffer of `maxsize` bytes (e.g. an imported DMABuf) as a memory showing
// [offset, offset + size). `keep` (transfer full, may be NULL) is unreffed when the last memory
// shared from it goes: the owner of what the buffer aliases (the input GstBuffer).
GstMemory *gst_op_allocator_wrap(GstAllocator *allocator, op::cl::MemHandle mem, gsize maxsize,
                                 gsize offset, gsize size, GstMiniObject *keep);

// Whether `mem` is a GstOpMemory (of any context).
gboolean gst_is_op_memory(GstMemory *mem);
// Whether `mem` is a GstOpMemory on the device of `ctx`.
gboolean gst_is_op_memory_on(GstMemory *mem, GstOpContext *ctx);
GstOpContext *gst_op_memory_get_context(GstMemory *mem);  // (transfer none)

// Maps `mem` for device access after checking it is ours; info->data is the cl_mem.
// Returns FALSE for memories that are not GstOpMemory. Unmap with gst_memory_unmap().
gboolean gst_op_memory_map_cl(GstMemory *mem, GstMapInfo *info, GstMapFlags flags);
inline cl_mem gst_op_map_info_get_cl_mem(const GstMapInfo *info) {
  return reinterpret_cast<cl_mem>(info->data);
}

// The event of the last command that wrote the buffer (empty when none is pending).
op::cl::EventHandle gst_op_memory_get_write_event(GstMemory *mem);
// Records `event` (retained) as the buffer's last writer; NULL clears it.
void gst_op_memory_set_write_event(GstMemory *mem, cl_event event);

// Adds the last-writer events of every GstOpMemory of `buffer` to `wait`. Returns FALSE when
// the list is full.
gboolean gst_op_buffer_add_write_events(GstBuffer *buffer, op::cl::EventList *wait);
// Records `event` as the last writer of every GstOpMemory of `buffer`.
void gst_op_buffer_set_write_event(GstBuffer *buffer, cl_event event);
