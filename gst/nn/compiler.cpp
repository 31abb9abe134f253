#include "nn/compiler.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "cl/program_cache.h"
#include "nn/onnx_import.h"
#include "nn/passes.h"
#include "nn_kernels.h"

namespace op::nn {
namespace {

void MakeDirs(const std::string &path) {
  for (size_t pos = 1; pos <= path.size(); pos++)
    if (pos == path.size() || path[pos] == '/')
      mkdir(path.substr(0, pos).c_str(), 0755);
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Bumped when code generation changes in a way the kernel sources do not show, so that cached
// models compiled by an older build are not reused.
constexpr int kCodegenRevision = 4;

uint64_t CompilerFingerprint();

// The binary that holds this compiler (the executable or the shared library) by path, size and
// modification time: a rebuilt compiler never reuses models cached by the previous build, even
// where a change to code generation forgot to bump the revision.
std::string BuildStamp() {
  Dl_info info{};
  struct stat st {};
  std::string path;
  if (dladdr(reinterpret_cast<void *>(&CompilerFingerprint), &info) && info.dli_fname)
    path = info.dli_fname;
  if (path.empty() || stat(path.c_str(), &st) != 0) {
    path = "/proc/self/exe";
    if (stat(path.c_str(), &st) != 0)
      return "";
  }
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime);
}

// Identifies this build's compiler: the revision, the binary, the file format and every kernel
// template.
uint64_t CompilerFingerprint() {
  uint64_t h = cl::Fnv1a64("codegen " + std::to_string(kCodegenRevision) + " format " +
                           std::to_string(kModelFormatVersion) + " " + BuildStamp());
  size_t n = 0;
  const kernels::Embedded *all = kernels::All(&n);
  for (size_t i = 0; i < n; i++)
    h = cl::Fnv1a64(all[i].source, cl::Fnv1a64(all[i].name, h));
  return h;
}

// Everything besides the model bytes that changes the compiled result.
std::string OptionsKey(const CodegenOptions &c, const CompileOptions &o) {
  std::string k = Hex(CompilerFingerprint()) + "|" + std::string(cl::ProfileName(c.profile)) + "|" +
                  PrecisionName(c.precision) + "|" + (c.fp16_compute ? "h" : "-") +
                  (c.image_weights ? "i" : "-") + "|" + std::to_string(c.alignment) + "|" +
                  std::to_string(c.simd_lanes) + "x" + std::to_string(c.simd_registers) +
                  (c.int8_dot ? "|vnni" : "") + "|" + (o.fuse ? "fuse" : "nofuse") +
                  (o.auto_precision ? "|auto" : "");
  for (const auto &[name, shape] : o.shapes)
    k += "|" + name + "=" + shape.ToString();
  return k;
}

std::string BaseName(const std::string &path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

}  // namespace

Status SetPrecision(const std::string &name, Precision fallback, CompileOptions *options) {
  if (name == "auto") {
    options->precision = fallback;
    options->auto_precision = true;
    return Status();
  }
  auto p = ParsePrecision(name);
  if (!p.ok())
    return InvalidArgument("precision '" + name + "' (expected auto, fp32, fp16 or int8)");
  options->precision = *p;
  options->auto_precision = false;
  return Status();
}

bool IsQuantizedGraph(const Graph &graph) {
  for (const Node &n : graph.nodes) {
    switch (n.op) {
      case OpKind::kQuantizeLinear:
      case OpKind::kDequantizeLinear:
      case OpKind::kDynamicQuantizeLinear:
      case OpKind::kQLinearConv:
      case OpKind::kQLinearMatMul:
      case OpKind::kConvInteger:
      case OpKind::kMatMulInteger:
        return true;
      default:
        break;
    }
  }
  return false;
}

std::string ModelCacheDir() {
  const char *xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg)
    return std::string(xdg) + "/gst-op/models";
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/gst-op/models";
}

StatusOr<CompiledModel> CompileGraph(Graph graph, const CodegenOptions &codegen,
                                     const CompileOptions &options, uint64_t hash) {
  // Never a silent float run of a float model asked for int8.
  if (codegen.precision == Precision::kInt8 && !IsQuantizedGraph(graph))
    return InvalidArgument(
        "precision int8 needs a quantized model, and this float model has no quantization "
        "(no QuantizeLinear/DequantizeLinear or integer ops): run 'opc quantize MODEL "
        "--calibration DIR' first");
  OP_RETURN_IF_ERROR(InferShapes(graph, options.shapes));
  OptimizeOptions opt;
  opt.fuse = options.fuse;
  OP_RETURN_IF_ERROR(OptimizeGraph(graph, opt));
  OP_ASSIGN_OR_RETURN(CompiledModel m, GenerateCode(graph, codegen));
  m.source_hash = hash;
  return m;
}

namespace {

// Compiles an imported graph: `auto_precision` makes a quantized graph int8.
StatusOr<CompiledModel> CompileImported(const std::string &path, std::string_view bytes, Graph g,
                                        CodegenOptions codegen, const CompileOptions &options) {
  if (codegen.precision == Precision::kInt8 && !IsQuantizedGraph(g))
    return InvalidArgument("precision int8 needs a quantized model, and " + path +
                           " is a float model with no quantization (no QuantizeLinear/"
                           "DequantizeLinear or integer ops): run 'opc quantize " +
                           path + " --calibration DIR' first");
  if (options.auto_precision && IsQuantizedGraph(g)) {
    codegen.precision = Precision::kInt8;
    codegen.fp16_compute = false;
  }
  uint64_t hash = ModelChecksum(bytes);
  auto m = CompileGraph(std::move(g), codegen, options, hash);
  if (!m.ok())
    return Status(m.status()).Prepend(path);
  m->source_name = BaseName(path);
  return m;
}

}  // namespace

StatusOr<CompiledModel> CompileOnnxFile(const std::string &path, const CodegenOptions &codegen,
                                        const CompileOptions &options) {
  OP_ASSIGN_OR_RETURN(FileBytes bytes, ReadFileBytes(path));
  OP_ASSIGN_OR_RETURN(Graph g, ImportOnnxFile(path));
  return CompileImported(path, bytes.view(), std::move(g), codegen, options);
}

// A compiled model whose kernels use instructions this processor lacks would stop the process
// at its first launch: refused here, with what to do.
static Status CheckCpuFeatures(const CompiledModel &m, const std::string &path) {
  size_t at = 0;
  while (at < m.cpu_features.size()) {
    size_t end = m.cpu_features.find(',', at);
    if (end == std::string::npos)
      end = m.cpu_features.size();
    const std::string f = m.cpu_features.substr(at, end - at);
    at = end + 1;
    if (f == "avx512vnni" && HostHasAvx512Vnni())
      continue;
    return Unsupported(path + " was compiled for a processor with " + f +
                       ", which this one does not have: compile the ONNX model again here");
  }
  return Status::Ok();
}

StatusOr<CompiledModel> LoadOrCompile(const std::string &path, const cl::Device &device,
                                      const CompileOptions &options, LoadInfo *info) {
  LoadInfo local;
  if (!info)
    info = &local;
  OP_ASSIGN_OR_RETURN(FileBytes read, ReadFileBytes(path));
  auto file = std::make_shared<const FileBytes>(std::move(read));
  const std::string_view bytes = file->view();
  if (LooksLikeModelFile(bytes)) {
    OP_ASSIGN_OR_RETURN(CompiledModel m, ParseModel(file, path));
    const std::string asked = PrecisionName(options.precision);
    if (!options.auto_precision && m.precision != asked)
      return InvalidArgument(path + " is compiled for precision " + m.precision + ", not the " +
                             asked + " asked: ask for " + m.precision + " (or auto), or compile " +
                             "the ONNX model again with --precision " + asked);
    OP_RETURN_IF_ERROR(CheckCpuFeatures(m, path));
    return m;
  }

  CodegenOptions codegen = OptionsForDevice(device.caps(), options.precision);
  if (!options.profile.empty()) {
    OP_ASSIGN_OR_RETURN(CodegenOptions named,
                        OptionsForProfile(options.profile, options.precision));
    named.alignment = codegen.alignment;
    named.device_name = codegen.device_name;
    if (named.profile == codegen.profile) {  // the device's own blocking, not the defaults
      named.simd_lanes = codegen.simd_lanes;
      named.simd_registers = codegen.simd_registers;
      named.int8_dot = codegen.int8_dot;
    }
    if (named.fp16_compute && !device.caps().fp16)
      named.fp16_compute = false;  // half arithmetic needs cl_khr_fp16; storage alone does not
    if (named.image_weights && !device.caps().images)
      named.image_weights = false;
    codegen = named;
  }
  const cl::Capabilities &caps = device.caps();
  // The .opm checksum's four word chains: with a byte-wise hash of the full-size vision ONNX
  // (14 MB) a start from the cache spent 48-51 ms in its model step, with this 34-36 ms.
  uint64_t key = ModelChecksum(bytes);
  key = cl::Fnv1a64(OptionsKey(codegen, options), key);
  key =
      cl::Fnv1a64(caps.device_name + "|" + caps.driver_version + "|" + caps.platform_version, key);
  std::string dir = options.cache_dir.empty() ? ModelCacheDir() : options.cache_dir;
  bool use_cache = options.cache_dir != "none";
  std::string cached = dir + "/" + Hex(key) + ".opm";
  info->cache_path = use_cache ? cached : "";
  if (use_cache) {
    auto hit = ReadModelFile(cached);
    if (hit.ok()) {
      info->from_cache = true;
      return hit;
    }
  }
  OP_ASSIGN_OR_RETURN(Graph g, ImportOnnxFile(path));
  OP_ASSIGN_OR_RETURN(CompiledModel m,
                      CompileImported(path, bytes, std::move(g), codegen, options));
  info->compiled = true;
  if (use_cache) {
    MakeDirs(dir);
    // A cache that cannot be written costs a recompilation next time, nothing more.
    (void)WriteModelFile(m, cached);
  }
  return m;
}

}  // namespace op::nn
