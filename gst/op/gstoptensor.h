// Tensor stream caps and the frame provenance meta: the one place either is built or parsed.
//
// Caps: application/x-op-tensors, one GstMemory per tensor in caps order, with
//   names  = <"img", "big_img">            tensor names
//   types  = <"uint8", "uint8">            uint8, int64, float16 or float32
//   dims   = <"1,12,128,256", "1,12,128,256">  outermost first
//   slices = <"pose:0:12", "plan/desire_state:990:998">   optional, over the last axis;
//            "name:start:end" is a slice of the first tensor, "tensor/name:start:end" of the
//            tensor named before the slash.
// A single tensor may also be written with plain strings (names="img", ...).
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cl/cl.h"
#include "base/status.h"

enum class GstOpTensorType { kUint8, kInt64, kFloat16, kFloat32 };

const char *gst_op_tensor_type_to_string(GstOpTensorType type);
// Bytes per element.
gsize gst_op_tensor_type_size(GstOpTensorType type);
op::StatusOr<GstOpTensorType> gst_op_tensor_type_from_string(const std::string &name);

struct GstOpTensorDesc {
  std::string name;
  GstOpTensorType type = GstOpTensorType::kFloat32;
  std::vector<int64_t> dims;  // outermost first, every entry > 0

  int64_t elements() const;
  gsize bytes() const { return elements() * gst_op_tensor_type_size(type); }
};

struct GstOpTensorSlice {
  std::string tensor;  // the tensor it slices (the first one when written without a prefix)
  std::string name;
  int64_t start = 0;  // [start, end) along the last axis
  int64_t end = 0;
};

struct GstOpTensorInfo {
  std::vector<GstOpTensorDesc> tensors;
  std::vector<GstOpTensorSlice> slices;

  // Index of the tensor called `name`, or -1.
  int Find(const std::string &name) const;
  // The slice called `name` (of any tensor), or nullptr.
  const GstOpTensorSlice *FindSlice(const std::string &name) const;
  // Total bytes of all tensors.
  gsize bytes() const;
  bool operator==(const GstOpTensorInfo &o) const;
  bool operator!=(const GstOpTensorInfo &o) const { return !(*this == o); }
};

#define GST_OP_TENSOR_CAPS_NAME "application/x-op-tensors"

// Checks names are unique and non-empty, dims positive and slices inside their tensor.
op::Status gst_op_tensor_info_validate(const GstOpTensorInfo &info);
// Parses fixed tensor caps (the first structure); the error names the field and the reason.
op::StatusOr<GstOpTensorInfo> gst_op_tensor_info_from_caps(const GstCaps *caps);
op::StatusOr<GstOpTensorInfo> gst_op_tensor_info_from_structure(const GstStructure *s);
// Fixed caps for `info` (system memory; add a caps feature for device memory). (transfer full)
GstCaps *gst_op_tensor_info_to_caps(const GstOpTensorInfo &info);
// Writes the fields of `info` into `s` (keeps its name and other fields).
void gst_op_tensor_info_to_structure(const GstOpTensorInfo &info, GstStructure *s);
// Whether `s` is application/x-op-tensors.
gboolean gst_op_structure_is_tensors(const GstStructure *s);

// Reads tensor `desc` of a buffer (its memory `mem`) into `out` as desc.elements() floats,
// converting float16. The one way elements read tensors back to the host: memory of the OpenCL
// allocator is read with a queue read after its last writer, then one host wait (the caller
// needs the values now); it is never host-mapped here, because a tee hands the same buffer to
// several readers and two threads host-mapping one OpenCL buffer at once crashed PoCL. Other
// memory is mapped. `half` is scratch space for float16 tensors, kept by the caller so frames
// do not allocate. Errors say what is wrong (size, type, device).
op::Status gst_op_tensor_read_floats(GstMemory *mem, const GstOpTensorDesc &desc, float *out,
                                     std::vector<uint16_t> *half);

// ---- GstOpFrameMeta: where a frame came from and what was done to it ------------------------

enum GstOpStage {
  GST_OP_STAGE_WARP = 0,
  GST_OP_STAGE_VISION,
  GST_OP_STAGE_POLICY,
  GST_OP_STAGE_PARSE,
  GST_OP_STAGE_COUNT
};

// The newest road frame id that has entered the pipeline: opwarp (the road camera's) notes every
// frame's id as the frame arrives and puts a reference in the frame's meta, so the element that
// fills the frame's messages can tell how many newer frames arrived meanwhile (modelV2.frameAge,
// as openpilot's modeld takes it from the latest roadCameraState). Thread-safe, refcounted.
struct GstOpFrameClock;
GstOpFrameClock *gst_op_frame_clock_new(void);
GstOpFrameClock *gst_op_frame_clock_ref(GstOpFrameClock *clock);
void gst_op_frame_clock_unref(GstOpFrameClock *clock);
void gst_op_frame_clock_note(GstOpFrameClock *clock, guint32 road_frame_id);
// FALSE while no frame has been noted.
gboolean gst_op_frame_clock_newest(const GstOpFrameClock *clock, guint32 *road_frame_id);

struct GstOpFrameMeta {
  GstMeta meta;
  guint32 road_frame_id;
  guint32 wide_frame_id;
  guint64 road_sof_ns;  // start/end-of-frame capture timestamps of each camera
  guint64 road_eof_ns;
  guint64 wide_sof_ns;
  guint64 wide_eof_ns;
  gboolean calibration_seen;  // a calibration was received (modelV2.valid)
  guint32 dropped;            // frames dropped before this one
  // Set by the element that counts drops as modeld does (opvision): frame_drop_perc is then
  // openpilot's filtered percentage over every received frame, skipped ones included.
  gboolean drops_counted;
  gfloat frame_drop_perc;
  guint64 stage_ns[GST_OP_STAGE_COUNT];  // time spent in each stage, 0 when not run
  // The first and last device command of each stage for this frame (retained by the meta; NULL
  // when the stage did not run). Once the frame's output is complete, their profiling times
  // give the frame's own device time (gst_op_frame_meta_device_ns).
  cl_event stage_first[GST_OP_STAGE_COUNT];
  cl_event stage_last[GST_OP_STAGE_COUNT];
  // The road camera's frame clock (a reference; NULL when no opwarp noted the frame).
  GstOpFrameClock *clock;
};

GType gst_op_frame_meta_api_get_type(void);
#define GST_OP_FRAME_META_API_TYPE (gst_op_frame_meta_api_get_type())
const GstMetaInfo *gst_op_frame_meta_get_info(void);
#define GST_OP_FRAME_META_INFO (gst_op_frame_meta_get_info())

// Adds a zeroed frame meta. (transfer none)
GstOpFrameMeta *gst_buffer_add_op_frame_meta(GstBuffer *buffer);
// The frame meta of `buffer`, or NULL. (transfer none)
GstOpFrameMeta *gst_buffer_get_op_frame_meta(GstBuffer *buffer);
// The meta of `buffer`, added if missing. (transfer none)
GstOpFrameMeta *gst_buffer_get_or_add_op_frame_meta(GstBuffer *buffer);
// Records a stage's first and last device command (retained; `last` NULL: `first` alone).
void gst_op_frame_meta_set_stage_events(GstOpFrameMeta *meta, GstOpStage stage, cl_event first,
                                        cl_event last);
// Makes the meta hold a reference to `clock` (NULL: none), dropping the one it held.
void gst_op_frame_meta_set_clock(GstOpFrameMeta *meta, GstOpFrameClock *clock);
// The device time of a stage for this frame, from its first command's start to its last
// command's end, in ns; 0 when the stage did not run, has not completed, or the queue does not
// profile. Never waits.
guint64 gst_op_frame_meta_device_ns(const GstOpFrameMeta *meta, GstOpStage stage);
