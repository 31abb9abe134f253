#include "common/net/model_slot.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "op/gstopmemory.h"

GType gst_op_precision_get_type(void) {
  static gsize type = 0;
  static const GEnumValue values[] = {
      {int(op::net::Precision::kAuto), "fp16 where the device computes in half, else fp32", "auto"},
      {int(op::net::Precision::kFp32), "float32 storage and compute", "fp32"},
      {int(op::net::Precision::kFp16), "float16 storage", "fp16"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstOpPrecision", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}

namespace op::net {

// ---- ModelSlot ----------------------------------------------------------------------------

void ModelSlot::SetPath(const std::string &path) {
  bool load = false;
  {
    std::lock_guard<std::mutex> g(lock_);
    if (path == path_)
      return;
    path_ = path;
    load = open_;
  }
  if (load)
    StartLoad(path);
}

std::string ModelSlot::path() const {
  std::lock_guard<std::mutex> g(lock_);
  return path_;
}

void ModelSlot::SetPrecision(Precision p) {
  std::lock_guard<std::mutex> g(lock_);
  precision_ = p;
}

Precision ModelSlot::precision() const {
  std::lock_guard<std::mutex> g(lock_);
  return precision_;
}

Status ModelSlot::Open(std::shared_ptr<cl::Device> device) {
  std::string path;
  Precision precision;
  {
    std::lock_guard<std::mutex> g(lock_);
    path = path_;
    precision = precision_;
    device_ = device;
  }
  if (path.empty())
    return NotFound("no model: set the model property to an .onnx or .opm file");
  OP_ASSIGN_OR_RETURN(current_, Load(device, path, precision));
  std::lock_guard<std::mutex> g(lock_);
  current_path_ = path;
  open_ = true;
  return Status::Ok();
}

StatusOr<std::unique_ptr<Network>> ModelSlot::Load(std::shared_ptr<cl::Device> device,
                                                   const std::string &path, Precision precision) {
  GstElement *owner = owner_;
  // Posted from the loading thread (the bus is thread-safe): an application shows progress
  // during a cold start, when building a model's programs can take many seconds.
  auto progress = [owner, &path](size_t done, size_t total) {
    if (!owner)
      return;
    GstStructure *s =
        gst_structure_new("op-compile-progress", "model", G_TYPE_STRING, path.c_str(), "done",
                          G_TYPE_UINT, guint(done), "total", G_TYPE_UINT, guint(total), nullptr);
    gst_element_post_message(owner, gst_message_new_element(GST_OBJECT(owner), s));
  };
  return LoadNetwork(std::move(device), path, precision, progress);
}

void ModelSlot::StartLoad(const std::string &path) {
  // One load at a time: a newer path waits for the older load, whose result it then replaces.
  if (loader_.joinable())
    loader_.join();
  std::shared_ptr<cl::Device> device;
  Precision precision;
  {
    std::lock_guard<std::mutex> g(lock_);
    device = device_;
    precision = precision_;
  }
  loader_ = std::thread([this, device, precision, path] {
    auto loaded = Load(device, path, precision);
    std::lock_guard<std::mutex> g(lock_);
    pending_ = Pending();
    pending_.present = true;
    pending_.path = path;
    if (loaded.ok())
      pending_.network = std::move(loaded).value();
    else
      pending_.status = loaded.status();
  });
}

void ModelSlot::Adopt(std::unique_ptr<Network> network, const std::string &path) {
  current_ = std::move(network);
  std::lock_guard<std::mutex> g(lock_);
  current_path_ = path;
}

std::string ModelSlot::current_path() const {
  std::lock_guard<std::mutex> g(lock_);
  return current_path_;
}

ModelSlot::Pending ModelSlot::TakePending() {
  std::lock_guard<std::mutex> g(lock_);
  Pending p = std::move(pending_);
  pending_ = Pending();
  return p;
}

void ModelSlot::Close() {
  {
    std::lock_guard<std::mutex> g(lock_);
    open_ = false;
  }
  if (loader_.joinable())
    loader_.join();
  std::lock_guard<std::mutex> g(lock_);
  pending_ = Pending();
  current_.reset();
  current_path_.clear();
  device_.reset();
}

// ---- FrameTimer ---------------------------------------------------------------------------

int64_t FrameTimer::Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void FrameTimer::Track(cl_event done, int64_t start_ns, cl_event first, cl_event last) {
  Slot *slot = nullptr;
  {
    std::lock_guard<std::mutex> g(lock_);
    for (size_t i = 0; i < kSlots && !slot; i++) {
      Slot &s = slots_[(next_ + i) % kSlots];
      if (!s.busy) {
        slot = &s;
        next_ = (next_ + i + 1) % kSlots;
      }
    }
    if (!slot)
      return;
    slot->timer = this;
    slot->start_ns = start_ns;
    slot->first = first;
    slot->last = last;
    slot->busy = true;
    pending_++;
  }
  if (first)
    clRetainEvent(first);
  if (last)
    clRetainEvent(last);
  if (clSetEventCallback(done, CL_COMPLETE, &FrameTimer::OnComplete, slot) != CL_SUCCESS) {
    ReleaseEvents(slot);
    std::lock_guard<std::mutex> g(lock_);
    slot->busy = false;
    pending_--;
  }
}

void FrameTimer::ReleaseEvents(Slot *slot) {
  if (slot->first)
    clReleaseEvent(slot->first);
  if (slot->last)
    clReleaseEvent(slot->last);
  slot->first = slot->last = nullptr;
}

void CL_CALLBACK FrameTimer::OnComplete(cl_event done, cl_int status, void *data) {
  auto *slot = static_cast<Slot *>(data);
  FrameTimer *t = slot->timer;
  const int64_t end = Now();
  // Device time: every command of the frame has completed, so their profiling times are set
  // (on a queue without profiling the queries fail and only the first time is kept).
  cl_ulong dev_start = 0, dev_end = 0;
  const bool device =
      status == CL_COMPLETE && slot->first &&
      clGetEventProfilingInfo(slot->first, CL_PROFILING_COMMAND_START, sizeof(dev_start),
                              &dev_start, nullptr) == CL_SUCCESS &&
      clGetEventProfilingInfo(slot->last ? slot->last : done, CL_PROFILING_COMMAND_END,
                              sizeof(dev_end), &dev_end, nullptr) == CL_SUCCESS &&
      dev_end >= dev_start;
  ReleaseEvents(slot);
  std::lock_guard<std::mutex> g(t->lock_);
  if (device) {
    t->stats_.device_frames++;
    t->stats_.device_total_ns += dev_end - dev_start;
    t->stats_.device_last_ns = dev_end - dev_start;
  }
  if (status == CL_COMPLETE) {
    const uint64_t ns = uint64_t(end > slot->start_ns ? end - slot->start_ns : 0);
    t->stats_.frames++;
    t->stats_.total_ns += ns;
    t->stats_.last_ns = ns;
    if (ns > t->stats_.max_ns)
      t->stats_.max_ns = ns;
  }
  slot->busy = false;
  if (--t->pending_ == 0)
    t->idle_.notify_all();
}

void FrameTimer::Drain() {
  std::unique_lock<std::mutex> g(lock_);
  idle_.wait(g, [this] { return pending_ == 0; });
}

void FrameTimer::Reset() {
  std::lock_guard<std::mutex> g(lock_);
  stats_ = Stats();
}

FrameTimer::Stats FrameTimer::stats() const {
  std::lock_guard<std::mutex> g(lock_);
  return stats_;
}

std::string FrameTimer::Summary() const {
  const Stats s = stats();
  char line[200];
  std::snprintf(line, sizeof line,
                "%" PRIu64
                " frames: device time %.2f ms per frame; submission to completion "
                "%.2f ms per frame, longest %.2f ms",
                s.frames, s.device_mean_ns() / 1e6, s.mean_ns() / 1e6, s.max_ns / 1e6);
  return line;
}

// ---- properties ---------------------------------------------------------------------------

void InstallFrameTimerProperties(GObjectClass *klass, guint first) {
  const auto ro = (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(
      klass, first,
      g_param_spec_double("mean-time", "Mean time",
                          "Mean time from submission to device completion per frame (ms)", 0,
                          G_MAXDOUBLE, 0, ro));
  g_object_class_install_property(
      klass, first + 1,
      g_param_spec_double("max-time", "Maximum time",
                          "Longest time from submission to device completion of a frame (ms)", 0,
                          G_MAXDOUBLE, 0, ro));
  g_object_class_install_property(
      klass, first + 2,
      g_param_spec_double("device-time", "Device time",
                          "Mean device time per frame, from the start of its first kernel to the "
                          "end of its last (ms; 0 where the queue has no profiling)",
                          0, G_MAXDOUBLE, 0, ro));
}

bool GetFrameTimerProperty(const FrameTimer &timer, guint first, guint id, GValue *value) {
  if (id < first || id > first + 2)
    return false;
  const FrameTimer::Stats s = timer.stats();
  const double ns = id == first       ? s.mean_ns()
                    : id == first + 1 ? double(s.max_ns)
                                      : s.device_mean_ns();
  g_value_set_double(value, ns / 1e6);
  return true;
}

// ---- DeviceInput --------------------------------------------------------------------------

StatusOr<DeviceTensor> DeviceInput(GstOpContext *ctx, GstOpUploader *uploader, GstMemory *memory,
                                   size_t bytes, cl_mem staging) {
  DeviceTensor t;
  if (gst_is_op_memory_on(memory, ctx)) {
    GstMapInfo info;
    if (!gst_op_memory_map_cl(memory, &info, GST_MAP_READ))
      return Internal("cannot map an OpenCL memory of our own context for the device");
    t.mem = gst_op_map_info_get_cl_mem(&info);
    t.offset = memory->offset;
    gst_memory_unmap(memory, &info);
    if (memory->size < bytes)
      return InvalidArgument("an input memory of " + std::to_string(memory->size) +
                             " bytes is smaller than the " + std::to_string(bytes) +
                             " bytes of its tensor");
    t.ready = gst_op_memory_get_write_event(memory);
    return t;
  }
  // System memory (or another device's): the compatibility path, one upload per frame into a
  // buffer made at negotiation; the uploader keeps the memory until the device has read it.
  if (!staging || !uploader)
    return Internal("no staging buffer for a system-memory input");
  OP_ASSIGN_OR_RETURN(cl::EventHandle written, uploader->WriteMemory(memory, bytes, staging, {}));
  t.mem = staging;
  t.ready = std::move(written);
  return t;
}

}  // namespace op::net
