#include "common/net/model_slot.h"

#include "op/gstoperror.h"
#include "op/gstopmemory.h"

GType gst_op_precision_get_type(void) {
  static gsize type = 0;
  static const GEnumValue values[] = {
      {int(op::net::Precision::kAuto),
       "int8 for a quantized model, else fp16 where the device computes in half, else fp32",
       "auto"},
      {int(op::net::Precision::kFp32), "float32 storage and compute", "fp32"},
      {int(op::net::Precision::kFp16), "float16 storage", "fp16"},
      {int(op::net::Precision::kInt8),
       "a quantized model's integer ops, float parts in float32 (needs a quantized model)", "int8"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstOpPrecision", values);
    gst_type_mark_as_plugin_api(t, (GstPluginAPIFlags)0);
    g_once_init_leave(&type, t);
  }
  return type;
}

GST_DEBUG_CATEGORY_STATIC(gst_op_model_slot_debug);
#define GST_CAT_DEFAULT gst_op_model_slot_debug

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

void ModelSlot::SetOwner(GstElement *owner) {
  owner_ = owner;
  GST_DEBUG_CATEGORY_INIT(gst_op_model_slot_debug, "opmodelslot", 0,
                          "model loading and swapping of opvision and oppolicy");
}

bool ModelSlot::Start(std::shared_ptr<cl::Device> device, const char *role, const char *kind,
                      const Prepare &prepare) {
  std::string path;
  Precision precision;
  {
    std::lock_guard<std::mutex> g(lock_);
    path = path_;
    precision = precision_;
    device_ = device;
  }
  Status s = path.empty() ? NotFound("no model: set the model property to an .onnx or .opm file")
                          : Status::Ok();
  if (s.ok()) {
    // A preload of this very model is waited for; anything else it loaded is dropped.
    if (loader_.joinable())
      loader_.join();
    Pending pre = TakePending();
    if (pre.present && pre.path == path && pre.precision == precision && pre.device == device) {
      GST_DEBUG_OBJECT(owner_, "taking the preloaded %s model", role);
      if (pre.status.ok())
        current_ = std::move(pre.network);
      else
        s = pre.status;
    } else {
      auto loaded = Load(device, path, precision);
      if (loaded.ok())
        current_ = std::move(loaded).value();
      else
        s = loaded.status();
    }
  }
  if (!s.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(owner_, s, LIBRARY, INIT,
                                ("Could not load the %s model \"%s\".", role, path.c_str()));
    Close();
    return false;
  }
  s = prepare(*current_);
  if (!s.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(owner_, s, CORE, NEGOTIATION,
                                ("The model \"%s\" is not %s.", path.c_str(), kind));
    Close();
    return false;
  }
  std::lock_guard<std::mutex> g(lock_);
  current_path_ = path;
  open_ = true;
  return true;
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

void ModelSlot::Preload(std::shared_ptr<cl::Device> device) {
  std::string path;
  {
    std::lock_guard<std::mutex> g(lock_);
    if (open_ || path_.empty())
      return;
    device_ = std::move(device);
    path = path_;
  }
  StartLoad(path);
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
    pending_.precision = precision;
    pending_.device = device;
    if (loaded.ok())
      pending_.network = std::move(loaded).value();
    else
      pending_.status = loaded.status();
  });
}

ModelSlot::Swap ModelSlot::AdoptPending(const Prepare &prepare, const GstOpTensorInfo &negotiated) {
  Pending pending = TakePending();
  if (!pending.present)
    return Swap::kNone;
  if (!pending.status.ok()) {
    GST_OP_ELEMENT_WARNING_STATUS(
        owner_, pending.status, RESOURCE, NOT_FOUND,
        ("Could not load model \"%s\"; the previous model keeps running.", pending.path.c_str()));
    return Swap::kNone;
  }
  Status fit = prepare(*pending.network);
  if (!fit.ok()) {
    GST_OP_ELEMENT_WARNING_STATUS(
        owner_, fit, CORE, NEGOTIATION,
        ("Model \"%s\" does not fit this stream; the previous model keeps running.",
         pending.path.c_str()));
    return Swap::kNone;
  }
  const Swap swap = pending.network->outputs() != negotiated ? Swap::kNewOutputs : Swap::kSame;
  GST_INFO_OBJECT(owner_, "switching to %s", pending.network->Describe().c_str());
  current_ = std::move(pending.network);
  std::lock_guard<std::mutex> g(lock_);
  current_path_ = pending.path;
  return swap;
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
