// ONNX → compiled model, end to end, with the on-disk cache of compiled models.
//
// CompileOnnx runs the front end (import, shape inference with the given bindings, folding and
// fusion) and code generation. LoadOrCompile is what elements and tools call: given a compiled
// model (.opm) it reads it; given an ONNX file it looks in the cache
// ($XDG_CACHE_HOME/gst-op/models, else ~/.cache/gst-op/models) under a key made of the model
// file's hash, the options, this build's compiler (kernel templates and a revision number) and
// the device's name, driver and platform versions, compiling and storing on a miss. A cache entry
// that fails to load is recompiled and replaced.
#pragma once

#include <string>

#include "nn/codegen.h"
#include "nn/executor.h"
#include "nn/shape_inference.h"

namespace op::nn {

struct CompileOptions {
  Precision precision = Precision::kFp32;
  // false: `precision` is what was asked. An ONNX model asked for int8 must be quantized (else an
  // error says to run `opc quantize` first), and a compiled model (.opm) recording another
  // precision is an error naming both. true ("auto"): `precision` is a default; a quantized ONNX
  // model compiles at int8, and a compiled model keeps the precision it records.
  bool auto_precision = false;
  // Empty: the profile of the device the model is compiled for; else "cpu", "adreno", "amd".
  std::string profile;
  ShapeBindings shapes;
  bool fuse = true;  // false: folding only (no Conv/Gemm/elementwise fusion)
  // Cache folder; empty: the default; "none": no cache.
  std::string cache_dir;
};

// Sets `options` from a precision name: auto, fp32, fp16 or int8 (auto: `fallback`, and
// auto_precision).
Status SetPrecision(const std::string &name, Precision fallback, CompileOptions *options);

// Whether a graph is quantized: it has QuantizeLinear/DequantizeLinear, QLinear or integer
// convolution/product ops (what `precision int8` needs).
bool IsQuantizedGraph(const Graph &graph);

// The default cache folder of compiled models.
std::string ModelCacheDir();

// Compiles an ONNX file for `codegen` options (the source hash is set from the file's bytes).
StatusOr<CompiledModel> CompileOnnxFile(const std::string &path, const CodegenOptions &codegen,
                                        const CompileOptions &options);
// The same for an already imported graph (tests); `hash` identifies the source.
StatusOr<CompiledModel> CompileGraph(Graph graph, const CodegenOptions &codegen,
                                     const CompileOptions &options, uint64_t hash);

struct LoadInfo {
  bool from_cache = false;  // an ONNX model found compiled in the cache
  bool compiled = false;    // compiled now
  std::string cache_path;
};

// A compiled model for `device` from an .opm or .onnx file (cached as described above).
StatusOr<CompiledModel> LoadOrCompile(const std::string &path, const cl::Device &device,
                                      const CompileOptions &options, LoadInfo *info = nullptr);

}  // namespace op::nn
