// GstOpUploader: how input frames and tensors get into OpenCL memory, for every element that
// takes system memory or DMABuf input (see docs/memory-and-sync.md, "Uploads" and "DMABuf").
// It is the only host → device path of the elements (opclupload, opwarp, opvision, oppolicy).
//
//   - DMABuf input (`video/x-raw(memory:DMABuf)`, one dmabuf memory per frame): imported
//     zero-copy when the device has an import extension, chosen from the capability record
//     alone by gst_op_dmabuf_import_method(); the cl_mem is cached on the dmabuf memory, so a
//     pool of camera buffers is imported once per buffer. Without an extension the frame is
//     uploaded like system memory and the element posts one warning.
//   - Uploads on devices whose buffer policy asks for staging (discrete GPUs) go through a ring
//     of pinned host-visible staging buffers: memcpy into a mapped slot, then a non-blocking
//     device write from it with an event. The ring is made once per caps and reused per frame.
//     Elsewhere (unified memory) uploads are direct non-blocking writes from the input, which
//     stays mapped and referenced until the device has read it (GstOpKeepAlive, no host wait).
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "cl/device.h"
#include "op/gstopcontext.h"
#include "op/gstopkeepalive.h"

#define GST_OP_CAPS_FEATURE_MEMORY_DMABUF "memory:DMABuf"

// How a device imports a dmabuf fd, in order of preference.
enum class GstOpDmabufImport {
  kNone,  // no extension: upload each frame
  kQcom,  // cl_qcom_dmabuf_host_ptr: clCreateBuffer with CL_MEM_EXT_HOST_PTR_QCOM
  kKhr,   // cl_khr_external_memory_dma_buf: clCreateBufferWithProperties
  kArm,   // cl_arm_import_memory: clImportMemoryARM with CL_IMPORT_TYPE_DMA_BUF_ARM
};

// The import method for a device, from its capability record only.
GstOpDmabufImport gst_op_dmabuf_import_method(const op::cl::Capabilities &caps);
const char *gst_op_dmabuf_import_method_name(GstOpDmabufImport method);

// Imports `bytes` bytes of dmabuf `fd` as a buffer on `device` with `method`. `host` is the fd
// mapped on the host (cl_qcom_dmabuf_host_ptr needs it; page aligned). Fails with a Status
// naming the call and the OpenCL error; never for kNone's sake (that is an InvalidArgument).
op::StatusOr<op::cl::MemHandle> gst_op_dmabuf_import(const op::cl::Device &device,
                                                     GstOpDmabufImport method, int fd, size_t bytes,
                                                     void *host);

// Whether the first structure of `caps` has the memory:DMABuf feature.
gboolean gst_op_caps_is_dmabuf(const GstCaps *caps);

// What an uploader did since it was made (the element's `stats` property).
struct GstOpUploadStats {
  guint64 uploads = 0;          // frames or tensor sets written to the device
  guint64 staged_uploads = 0;   // of those, through a staging slot
  guint64 imported_frames = 0;  // DMABuf frames passed on zero-copy
  guint dmabuf_imports = 0;     // dmabuf memories imported (once each)
  guint staging_buffers = 0;    // staging buffers created
  guint staging_waits = 0;      // frames that waited for a slot's previous write (device behind)
  guint fallback_warnings = 0;  // "DMABuf import not supported" warnings posted
};

class GstOpUploader;

// The host input a write reads: a buffer or a memory, referenced, with its read maps. Made by the
// Map functions (WriteMemory and WriteBuffer reuse the uploader's own); the uploader releases it
// once the device no longer reads it.
struct GstOpUploadSource {
  GstBuffer *buffer = nullptr;  // either a buffer (maps of its ranges) …
  GstMemory *memory = nullptr;  // … or one memory (maps.size() == 1)
  std::vector<GstMapInfo> maps;
  // The uploader that takes this source back for reuse once released; null: it is deleted.
  GstOpUploader *recycle_to = nullptr;
  GstOpUploadSource() = default;
  GstOpUploadSource(const GstOpUploadSource &) = delete;
  GstOpUploadSource &operator=(const GstOpUploadSource &) = delete;
  ~GstOpUploadSource() { Reset(); }

  // `buffer` referenced, no maps yet (MapRange adds them).
  explicit GstOpUploadSource(GstBuffer *buffer);
  // An empty source takes a reference to `buffer`, no maps yet.
  void SetBuffer(GstBuffer *buffer);
  // Maps memories [idx, idx + length) of the buffer for reading (length -1: to the end).
  op::Status MapRange(guint idx, gint length);
  // An empty source takes one memory, referenced and mapped for reading.
  op::Status SetMemory(GstMemory *memory);
  // One memory, referenced and mapped for reading.
  static op::StatusOr<std::unique_ptr<GstOpUploadSource>> MapMemory(GstMemory *memory);
  // Unmaps and unrefs; empty again (the maps keep their capacity).
  void Reset();
};

// One element's upload state, rebuilt when caps change and dropped in stop(). Not thread-safe:
// the element's streaming thread uses it.
class GstOpUploader {
 public:
  // Slots in the staging ring: one being filled by the host, one being read by the device, one
  // spare so that a frame arriving while the device still reads the last one does not wait.
  static constexpr size_t kStagingSlots = 3;

  // `force_staging` is the debug override of the device's policy (the element's
  // `force-staging` property): it exercises the discrete-GPU path on unified-memory devices.
  GstOpUploader(GstElement *element, GstOpContext *ctx, bool force_staging);
  // Waits for the staging slots' writes (they read the mapped slots) and unmaps them.
  ~GstOpUploader();
  GstOpUploader(const GstOpUploader &) = delete;
  GstOpUploader &operator=(const GstOpUploader &) = delete;

  bool staging() const { return staging_; }
  GstOpDmabufImport import_method() const { return import_; }

  // For a frame of DMABuf caps: a new output buffer (transfer full) whose one GstOpMemory is
  // the imported input frame, with `layout`'s GstVideoMeta; it holds a reference to `inbuf`
  // until downstream lets go. Returns nullptr when the frame has to be uploaded instead (no
  // import extension: the fallback warning is posted the first time; or a frame that is not
  // one dmabuf memory). An import failure is an error Status.
  op::StatusOr<GstBuffer *> Import(GstBuffer *inbuf, const GstVideoInfo &layout);

  // One host → device write: linear (`bytes` bytes) when `rows` is 0, else `rows` rows of
  // `row_bytes` with their own pitches.
  struct Region {
    cl_mem dst = nullptr;
    size_t dst_offset = 0;
    const guint8 *src = nullptr;
    size_t bytes = 0;
    size_t rows = 0, row_bytes = 0, dst_pitch = 0, src_pitch = 0;
  };
  // Enqueues `regions` (whose sources lie in `source`'s maps) after `wait`; returns the last
  // write's event. The uploader takes `source`: with staging the bytes are copied into a slot
  // and it is released before this returns; otherwise it is released by the write's completion
  // callback. On failure it is released after the queue finished what was enqueued.
  op::StatusOr<op::cl::EventHandle> Write(const std::vector<Region> &regions,
                                          const op::cl::EventList &wait,
                                          std::unique_ptr<GstOpUploadSource> source);
  // The common case: `bytes` bytes of one system memory to byte 0 of `dst`. Fails naming the
  // sizes when the memory is smaller than `bytes`.
  op::StatusOr<op::cl::EventHandle> WriteMemory(GstMemory *memory, size_t bytes, cl_mem dst,
                                                const op::cl::EventList &wait);
  // The same for a whole buffer (mapped as one range).
  op::StatusOr<op::cl::EventHandle> WriteBuffer(GstBuffer *buffer, size_t bytes, cl_mem dst,
                                                const op::cl::EventList &wait);
  // Flushes the queue and waits until every source has been released (stop()).
  void Drain();

  const GstOpUploadStats &stats() const { return stats_; }
  // The element already posted the fallback warning this run (an uploader made for new caps
  // must not repeat it).
  void MarkFallbackWarned() { fallback_warned_ = true; }

 private:
  struct Slot {
    op::cl::MemHandle mem;
    guint8 *host = nullptr;
    size_t bytes = 0;
    op::cl::EventHandle last_write;  // the write that reads this slot; reused after it
  };
  op::Status EnsureSlots(size_t bytes);
  void DropSlots();
  op::StatusOr<op::cl::EventHandle> WriteRegions(const std::vector<Region> &regions,
                                                 const op::cl::EventList &wait);
  op::StatusOr<op::cl::EventHandle> WriteOne(std::unique_ptr<GstOpUploadSource> source,
                                             size_t bytes, cl_mem dst,
                                             const op::cl::EventList &wait);
  static void ReleaseSource(void *source, cl_int status);
  // WriteMemory's and WriteBuffer's sources, reused so that no frame allocates one: a spare one
  // (all kSpareSources are made with the uploader), or a new one when all are still being read.
  std::unique_ptr<GstOpUploadSource> TakeSource();
  // A source that recycles to this uploader, with room for kMapsPerSource maps.
  std::unique_ptr<GstOpUploadSource> NewSource();
  // Back to the spares when it is one of ours (any thread), else freed.
  void Recycle(std::unique_ptr<GstOpUploadSource> source);
  static constexpr size_t kSpareSources = 16;
  static constexpr size_t kMapsPerSource = 4;  // a buffer's memories: one or two for a frame

  GstElement *element_;
  GstOpContext *ctx_;
  GstAllocator *allocator_;  // wraps imported frames
  bool staging_ = false;
  GstOpDmabufImport import_ = GstOpDmabufImport::kNone;
  std::array<Slot, kStagingSlots> slots_;
  size_t next_slot_ = 0;
  bool fallback_warned_ = false;
  GstOpUploadStats stats_;
  std::vector<Region> single_;  // WriteMemory's region (keeps its capacity between frames)
  std::mutex spare_lock_;       // guards spare_ (sources come back on a driver thread)
  std::vector<std::unique_ptr<GstOpUploadSource>> spare_;  // capacity kSpareSources
  GstOpKeepAlive keep_alive_;  // sources the device still reads; drained before spare_ goes
};

// The stats as a GstStructure "GstOpUploadStats" with kebab-case fields (transfer full).
GstStructure *gst_op_upload_stats_to_structure(const GstOpUploadStats &stats);
