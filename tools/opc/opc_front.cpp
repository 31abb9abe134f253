// opc info and opc run (argument parsing, the reference interpreter path, .npy output).
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "nn/npy.h"
#include "nn/onnx_import.h"
#include "nn/passes.h"
#include "nn/reference.h"
#include "nn/stats.h"
#include "opc.h"

namespace fs = std::filesystem;
using namespace op;
using namespace op::nn;

namespace opc {
namespace {

std::string Describe(const Tensor &t) {
  std::string dims = "(";
  for (size_t i = 0; i < t.shape.rank(); ++i) {
    if (i)
      dims += ",";
    const bool named = i < t.dim_params.size() && !t.dim_params[i].empty();
    dims += t.shape[i] >= 0 ? std::to_string(t.shape[i]) : (named ? t.dim_params[i] : "?");
  }
  return std::string(DTypeName(t.dtype)) + " " + dims + ")";
}

// A file name for a tensor name ("a/b:0" → "a_b_0").
std::string FileName(const std::string &name) {
  std::string s;
  for (char c : name)
    s += (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return s.empty() ? "output" : s;
}

}  // namespace

int Info(const Args &args) {
  std::string model;
  ShapeBindings shapes;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--shape" && i + 1 < args.size()) {
      Status st = ParseShapeBinding(args[++i], &shapes);
      if (!st.ok())
        return Fail(st);
    } else if (model.empty() && args[i][0] != '-') {
      model = args[i];
    } else {
      return Fail(InvalidArgument("info: unexpected argument '" + args[i] + "'"));
    }
  }
  if (model.empty())
    return Fail(InvalidArgument("info: no model given"));
  auto graph = ImportOnnxFile(model);
  if (!graph.ok())
    return Fail(graph.status());
  Graph &g = *graph;
  std::printf("model: %s\n", model.c_str());
  std::printf("producer: %s, opset %d, %zu nodes, %zu tensors\n",
              g.producer.empty() ? "(unknown)" : g.producer.c_str(), g.opset, g.nodes.size(),
              g.tensors.size());
  std::printf("inputs:\n");
  for (TensorId id : g.inputs)
    std::printf("  %-24s %s\n", g.tensor(id).name.c_str(), Describe(g.tensor(id)).c_str());
  std::printf("outputs:\n");
  for (TensorId id : g.outputs)
    std::printf("  %-24s %s\n", g.tensor(id).name.c_str(), Describe(g.tensor(id)).c_str());
  if (!g.slices.empty()) {
    std::printf("output slices (last axis):\n");
    for (const OutputSlice &s : g.slices)
      std::printf("  %-24s %lld:%lld (%lld)\n", s.name.c_str(), static_cast<long long>(s.start),
                  static_cast<long long>(s.end), static_cast<long long>(s.end - s.start));
  }
  std::map<std::string, int> imported;
  for (const Node &n : g.nodes)
    ++imported[OpName(n.op)];
  Status st = InferShapes(g, shapes);
  if (!st.ok()) {
    std::printf("ops (as imported):\n");
    for (const auto &[name, count] : imported)
      std::printf("  %-24s %d\n", name.c_str(), count);
    std::printf("shapes: not static (%s); FLOPs need --shape\n", st.message().c_str());
    return 0;
  }
  GraphStats folded = ComputeStats(g);
  Graph fused = g;
  Status ost = OptimizeGraph(fused);
  GraphStats after = ost.ok() ? ComputeStats(fused) : folded;
  std::printf("ops (after shape folding: %zu nodes; after fusion: %zu nodes):\n", g.nodes.size(),
              fused.nodes.size());
  for (const auto &[name, count] : folded.ops)
    std::printf("  %-24s %d\n", name.c_str(), count);
  for (const auto &[name, count] : after.ops)
    if (!folded.ops.count(name))
      std::printf("  %-24s %d (fused)\n", name.c_str(), count);
  std::printf("FLOPs: %s per run\n",
              FormatCount(static_cast<double>(folded.flops), "FLOP").c_str());
  std::printf("parameters: %s (%s)\n",
              FormatCount(static_cast<double>(folded.parameters), "").c_str(),
              FormatCount(static_cast<double>(folded.parameter_bytes), "B").c_str());
  std::printf("intermediate tensors: %s in all (before memory planning)\n",
              FormatCount(static_cast<double>(folded.activation_bytes), "B").c_str());
  PrintDeviceInfo(model, shapes);
  return 0;
}

int Run(const Args &args) {
  RunRequest req;
  bool reference = false;
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&]() -> const std::string * {
      return i + 1 < args.size() ? &args[++i] : nullptr;
    };
    if (a == "--reference") {
      reference = true;
    } else if (a == "--input" || a == "--output-dir" || a == "--shape" || a == "--device" ||
               a == "--precision") {
      const std::string *v = value();
      if (!v)
        return Fail(InvalidArgument("run: " + a + " needs a value"));
      if (a == "--input") {
        const size_t eq = v->find('=');
        if (eq == std::string::npos || eq == 0)
          return Fail(InvalidArgument("run: --input '" + *v + "' is not name=file.npy"));
        files.emplace_back(v->substr(0, eq), v->substr(eq + 1));
      } else if (a == "--output-dir") {
        req.output_dir = *v;
      } else if (a == "--shape") {
        Status st = ParseShapeBinding(*v, &req.shapes);
        if (!st.ok())
          return Fail(st);
      } else if (a == "--device") {
        req.device = *v;
      } else {
        req.precision = *v;
      }
    } else if (req.model.empty() && a[0] != '-') {
      req.model = a;
    } else {
      return Fail(InvalidArgument("run: unexpected argument '" + a + "'"));
    }
  }
  if (req.model.empty())
    return Fail(InvalidArgument("run: no model given"));
  if (req.output_dir.empty())
    return Fail(InvalidArgument("run: --output-dir is required"));
  for (const auto &[name, path] : files) {
    auto t = ReadNpy(path);
    if (!t.ok())
      return Fail(Status(t.status()).Prepend("input '" + name + "'"));
    t->name = name;
    req.inputs.push_back(std::move(*t));
  }
  std::vector<Tensor> outputs;
  std::vector<std::string> names;
  if (reference) {
    auto graph = ImportOnnxFile(req.model);
    if (!graph.ok())
      return Fail(graph.status());
    Graph &g = *graph;
    for (const Tensor &t : req.inputs) {
      const TensorId id = g.FindTensor(t.name);
      if (id == kNoTensor || !g.tensor(id).is_input)
        return Fail(NotFound("run: the model has no input '" + t.name + "'"));
      if (!req.shapes.count(t.name))
        req.shapes[t.name] = t.shape;  // bind from the data
    }
    Status st = InferShapes(g, req.shapes);
    if (!st.ok())
      return Fail(st);
    auto outs = RunReference(g, req.inputs);
    if (!outs.ok())
      return Fail(outs.status());
    outputs = std::move(*outs);
  } else {
    auto outs = RunOnDevice(req);
    if (!outs.ok())
      return Fail(outs.status());
    outputs = std::move(*outs);
  }
  std::error_code ec;
  fs::create_directories(req.output_dir, ec);
  if (ec)
    return Fail(IoError(req.output_dir + ": cannot create (" + ec.message() + ")"));
  std::set<std::string> used;  // two names that sanitise alike ("a/b", "a:b") get "-2", "-3"
  for (const Tensor &t : outputs) {
    std::string file = FileName(t.name);
    for (int k = 2; used.count(file); ++k)
      file = FileName(t.name) + "-" + std::to_string(k);
    used.insert(file);
    const std::string path = (fs::path(req.output_dir) / (file + ".npy")).string();
    Status st = WriteNpy(path, t);
    if (!st.ok())
      return Fail(st);
    std::printf("%s: %s %s → %s\n", t.name.c_str(), DTypeName(t.dtype), t.shape.ToString().c_str(),
                path.c_str());
  }
  return 0;
}

}  // namespace opc
