// The compiled model in memory, and its file (.opm, schemas/model.capnp).
//
// A file is "OPM3", a 64-bit checksum of the payload (ModelChecksum), and the Cap'n Proto payload.
// Reading checks the checksum (a corrupted file is caught before anything is parsed), then the
// Cap'n Proto structure (with traversal limits), then ValidateModel: every offset, size and
// argument against the weights, the arena and the I/O sizes. The kernel sources inside a file
// are code and are trusted like the program that loads them; everything that decides where a
// kernel reads or writes is checked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/graph.h"

namespace op::nn {

constexpr uint32_t kModelFormatVersion = 1;

struct TensorDesc {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<OutputSlice> slices;

  int64_t NumElements() const;
  uint64_t ByteSize() const;
  // "img: uint8 (1,12,128,256)".
  std::string Describe() const;
};

enum class BufferKind : uint8_t { kArena, kWeights, kInput, kOutput };
const char *BufferKindName(BufferKind k);

// A region of one of the model's buffers. As a kernel argument it is two arguments: the cl_mem
// and a uint offset in elements of `element_bytes`.
struct BufferRef {
  BufferKind kind = BufferKind::kArena;
  uint32_t index = 0;  // input/output index
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t element_bytes = 4;
};

struct KernelArg {
  enum class Kind : uint8_t { kBuffer, kInt32, kFloat32, kImage };
  Kind kind = Kind::kInt32;
  BufferRef buffer;
  int32_t i = 0;
  float f = 0.f;
  uint32_t image = 0;

  static KernelArg Buffer(BufferRef b) {
    KernelArg a;
    a.kind = Kind::kBuffer;
    a.buffer = b;
    return a;
  }
  static KernelArg Int(int32_t v) {
    KernelArg a;
    a.kind = Kind::kInt32;
    a.i = v;
    return a;
  }
  static KernelArg Float(float v) {
    KernelArg a;
    a.kind = Kind::kFloat32;
    a.f = v;
    return a;
  }
};

struct KernelDesc {
  std::string label;  // the node(s) it computes
  std::string entry;  // __kernel function name
  uint32_t source = 0;
  std::string options;
  std::vector<uint64_t> global;
  std::vector<uint64_t> local;  // empty: the driver chooses
  std::vector<KernelArg> args;
  uint64_t flops = 0;
};

struct WeightImage {
  uint64_t offset = 0;
  uint32_t width = 0;
  uint32_t height = 0;
  bool half = false;  // CL_HALF_FLOAT channels, else CL_FLOAT; always RGBA
  uint64_t ByteSize() const { return uint64_t{width} * height * 4 * (half ? 2 : 4); }
};

// The weights blob: bytes the model owns (as the compiler packs them), or a view of the file
// bytes the model was read from, kept alive with it (a copy of a 47 MB blob was a ninth of a warm
// start of the full-size vision model).
class WeightBytes {
 public:
  const uint8_t *data() const { return view_ ? view_ : owned_.data(); }
  size_t size() const { return view_ ? view_size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  // The owned bytes, for writers; a view is copied into them first.
  std::vector<uint8_t> &mutable_bytes();
  void resize(size_t n) { mutable_bytes().resize(n); }
  // Views `size` bytes at `data`, which `keep` keeps alive.
  void View(std::shared_ptr<const void> keep, const uint8_t *data, size_t size);
  bool operator==(const WeightBytes &o) const;

 private:
  std::vector<uint8_t> owned_;
  std::shared_ptr<const void> keep_;
  const uint8_t *view_ = nullptr;
  size_t view_size_ = 0;
};

struct CompiledModel {
  uint32_t format_version = kModelFormatVersion;
  uint64_t source_hash = 0;
  std::string source_name;
  std::string profile = "cpu";
  std::string precision = "fp32";
  std::string device_name;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<std::string> sources;
  std::vector<KernelDesc> kernels;
  WeightBytes weights;
  uint64_t arena_bytes = 0;
  uint64_t intermediate_bytes = 0;
  uint32_t alignment = 128;
  std::vector<WeightImage> images;
  // The host processor's extensions the kernels need, comma-separated ("" for none).
  std::string cpu_features;

  uint64_t TotalFlops() const;
};

// Checks everything a kernel launch depends on; errors are Corrupt and name the kernel/arg.
Status ValidateModel(const CompiledModel &model);

// The file's checksum of a payload: four 64-bit FNV-1a chains over its little-endian 64-bit
// words (word i into chain i % 4), folded into one, then the words left over and a last partial
// word byte by byte. Every step is a bijection of the state, so any change to one word always
// changes the sum. ModelFileHeader: the magic and checksum a payload is written behind.
uint64_t ModelChecksum(std::string_view payload);
std::string ModelFileHeader(std::string_view payload);
// Serialises to the file format (magic, checksum, Cap'n Proto payload).
StatusOr<std::string> SerializeModel(const CompiledModel &model);
// Parses and validates bytes in the file format; `what` names the source in errors. A payload
// that lies 8-byte aligned (as ReadFileBytes places it) is read in place, others are copied.
StatusOr<CompiledModel> ParseModel(std::string_view bytes, const std::string &what);
class FileBytes;
// The same for a whole file's bytes, whose weights the model then views instead of copying.
StatusOr<CompiledModel> ParseModel(std::shared_ptr<const FileBytes> file, const std::string &what);
Status WriteModelFile(const CompiledModel &model, const std::string &path);
StatusOr<CompiledModel> ReadModelFile(const std::string &path);

// True when the bytes start like a compiled-model file (tools pick .opm vs .onnx by content).
bool LooksLikeModelFile(std::string_view bytes);

// A whole file read with one read(2), placed so that a compiled model's payload (after its
// 12-byte header) starts 8-byte aligned: ParseModel then reads the weights where they lie
// instead of copying tens of megabytes once more.
class FileBytes {
 public:
  std::string_view view() const { return {data_, size_}; }

 private:
  friend StatusOr<FileBytes> ReadFileBytes(const std::string &path);
  std::unique_ptr<uint64_t[]> words_;
  const char *data_ = nullptr;
  size_t size_ = 0;
};
StatusOr<FileBytes> ReadFileBytes(const std::string &path);

}  // namespace op::nn
