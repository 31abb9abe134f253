#include "op/gstopmemory.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

GST_DEBUG_CATEGORY_STATIC(gst_op_memory_debug);
#define GST_CAT_DEFAULT gst_op_memory_debug

namespace {
// The cl_mem behind a memory and every view shared from it, with its last writer's event.
struct SharedBuffer {
  SharedBuffer() = default;
  SharedBuffer(const SharedBuffer &) = delete;
  ~SharedBuffer() {
    mem.reset();  // before `keep`: the buffer may alias what keep owns
    if (keep)
      gst_mini_object_unref(keep);
  }
  op::cl::MemHandle mem;
  GstMiniObject *keep = nullptr;  // what a wrapped buffer aliases, released last
  std::mutex lock;                // guards write_event
  op::cl::EventHandle write_event;
  // Host maps are counted: the cl_mem is mapped once, by the first map, and unmapped by the
  // last unmap. Elements on two branches of a tee map the same buffer from two threads, and
  // separate clEnqueueMapBuffer/Unmap pairs on one cl_mem from several threads are not safe on
  // every driver (PoCL handed out a pointer another thread's unmap had invalidated).
  std::mutex map_lock;  // guards the three below
  void *host = nullptr;
  int host_maps = 0;
  bool host_written = false;  // a write map happened since the first map
};
}  // namespace

struct GstOpMemoryPrivate {
  std::shared_ptr<SharedBuffer> buf;
};

struct _GstOpAllocator {
  GstAllocator parent;
  GstOpContext *ctx;
};

G_DEFINE_TYPE(GstOpAllocator, gst_op_allocator, GST_TYPE_ALLOCATOR)

static GstOpMemory *WrapBuffer(GstAllocator *allocator, GstMemory *parent,
                               std::shared_ptr<SharedBuffer> buf, gsize maxsize, gsize offset,
                               gsize size, GstMemoryFlags flags) {
  auto *m = g_new0(GstOpMemory, 1);
  gst_memory_init(GST_MEMORY_CAST(m), flags, allocator, parent, maxsize, 0, offset, size);
  m->priv = new GstOpMemoryPrivate{std::move(buf)};
  return m;
}

GstMemory *gst_op_allocator_alloc(GstAllocator *allocator, gsize size, op::Status *status) {
  g_return_val_if_fail(GST_IS_OP_ALLOCATOR(allocator), nullptr);
  auto *self = GST_OP_ALLOCATOR(allocator);
  auto created = gst_op_context_get_device(self->ctx)->CreateBuffer(size);
  if (!created.ok()) {
    GST_ERROR_OBJECT(self, "%s", created.status().ToString().c_str());
    if (status)
      *status = created.status();
    return nullptr;
  }
  auto buf = std::make_shared<SharedBuffer>();
  buf->mem = std::move(created).value();
  return GST_MEMORY_CAST(
      WrapBuffer(allocator, nullptr, std::move(buf), size, 0, size, (GstMemoryFlags)0));
}

GstMemory *gst_op_allocator_wrap(GstAllocator *allocator, op::cl::MemHandle mem, gsize maxsize,
                                 gsize offset, gsize size, GstMiniObject *keep) {
  g_return_val_if_fail(GST_IS_OP_ALLOCATOR(allocator) && mem && offset + size <= maxsize, nullptr);
  auto buf = std::make_shared<SharedBuffer>();
  buf->mem = std::move(mem);
  buf->keep = keep;
  return GST_MEMORY_CAST(
      WrapBuffer(allocator, nullptr, std::move(buf), maxsize, offset, size, (GstMemoryFlags)0));
}

static GstMemory *AllocatorAlloc(GstAllocator *allocator, gsize size, GstAllocationParams *params) {
  // Prefix and padding would need host-side slack that an OpenCL buffer does not have; the
  // device's own base-address alignment already exceeds any alignment GStreamer asks for.
  if (params && (params->prefix || params->padding))
    GST_DEBUG_OBJECT(allocator, "ignoring prefix %" G_GSIZE_FORMAT " and padding %" G_GSIZE_FORMAT,
                     params->prefix, params->padding);
  return gst_op_allocator_alloc(allocator, size);
}

static void AllocatorFree(GstAllocator *, GstMemory *memory) {
  auto *m = reinterpret_cast<GstOpMemory *>(memory);
  delete m->priv;
  g_free(m);
}

static SharedBuffer &BufferOf(GstMemory *mem) {
  return *reinterpret_cast<GstOpMemory *>(mem)->priv->buf;
}

static GstOpContext *ContextOf(GstMemory *mem) {
  return GST_OP_ALLOCATOR(mem->allocator)->ctx;
}

// The map flags as an integer. GST_MAP_OP_CL lies above GstMapFlags' named values (GStreamer's
// custom flags start at GST_MAP_FLAG_LAST), outside what C++ allows a value of that enum type
// to hold: the flags are never loaded as a GstMapFlags in this file (UBSan checks such loads).
static guint MapFlagsOf(const GstMapInfo *info) {
  static_assert(sizeof(info->flags) == sizeof(guint), "GstMapFlags is an int-sized enum");
  guint flags;
  std::memcpy(&flags, &info->flags, sizeof(flags));
  return flags;
}

static gpointer MemMap(GstMemory *mem, GstMapInfo *info, gsize) {
  SharedBuffer &buf = BufferOf(mem);
  if (MapFlagsOf(info) & GST_MAP_OP_CL) {
    // GstMemory adds mem->offset to what we return; undo it so the caller gets the cl_mem.
    return reinterpret_cast<gpointer>(reinterpret_cast<uintptr_t>(buf.mem.get()) - mem->offset);
  }
  std::lock_guard<std::mutex> guard(buf.map_lock);
  if (buf.host_maps == 0) {
    // The whole cl_mem, read and write, so that every view of it (shares have their own
    // offsets and sizes) and every later map, read or write, is served by this one mapping.
    size_t bytes = 0;
    if (clGetMemObjectInfo(buf.mem.get(), CL_MEM_SIZE, sizeof(bytes), &bytes, nullptr) !=
            CL_SUCCESS ||
        bytes == 0)
      bytes = mem->maxsize;
    op::cl::EventHandle writer = gst_op_memory_get_write_event(mem);
    // A host map is the host's request for the bytes: it has to wait for the last writer.
    auto mapped =
        gst_op_context_get_queue(ContextOf(mem))
            .Map(buf.mem.get(), CL_MAP_READ | CL_MAP_WRITE, 0, bytes, true, {writer.get()});
    if (!mapped.ok()) {
      GST_ERROR("host map of %p failed: %s", mem, mapped.status().ToString().c_str());
      return nullptr;
    }
    buf.host = *mapped;
  }
  buf.host_maps++;
  if (MapFlagsOf(info) & GST_MAP_WRITE)
    buf.host_written = true;
  return buf.host;
}

static void MemUnmap(GstMemory *mem, GstMapInfo *info) {
  if (MapFlagsOf(info) & GST_MAP_OP_CL)
    return;
  SharedBuffer &buf = BufferOf(mem);
  std::lock_guard<std::mutex> guard(buf.map_lock);
  if (buf.host_maps == 0 || --buf.host_maps > 0)
    return;
  op::cl::Queue &queue = gst_op_context_get_queue(ContextOf(mem));
  auto unmapped = queue.Unmap(buf.mem.get(), buf.host);
  buf.host = nullptr;
  const bool written = std::exchange(buf.host_written, false);
  if (!unmapped.ok()) {
    GST_ERROR("unmap of %p failed: %s", mem, unmapped.status().ToString().c_str());
    return;
  }
  // Device work that reads the buffer after a host write must wait for the unmap.
  if (written)
    gst_op_memory_set_write_event(mem, unmapped->get());
  // The unmap must not sit in the queue until the next frame's flush.
  (void)queue.Flush();
}

static GstMemory *MemCopy(GstMemory *mem, gssize offset, gssize size) {
  if (size < 0)
    size = static_cast<gssize>(mem->size) - offset;
  if (size <= 0 || offset < 0 || static_cast<gsize>(offset + size) > mem->size) {
    GST_ERROR("copy of %p: region %" G_GSSIZE_FORMAT "+%" G_GSSIZE_FORMAT
              " outside %" G_GSIZE_FORMAT " bytes",
              mem, offset, size, mem->size);
    return nullptr;
  }
  op::Status status;
  GstMemory *copy = gst_op_allocator_alloc(mem->allocator, size, &status);
  if (!copy)
    return nullptr;
  op::cl::EventHandle writer = gst_op_memory_get_write_event(mem);
  auto copied = gst_op_context_get_queue(ContextOf(mem))
                    .Copy(BufferOf(mem).mem.get(), mem->offset + offset, BufferOf(copy).mem.get(),
                          0, size, {writer.get()});
  if (!copied.ok()) {
    GST_ERROR("device copy of %p failed: %s", mem, copied.status().ToString().c_str());
    gst_memory_unref(copy);
    return nullptr;
  }
  gst_op_memory_set_write_event(copy, copied->get());
  return copy;
}

static GstMemory *MemShare(GstMemory *mem, gssize offset, gssize size) {
  if (size < 0)
    size = static_cast<gssize>(mem->size) - offset;
  GstMemory *parent = mem->parent ? mem->parent : mem;
  auto *self = reinterpret_cast<GstOpMemory *>(mem);
  GstMemoryFlags flags =
      (GstMemoryFlags)(GST_MINI_OBJECT_FLAGS(parent) | GST_MINI_OBJECT_FLAG_LOCK_READONLY);
  return GST_MEMORY_CAST(WrapBuffer(mem->allocator, parent, self->priv->buf, mem->maxsize,
                                    mem->offset + offset, size, flags));
}

static gboolean MemIsSpan(GstMemory *a, GstMemory *b, gsize *offset) {
  auto *ma = reinterpret_cast<GstOpMemory *>(a), *mb = reinterpret_cast<GstOpMemory *>(b);
  if (ma->priv->buf != mb->priv->buf)
    return FALSE;
  // Our buffers start at offset 0 of their cl_mem, so the offset in the parent is a->offset.
  if (offset)
    *offset = a->offset;
  return a->offset + a->size == b->offset;
}

static void gst_op_allocator_finalize(GObject *object) {
  auto *self = GST_OP_ALLOCATOR(object);
  GST_DEBUG_OBJECT(self, "finalize");
  gst_clear_object(&self->ctx);
  G_OBJECT_CLASS(gst_op_allocator_parent_class)->finalize(object);
}

static void gst_op_allocator_class_init(GstOpAllocatorClass *klass) {
  G_OBJECT_CLASS(klass)->finalize = gst_op_allocator_finalize;
  GST_ALLOCATOR_CLASS(klass)->alloc = AllocatorAlloc;
  GST_ALLOCATOR_CLASS(klass)->free = AllocatorFree;
  GST_DEBUG_CATEGORY_INIT(gst_op_memory_debug, "opmemory", 0, "OpenCL memory");
}

static void gst_op_allocator_init(GstOpAllocator *self) {
  GstAllocator *alloc = GST_ALLOCATOR_CAST(self);
  alloc->mem_type = GST_OP_MEMORY_NAME;
  alloc->mem_map_full = MemMap;
  alloc->mem_unmap_full = MemUnmap;
  alloc->mem_copy = MemCopy;
  alloc->mem_share = MemShare;
  alloc->mem_is_span = MemIsSpan;
  GST_OBJECT_FLAG_SET(self, GST_ALLOCATOR_FLAG_CUSTOM_ALLOC);
}

GstAllocator *gst_op_allocator_new(GstOpContext *ctx) {
  g_return_val_if_fail(GST_IS_OP_CONTEXT(ctx), nullptr);
  auto *self = GST_OP_ALLOCATOR(g_object_new(GST_TYPE_OP_ALLOCATOR, nullptr));
  gst_object_ref_sink(self);
  self->ctx = GST_OP_CONTEXT(gst_object_ref(ctx));
  return GST_ALLOCATOR_CAST(self);
}

GstOpContext *gst_op_allocator_get_context(GstAllocator *allocator) {
  g_return_val_if_fail(GST_IS_OP_ALLOCATOR(allocator), nullptr);
  return GST_OP_ALLOCATOR(allocator)->ctx;
}

gboolean gst_is_op_memory(GstMemory *mem) {
  return mem && mem->allocator && GST_IS_OP_ALLOCATOR(mem->allocator);
}

gboolean gst_is_op_memory_on(GstMemory *mem, GstOpContext *ctx) {
  if (!gst_is_op_memory(mem) || !ctx)
    return FALSE;
  GstOpContext *own = ContextOf(mem);
  return own == ctx ||
         gst_op_context_get_device(own)->context() == gst_op_context_get_device(ctx)->context();
}

GstOpContext *gst_op_memory_get_context(GstMemory *mem) {
  return gst_is_op_memory(mem) ? ContextOf(mem) : nullptr;
}

gboolean gst_op_memory_map_cl(GstMemory *mem, GstMapInfo *info, GstMapFlags flags) {
  if (!gst_is_op_memory(mem))
    return FALSE;
  return gst_memory_map(mem, info, (GstMapFlags)(flags | GST_MAP_OP_CL));
}

op::cl::EventHandle gst_op_memory_get_write_event(GstMemory *mem) {
  if (!gst_is_op_memory(mem))
    return {};
  SharedBuffer &buf = BufferOf(mem);
  std::lock_guard<std::mutex> guard(buf.lock);
  return buf.write_event;
}

void gst_op_memory_set_write_event(GstMemory *mem, cl_event event) {
  g_return_if_fail(gst_is_op_memory(mem));
  SharedBuffer &buf = BufferOf(mem);
  std::lock_guard<std::mutex> guard(buf.lock);
  buf.write_event = op::cl::EventHandle::Retained(event);
}

gboolean gst_op_buffer_add_write_events(GstBuffer *buffer, op::cl::EventList *wait) {
  guint n = gst_buffer_n_memory(buffer);
  for (guint i = 0; i < n; i++) {
    GstMemory *mem = gst_buffer_peek_memory(buffer, i);
    if (!gst_is_op_memory(mem))
      continue;
    // The memory holds its own reference; the list borrows it while the buffer lives.
    SharedBuffer &buf = BufferOf(mem);
    std::lock_guard<std::mutex> guard(buf.lock);
    if (!wait->Add(buf.write_event.get()))
      return FALSE;
  }
  return TRUE;
}

void gst_op_buffer_set_write_event(GstBuffer *buffer, cl_event event) {
  guint n = gst_buffer_n_memory(buffer);
  for (guint i = 0; i < n; i++) {
    GstMemory *mem = gst_buffer_peek_memory(buffer, i);
    if (gst_is_op_memory(mem))
      gst_op_memory_set_write_event(mem, event);
  }
}
