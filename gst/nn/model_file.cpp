#include "nn/model_file.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "cl/program_cache.h"
#include "model.capnp.h"

namespace op::nn {
namespace {

constexpr char kMagic[4] = {'O', 'P', 'M', '3'};
// Earlier formats, recognised to say what to do with them: "OPM1" checksummed byte by byte,
// "OPM2" word by word in one chain.
constexpr char kOldMagics[2][4] = {{'O', 'P', 'M', '1'}, {'O', 'P', 'M', '2'}};
constexpr size_t kHeaderBytes = 4 + 8;
// Limits that keep a hostile file from asking for absurd work before validation.
constexpr uint64_t kMaxDims = 8;
constexpr int64_t kMaxDim = int64_t{1} << 31;
constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 36;

schema::DataType ToSchema(DType t) {
  switch (t) {
    case DType::kFloat16:
      return schema::DataType::FLOAT16;
    case DType::kInt64:
      return schema::DataType::INT64;
    case DType::kInt32:
      return schema::DataType::INT32;
    case DType::kUInt8:
      return schema::DataType::UINT8;
    case DType::kInt8:
      return schema::DataType::INT8;
    case DType::kBool:
      return schema::DataType::BOOL;
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kUndefined:
      break;
  }
  return schema::DataType::FLOAT32;
}

StatusOr<DType> FromSchema(schema::DataType t) {
  switch (t) {
    case schema::DataType::FLOAT32:
      return DType::kFloat32;
    case schema::DataType::FLOAT16:
      return DType::kFloat16;
    case schema::DataType::INT64:
      return DType::kInt64;
    case schema::DataType::INT32:
      return DType::kInt32;
    case schema::DataType::UINT8:
      return DType::kUInt8;
    case schema::DataType::INT8:
      return DType::kInt8;
    case schema::DataType::BOOL:
      return DType::kBool;
  }
  return Corrupt("unknown data type " + std::to_string(static_cast<int>(t)));
}

schema::BufferKind ToSchema(BufferKind k) {
  switch (k) {
    case BufferKind::kArena:
      return schema::BufferKind::ARENA;
    case BufferKind::kWeights:
      return schema::BufferKind::WEIGHTS;
    case BufferKind::kInput:
      return schema::BufferKind::INPUT;
    case BufferKind::kOutput:
      return schema::BufferKind::OUTPUT;
  }
  return schema::BufferKind::ARENA;
}

StatusOr<BufferKind> FromSchema(schema::BufferKind k) {
  switch (k) {
    case schema::BufferKind::ARENA:
      return BufferKind::kArena;
    case schema::BufferKind::WEIGHTS:
      return BufferKind::kWeights;
    case schema::BufferKind::INPUT:
      return BufferKind::kInput;
    case schema::BufferKind::OUTPUT:
      return BufferKind::kOutput;
  }
  return Corrupt("unknown buffer kind " + std::to_string(static_cast<int>(k)));
}

void WriteTensors(capnp::List<schema::TensorDesc>::Builder out, const std::vector<TensorDesc> &in) {
  for (size_t i = 0; i < in.size(); i++) {
    auto t = out[i];
    t.setName(in[i].name);
    t.setType(ToSchema(in[i].dtype));
    auto dims = t.initDims(in[i].dims.size());
    for (size_t d = 0; d < in[i].dims.size(); d++)
      dims.set(d, in[i].dims[d]);
    auto slices = t.initSlices(in[i].slices.size());
    for (size_t s = 0; s < in[i].slices.size(); s++) {
      slices[s].setName(in[i].slices[s].name);
      slices[s].setStart(in[i].slices[s].start);
      slices[s].setEnd(in[i].slices[s].end);
    }
  }
}

Status ReadTensors(capnp::List<schema::TensorDesc>::Reader in, std::vector<TensorDesc> *out) {
  for (auto t : in) {
    TensorDesc d;
    d.name = t.getName();
    OP_ASSIGN_OR_RETURN(d.dtype, FromSchema(t.getType()));
    if (t.getDims().size() > kMaxDims)
      return Corrupt("tensor '" + d.name + "' has " + std::to_string(t.getDims().size()) + " dims");
    for (int64_t v : t.getDims())
      d.dims.push_back(v);
    for (auto s : t.getSlices())
      d.slices.push_back({s.getName(), s.getStart(), s.getEnd()});
    out->push_back(std::move(d));
  }
  return Status::Ok();
}

Status CheckTensor(const TensorDesc &t, const char *what) {
  std::string where = std::string(what) + " '" + t.name + "'";
  if (t.name.empty())
    return Corrupt(std::string(what) + " without a name");
  int64_t n = 1;
  for (int64_t d : t.dims) {
    if (d < 0 || d > kMaxDim)
      return Corrupt(where + " has dim " + std::to_string(d));
    if (d && n > kMaxDim / d)
      return Corrupt(where + " has too many elements");
    n *= d;
  }
  int64_t last = t.dims.empty() ? 1 : t.dims.back();
  for (size_t i = 0; i < t.slices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (t.slices[i].name == t.slices[j].name)
        return Corrupt(where + " has two slices named '" + t.slices[i].name + "'");
  for (const OutputSlice &s : t.slices)
    if (s.start < 0 || s.end < s.start || s.end > last)
      return Corrupt(where + " has slice '" + s.name + "' [" + std::to_string(s.start) + ", " +
                     std::to_string(s.end) + ") outside its last axis of " + std::to_string(last));
  return Status::Ok();
}

bool IsIdentifier(const std::string &s) {
  if (s.empty() || s.size() > 128 ||
      !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

}  // namespace

int64_t TensorDesc::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

uint64_t TensorDesc::ByteSize() const {
  return static_cast<uint64_t>(NumElements()) * DTypeSize(dtype);
}

std::string TensorDesc::Describe() const {
  std::string s = name + ": " + DTypeName(dtype) + " " + Shape(dims).ToString();
  return s;
}

const char *BufferKindName(BufferKind k) {
  switch (k) {
    case BufferKind::kArena:
      return "arena";
    case BufferKind::kWeights:
      return "weights";
    case BufferKind::kInput:
      return "input";
    case BufferKind::kOutput:
      return "output";
  }
  return "?";
}

uint64_t CompiledModel::TotalFlops() const {
  uint64_t f = 0;
  for (const KernelDesc &k : kernels)
    f += k.flops;
  return f;
}

Status ValidateModel(const CompiledModel &m) {
  if (m.format_version != kModelFormatVersion)
    return Corrupt("format version " + std::to_string(m.format_version) + " (this build reads " +
                   std::to_string(kModelFormatVersion) + ")");
  if (m.profile != "cpu" && m.profile != "adreno" && m.profile != "amd" && m.profile != "other")
    return Corrupt("unknown device profile '" + m.profile + "'");
  if (m.precision != "fp32" && m.precision != "fp16" && m.precision != "int8")
    return Corrupt("unknown precision '" + m.precision + "'");
  if (m.alignment == 0 || (m.alignment & (m.alignment - 1)) || m.alignment > 4096)
    return Corrupt("alignment " + std::to_string(m.alignment) + " is not a power of two <= 4096");
  if (m.arena_bytes > kMaxArenaBytes)
    return Corrupt("arena of " + std::to_string(m.arena_bytes) + " bytes");
  if (m.outputs.empty())
    return Corrupt("a model needs outputs");
  for (const TensorDesc &t : m.inputs)
    OP_RETURN_IF_ERROR(CheckTensor(t, "input"));
  for (const TensorDesc &t : m.outputs)
    OP_RETURN_IF_ERROR(CheckTensor(t, "output"));
  for (size_t i = 0; i < m.images.size(); i++) {
    const WeightImage &im = m.images[i];
    if (!im.width || !im.height || im.width > 65536 || im.height > 65536 ||
        im.offset > m.weights.size() || im.ByteSize() > m.weights.size() - im.offset)
      return Corrupt("weight image " + std::to_string(i) + " leaves the weights");
  }
  // The byte ranges kernels write of each output: together they must cover it, else the
  // caller would read what no kernel wrote.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> output_written(m.outputs.size());
  for (size_t k = 0; k < m.kernels.size(); k++) {
    const KernelDesc &kd = m.kernels[k];
    std::string where = "kernel " + std::to_string(k) + " (" + kd.label + ")";
    if (kd.source >= m.sources.size())
      return Corrupt(where + " refers to source " + std::to_string(kd.source) + " of " +
                     std::to_string(m.sources.size()));
    if (!IsIdentifier(kd.entry))
      return Corrupt(where + " has entry point '" + kd.entry + "'");
    if (kd.global.empty() || kd.global.size() > 3)
      return Corrupt(where + " has " + std::to_string(kd.global.size()) + " launch dims");
    if (!kd.local.empty() && kd.local.size() != kd.global.size())
      return Corrupt(where + " has local size dims that differ from its global size");
    for (size_t d = 0; d < kd.global.size(); d++) {
      if (kd.global[d] == 0 || kd.global[d] > (uint64_t{1} << 32))
        return Corrupt(where + " has global size " + std::to_string(kd.global[d]));
      if (!kd.local.empty() &&
          (kd.local[d] == 0 || kd.local[d] > 4096 || kd.global[d] % kd.local[d] != 0))
        return Corrupt(where + " has local size " + std::to_string(kd.local[d]));
    }
    if (kd.args.size() > 64)
      return Corrupt(where + " has " + std::to_string(kd.args.size()) + " arguments");
    for (size_t a = 0; a < kd.args.size(); a++) {
      const KernelArg &arg = kd.args[a];
      std::string awhere = where + " argument " + std::to_string(a);
      if (arg.kind == KernelArg::Kind::kImage) {
        if (arg.image >= m.images.size())
          return Corrupt(awhere + " refers to image " + std::to_string(arg.image));
        continue;
      }
      if (arg.kind != KernelArg::Kind::kBuffer)
        continue;
      const BufferRef &b = arg.buffer;
      uint64_t limit = 0;
      switch (b.kind) {
        case BufferKind::kArena:
          limit = m.arena_bytes;
          break;
        case BufferKind::kWeights:
          limit = m.weights.size();
          break;
        case BufferKind::kInput:
          if (b.index >= m.inputs.size())
            return Corrupt(awhere + " refers to input " + std::to_string(b.index));
          limit = m.inputs[b.index].ByteSize();
          break;
        case BufferKind::kOutput:
          if (b.index >= m.outputs.size())
            return Corrupt(awhere + " refers to output " + std::to_string(b.index));
          limit = m.outputs[b.index].ByteSize();
          break;
      }
      uint32_t e = b.element_bytes;
      if (e != 1 && e != 2 && e != 4 && e != 8)
        return Corrupt(awhere + " has element size " + std::to_string(e));
      if (b.offset % e != 0)
        return Corrupt(awhere + " has offset " + std::to_string(b.offset) +
                       " that is not a multiple of its element size " + std::to_string(e));
      if (b.offset / e > 0xffffffffull)
        return Corrupt(awhere + " has an element offset beyond 32 bits");
      if (b.offset > limit || b.size > limit - b.offset)
        return Corrupt(awhere + " (" + std::to_string(b.size) + " bytes at " +
                       std::to_string(b.offset) + ") leaves the " + BufferKindName(b.kind) +
                       " buffer of " + std::to_string(limit) + " bytes");
      if (b.kind == BufferKind::kOutput)
        output_written[b.index].emplace_back(b.offset, b.offset + b.size);
    }
  }
  for (size_t o = 0; o < m.outputs.size(); o++) {
    const uint64_t bytes = m.outputs[o].ByteSize();
    if (bytes == 0)
      continue;
    auto &ranges = output_written[o];
    if (ranges.empty())
      return Corrupt("no kernel writes output '" + m.outputs[o].name + "'");
    std::sort(ranges.begin(), ranges.end());
    uint64_t covered = 0;
    for (const auto &[begin, end] : ranges) {
      if (begin > covered)
        break;
      covered = std::max(covered, end);
    }
    if (covered < bytes)
      return Corrupt("output '" + m.outputs[o].name + "' is " + std::to_string(bytes) +
                     " bytes, its kernels write only the first " + std::to_string(covered));
  }
  return Status::Ok();
}

bool LooksLikeModelFile(std::string_view bytes) {
  if (bytes.size() < 4)
    return false;
  if (std::memcmp(bytes.data(), kMagic, 4) == 0)
    return true;
  for (const char *old : kOldMagics)
    if (std::memcmp(bytes.data(), old, 4) == 0)
      return true;
  return false;
}

uint64_t ModelChecksum(std::string_view payload) {
  // Word i goes to chain i % 4. The chains do not wait on one another's multiplications: on the
  // 2-core AVX-512 Xeon, 33 GB/s against one chain's 8 GB/s over 256 KB in cache. In a warm
  // start, right after the file's read, it is about 10 ms for the full-size vision model (47 MB)
  // either way: bound by memory, not by the multiplications.
  constexpr uint64_t kPrime = 0x100000001b3ull;
  // Four named states, not an array: compilers kept an array in memory, a store and a load in
  // every chain's step.
  uint64_t l0 = 0xcbf29ce484222325ull, l1 = 0x84222325cbf29ce4ull, l2 = 0x9e3779b97f4a7c15ull,
           l3 = 0xc2b2ae3d27d4eb4full;
  auto load = [](const char *p) {
    uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(&w, p, 8);  // one load
#else
    for (int b = 0; b < 8; b++)  // little-endian whatever the host
      w |= uint64_t{static_cast<uint8_t>(p[b])} << (8 * b);
#endif
    return w;
  };
  const size_t words = payload.size() / 8;
  const char *p = payload.data();
  for (size_t i = 0; i + 4 <= words; i += 4, p += 32) {
    l0 = (l0 ^ load(p)) * kPrime;
    l1 = (l1 ^ load(p + 8)) * kPrime;
    l2 = (l2 ^ load(p + 16)) * kPrime;
    l3 = (l3 ^ load(p + 24)) * kPrime;
  }
  uint64_t h = l0;
  h = (h ^ l1) * kPrime;
  h = (h ^ l2) * kPrime;
  h = (h ^ l3) * kPrime;
  for (size_t i = words / 4 * 4; i < words; i++, p += 8)
    h = (h ^ load(p)) * kPrime;
  return cl::Fnv1a64(payload.substr(words * 8), h);
}

std::string ModelFileHeader(std::string_view payload) {
  const uint64_t sum = ModelChecksum(payload);
  std::string out(kMagic, 4);
  for (int i = 0; i < 8; i++)
    out.push_back(static_cast<char>((sum >> (8 * i)) & 0xff));
  return out;
}

StatusOr<std::string> SerializeModel(const CompiledModel &m) {
  OP_RETURN_IF_ERROR(ValidateModel(m).Prepend("refusing to write an invalid model"));
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::CompiledModel>();
  root.setFormatVersion(m.format_version);
  root.setSourceHash(m.source_hash);
  root.setSourceName(m.source_name);
  root.setProfile(m.profile);
  root.setPrecision(m.precision);
  root.setDeviceName(m.device_name);
  root.setCpuFeatures(m.cpu_features);
  WriteTensors(root.initInputs(m.inputs.size()), m.inputs);
  WriteTensors(root.initOutputs(m.outputs.size()), m.outputs);
  auto sources = root.initSources(m.sources.size());
  for (size_t i = 0; i < m.sources.size(); i++)
    sources.set(i, m.sources[i]);
  auto kernels = root.initKernels(m.kernels.size());
  for (size_t i = 0; i < m.kernels.size(); i++) {
    const KernelDesc &kd = m.kernels[i];
    auto k = kernels[i];
    k.setLabel(kd.label);
    k.setEntry(kd.entry);
    k.setSource(kd.source);
    k.setBuildOptions(kd.options);
    k.setFlops(kd.flops);
    auto g = k.initGlobalSize(kd.global.size());
    for (size_t d = 0; d < kd.global.size(); d++)
      g.set(d, kd.global[d]);
    auto l = k.initLocalSize(kd.local.size());
    for (size_t d = 0; d < kd.local.size(); d++)
      l.set(d, kd.local[d]);
    auto args = k.initArgs(kd.args.size());
    for (size_t a = 0; a < kd.args.size(); a++) {
      const KernelArg &arg = kd.args[a];
      switch (arg.kind) {
        case KernelArg::Kind::kBuffer: {
          auto b = args[a].initBuffer();
          b.setKind(ToSchema(arg.buffer.kind));
          b.setIndex(arg.buffer.index);
          b.setOffsetBytes(arg.buffer.offset);
          b.setSizeBytes(arg.buffer.size);
          b.setElementBytes(arg.buffer.element_bytes);
          break;
        }
        case KernelArg::Kind::kInt32:
          args[a].setInt32(arg.i);
          break;
        case KernelArg::Kind::kFloat32:
          args[a].setFloat32(arg.f);
          break;
        case KernelArg::Kind::kImage:
          args[a].setImage(arg.image);
          break;
      }
    }
  }
  root.setWeights(capnp::Data::Reader(m.weights.data(), m.weights.size()));
  root.setArenaBytes(m.arena_bytes);
  root.setIntermediateBytes(m.intermediate_bytes);
  root.setAlignment(m.alignment);
  auto images = root.initImages(m.images.size());
  for (size_t i = 0; i < m.images.size(); i++) {
    images[i].setOffsetBytes(m.images[i].offset);
    images[i].setWidth(m.images[i].width);
    images[i].setHeight(m.images[i].height);
    images[i].setChannelType(m.images[i].half ? "half" : "float");
  }

  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  std::string payload(reinterpret_cast<const char *>(bytes.begin()), bytes.size());
  return ModelFileHeader(payload) + payload;
}

namespace {

StatusOr<CompiledModel> Parse(std::string_view bytes, const std::string &what,
                              std::shared_ptr<const void> keep) {
  auto fail = [&](const std::string &why) { return Corrupt(what + ": " + why); };
  if (bytes.size() < kHeaderBytes || !LooksLikeModelFile(bytes))
    return fail("not a compiled model (no OPM3 header)");
  for (const char *old : kOldMagics)
    if (std::memcmp(bytes.data(), old, 4) == 0)
      return fail("compiled by an older build (" + std::string(old, 4) +
                  " format): compile its ONNX model again");
  uint64_t sum = 0;
  for (int i = 0; i < 8; i++)
    sum |= uint64_t{static_cast<uint8_t>(bytes[4 + i])} << (8 * i);
  std::string_view payload = bytes.substr(kHeaderBytes);
  if (payload.size() % sizeof(capnp::word) != 0)
    return fail("truncated (payload of " + std::to_string(payload.size()) + " bytes)");
  if (ModelChecksum(payload) != sum)
    return fail("checksum mismatch (the file is truncated or corrupted)");

  CompiledModel m;
  try {
    // Cap'n Proto reads words in place: an aligned payload as it lies, others from an aligned
    // copy.
    kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word *>(payload.data()),
                                          payload.size() / sizeof(capnp::word));
    kj::Array<capnp::word> copy;
    if (reinterpret_cast<uintptr_t>(payload.data()) % alignof(capnp::word) != 0) {
      copy = kj::heapArray<capnp::word>(words.size());
      std::memcpy(copy.begin(), payload.data(), payload.size());
      words = copy.asPtr();
    }
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() * 2 + 1024;
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader reader(words, options);
    auto root = reader.getRoot<schema::CompiledModel>();
    m.format_version = root.getFormatVersion();
    if (m.format_version != kModelFormatVersion)
      return fail("format version " + std::to_string(m.format_version) + " (this build reads " +
                  std::to_string(kModelFormatVersion) + ")");
    m.source_hash = root.getSourceHash();
    m.source_name = root.getSourceName();
    m.profile = root.getProfile();
    m.precision = root.getPrecision();
    m.device_name = root.getDeviceName();
    m.cpu_features = root.getCpuFeatures();
    OP_RETURN_IF_ERROR(ReadTensors(root.getInputs(), &m.inputs).Prepend(what));
    OP_RETURN_IF_ERROR(ReadTensors(root.getOutputs(), &m.outputs).Prepend(what));
    for (auto s : root.getSources())
      m.sources.emplace_back(s.cStr(), s.size());
    for (auto k : root.getKernels()) {
      KernelDesc kd;
      kd.label = k.getLabel();
      kd.entry = k.getEntry();
      kd.source = k.getSource();
      kd.options = k.getBuildOptions();
      kd.flops = k.getFlops();
      for (uint64_t g : k.getGlobalSize())
        kd.global.push_back(g);
      for (uint64_t l : k.getLocalSize())
        kd.local.push_back(l);
      for (auto a : k.getArgs()) {
        KernelArg arg;
        switch (a.which()) {
          case schema::Arg::BUFFER: {
            auto b = a.getBuffer();
            arg.kind = KernelArg::Kind::kBuffer;
            OP_ASSIGN_OR_RETURN(arg.buffer.kind, FromSchema(b.getKind()));
            arg.buffer.index = b.getIndex();
            arg.buffer.offset = b.getOffsetBytes();
            arg.buffer.size = b.getSizeBytes();
            arg.buffer.element_bytes = b.getElementBytes();
            break;
          }
          case schema::Arg::INT32:
            arg = KernelArg::Int(a.getInt32());
            break;
          case schema::Arg::FLOAT32:
            arg = KernelArg::Float(a.getFloat32());
            break;
          case schema::Arg::IMAGE:
            arg.kind = KernelArg::Kind::kImage;
            arg.image = a.getImage();
            break;
          default:
            return fail("kernel '" + kd.label + "' has an argument of unknown kind");
        }
        kd.args.push_back(arg);
      }
      m.kernels.push_back(std::move(kd));
    }
    auto w = root.getWeights();
    if (keep && !copy.begin())  // read in place: view the file's bytes
      m.weights.View(std::move(keep), w.begin(), w.size());
    else
      m.weights.mutable_bytes().assign(w.begin(), w.end());
    m.arena_bytes = root.getArenaBytes();
    m.intermediate_bytes = root.getIntermediateBytes();
    m.alignment = root.getAlignment();
    for (auto im : root.getImages()) {
      WeightImage wi;
      wi.offset = im.getOffsetBytes();
      wi.width = im.getWidth();
      wi.height = im.getHeight();
      std::string ct = im.getChannelType();
      if (ct != "half" && ct != "float")
        return fail("weight image channel type '" + ct + "'");
      wi.half = ct == "half";
      m.images.push_back(wi);
    }
  } catch (const kj::Exception &e) {
    return fail("malformed (" + std::string(e.getDescription().cStr()) + ")");
  } catch (const std::exception &e) {
    return fail(std::string("malformed (") + e.what() + ")");
  }
  OP_RETURN_IF_ERROR(ValidateModel(m).Prepend(what));
  return m;
}

}  // namespace

StatusOr<CompiledModel> ParseModel(std::string_view bytes, const std::string &what) {
  return Parse(bytes, what, nullptr);
}

StatusOr<CompiledModel> ParseModel(std::shared_ptr<const FileBytes> file, const std::string &what) {
  const std::string_view bytes = file->view();
  return Parse(bytes, what, std::move(file));
}

std::vector<uint8_t> &WeightBytes::mutable_bytes() {
  if (view_) {
    owned_.assign(view_, view_ + view_size_);
    view_ = nullptr;
    view_size_ = 0;
    keep_.reset();
  }
  return owned_;
}

void WeightBytes::View(std::shared_ptr<const void> keep, const uint8_t *data, size_t size) {
  owned_.clear();
  owned_.shrink_to_fit();
  keep_ = std::move(keep);
  view_ = data;
  view_size_ = size;
}

bool WeightBytes::operator==(const WeightBytes &o) const {
  return size() == o.size() && (size() == 0 || std::memcmp(data(), o.data(), size()) == 0);
}

Status WriteModelFile(const CompiledModel &model, const std::string &path) {
  OP_ASSIGN_OR_RETURN(std::string bytes, SerializeModel(model));
  // Write then rename, so a reader (or a crash) never sees half a file.
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      return IoError(path + ": cannot open for writing");
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.flush())
      return IoError(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return IoError(path + ": cannot rename " + tmp + " into place");
  return Status::Ok();
}

StatusOr<FileBytes> ReadFileBytes(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NotFound(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgument(path + ": not a regular file");
  }
  FileBytes out;
  const size_t size = static_cast<size_t>(st.st_size);
  // 4 bytes ahead of the file, so that byte 12 (a model's payload) lands on a word boundary.
  constexpr size_t kLead = sizeof(uint64_t) - kHeaderBytes % sizeof(uint64_t);
  out.words_.reset(new uint64_t[(kLead + size + 7) / 8 + 1]);
  char *data = reinterpret_cast<char *>(out.words_.get()) + kLead;
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "the file shrank while read";
      close(fd);
      return IoError(path + ": read failed (" + why + ")");
    }
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.data_ = data;
  out.size_ = size;
  return out;
}

StatusOr<CompiledModel> ReadModelFile(const std::string &path) {
  OP_ASSIGN_OR_RETURN(FileBytes bytes, ReadFileBytes(path));
  return ParseModel(std::make_shared<const FileBytes>(std::move(bytes)), path);
}

}  // namespace op::nn
