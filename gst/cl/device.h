// Device choice and the capability record every other layer decides by.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "handle.h"
#include "program_cache.h"

namespace op::cl {

// The code-generation and memory profile of a device.
enum class Profile { kAdreno, kAmd, kCpu, kOther };
const char *ProfileName(Profile p);

struct Capabilities {
  std::string platform_name;
  std::string platform_version;
  std::string device_name;
  std::string device_vendor;
  std::string device_version;
  std::string driver_version;
  std::string c_version;  // CL_DEVICE_OPENCL_C_VERSION
  std::string extensions;

  bool is_gpu = false;
  bool is_cpu = false;
  Profile profile = Profile::kOther;

  bool fp16 = false;  // cl_khr_fp16: half arithmetic (vload_half works everywhere)
  bool fp64 = false;
  // CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT in CL_DEVICE_SINGLE_FP_CONFIG: the device can divide and
  // take square roots in float32 as IEEE 754 does when asked (-cl-fp32-correctly-rounded-...).
  bool exact_divide_sqrt = false;
  bool images = false;                  // CL_DEVICE_IMAGE_SUPPORT
  bool image_from_buffer = false;       // cl_khr_image2d_from_buffer
  bool unified_memory = false;          // host and device share memory: host maps are zero-copy
  cl_uint base_address_align_bits = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bits as reported
  cl_uint image_pitch_align_pixels = 0;
  size_t max_work_group_size = 0;
  std::array<size_t, 3> max_work_item_sizes{};
  cl_ulong local_mem_bytes = 0;
  cl_ulong global_mem_bytes = 0;
  cl_ulong max_alloc_bytes = 0;
  cl_uint compute_units = 0;
  // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: the float lanes of one SIMD register (PoCL reports
  // 16 on AVX-512, 8 on AVX/AVX2, 4 on SSE or NEON); 0 where the driver does not say.
  cl_uint native_float_lanes = 0;

  // DMABuf import paths (chosen in this order when present).
  bool qcom_dmabuf = false;  // cl_qcom_dmabuf_host_ptr
  bool khr_dmabuf = false;   // cl_khr_external_memory_dma_buf
  bool arm_import = false;   // cl_arm_import_memory

  bool HasExtension(std::string_view name) const;
  // One line: "pthread-skylake (CPU, profile cpu, PoCL 3.1, images, no fp16)".
  std::string Describe() const;
};

// Reads the capability record of one device.
StatusOr<Capabilities> QueryCapabilities(cl_platform_id platform, cl_device_id device);

struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  int platform_index = 0;
  int device_index = 0;
  Capabilities caps;
};

// Every device of every platform, in platform then device order.
StatusOr<std::vector<DeviceInfo>> ListDevices();

struct Selection {
  DeviceInfo info;
  // Set when `auto` or `gpu` found no GPU and took the CPU: callers announce it as a warning.
  std::string fallback;
};

// Chooses a device from a user string:
//   "auto" (or "")  a GPU — Qualcomm, then AMD, then any — else the CPU, with a fallback note;
//   "gpu", "cpu"    the first device of that type;
//   "P:D"           platform P, device D (indices as `clinfo -l` lists them);
//   anything else   a case-insensitive substring of the device name, vendor or platform name.
StatusOr<Selection> SelectDevice(std::string_view spec);

// Where buffers of one kind live on this device (see docs/memory-and-sync.md).
struct BufferPolicy {
  cl_mem_flags frame_flags;  // flags for frames and tensors passed between elements
  bool zero_copy_maps;       // host maps of those buffers cost no copy
  bool staging_uploads;      // uploads go through a pinned host-visible staging buffer
};

// An opened device: context, capabilities and program cache. Shared by everything on it.
class Device {
 public:
  static StatusOr<std::shared_ptr<Device>> Open(std::string_view spec);
  static StatusOr<std::shared_ptr<Device>> Open(const Selection &selection, std::string spec);

  cl_context context() const { return context_.get(); }
  cl_device_id id() const { return info_.device; }
  cl_platform_id platform() const { return info_.platform; }
  const Capabilities &caps() const { return info_.caps; }
  const DeviceInfo &info() const { return info_; }
  // The string the device was opened with (what context sharing compares).
  const std::string &spec() const { return spec_; }
  // Non-empty when the choice fell back (no GPU → CPU).
  const std::string &fallback() const { return fallback_; }
  const BufferPolicy &buffer_policy() const { return policy_; }
  ProgramCache &programs() { return *programs_; }

  // A buffer with the policy's flags plus `extra` (e.g. CL_MEM_READ_ONLY).
  StatusOr<MemHandle> CreateBuffer(size_t bytes, cl_mem_flags extra = 0) const;

 private:
  Device() = default;
  DeviceInfo info_;
  std::string spec_;
  std::string fallback_;
  BufferPolicy policy_{};
  ContextHandle context_;
  std::unique_ptr<ProgramCache> programs_;
};

}  // namespace op::cl
