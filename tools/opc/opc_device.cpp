// The device half of opc: compile (ONNX → .opm), device runs, and the compiled-model lines of
// `opc info` (kernels, programs, arena against the sum of intermediates, weights).
#include <chrono>
#include <cstdio>
#include <map>

#include "cl/device.h"
#include "cl/queue.h"
#include "nn/compiler.h"
#include "nn/plan.h"
#include "opc.h"

namespace opc {
namespace {

using op::Status;
using op::StatusOr;
namespace nn = op::nn;
namespace cl = op::cl;

bool IsProfileName(const std::string &s) {
  return s == "cpu" || s == "adreno" || s == "amd";
}

// Code-generation options for `--device D`: the device's own capability record when D opens a
// device (and, for a profile name, one of that profile); a profile name without such a device
// compiles for the profile's assumed capabilities.
StatusOr<nn::CodegenOptions> OptionsFor(const std::string &device, nn::Precision precision) {
  std::string spec = device.empty() ? "auto" : device;
  auto dev = cl::Device::Open(spec);
  if (dev.ok() && (!IsProfileName(spec) || cl::ProfileName((*dev)->caps().profile) == spec))
    return nn::OptionsForDevice((*dev)->caps(), precision);
  if (IsProfileName(spec))
    return nn::OptionsForProfile(spec, precision);
  return dev.status();
}

void PrintModelSummary(const nn::CompiledModel &m) {
  size_t programs = m.sources.size();
  std::printf("compiled: profile %s, precision %s, %zu kernels from %zu programs\n",
              m.profile.c_str(), m.precision.c_str(), m.kernels.size(), programs);
  std::printf("arena: %s for %s of intermediate tensors (%.0f%%)\n",
              nn::FormatBytes(m.arena_bytes).c_str(), nn::FormatBytes(m.intermediate_bytes).c_str(),
              m.intermediate_bytes ? 100.0 * m.arena_bytes / m.intermediate_bytes : 100.0);
  std::printf("weights: %s\n", nn::FormatBytes(m.weights.size()).c_str());
  std::printf("kernel FLOPs: %s per run\n",
              FormatCount(static_cast<double>(m.TotalFlops()), "FLOP").c_str());
}

}  // namespace

int Compile(const Args &args) {
  std::string model, out, device, precision = "auto";
  nn::CompileOptions options;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string &a = args[i];
    bool has_value = i + 1 < args.size();
    if ((a == "-o" || a == "--device" || a == "--precision" || a == "--shape") && !has_value)
      return Fail(op::InvalidArgument("compile: " + a + " needs a value"));
    if (a == "-o") {
      out = args[++i];
    } else if (a == "--device") {
      device = args[++i];
    } else if (a == "--precision") {
      precision = args[++i];
    } else if (a == "--shape") {
      Status st = nn::ParseShapeBinding(args[++i], &options.shapes);
      if (!st.ok())
        return Fail(st);
    } else if (a == "--no-fuse") {
      options.fuse = false;
    } else if (model.empty() && !a.empty() && a[0] != '-') {
      model = a;
    } else {
      return Fail(op::InvalidArgument("compile: unexpected argument '" + a + "'"));
    }
  }
  if (model.empty() || out.empty())
    return Fail(op::InvalidArgument("compile: usage: opc compile MODEL.onnx -o MODEL.opm"));
  Status prec = nn::SetPrecision(precision, nn::Precision::kFp32, &options);
  if (!prec.ok())
    return Fail(prec);
  auto codegen = OptionsFor(device, options.precision);
  if (!codegen.ok())
    return Fail(codegen.status());
  auto t0 = std::chrono::steady_clock::now();
  auto m = nn::CompileOnnxFile(model, *codegen, options);
  if (!m.ok())
    return Fail(m.status());
  Status st = nn::WriteModelFile(*m, out);
  if (!st.ok())
    return Fail(st);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s (%.0f ms)\n", out.c_str(), ms);
  PrintModelSummary(*m);
  return 0;
}

StatusOr<std::vector<nn::Tensor>> RunOnDevice(const RunRequest &request) {
  auto device = cl::Device::Open(request.device.empty() ? "auto" : request.device);
  if (!device.ok())
    return device.status();
  if (!(*device)->fallback().empty())
    std::fprintf(stderr, "opc: warning: %s\n", (*device)->fallback().c_str());
  nn::CompileOptions options;
  OP_RETURN_IF_ERROR(nn::SetPrecision(request.precision.empty() ? "auto" : request.precision,
                                      nn::Precision::kFp32, &options));
  options.shapes = request.shapes;
  // Inputs with symbolic dims take their shapes from the data (as the reference run does).
  for (const nn::Tensor &t : request.inputs)
    if (!options.shapes.count(t.name))
      options.shapes[t.name] = t.shape;
  nn::LoadInfo info;
  auto model = nn::LoadOrCompile(request.model, **device, options, &info);
  if (!model.ok())
    return model.status();
  cl::ProgressLine progress("opc");
  auto exec = nn::Executor::Create(*device, std::move(*model), progress.For(request.model));
  if (!exec.ok())
    return exec.status();
  auto queue = cl::Queue::Create(**device);
  if (!queue.ok())
    return queue.status();
  auto t0 = std::chrono::steady_clock::now();
  auto outs = (*exec)->RunHost(*queue, request.inputs);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (outs.ok())
    std::fprintf(stderr, "opc: ran on %s in %.1f ms (%s)\n", (*device)->caps().device_name.c_str(),
                 ms,
                 info.compiled     ? "compiled now"
                 : info.from_cache ? "compiled model from the cache"
                                   : "precompiled");
  return outs;
}

int InfoCompiled(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return -1;
  char magic[4] = {};
  size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  if (n != 4 || !nn::LooksLikeModelFile(std::string(magic, 4)))
    return -1;
  auto m = nn::ReadModelFile(path);
  if (!m.ok())
    return Fail(m.status());
  std::printf("compiled model: %s (from %s, source hash %016llx)\n", path.c_str(),
              m->source_name.empty() ? "?" : m->source_name.c_str(),
              static_cast<unsigned long long>(m->source_hash));
  if (!m->device_name.empty())
    std::printf("compiled on: %s\n", m->device_name.c_str());
  std::printf("inputs:\n");
  for (const nn::TensorDesc &t : m->inputs)
    std::printf("  %s\n", t.Describe().c_str());
  std::printf("outputs:\n");
  for (const nn::TensorDesc &t : m->outputs) {
    std::printf("  %s\n", t.Describe().c_str());
    for (const nn::OutputSlice &s : t.slices)
      std::printf("    slice %-20s %lld:%lld\n", s.name.c_str(), static_cast<long long>(s.start),
                  static_cast<long long>(s.end));
  }
  std::map<std::string, int> entries;
  for (const nn::KernelDesc &k : m->kernels)
    ++entries[k.entry];
  std::printf("kernels by template:\n");
  for (const auto &[name, count] : entries)
    std::printf("  %-24s %d\n", name.c_str(), count);
  PrintModelSummary(*m);
  return 0;
}

void PrintDeviceInfo(const std::string &model, const nn::ShapeBindings &shapes) {
  auto device = cl::Device::Open("auto");
  if (!device.ok()) {
    std::printf("device: none (%s)\n", device.status().message().c_str());
    return;
  }
  nn::CompileOptions options;
  options.shapes = shapes;
  auto m = nn::LoadOrCompile(model, **device, options);
  if (!m.ok()) {
    std::printf("device: not compiled (%s)\n", m.status().message().c_str());
    return;
  }
  std::printf("device: %s\n", (*device)->caps().device_name.c_str());
  PrintModelSummary(*m);
}

}  // namespace opc
