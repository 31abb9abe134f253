#include "op/gstoptensor.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "cl/half.h"
#include "op/gstopcontext.h"
#include "op/gstopmemory.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_tensor_debug);
#define GST_CAT_DEFAULT gst_op_tensor_debug

static void InitDebug() {
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    GST_DEBUG_CATEGORY_INIT(gst_op_tensor_debug, "optensor", 0, "tensor caps and frame meta");
    g_once_init_leave(&once, 1);
  }
}

namespace {
struct TypeName {
  GstOpTensorType type;
  const char *name;
  gsize size;
};
// Switches below have no default, so a new type is handled everywhere or does not compile.
constexpr TypeName kTypes[] = {
    {GstOpTensorType::kUint8, "uint8", 1},
    {GstOpTensorType::kInt64, "int64", 8},
    {GstOpTensorType::kFloat16, "float16", 2},
    {GstOpTensorType::kFloat32, "float32", 4},
};
}  // namespace

const char *gst_op_tensor_type_to_string(GstOpTensorType type) {
  for (const TypeName &t : kTypes)
    if (t.type == type)
      return t.name;
  return "unknown";
}

gsize gst_op_tensor_type_size(GstOpTensorType type) {
  for (const TypeName &t : kTypes)
    if (t.type == type)
      return t.size;
  return 0;
}

op::StatusOr<GstOpTensorType> gst_op_tensor_type_from_string(const std::string &name) {
  for (const TypeName &t : kTypes)
    if (name == t.name)
      return t.type;
  return op::InvalidArgument("unknown tensor type \"" + name +
                             "\" (known: uint8, int64, float16, float32)");
}

int64_t GstOpTensorDesc::elements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

int GstOpTensorInfo::Find(const std::string &name) const {
  for (size_t i = 0; i < tensors.size(); i++)
    if (tensors[i].name == name)
      return static_cast<int>(i);
  return -1;
}

const GstOpTensorSlice *GstOpTensorInfo::FindSlice(const std::string &name) const {
  for (const GstOpTensorSlice &s : slices)
    if (s.name == name)
      return &s;
  return nullptr;
}

gsize GstOpTensorInfo::bytes() const {
  gsize total = 0;
  for (const GstOpTensorDesc &t : tensors)
    total += t.bytes();
  return total;
}

bool GstOpTensorInfo::operator==(const GstOpTensorInfo &o) const {
  if (tensors.size() != o.tensors.size() || slices.size() != o.slices.size())
    return false;
  for (size_t i = 0; i < tensors.size(); i++)
    if (tensors[i].name != o.tensors[i].name || tensors[i].type != o.tensors[i].type ||
        tensors[i].dims != o.tensors[i].dims)
      return false;
  for (size_t i = 0; i < slices.size(); i++)
    if (slices[i].tensor != o.slices[i].tensor || slices[i].name != o.slices[i].name ||
        slices[i].start != o.slices[i].start || slices[i].end != o.slices[i].end)
      return false;
  return true;
}

op::Status gst_op_tensor_info_validate(const GstOpTensorInfo &info) {
  if (info.tensors.empty())
    return op::InvalidArgument("no tensors");
  std::set<std::string> names;
  for (const GstOpTensorDesc &t : info.tensors) {
    if (t.name.empty())
      return op::InvalidArgument("field names: a tensor name is empty");
    if (!names.insert(t.name).second)
      return op::InvalidArgument("field names: tensor \"" + t.name + "\" appears twice");
    if (t.dims.empty())
      return op::InvalidArgument("field dims: tensor \"" + t.name + "\" has no dimensions");
    for (int64_t d : t.dims)
      if (d <= 0)
        return op::InvalidArgument("field dims: tensor \"" + t.name +
                                   "\" has a dimension that is not positive");
  }
  std::set<std::string> slice_names;
  for (const GstOpTensorSlice &s : info.slices) {
    int i = info.Find(s.tensor);
    if (i < 0)
      return op::InvalidArgument("field slices: slice \"" + s.name + "\" names unknown tensor \"" +
                                 s.tensor + "\"");
    if (!slice_names.insert(s.tensor + "/" + s.name).second)
      return op::InvalidArgument("field slices: slice \"" + s.name + "\" appears twice");
    int64_t last = info.tensors[i].dims.back();
    if (s.start < 0 || s.end <= s.start || s.end > last)
      return op::InvalidArgument("field slices: slice \"" + s.name + "\" [" +
                                 std::to_string(s.start) + ", " + std::to_string(s.end) +
                                 ") is empty or outside the last axis of \"" + s.tensor + "\" (" +
                                 std::to_string(last) + ")");
  }
  return op::Status::Ok();
}

// Reads a field that is a string or an array of strings.
static op::StatusOr<std::vector<std::string>> ReadStrings(const GstStructure *s, const char *field,
                                                          bool required) {
  const GValue *v = gst_structure_get_value(s, field);
  std::vector<std::string> out;
  if (!v) {
    if (required)
      return op::InvalidArgument(std::string("field ") + field + " is missing");
    return out;
  }
  // A string field may hold NULL ("(string)NULL" in a caps string): that is no name.
  if (G_VALUE_HOLDS_STRING(v)) {
    if (!g_value_get_string(v))
      return op::InvalidArgument(std::string("field ") + field + " is a NULL string");
    out.emplace_back(g_value_get_string(v));
    return out;
  }
  if (!GST_VALUE_HOLDS_ARRAY(v))
    return op::InvalidArgument(std::string("field ") + field + " must be a string array like <\"" +
                               "a\", \"b\"> (got " + G_VALUE_TYPE_NAME(v) +
                               (GST_VALUE_HOLDS_LIST(v) ? ", caps not fixed" : "") + ")");
  guint n = gst_value_array_get_size(v);
  for (guint i = 0; i < n; i++) {
    const GValue *e = gst_value_array_get_value(v, i);
    if (!G_VALUE_HOLDS_STRING(e) || !g_value_get_string(e))
      return op::InvalidArgument(
          std::string("field ") + field + ": entry " + std::to_string(i) +
          (G_VALUE_HOLDS_STRING(e) ? " is a NULL string" : " is not a string"));
    out.emplace_back(g_value_get_string(e));
  }
  return out;
}

static bool ParseInt(const std::string &text, int64_t *out) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

static std::vector<std::string> Split(const std::string &text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos)
      break;
    start = pos + 1;
  }
  return parts;
}

gboolean gst_op_structure_is_tensors(const GstStructure *s) {
  return s && gst_structure_has_name(s, GST_OP_TENSOR_CAPS_NAME);
}

op::StatusOr<GstOpTensorInfo> gst_op_tensor_info_from_structure(const GstStructure *s) {
  InitDebug();
  if (!gst_op_structure_is_tensors(s))
    return op::InvalidArgument(std::string("caps are ") +
                               (s ? gst_structure_get_name(s) : "empty") +
                               ", not " GST_OP_TENSOR_CAPS_NAME);
  OP_ASSIGN_OR_RETURN(auto names, ReadStrings(s, "names", true));
  OP_ASSIGN_OR_RETURN(auto types, ReadStrings(s, "types", true));
  OP_ASSIGN_OR_RETURN(auto dims, ReadStrings(s, "dims", true));
  OP_ASSIGN_OR_RETURN(auto slices, ReadStrings(s, "slices", false));
  if (types.size() != names.size() || dims.size() != names.size())
    return op::InvalidArgument("fields names, types and dims must have one entry per tensor (" +
                               std::to_string(names.size()) + " names, " +
                               std::to_string(types.size()) + " types, " +
                               std::to_string(dims.size()) + " dims)");
  if (names.empty())
    return op::InvalidArgument("field names: no tensors");
  GstOpTensorInfo info;
  for (size_t i = 0; i < names.size(); i++) {
    GstOpTensorDesc t;
    t.name = names[i];
    auto type = gst_op_tensor_type_from_string(types[i]);
    if (!type.ok())
      return op::InvalidArgument("field types: " + type.status().message());
    t.type = *type;
    for (const std::string &d : Split(dims[i], ',')) {
      int64_t v = 0;
      if (!ParseInt(d, &v) || v <= 0)
        return op::InvalidArgument("field dims: \"" + dims[i] + "\" of tensor \"" + t.name +
                                   "\" is not a comma-separated list of positive integers");
      t.dims.push_back(v);
    }
    info.tensors.push_back(std::move(t));
  }
  for (const std::string &entry : slices) {
    std::vector<std::string> parts = Split(entry, ':');
    GstOpTensorSlice sl;
    if (parts.size() != 3 || !ParseInt(parts[1], &sl.start) || !ParseInt(parts[2], &sl.end))
      return op::InvalidArgument("field slices: \"" + entry +
                                 "\" is not name:start:end or tensor/name:start:end");
    size_t slash = parts[0].find('/');
    if (slash == std::string::npos) {
      sl.tensor = info.tensors.front().name;
      sl.name = parts[0];
    } else {
      sl.tensor = parts[0].substr(0, slash);
      sl.name = parts[0].substr(slash + 1);
    }
    if (sl.name.empty())
      return op::InvalidArgument("field slices: \"" + entry + "\" has an empty name");
    info.slices.push_back(std::move(sl));
  }
  OP_RETURN_IF_ERROR(gst_op_tensor_info_validate(info));
  return info;
}

op::StatusOr<GstOpTensorInfo> gst_op_tensor_info_from_caps(const GstCaps *caps) {
  if (!caps || gst_caps_get_size(caps) == 0)
    return op::InvalidArgument("caps are empty");
  return gst_op_tensor_info_from_structure(gst_caps_get_structure(caps, 0));
}

static void SetStrings(GstStructure *s, const char *field, const std::vector<std::string> &vals) {
  GValue array = G_VALUE_INIT;
  gst_value_array_init(&array, vals.size());
  for (const std::string &v : vals) {
    GValue item = G_VALUE_INIT;
    g_value_init(&item, G_TYPE_STRING);
    g_value_set_string(&item, v.c_str());
    gst_value_array_append_and_take_value(&array, &item);
  }
  gst_structure_take_value(s, field, &array);
}

void gst_op_tensor_info_to_structure(const GstOpTensorInfo &info, GstStructure *s) {
  std::vector<std::string> names, types, dims, slices;
  for (const GstOpTensorDesc &t : info.tensors) {
    names.push_back(t.name);
    types.push_back(gst_op_tensor_type_to_string(t.type));
    std::string d;
    for (size_t i = 0; i < t.dims.size(); i++)
      d += (i ? "," : "") + std::to_string(t.dims[i]);
    dims.push_back(d);
  }
  for (const GstOpTensorSlice &sl : info.slices) {
    std::string prefix = info.tensors.empty() || sl.tensor == info.tensors.front().name
                             ? std::string()
                             : sl.tensor + "/";
    slices.push_back(prefix + sl.name + ":" + std::to_string(sl.start) + ":" +
                     std::to_string(sl.end));
  }
  SetStrings(s, "names", names);
  SetStrings(s, "types", types);
  SetStrings(s, "dims", dims);
  if (slices.empty())
    gst_structure_remove_field(s, "slices");
  else
    SetStrings(s, "slices", slices);
}

GstCaps *gst_op_tensor_info_to_caps(const GstOpTensorInfo &info) {
  GstStructure *s = gst_structure_new_empty(GST_OP_TENSOR_CAPS_NAME);
  gst_op_tensor_info_to_structure(info, s);
  return gst_caps_new_full(s, nullptr);
}

// ---- GstOpFrameMeta -----------------------------------------------------------------------

GType gst_op_frame_meta_api_get_type(void) {
  static GType type = 0;
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    // No tags: provenance does not depend on the pixels, so every transform keeps it.
    static const gchar *tags[] = {nullptr};
    type = gst_meta_api_type_register("GstOpFrameMetaAPI", tags);
    g_once_init_leave(&once, 1);
  }
  return type;
}

struct GstOpFrameClock {
  std::atomic<int> refs{1};
  // The newest id in the low 32 bits, bit 32 set once a frame was noted: one atomic word.
  std::atomic<guint64> newest{0};
};

GstOpFrameClock *gst_op_frame_clock_new(void) {
  return new GstOpFrameClock();
}

GstOpFrameClock *gst_op_frame_clock_ref(GstOpFrameClock *clock) {
  if (clock)
    clock->refs.fetch_add(1, std::memory_order_relaxed);
  return clock;
}

void gst_op_frame_clock_unref(GstOpFrameClock *clock) {
  if (clock && clock->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
    delete clock;
}

void gst_op_frame_clock_note(GstOpFrameClock *clock, guint32 road_frame_id) {
  if (clock)
    clock->newest.store((guint64(1) << 32) | road_frame_id, std::memory_order_release);
}

gboolean gst_op_frame_clock_newest(const GstOpFrameClock *clock, guint32 *road_frame_id) {
  const guint64 v = clock ? clock->newest.load(std::memory_order_acquire) : 0;
  if (!(v >> 32))
    return FALSE;
  *road_frame_id = guint32(v);
  return TRUE;
}

static gboolean FrameMetaInit(GstMeta *meta, gpointer, GstBuffer *) {
  auto *m = reinterpret_cast<GstOpFrameMeta *>(meta);
  std::memset(reinterpret_cast<guint8 *>(m) + sizeof(GstMeta), 0,
              sizeof(GstOpFrameMeta) - sizeof(GstMeta));
  return TRUE;
}

static void ReleaseStageEvents(GstOpFrameMeta *m) {
  for (int s = 0; s < GST_OP_STAGE_COUNT; s++) {
    if (m->stage_first[s])
      clReleaseEvent(m->stage_first[s]);
    if (m->stage_last[s])
      clReleaseEvent(m->stage_last[s]);
    m->stage_first[s] = m->stage_last[s] = nullptr;
  }
}

static void FrameMetaFree(GstMeta *meta, GstBuffer *) {
  auto *m = reinterpret_cast<GstOpFrameMeta *>(meta);
  ReleaseStageEvents(m);
  gst_op_frame_clock_unref(m->clock);
  m->clock = nullptr;
}

static gboolean FrameMetaTransform(GstBuffer *dest, GstMeta *meta, GstBuffer *, GQuark, gpointer) {
  auto *src = reinterpret_cast<GstOpFrameMeta *>(meta);
  GstOpFrameMeta *dst = gst_buffer_get_or_add_op_frame_meta(dest);
  if (!dst)
    return FALSE;
  if (dst == src)
    return TRUE;
  ReleaseStageEvents(dst);
  gst_op_frame_clock_unref(dst->clock);
  std::memcpy(reinterpret_cast<guint8 *>(dst) + sizeof(GstMeta),
              reinterpret_cast<guint8 *>(src) + sizeof(GstMeta),
              sizeof(GstOpFrameMeta) - sizeof(GstMeta));
  for (int s = 0; s < GST_OP_STAGE_COUNT; s++) {
    if (dst->stage_first[s])
      clRetainEvent(dst->stage_first[s]);
    if (dst->stage_last[s])
      clRetainEvent(dst->stage_last[s]);
  }
  gst_op_frame_clock_ref(dst->clock);
  return TRUE;
}

void gst_op_frame_meta_set_clock(GstOpFrameMeta *meta, GstOpFrameClock *clock) {
  if (!meta || meta->clock == clock)
    return;
  gst_op_frame_clock_ref(clock);
  gst_op_frame_clock_unref(meta->clock);
  meta->clock = clock;
}

void gst_op_frame_meta_set_stage_events(GstOpFrameMeta *meta, GstOpStage stage, cl_event first,
                                        cl_event last) {
  if (!meta || stage < 0 || stage >= GST_OP_STAGE_COUNT)
    return;
  if (!last)
    last = first;
  if (first)
    clRetainEvent(first);
  if (last)
    clRetainEvent(last);
  if (meta->stage_first[stage])
    clReleaseEvent(meta->stage_first[stage]);
  if (meta->stage_last[stage])
    clReleaseEvent(meta->stage_last[stage]);
  meta->stage_first[stage] = first;
  meta->stage_last[stage] = last;
}

guint64 gst_op_frame_meta_device_ns(const GstOpFrameMeta *meta, GstOpStage stage) {
  if (!meta || stage < 0 || stage >= GST_OP_STAGE_COUNT || !meta->stage_first[stage])
    return 0;
  cl_int status = CL_QUEUED;
  if (clGetEventInfo(meta->stage_last[stage], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                     &status, nullptr) != CL_SUCCESS ||
      status != CL_COMPLETE)
    return 0;
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(meta->stage_first[stage], CL_PROFILING_COMMAND_START, sizeof(start),
                              &start, nullptr) != CL_SUCCESS ||
      clGetEventProfilingInfo(meta->stage_last[stage], CL_PROFILING_COMMAND_END, sizeof(end), &end,
                              nullptr) != CL_SUCCESS ||
      end < start)
    return 0;
  return guint64(end - start);
}

const GstMetaInfo *gst_op_frame_meta_get_info(void) {
  static const GstMetaInfo *info = nullptr;
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    info = gst_meta_register(GST_OP_FRAME_META_API_TYPE, "GstOpFrameMeta", sizeof(GstOpFrameMeta),
                             FrameMetaInit, FrameMetaFree, FrameMetaTransform);
    g_once_init_leave(&once, 1);
  }
  return info;
}

GstOpFrameMeta *gst_buffer_add_op_frame_meta(GstBuffer *buffer) {
  return reinterpret_cast<GstOpFrameMeta *>(
      gst_buffer_add_meta(buffer, GST_OP_FRAME_META_INFO, nullptr));
}

GstOpFrameMeta *gst_buffer_get_op_frame_meta(GstBuffer *buffer) {
  return reinterpret_cast<GstOpFrameMeta *>(
      gst_buffer_get_meta(buffer, GST_OP_FRAME_META_API_TYPE));
}

GstOpFrameMeta *gst_buffer_get_or_add_op_frame_meta(GstBuffer *buffer) {
  GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(buffer);
  return m ? m : gst_buffer_add_op_frame_meta(buffer);
}

// ---- reading tensors back ------------------------------------------------------------------

// The bytes of one tensor memory into `host`.
static op::Status ReadTensorBytes(GstMemory *mem, size_t bytes, uint8_t *host) {
  if (mem->size < bytes)
    return op::InvalidArgument("it has " + std::to_string(mem->size) + " bytes, its caps say " +
                               std::to_string(bytes));
  if (gst_is_op_memory(mem)) {
    GstMapInfo info;
    if (!gst_op_memory_map_cl(mem, &info, GST_MAP_READ))
      return op::DeviceError("its OpenCL buffer is not reachable");
    cl_mem buffer = gst_op_map_info_get_cl_mem(&info);
    gst_memory_unmap(mem, &info);
    op::cl::EventHandle writer = gst_op_memory_get_write_event(mem);
    op::cl::Queue &queue = gst_op_context_get_queue(gst_op_memory_get_context(mem));
    OP_ASSIGN_OR_RETURN(op::cl::EventHandle read,
                        queue.Read(buffer, mem->offset, bytes, host, {writer.get()}));
    // The caller uses the values right after this, so waiting here is the point.
    return op::cl::WaitForEvent(read.get());
  }
  GstMapInfo map;
  if (!gst_memory_map(mem, &map, GST_MAP_READ))
    return op::IoError("mapping it failed");
  std::memcpy(host, map.data, bytes);
  gst_memory_unmap(mem, &map);
  return op::Status::Ok();
}

op::Status gst_op_tensor_read_floats(GstMemory *mem, const GstOpTensorDesc &desc, float *out,
                                     std::vector<uint16_t> *half) {
  const size_t n = static_cast<size_t>(desc.elements());
  switch (desc.type) {
    case GstOpTensorType::kFloat32:
      return ReadTensorBytes(mem, desc.bytes(), reinterpret_cast<uint8_t *>(out));
    case GstOpTensorType::kFloat16: {
      half->resize(n);
      OP_RETURN_IF_ERROR(
          ReadTensorBytes(mem, desc.bytes(), reinterpret_cast<uint8_t *>(half->data())));
      for (size_t k = 0; k < n; k++)
        out[k] = op::cl::HalfToFloat((*half)[k]);
      return op::Status::Ok();
    }
    default:
      return op::Unsupported(std::string("a ") + gst_op_tensor_type_to_string(desc.type) +
                             " tensor read as floats");
  }
}
