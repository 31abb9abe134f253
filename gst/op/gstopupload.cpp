#include "op/gstopupload.h"

#include <gst/allocators/gstdmabuf.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "op/gstopmemory.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_upload_debug);
#define GST_CAT_DEFAULT gst_op_upload_debug

// ---- extension constants the installed headers may lack ----------------------------------
// Values from the Khronos registry and the vendors' extension specifications.

#ifndef CL_MEM_EXT_HOST_PTR_QCOM
#define CL_MEM_EXT_HOST_PTR_QCOM (1 << 29)
#endif
#ifndef CL_MEM_HOST_UNCACHED_QCOM
#define CL_MEM_HOST_UNCACHED_QCOM 0x40A4
#endif
#ifndef CL_MEM_DMABUF_HOST_PTR_QCOM
#define CL_MEM_DMABUF_HOST_PTR_QCOM 0x411D
#endif
#ifndef CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR
#define CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR 0x2067
#endif
#ifndef CL_IMPORT_TYPE_ARM
#define CL_IMPORT_TYPE_ARM 0x40B2
#endif
#ifndef CL_IMPORT_TYPE_DMA_BUF_ARM
#define CL_IMPORT_TYPE_DMA_BUF_ARM 0x40B4
#endif

namespace {

// cl_qcom_ext_host_ptr's header block and cl_qcom_dmabuf_host_ptr's descriptor (declared
// under our own names so they cannot clash with a vendor header that has them).
struct QcomExtHostPtr {
  cl_uint allocation_type;
  cl_uint host_cache_policy;
};
struct QcomDmabufHostPtr {
  QcomExtHostPtr ext_host_ptr;
  int dmabuf_filedesc;
  void *dmabuf_hostptr;
};

using ImportMemoryArmFn = cl_mem(CL_API_CALL *)(cl_context, cl_mem_flags, const intptr_t *, void *,
                                                size_t, cl_int *);

void EnsureDebugCategory() {
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    GST_DEBUG_CATEGORY_INIT(gst_op_upload_debug, "opupload", 0, "OpenCL uploads and imports");
    g_once_init_leave(&once, 1);
  }
}

// What a dmabuf memory caches about its import: kept as qdata on the memory, so a pool's
// buffers are imported once each and the import goes when the memory does.
struct ImportCache {
  cl_context context = nullptr;  // the import is valid only there
  op::cl::MemHandle mem;
  size_t bytes = 0;
  void *host = nullptr;  // the fd mapped on the host (cl_qcom_dmabuf_host_ptr only)
};

void FreeImportCache(gpointer data) {
  auto *cache = static_cast<ImportCache *>(data);
  // clReleaseMemObject defers the free until the commands using the buffer are done.
  cache->mem.reset();
  if (cache->host)
    munmap(cache->host, cache->bytes);
  delete cache;
}

GQuark ImportQuark() {
  static GQuark quark = g_quark_from_static_string("GstOpDmabufImport");
  return quark;
}

}  // namespace

GstOpDmabufImport gst_op_dmabuf_import_method(const op::cl::Capabilities &caps) {
  if (caps.qcom_dmabuf)
    return GstOpDmabufImport::kQcom;
  if (caps.khr_dmabuf)
    return GstOpDmabufImport::kKhr;
  if (caps.arm_import)
    return GstOpDmabufImport::kArm;
  return GstOpDmabufImport::kNone;
}

const char *gst_op_dmabuf_import_method_name(GstOpDmabufImport method) {
  switch (method) {
    case GstOpDmabufImport::kNone:
      return "none";
    case GstOpDmabufImport::kQcom:
      return "cl_qcom_dmabuf_host_ptr";
    case GstOpDmabufImport::kKhr:
      return "cl_khr_external_memory_dma_buf";
    case GstOpDmabufImport::kArm:
      return "cl_arm_import_memory";
  }
  return "none";
}

op::StatusOr<op::cl::MemHandle> gst_op_dmabuf_import(const op::cl::Device &device,
                                                     GstOpDmabufImport method, int fd, size_t bytes,
                                                     void *host) {
  cl_int err = CL_SUCCESS;
  cl_mem mem = nullptr;
  const std::string what =
      " (dmabuf fd " + std::to_string(fd) + ", " + std::to_string(bytes) + " bytes)";
  switch (method) {
    case GstOpDmabufImport::kNone:
      return op::InvalidArgument("no DMABuf import method on " + device.caps().device_name);
    case GstOpDmabufImport::kQcom: {
      if (!host)
        return op::InvalidArgument("cl_qcom_dmabuf_host_ptr needs the fd mapped on the host");
      QcomDmabufHostPtr desc{};
      desc.ext_host_ptr.allocation_type = CL_MEM_DMABUF_HOST_PTR_QCOM;
      // Frames come from hardware (camera, ISP): no CPU cache to keep coherent.
      desc.ext_host_ptr.host_cache_policy = CL_MEM_HOST_UNCACHED_QCOM;
      desc.dmabuf_filedesc = fd;
      desc.dmabuf_hostptr = host;
      mem = clCreateBuffer(device.context(),
                           CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR | CL_MEM_EXT_HOST_PTR_QCOM,
                           bytes, &desc, &err);
      if (err != CL_SUCCESS)
        return op::cl::ClError(("clCreateBuffer(CL_MEM_EXT_HOST_PTR_QCOM)" + what).c_str(), err);
      break;
    }
    case GstOpDmabufImport::kKhr: {
      // cl_khr_external_memory adds no entry point: the import is the OpenCL 3.0 core call,
      // dispatched by the ICD loader to the platform.
      cl_mem_properties props[] = {CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR,
                                   static_cast<cl_mem_properties>(fd), 0};
      mem = clCreateBufferWithProperties(device.context(), props, CL_MEM_READ_WRITE, bytes, nullptr,
                                         &err);
      if (err != CL_SUCCESS)
        return op::cl::ClError(("clCreateBufferWithProperties(DMA_BUF_KHR)" + what).c_str(), err);
      break;
    }
    case GstOpDmabufImport::kArm: {
      auto import = reinterpret_cast<ImportMemoryArmFn>(
          clGetExtensionFunctionAddressForPlatform(device.platform(), "clImportMemoryARM"));
      if (!import)
        return op::Unsupported("clImportMemoryARM is not exported by platform " +
                               device.caps().platform_name);
      const intptr_t props[] = {CL_IMPORT_TYPE_ARM, CL_IMPORT_TYPE_DMA_BUF_ARM, 0};
      int handle = fd;  // the extension takes a pointer to the fd
      mem = import(device.context(), CL_MEM_READ_WRITE, props, &handle, bytes, &err);
      if (err != CL_SUCCESS)
        return op::cl::ClError(("clImportMemoryARM(DMA_BUF)" + what).c_str(), err);
      break;
    }
  }
  if (!mem)
    return op::DeviceError("the DMABuf import returned no buffer" + what);
  return op::cl::MemHandle(mem);
}

gboolean gst_op_caps_is_dmabuf(const GstCaps *caps) {
  if (!caps || gst_caps_is_empty(caps) || gst_caps_is_any(caps))
    return FALSE;
  GstCapsFeatures *f = gst_caps_get_features(caps, 0);
  return f && gst_caps_features_contains(f, GST_OP_CAPS_FEATURE_MEMORY_DMABUF);
}

GstStructure *gst_op_upload_stats_to_structure(const GstOpUploadStats &s) {
  return gst_structure_new("GstOpUploadStats", "uploads", G_TYPE_UINT64, s.uploads,
                           "staged-uploads", G_TYPE_UINT64, s.staged_uploads, "imported-frames",
                           G_TYPE_UINT64, s.imported_frames, "dmabuf-imports", G_TYPE_UINT,
                           s.dmabuf_imports, "staging-buffers", G_TYPE_UINT, s.staging_buffers,
                           "staging-waits", G_TYPE_UINT, s.staging_waits, "fallback-warnings",
                           G_TYPE_UINT, s.fallback_warnings, nullptr);
}

GstOpUploader::GstOpUploader(GstElement *element, GstOpContext *ctx, bool force_staging)
    : element_(element),
      ctx_(GST_OP_CONTEXT(gst_object_ref(ctx))),
      allocator_(gst_op_allocator_new(ctx)) {
  EnsureDebugCategory();
  // All spare sources are made here, each with room for its maps. Made on demand, a frame that
  // found every source still waiting for its completion callback (late on a loaded machine)
  // allocated a new one on the frame path, after warm-up had made only as many as it needed.
  spare_.reserve(kSpareSources);
  for (size_t i = 0; i < kSpareSources; i++)
    spare_.push_back(NewSource());
  const auto &device = gst_op_context_get_device(ctx);
  staging_ = device->buffer_policy().staging_uploads || force_staging;
  import_ = gst_op_dmabuf_import_method(device->caps());
  GST_DEBUG_OBJECT(element_, "uploads %s, DMABuf import %s", staging_ ? "staged" : "direct",
                   gst_op_dmabuf_import_method_name(import_));
}

// ---- GstOpUploadSource ---------------------------------------------------------------------

GstOpUploadSource::GstOpUploadSource(GstBuffer *b) : buffer(gst_buffer_ref(b)) {}

void GstOpUploadSource::SetBuffer(GstBuffer *b) {
  buffer = gst_buffer_ref(b);
}

void GstOpUploadSource::Reset() {
  for (GstMapInfo &map : maps) {
    if (buffer)
      gst_buffer_unmap(buffer, &map);
    else
      gst_memory_unmap(memory, &map);
  }
  maps.clear();
  if (buffer)
    gst_buffer_unref(buffer);
  if (memory)
    gst_memory_unref(memory);
  buffer = nullptr;
  memory = nullptr;
}

op::Status GstOpUploadSource::MapRange(guint idx, gint length) {
  GstMapInfo info;
  if (!buffer || !gst_buffer_map_range(buffer, idx, length, &info, GST_MAP_READ))
    return op::IoError("could not map the input buffer for reading");
  maps.push_back(info);
  return op::Status::Ok();
}

op::Status GstOpUploadSource::SetMemory(GstMemory *m) {
  GstMapInfo info;
  if (!gst_memory_map(m, &info, GST_MAP_READ))
    return op::IoError("could not map an input memory for reading");
  memory = gst_memory_ref(m);
  maps.push_back(info);
  return op::Status::Ok();
}

op::StatusOr<std::unique_ptr<GstOpUploadSource>> GstOpUploadSource::MapMemory(GstMemory *m) {
  auto source = std::make_unique<GstOpUploadSource>();
  OP_RETURN_IF_ERROR(source->SetMemory(m));
  return source;
}

// ---- GstOpUploader -------------------------------------------------------------------------

GstOpUploader::~GstOpUploader() {
  Drain();
  DropSlots();
  gst_object_unref(allocator_);
  gst_object_unref(ctx_);
}

void GstOpUploader::DropSlots() {
  op::cl::Queue &queue = gst_op_context_get_queue(ctx_);
  for (Slot &slot : slots_) {
    // The slot's last write may still read it: it must be done before the unmap and release.
    if (slot.last_write)
      (void)op::cl::WaitForEvent(slot.last_write.get());
    if (slot.mem && slot.host) {
      auto unmapped = queue.Unmap(slot.mem.get(), slot.host);
      if (unmapped.ok() && *unmapped)
        (void)op::cl::WaitForEvent(unmapped->get());
    }
    slot = Slot();
  }
  next_slot_ = 0;
}

op::Status GstOpUploader::EnsureSlots(size_t bytes) {
  if (slots_[0].mem && slots_[0].bytes >= bytes)
    return op::Status::Ok();
  // Once per caps (or when a frame's layout grows): pinned host-visible buffers, mapped once.
  DropSlots();
  const auto &device = gst_op_context_get_device(ctx_);
  op::cl::Queue &queue = gst_op_context_get_queue(ctx_);
  for (Slot &slot : slots_) {
    cl_int err = CL_SUCCESS;
    slot.mem = op::cl::MemHandle(clCreateBuffer(
        device->context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, nullptr, &err));
    if (err != CL_SUCCESS) {
      DropSlots();
      return op::cl::ClError(
          ("clCreateBuffer(staging, " + std::to_string(bytes) + " bytes)").c_str(), err);
    }
    auto mapped = queue.Map(slot.mem.get(), CL_MAP_WRITE, 0, bytes, true);
    if (!mapped.ok()) {
      DropSlots();
      return mapped.status();
    }
    slot.host = static_cast<guint8 *>(*mapped);
    slot.bytes = bytes;
    stats_.staging_buffers++;
  }
  GST_INFO_OBJECT(element_, "%zu staging buffers of %zu bytes", slots_.size(), bytes);
  return op::Status::Ok();
}

void GstOpUploader::Drain() {
  (void)gst_op_context_get_queue(ctx_).Flush();
  keep_alive_.Drain();
}

// Runs when the device has read a source (or at once after staging): gives it back.
void GstOpUploader::ReleaseSource(void *data, cl_int status) {
  if (status < 0)
    GST_WARNING("an upload failed on the device: %d", status);
  std::unique_ptr<GstOpUploadSource> source(static_cast<GstOpUploadSource *>(data));
  if (GstOpUploader *owner = source->recycle_to)
    owner->Recycle(std::move(source));
}

std::unique_ptr<GstOpUploadSource> GstOpUploader::TakeSource() {
  {
    std::lock_guard<std::mutex> guard(spare_lock_);
    if (!spare_.empty()) {
      std::unique_ptr<GstOpUploadSource> source = std::move(spare_.back());
      spare_.pop_back();
      return source;
    }
  }
  // More than kSpareSources frames still being read: the device far behind.
  return NewSource();
}

std::unique_ptr<GstOpUploadSource> GstOpUploader::NewSource() {
  auto source = std::make_unique<GstOpUploadSource>();
  source->recycle_to = this;
  source->maps.reserve(kMapsPerSource);
  return source;
}

void GstOpUploader::Recycle(std::unique_ptr<GstOpUploadSource> source) {
  if (!source || source->recycle_to != this)
    return;  // not ours: freed here
  source->Reset();
  std::lock_guard<std::mutex> guard(spare_lock_);
  if (spare_.size() < kSpareSources)
    spare_.push_back(std::move(source));  // within the reserved capacity: no allocation
}

op::StatusOr<op::cl::EventHandle> GstOpUploader::WriteMemory(GstMemory *memory, size_t bytes,
                                                             cl_mem dst,
                                                             const op::cl::EventList &wait) {
  std::unique_ptr<GstOpUploadSource> source = TakeSource();
  if (op::Status mapped = source->SetMemory(memory); !mapped.ok()) {
    Recycle(std::move(source));
    return mapped;
  }
  return WriteOne(std::move(source), bytes, dst, wait);
}

op::StatusOr<op::cl::EventHandle> GstOpUploader::WriteBuffer(GstBuffer *buffer, size_t bytes,
                                                             cl_mem dst,
                                                             const op::cl::EventList &wait) {
  std::unique_ptr<GstOpUploadSource> source = TakeSource();
  source->SetBuffer(buffer);
  if (op::Status mapped = source->MapRange(0, -1); !mapped.ok()) {
    Recycle(std::move(source));
    return mapped;
  }
  return WriteOne(std::move(source), bytes, dst, wait);
}

op::StatusOr<op::cl::EventHandle> GstOpUploader::WriteOne(std::unique_ptr<GstOpUploadSource> source,
                                                          size_t bytes, cl_mem dst,
                                                          const op::cl::EventList &wait) {
  if (source->maps[0].size < bytes) {
    const size_t have = source->maps[0].size;
    Recycle(std::move(source));
    return op::InvalidArgument("an input of " + std::to_string(have) +
                               " bytes is smaller than the " + std::to_string(bytes) +
                               " bytes to upload");
  }
  single_.resize(1);
  single_[0] = Region();
  single_[0].dst = dst;
  single_[0].src = source->maps[0].data;
  single_[0].bytes = bytes;
  return Write(single_, wait, std::move(source));
}

op::StatusOr<op::cl::EventHandle> GstOpUploader::Write(const std::vector<Region> &regions,
                                                       const op::cl::EventList &wait,
                                                       std::unique_ptr<GstOpUploadSource> source) {
  auto written = WriteRegions(regions, wait);
  op::cl::Queue &queue = gst_op_context_get_queue(ctx_);
  if (!written.ok()) {
    // Nothing may still read the source: let what was enqueued finish first (an error path).
    (void)queue.Finish();
    Recycle(std::move(source));
    return written.status();
  }
  if (staging_) {
    // The bytes are in a pinned slot already: the input goes back upstream now.
    Recycle(std::move(source));
    return written;
  }
  keep_alive_.OnComplete(written->get(), ReleaseSource, source.release());
  return written;
}

op::StatusOr<op::cl::EventHandle> GstOpUploader::WriteRegions(const std::vector<Region> &regions,
                                                              const op::cl::EventList &wait) {
  op::cl::Queue &queue = gst_op_context_get_queue(ctx_);
  auto span = [](const Region &r) {
    return r.rows ? (r.rows - 1) * r.src_pitch + r.row_bytes : r.bytes;
  };
  auto enqueue = [&](const Region &r, const guint8 *src) {
    return r.rows ? queue.WriteRect(r.dst, r.dst_offset, r.dst_pitch, src, r.src_pitch, r.row_bytes,
                                    r.rows, wait)
                  : queue.Write(r.dst, r.dst_offset, r.bytes, src, wait);
  };
  op::cl::EventHandle last;
  if (!staging_) {
    for (const Region &r : regions) {
      OP_ASSIGN_OR_RETURN(last, enqueue(r, r.src));
    }
    stats_.uploads++;
    return last;
  }

  size_t total = 0;
  for (const Region &r : regions)
    total += span(r);
  OP_RETURN_IF_ERROR(EnsureSlots(total));
  Slot &slot = slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % slots_.size();
  if (slot.last_write) {
    // The slot's previous write must have read it before the host overwrites it. With three
    // slots that write is two frames old: it is only still pending when the device is behind,
    // and then waiting on its event is the back-pressure that keeps latency bounded.
    cl_int status = CL_COMPLETE;
    clGetEventInfo(slot.last_write.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                   &status, nullptr);
    if (status != CL_COMPLETE) {
      stats_.staging_waits++;
      OP_RETURN_IF_ERROR(op::cl::WaitForEvent(slot.last_write.get()));
    }
  }
  size_t at = 0;
  for (const Region &r : regions) {
    std::memcpy(slot.host + at, r.src, span(r));
    // A write from pinned memory: the driver's DMA reads the slot directly. (A buffer-to-buffer
    // copy from the slot would use it on the device while it is mapped, which OpenCL leaves
    // undefined.)
    OP_ASSIGN_OR_RETURN(last, enqueue(r, slot.host + at));
    at += span(r);
  }
  slot.last_write = last;
  stats_.uploads++;
  stats_.staged_uploads++;
  return last;
}

op::StatusOr<GstBuffer *> GstOpUploader::Import(GstBuffer *inbuf, const GstVideoInfo &layout) {
  const auto &device = gst_op_context_get_device(ctx_);
  if (import_ == GstOpDmabufImport::kNone) {
    if (!fallback_warned_) {
      fallback_warned_ = true;
      stats_.fallback_warnings++;
      GST_ELEMENT_WARNING(element_, RESOURCE, SETTINGS,
                          ("DMABuf import not supported by %s; uploading each frame",
                           device->caps().device_name.c_str()),
                          ("the device has none of cl_qcom_dmabuf_host_ptr, "
                           "cl_khr_external_memory_dma_buf, cl_arm_import_memory"));
    }
    return static_cast<GstBuffer *>(nullptr);
  }
  GstMemory *in_mem = gst_buffer_n_memory(inbuf) == 1 ? gst_buffer_peek_memory(inbuf, 0) : nullptr;
  if (!in_mem || !gst_is_dmabuf_memory(in_mem)) {
    GST_LOG_OBJECT(element_, "not one dmabuf memory (%u memories): uploading",
                   gst_buffer_n_memory(inbuf));
    return static_cast<GstBuffer *>(nullptr);
  }
  cl_context context = device->context();
  auto *cache = static_cast<ImportCache *>(
      gst_mini_object_get_qdata(GST_MINI_OBJECT_CAST(in_mem), ImportQuark()));
  if (!cache || cache->context != context) {
    // Once per dmabuf memory (a camera pool's buffer), not per frame.
    int fd = gst_dmabuf_memory_get_fd(in_mem);
    off_t end = lseek(fd, 0, SEEK_END);
    size_t bytes = end > 0 ? static_cast<size_t>(end) : in_mem->maxsize + in_mem->offset;
    auto fresh = new ImportCache();
    fresh->context = context;
    fresh->bytes = bytes;
    if (import_ == GstOpDmabufImport::kQcom) {
      void *host = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (host == MAP_FAILED) {
        delete fresh;
        return op::IoError("mmap of dmabuf fd " + std::to_string(fd) +
                           " failed: " + g_strerror(errno));
      }
      fresh->host = host;
    }
    auto imported = gst_op_dmabuf_import(*device, import_, fd, bytes, fresh->host);
    if (!imported.ok()) {
      FreeImportCache(fresh);
      return imported.status();
    }
    fresh->mem = std::move(imported).value();
    gst_mini_object_set_qdata(GST_MINI_OBJECT_CAST(in_mem), ImportQuark(), fresh, FreeImportCache);
    cache = fresh;
    stats_.dmabuf_imports++;
    GST_DEBUG_OBJECT(element_, "imported dmabuf fd %d (%zu bytes) with %s", fd, bytes,
                     gst_op_dmabuf_import_method_name(import_));
  }
  if (in_mem->offset + in_mem->size > cache->bytes)
    return op::InvalidArgument("the dmabuf memory ends past its fd's size");
  // The wrapper buffer, memory and meta are small host structures made per frame, as GStreamer's
  // own dmabuf allocator does for each frame it wraps; the device buffer is the cached import.
  GstMemory *out_mem =
      gst_op_allocator_wrap(allocator_, cache->mem, cache->bytes, in_mem->offset, in_mem->size,
                            GST_MINI_OBJECT_CAST(gst_buffer_ref(inbuf)));
  GstBuffer *out = gst_buffer_new();
  gst_buffer_append_memory(out, out_mem);
  GstVideoInfo l = layout;
  gst_buffer_add_video_meta_full(out, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&l),
                                 GST_VIDEO_INFO_WIDTH(&l), GST_VIDEO_INFO_HEIGHT(&l),
                                 GST_VIDEO_INFO_N_PLANES(&l), l.offset, l.stride);
  stats_.imported_frames++;
  return out;
}
