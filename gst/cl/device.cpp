#include "device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

namespace op::cl {
namespace {

// PoCL's CPU devices compile, at a kernel's first launch, a work-group function specialised for
// that launch's local size, global offset and grid size, one launch after the other on the
// device's thread: with empty caches that was more than a third of a full-size model's start-up.
// The generic work-group function (any local size) is the one PoCL compiles anyway when a
// program's binary is stored, and our kernels measured as fast with it (their inner loops are
// written out with explicit vectors; docs/devices.md has the figures). So unless the user chose
// otherwise, launches use the generic function: set before the first OpenCL call, as PoCL reads
// its options from the environment.
void PrepareDrivers() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("POCL_WORK_GROUP_SPECIALIZATION", "0", /*overwrite=*/0); });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return Lower(haystack).find(Lower(needle)) != std::string::npos;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\0' || std::isspace(static_cast<unsigned char>(s.back()))))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
    i++;
  return s.substr(i);
}

std::string PlatformString(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0)
    return {};
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  return Trim(s);
}

std::string DeviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0)
    return {};
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  return Trim(s);
}

template <typename T>
T DeviceValue(cl_device_id d, cl_device_info what, T fallback = T{}) {
  T v{};
  if (clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) != CL_SUCCESS)
    return fallback;
  return v;
}

Profile ProfileOf(const Capabilities &c) {
  if (c.is_cpu)
    return Profile::kCpu;
  if (Contains(c.device_vendor, "qualcomm") || Contains(c.device_name, "adreno") ||
      Contains(c.platform_name, "qualcomm"))
    return Profile::kAdreno;
  if (Contains(c.device_vendor, "advanced micro devices") || Contains(c.device_vendor, "amd") ||
      Contains(c.platform_name, "amd"))
    return Profile::kAmd;
  return Profile::kOther;
}

// Rank of a GPU for `auto`: Qualcomm first, then AMD, then any other GPU.
int GpuRank(const Capabilities &c) {
  switch (c.profile) {
    case Profile::kAdreno:
      return 0;
    case Profile::kAmd:
      return 1;
    case Profile::kOther:
      return 2;
    case Profile::kCpu:
      return 3;
  }
  return 3;
}

std::string Listing(const std::vector<DeviceInfo> &all) {
  std::string s;
  for (const DeviceInfo &d : all) {
    if (!s.empty())
      s += "; ";
    s += std::to_string(d.platform_index) + ":" + std::to_string(d.device_index) + " " +
         d.caps.device_name;
  }
  return s.empty() ? "none" : s;
}

}  // namespace

const char *ProfileName(Profile p) {
  switch (p) {
    case Profile::kAdreno:
      return "adreno";
    case Profile::kAmd:
      return "amd";
    case Profile::kCpu:
      return "cpu";
    case Profile::kOther:
      return "other";
  }
  return "other";
}

bool Capabilities::HasExtension(std::string_view name) const {
  size_t pos = 0;
  while ((pos = extensions.find(name, pos)) != std::string::npos) {
    size_t end = pos + name.size();
    bool starts = pos == 0 || extensions[pos - 1] == ' ';
    bool ends = end == extensions.size() || extensions[end] == ' ';
    if (starts && ends)
      return true;
    pos = end;
  }
  return false;
}

std::string Capabilities::Describe() const {
  std::string s = device_name + " (" +
                  (is_gpu   ? "GPU"
                   : is_cpu ? "CPU"
                            : "accelerator") +
                  ", profile " + ProfileName(profile) + ", " + platform_name + " " +
                  driver_version + ", " + std::to_string(compute_units) + " compute units";
  s += images ? ", images" : ", no images";
  s += fp16 ? ", fp16" : ", no fp16";
  if (unified_memory)
    s += ", unified memory";
  return s + ")";
}

StatusOr<Capabilities> QueryCapabilities(cl_platform_id platform, cl_device_id device) {
  Capabilities c;
  c.platform_name = PlatformString(platform, CL_PLATFORM_NAME);
  c.platform_version = PlatformString(platform, CL_PLATFORM_VERSION);
  c.device_name = DeviceString(device, CL_DEVICE_NAME);
  c.device_vendor = DeviceString(device, CL_DEVICE_VENDOR);
  c.device_version = DeviceString(device, CL_DEVICE_VERSION);
  c.driver_version = DeviceString(device, CL_DRIVER_VERSION);
  c.c_version = DeviceString(device, CL_DEVICE_OPENCL_C_VERSION);
  c.extensions = DeviceString(device, CL_DEVICE_EXTENSIONS);
  if (c.device_name.empty())
    return DeviceError("clGetDeviceInfo returned no device name");

  auto type = DeviceValue<cl_device_type>(device, CL_DEVICE_TYPE);
  c.is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  c.is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
  c.fp16 = c.HasExtension("cl_khr_fp16");
  c.fp64 = c.HasExtension("cl_khr_fp64");
  c.exact_divide_sqrt = (DeviceValue<cl_device_fp_config>(device, CL_DEVICE_SINGLE_FP_CONFIG) &
                         CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  c.images = DeviceValue<cl_bool>(device, CL_DEVICE_IMAGE_SUPPORT) == CL_TRUE;
  c.image_from_buffer = c.HasExtension("cl_khr_image2d_from_buffer");
  // Deprecated in 2.0 but still answered by every driver we target; CPUs share memory anyway.
  c.unified_memory =
      c.is_cpu || DeviceValue<cl_bool>(device, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
  c.base_address_align_bits = DeviceValue<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN);
  c.image_pitch_align_pixels = DeviceValue<cl_uint>(device, CL_DEVICE_IMAGE_PITCH_ALIGNMENT);
  c.max_work_group_size = DeviceValue<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(c.max_work_item_sizes),
                  c.max_work_item_sizes.data(), nullptr);
  c.local_mem_bytes = DeviceValue<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE);
  c.global_mem_bytes = DeviceValue<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
  c.max_alloc_bytes = DeviceValue<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  c.compute_units = DeviceValue<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS);
  c.native_float_lanes = DeviceValue<cl_uint>(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT);
  c.qcom_dmabuf = c.HasExtension("cl_qcom_dmabuf_host_ptr");
  c.khr_dmabuf = c.HasExtension("cl_khr_external_memory_dma_buf");
  c.arm_import = c.HasExtension("cl_arm_import_memory");
  c.profile = ProfileOf(c);
  return c;
}

StatusOr<std::vector<DeviceInfo>> ListDevices() {
  PrepareDrivers();
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || np == 0)
    return NotFound("no OpenCL platform is installed (is an ICD such as pocl-opencl-icd present?)");
  if (err != CL_SUCCESS)
    return ClError("clGetPlatformIDs", err);
  std::vector<cl_platform_id> platforms(np);
  OP_CL_CHECK(clGetPlatformIDs(np, platforms.data(), nullptr));

  std::vector<DeviceInfo> all;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS)
      continue;
    std::vector<cl_device_id> devices(nd);
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr) != CL_SUCCESS)
      continue;
    for (cl_uint d = 0; d < nd; d++) {
      auto caps = QueryCapabilities(platforms[p], devices[d]);
      if (!caps.ok())
        continue;
      all.push_back({platforms[p], devices[d], static_cast<int>(p), static_cast<int>(d),
                     std::move(caps).value()});
    }
  }
  if (all.empty())
    return NotFound("no OpenCL device found on any platform");
  return all;
}

StatusOr<Selection> SelectDevice(std::string_view spec_in) {
  std::string spec = Lower(Trim(std::string(spec_in)));
  OP_ASSIGN_OR_RETURN(std::vector<DeviceInfo> all, ListDevices());

  if (spec.empty() || spec == "auto" || spec == "gpu") {
    const DeviceInfo *best = nullptr;
    for (const DeviceInfo &d : all)
      if (d.caps.is_gpu && (!best || GpuRank(d.caps) < GpuRank(best->caps)))
        best = &d;
    if (best)
      return Selection{*best, {}};
    if (spec == "gpu")
      return NotFound("device \"gpu\": no OpenCL GPU found (devices: " + Listing(all) + ")");
    for (const DeviceInfo &d : all)
      if (d.caps.is_cpu)
        return Selection{d, "no OpenCL GPU found, using the CPU device " + d.caps.device_name};
    return Selection{all.front(), "no OpenCL GPU found, using " + all.front().caps.device_name};
  }
  if (spec == "cpu") {
    for (const DeviceInfo &d : all)
      if (d.caps.is_cpu)
        return Selection{d, {}};
    return NotFound("device \"cpu\": no OpenCL CPU device found (devices: " + Listing(all) + ")");
  }
  // "P:D" indices.
  size_t colon = spec.find(':');
  if (colon != std::string::npos && colon > 0 && colon + 1 < spec.size() &&
      std::all_of(spec.begin(), spec.begin() + colon, ::isdigit) &&
      std::all_of(spec.begin() + colon + 1, spec.end(), ::isdigit)) {
    int p = std::atoi(spec.c_str()), d = std::atoi(spec.c_str() + colon + 1);
    for (const DeviceInfo &info : all)
      if (info.platform_index == p && info.device_index == d)
        return Selection{info, {}};
    return NotFound("device \"" + std::string(spec_in) +
                    "\": no such platform:device (devices: " + Listing(all) + ")");
  }
  for (const DeviceInfo &d : all)
    if (Contains(d.caps.device_name, spec) || Contains(d.caps.device_vendor, spec) ||
        Contains(d.caps.platform_name, spec))
      return Selection{d, {}};
  return NotFound("device \"" + std::string(spec_in) +
                  "\" matches no OpenCL device; use auto, gpu, cpu, P:D or a name substring "
                  "(devices: " +
                  Listing(all) + ")");
}

StatusOr<std::shared_ptr<Device>> Device::Open(std::string_view spec) {
  OP_ASSIGN_OR_RETURN(Selection sel, SelectDevice(spec));
  return Open(sel, std::string(spec));
}

StatusOr<std::shared_ptr<Device>> Device::Open(const Selection &sel, std::string spec) {
  std::shared_ptr<Device> dev(new Device());
  dev->info_ = sel.info;
  dev->spec_ = spec.empty() ? "auto" : std::move(spec);
  dev->fallback_ = sel.fallback;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(sel.info.platform), 0};
  cl_int err = CL_SUCCESS;
  cl_device_id id = sel.info.device;
  dev->context_ = ContextHandle(clCreateContext(props, 1, &id, nullptr, nullptr, &err));
  if (err != CL_SUCCESS)
    return ClError("clCreateContext", err);

  const Capabilities &c = dev->info_.caps;
  if (c.unified_memory) {
    // Host and device share memory: let the driver place buffers where maps cost nothing.
    dev->policy_ = {CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, true, false};
  } else {
    // Discrete memory: frames live in device-local memory; uploads go through staging.
    dev->policy_ = {CL_MEM_READ_WRITE, false, true};
  }
  dev->programs_ = std::make_unique<ProgramCache>(dev->context(), id, c);
  dev->programs_->SetHelper(std::to_string(sel.info.platform_index) + ":" +
                            std::to_string(sel.info.device_index));
  return dev;
}

StatusOr<MemHandle> Device::CreateBuffer(size_t bytes, cl_mem_flags extra) const {
  if (bytes == 0)
    return InvalidArgument("cannot create an empty OpenCL buffer");
  cl_mem_flags flags = policy_.frame_flags;
  if (extra & (CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY))
    flags &= ~CL_MEM_READ_WRITE;
  flags |= extra;
  cl_int err = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context(), flags, bytes, nullptr, &err));
  if (err != CL_SUCCESS)
    return ClError(("clCreateBuffer(" + std::to_string(bytes) + " bytes)").c_str(), err);
  return mem;
}

}  // namespace op::cl
