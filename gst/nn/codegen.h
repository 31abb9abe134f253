// Code generation: an optimised, shape-inferred graph → the launch list of a CompiledModel for
// one device profile (kernels from kernels/*.cl specialised with #defines, their arguments as
// regions of the arena, weights and I/O buffers), with the memory plan and the packed weights.
#pragma once

#include <string>

#include "cl/device.h"
#include "nn/graph.h"
#include "nn/model_file.h"
#include "nn/plan.h"

namespace op::nn {

// int8: a quantized model's integer ops as they are, its float tensors in float32 storage.
enum class Precision { kFp32, kFp16, kInt8 };
const char *PrecisionName(Precision p);
// "fp32" / "fp16"; an error names the string.
StatusOr<Precision> ParsePrecision(const std::string &s);

struct CodegenOptions {
  cl::Profile profile = cl::Profile::kCpu;
  // Storage of the float tensors in the arena and weights, whatever their dtype: kFp32 holds
  // a float16 model's tensors as float32 (constants convert exactly; a Cast to float16 still
  // rounds), kFp16 holds float32 tensors as half. Model inputs and outputs keep their dtype.
  Precision precision = Precision::kFp32;
  // Half buffers read directly as half (cl_khr_fp16) rather than through vload_half.
  bool fp16_compute = false;
  // Convolution weights as image2d (adreno with image support).
  bool image_weights = false;
  // Arena offsets and weight offsets are aligned to this (the device's base address alignment).
  uint64_t alignment = 128;
  std::string device_name;
  // The CPU profile's register blocking: float lanes per SIMD register and how many such
  // registers there are. The defaults are AVX-512's (16 and 32); AVX/AVX2 has 8 and 16, and a
  // block sized for AVX-512 spills there.
  int simd_lanes = 16;
  int simd_registers = 32;
  // The CPU profile's int8 products by AVX-512 VNNI's vpdpbusd (kernels/qconv_dot.cl): set for
  // a CPU device on a host processor that has it, unless GST_OP_INT8_DOT=0 says otherwise. A
  // model that uses it records "avx512vnni" in its cpu_features.
  bool int8_dot = false;
  // The CPU profile's launch-saving fusions around matrix products: chains of small
  // matrix-vector products as one launch (kernels/matvec_chain.cl) and Concats whose rows the
  // product reading them copies itself (matmul_vec's A_CAT). Off to compare with the launches
  // one by one.
  bool fuse_products = true;
  // The CPU profile's kernels of one template that differ only in their epilogue (activation,
  // residual) share one program, the epilogue switched by arguments: fewer programs to build
  // on a cold start. Off to compare with a program each.
  bool merge_epilogues = true;
};

// Whether this host processor has AVX-512 VNNI (and AVX-512 BW, which its registers need).
bool HostHasAvx512Vnni();

// The options for a device: the profile from its capability record; fp16 compute only with
// cl_khr_fp16; image weights on adreno with image support; alignment from
// CL_DEVICE_MEM_BASE_ADDR_ALIGN; for a CPU, the SIMD lanes from
// CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT and the register count they imply.
CodegenOptions OptionsForDevice(const cl::Capabilities &caps, Precision precision);
// The options for a named profile ("cpu", "adreno", "amd") without a device: the capabilities
// such a device is assumed to have (adreno: fp16 and images; amd: neither).
StatusOr<CodegenOptions> OptionsForProfile(const std::string &profile, Precision precision);

// What code generation decided about memory, for reports and tests: the arena tensors'
// lifetimes (in launch steps) and the plan that placed them.
struct CodegenReport {
  std::vector<std::string> arena_tensors;  // names, in the order of `lifetimes`
  std::vector<Lifetime> lifetimes;
  MemoryPlan plan;
};

// Lowers `graph` (static shapes; FoldConstants and the fusion passes applied or not) to a
// compiled model. Unsupported ops or attribute values fail with the node and the reason.
StatusOr<CompiledModel> GenerateCode(const Graph &graph, const CodegenOptions &options,
                                     CodegenReport *report = nullptr);

}  // namespace op::nn
