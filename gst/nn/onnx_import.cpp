// ONNX → graph IR (see onnx_import.h).
#include "nn/onnx_import.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "nn/pickle.h"

namespace op::nn {
namespace {

namespace fs = std::filesystem;

// Opset 6 is accepted too (PyTorch's older exports): its ops mean what opset 7's do except the
// legacy `broadcast`/`axis` attributes, which shape inference refuses where they differ.
constexpr int kMinOpset = 6;
constexpr int kMaxOpset = 17;

StatusOr<std::string> ReadFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return NotFound(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad())
    return IoError(path + ": read failed");
  return ss.str();
}

// Reads the external-data range of a tensor, refusing locations outside base_dir, anything but
// a regular file (a folder, a FIFO that would block the load for ever, a device) and a range
// other than the `expected` bytes its shape needs.
StatusOr<std::string> ReadExternal(const onnx::TensorProto &tp, const std::string &base_dir,
                                   size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  const std::string what = "tensor '" + tp.name() + "': external data";
  for (const auto &kv : tp.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    if (kv.key() == "offset" || kv.key() == "length") {
      char *end = nullptr;
      errno = 0;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end != '\0' || v < 0 || errno == ERANGE)
        return Corrupt(what + " " + kv.key() + " '" + kv.value() + "' is not a number");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (base_dir.empty())
    return InvalidArgument(what + " needs the model's folder (load a file)");
  if (location.empty())
    return Corrupt(what + " has no location");
  const fs::path base = fs::weakly_canonical(fs::path(base_dir));
  const fs::path rel(location);
  if (rel.is_absolute())
    return InvalidArgument(what + " location '" + location +
                           "' is an absolute path; only files in the model's folder are read");
  std::error_code ec;
  const fs::path full = fs::weakly_canonical(base / rel, ec);
  // Resolved (symlinks and ..) path must still start with the model's folder.
  auto b = base.begin(), f = full.begin();
  for (; b != base.end() && f != full.end() && *b == *f; ++b, ++f) {
  }
  if (ec || b != base.end() || f == full.end())
    return InvalidArgument(what + " location '" + location + "' leaves the model's folder");
  const fs::file_status st = fs::status(full, ec);
  if (ec || !fs::exists(st))
    return NotFound(what + " file '" + location + "' cannot be opened");
  if (!fs::is_regular_file(st))
    return InvalidArgument(what + " location '" + location + "' is not a regular file");
  std::ifstream in(full, std::ios::binary);
  if (!in)
    return NotFound(what + " file '" + location + "' cannot be opened");
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (size < 0)
    return IoError(what + " file '" + location + "' has no size");
  if (offset < 0 || offset > size)
    return Corrupt(what + " offset is past the end of its file");
  if (length < 0)
    length = size - offset;
  if (length > size - offset)  // not offset + length: both may be near 2^63
    return Corrupt(what + " range is past the end of its file");
  if (static_cast<uint64_t>(length) != expected)
    return Corrupt(what + " has " + std::to_string(length) + " bytes, its shape needs " +
                   std::to_string(expected));
  std::string out(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(out.data(), length);
  if (!in)
    return IoError(what + " read failed");
  return out;
}

StatusOr<Tensor> ConvertTensor(const onnx::TensorProto &tp, const std::string &base_dir) {
  Tensor t;
  t.name = tp.name();
  t.dtype = DTypeFromOnnx(tp.data_type());
  const std::string what = "tensor '" + tp.name() + "'";
  if (t.dtype == DType::kUndefined)
    return Unsupported(what + ": data type " + std::to_string(tp.data_type()) +
                       " is not supported (float16/32/64, uint8, int8, int32, int64, bool)");
  for (int64_t d : tp.dims()) {
    if (d < 0)
      return Corrupt(what + ": negative dimension");
    t.shape.dims.push_back(d);
  }
  const int64_t n = t.shape.NumElements();
  const size_t esize = DTypeSize(t.dtype);
  if (n < 0)
    return Corrupt(what + ": implausibly large shape " + t.shape.ToString());
  const size_t nbytes = static_cast<size_t>(n) * esize;
  auto count_error = [&](size_t have) {
    return Corrupt(what + ": has " + std::to_string(have) + " values, its shape " +
                   t.shape.ToString() + " needs " + std::to_string(n));
  };
  // Sizes are checked against what the file holds before anything is allocated, so a hostile
  // shape cannot ask for terabytes.
  Bytes bytes;
  if (tp.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    OP_ASSIGN_OR_RETURN(std::string raw, ReadExternal(tp, base_dir, nbytes));
    if (raw.size() != nbytes)
      return count_error(raw.size() / std::max<size_t>(esize, 1));
    bytes.assign(raw.begin(), raw.end());
  } else if (tp.has_raw_data()) {
    if (tp.raw_data().size() != nbytes)
      return count_error(tp.raw_data().size() / std::max<size_t>(esize, 1));
    bytes.assign(tp.raw_data().begin(), tp.raw_data().end());
  } else {
    // Typed fields: float_data (float), int32_data (int32, int8, uint8, bool, float16 bits),
    // int64_data, double_data.
    auto fill = [&](const auto &field, auto convert) -> Status {
      if (static_cast<int64_t>(field.size()) != n)
        return count_error(field.size());
      bytes.resize(nbytes);
      for (int64_t k = 0; k < n; ++k)
        convert(static_cast<size_t>(k), field.Get(static_cast<int>(k)));
      return Status::Ok();
    };
    switch (t.dtype) {
      case DType::kFloat32:
        OP_RETURN_IF_ERROR(fill(
            tp.float_data(), [&](size_t k, float v) { std::memcpy(bytes.data() + 4 * k, &v, 4); }));
        break;
      case DType::kFloat64:
        OP_RETURN_IF_ERROR(fill(tp.double_data(), [&](size_t k, double v) {
          std::memcpy(bytes.data() + 8 * k, &v, 8);
        }));
        break;
      case DType::kInt64:
        OP_RETURN_IF_ERROR(fill(tp.int64_data(), [&](size_t k, int64_t v) {
          std::memcpy(bytes.data() + 8 * k, &v, 8);
        }));
        break;
      case DType::kInt32:
        OP_RETURN_IF_ERROR(fill(tp.int32_data(), [&](size_t k, int32_t v) {
          std::memcpy(bytes.data() + 4 * k, &v, 4);
        }));
        break;
      case DType::kFloat16:
        OP_RETURN_IF_ERROR(fill(tp.int32_data(), [&](size_t k, int32_t v) {
          uint16_t h = static_cast<uint16_t>(v);
          std::memcpy(bytes.data() + 2 * k, &h, 2);
        }));
        break;
      case DType::kUInt8:
      case DType::kInt8:
      case DType::kBool:
        OP_RETURN_IF_ERROR(fill(tp.int32_data(), [&](size_t k, int32_t v) {
          bytes[k] = static_cast<uint8_t>(t.dtype == DType::kBool ? (v != 0) : v);
        }));
        break;
      case DType::kUndefined:
        break;
    }
  }
  t.data = std::make_shared<const Bytes>(std::move(bytes));
  return t;
}

StatusOr<AttrValue> ConvertAttribute(const onnx::AttributeProto &a, const std::string &base_dir,
                                     const std::string &node) {
  switch (a.type()) {
    case onnx::AttributeProto_AttributeType_FLOAT:
      return AttrValue(a.f());
    case onnx::AttributeProto_AttributeType_INT:
      return AttrValue(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto_AttributeType_STRING:
      return AttrValue(a.s());
    case onnx::AttributeProto_AttributeType_FLOATS:
      return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto_AttributeType_INTS:
      return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto_AttributeType_STRINGS:
      return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto_AttributeType_TENSOR: {
      OP_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(a.t(), base_dir));
      return AttrValue(std::move(t));
    }
    default:
      return Unsupported("node '" + node + "': attribute '" + a.name() + "' of kind " +
                         std::to_string(a.type()) + " is not supported");
  }
}

// A Constant node's value as a tensor (value, value_float(s), value_int(s)).
StatusOr<Tensor> ConstantValue(const onnx::NodeProto &n, const std::string &base_dir) {
  for (const auto &a : n.attribute()) {
    if (a.name() == "value")
      return ConvertTensor(a.t(), base_dir);
    if (a.name() == "value_float")
      return MakeFloatConstant({a.f()}, Shape{});
    if (a.name() == "value_floats")
      return MakeFloatConstant(std::vector<float>(a.floats().begin(), a.floats().end()),
                               Shape{static_cast<int64_t>(a.floats_size())});
    if (a.name() == "value_int")
      return MakeInt64Constant({a.i()}, Shape{});
    if (a.name() == "value_ints")
      return MakeInt64Constant(std::vector<int64_t>(a.ints().begin(), a.ints().end()),
                               Shape{static_cast<int64_t>(a.ints_size())});
  }
  return Unsupported("Constant '" + n.name() + "': value kind is not supported");
}

struct Importer {
  Graph g;
  std::unordered_map<std::string, TensorId> ids;
  std::string base_dir;

  // The id of a tensor by name, creating it (dtype/shape unknown) if new.
  TensorId Ref(const std::string &name) {
    auto it = ids.find(name);
    if (it != ids.end())
      return it->second;
    Tensor t;
    t.name = name;
    TensorId id = g.AddTensor(std::move(t));
    ids.emplace(name, id);
    return id;
  }

  Status SetValueInfo(Tensor &t, const onnx::ValueInfoProto &vi) {
    if (!vi.type().has_tensor_type())
      return Unsupported("value '" + vi.name() +
                         "' is not a tensor (sequences, maps: unsupported)");
    const auto &tt = vi.type().tensor_type();
    t.dtype = DTypeFromOnnx(tt.elem_type());
    if (t.dtype == DType::kUndefined)
      return Unsupported("value '" + vi.name() + "': data type " + std::to_string(tt.elem_type()) +
                         " is not supported");
    if (!tt.has_shape())
      return Status::Ok();  // rank unknown: shape inference fills it
    t.shape.dims.clear();
    t.dim_params.clear();
    for (const auto &d : tt.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        t.shape.dims.push_back(d.dim_value());
        t.dim_params.push_back("");
      } else {
        t.shape.dims.push_back(kUnknownDim);
        t.dim_params.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
    }
    return Status::Ok();
  }

  Status Run(const onnx::ModelProto &m) {
    int opset = -1;
    for (const auto &os : m.opset_import()) {
      if (os.domain().empty() || os.domain() == "ai.onnx")
        opset = static_cast<int>(os.version());
    }
    if (opset < 0) {
      if (m.opset_import_size() == 0)
        opset = 1;  // IR version 1/2 models
      else
        return Unsupported("the model imports no default-domain (ai.onnx) opset");
    }
    if (opset < kMinOpset || opset > kMaxOpset)
      return Unsupported("opset " + std::to_string(opset) + " is not supported (opsets " +
                         std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
    g.opset = opset;
    g.producer =
        m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
    for (const auto &kv : m.metadata_props())
      g.metadata[kv.key()] = kv.value();
    auto sl = g.metadata.find("output_slices");
    if (sl != g.metadata.end()) {
      auto slices = DecodeOutputSlices(sl->second);
      if (!slices.ok())
        return Status(slices.status()).Prepend("metadata output_slices");
      g.slices = std::move(*slices);
    }

    const onnx::GraphProto &gp = m.graph();
    for (const auto &init : gp.initializer()) {
      if (ids.count(init.name()))
        return Corrupt("initializer '" + init.name() + "' twice");
      OP_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(init, base_dir));
      const std::string name = t.name;  // read before the move below
      ids.emplace(name, g.AddTensor(std::move(t)));
    }
    if (gp.sparse_initializer_size() > 0)
      return Unsupported("sparse initializers");
    for (const auto &in : gp.input()) {
      if (ids.count(in.name()))
        continue;  // an initializer listed as input (old exporters)
      TensorId id = Ref(in.name());
      Tensor &t = g.tensor(id);
      OP_RETURN_IF_ERROR(SetValueInfo(t, in));
      t.is_input = true;
      g.inputs.push_back(id);
    }
    int index = 0;
    for (const auto &n : gp.node()) {
      ++index;
      const std::string label = n.name().empty() ? "#" + std::to_string(index) : n.name();
      if (!n.domain().empty() && n.domain() != "ai.onnx")
        return Unsupported("node '" + label + "': unsupported op " + n.domain() + "." +
                           n.op_type() + " (opset " + std::to_string(opset) + ")");
      if (n.op_type() == "Constant") {
        if (n.output_size() != 1)
          return Corrupt("Constant '" + label + "' without one output");
        OP_ASSIGN_OR_RETURN(Tensor t, ConstantValue(n, base_dir));
        t.name = n.output(0);
        if (ids.count(t.name))
          return Corrupt("tensor '" + t.name + "' is written twice");
        const std::string name = t.name;  // read before the move below
        ids.emplace(name, g.AddTensor(std::move(t)));
        continue;
      }
      Node node;
      if (!OpFromName(n.op_type(), &node.op))
        return Unsupported("node '" + label + "': unsupported op " + n.op_type() + " (opset " +
                           std::to_string(opset) + ")");
      // Input and output counts and attribute names as ONNX's schema of the op at this opset
      // allows them (what onnxruntime checks at load): a node without outputs, with surplus
      // inputs or with an attribute the op does not have is refused, not silently accepted.
      if (n.output_size() == 0 || n.output(0).empty())
        return Corrupt("node '" + label + "' (" + n.op_type() + ") has no output");
      if (const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(n.op_type(), opset, "")) {
        if (n.input_size() > schema->max_input() || n.output_size() > schema->max_output())
          return InvalidArgument(
              "node '" + label + "' (" + n.op_type() + ") has " + std::to_string(n.input_size()) +
              " inputs and " + std::to_string(n.output_size()) + " outputs, opset " +
              std::to_string(opset) + " allows at most " + std::to_string(schema->max_input()) +
              " and " + std::to_string(schema->max_output()));
        for (const auto &a : n.attribute())
          if (!schema->attributes().count(a.name()))
            return InvalidArgument("node '" + label + "' (" + n.op_type() + "): attribute '" +
                                   a.name() + "' is not one of " + n.op_type() + "'s at opset " +
                                   std::to_string(opset));
      }
      node.name = n.name();
      node.opset = opset;
      for (const auto &a : n.attribute()) {
        OP_ASSIGN_OR_RETURN(AttrValue v, ConvertAttribute(a, base_dir, label));
        node.attrs.Set(a.name(), std::move(v));
      }
      for (const auto &in : n.input()) {
        if (in.empty()) {
          node.inputs.push_back(kNoTensor);
          continue;
        }
        if (!ids.count(in))
          return Corrupt("node '" + label + "' (" + n.op_type() + "): input '" + in +
                         "' is not produced before it is used");
        node.inputs.push_back(ids.at(in));
      }
      for (const auto &out : n.output()) {
        if (out.empty()) {
          node.outputs.push_back(kNoTensor);
          continue;
        }
        if (ids.count(out))
          return Corrupt("tensor '" + out + "' is written twice");
        node.outputs.push_back(Ref(out));
      }
      g.nodes.push_back(std::move(node));
    }
    for (const auto &out : gp.output()) {
      auto it = ids.find(out.name());
      if (it == ids.end())
        return Corrupt("graph output '" + out.name() + "' is never computed");
      Tensor &t = g.tensor(it->second);
      if (!t.is_constant()) {
        Tensor declared = t;
        OP_RETURN_IF_ERROR(SetValueInfo(declared, out));
        t.dtype = declared.dtype;
        t.shape = declared.shape;  // a hint: shape inference recomputes and checks it
      }
      t.is_output = true;
      g.outputs.push_back(it->second);
    }
    if (g.outputs.empty())
      return Corrupt("the graph has no outputs");
    return g.Validate();
  }
};

}  // namespace

StatusOr<Graph> ImportOnnxBytes(const std::string &bytes, const ImportOptions &options) {
  onnx::ModelProto m;
  if (bytes.empty() || !m.ParseFromString(bytes) || !m.has_graph())
    return Corrupt("truncated or not an ONNX model (protobuf parse failed)");
  Importer imp;
  imp.base_dir = options.base_dir;
  OP_RETURN_IF_ERROR(OneLineStatus(imp.Run(m)));
  return std::move(imp.g);
}

StatusOr<Graph> ImportOnnxFile(const std::string &path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok())
    return bytes.status();
  ImportOptions opt;
  opt.base_dir = fs::path(path).parent_path().string();
  if (opt.base_dir.empty())
    opt.base_dir = ".";
  auto g = ImportOnnxBytes(*bytes, opt);
  if (!g.ok())
    return Status(g.status()).Prepend(path);
  return g;
}

StatusOr<Tensor> ReadTensorProtoFile(const std::string &path) {
  OP_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes))
    return Corrupt(path + ": truncated or not a TensorProto");
  auto t = ConvertTensor(tp, fs::path(path).parent_path().string());
  if (!t.ok())
    return Status(t.status()).Prepend(path);
  return t;
}

}  // namespace op::nn
