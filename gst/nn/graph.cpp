// The graph IR's helpers: dtypes, half floats, shapes, constants, attributes, validation.
#include "nn/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <unordered_map>

#include "cl/half.h"

namespace op::nn {

// ---------------------------------------------------------------------------------------------
// DType

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kUndefined:
      return 0;
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
    case DType::kUInt8:
      return 1;
    case DType::kInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

const char *DTypeName(DType t) {
  switch (t) {
    case DType::kUndefined:
      return "undefined";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat64:
      return "float64";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "undefined";
}

bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64;
}

// ONNX TensorProto.DataType: FLOAT 1, UINT8 2, INT8 3, UINT16 4, INT16 5, INT32 6, INT64 7,
// STRING 8, BOOL 9, FLOAT16 10, DOUBLE 11, UINT32 12, UINT64 13, ...
DType DTypeFromOnnx(int onnx_type) {
  switch (onnx_type) {
    case 1:
      return DType::kFloat32;
    case 2:
      return DType::kUInt8;
    case 3:
      return DType::kInt8;
    case 6:
      return DType::kInt32;
    case 7:
      return DType::kInt64;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kFloat16;
    case 11:
      return DType::kFloat64;
    default:
      return DType::kUndefined;
  }
}

int DTypeToOnnx(DType t) {
  switch (t) {
    case DType::kUndefined:
      return 0;
    case DType::kFloat32:
      return 1;
    case DType::kFloat16:
      return 10;
    case DType::kFloat64:
      return 11;
    case DType::kUInt8:
      return 2;
    case DType::kInt8:
      return 3;
    case DType::kInt32:
      return 6;
    case DType::kInt64:
      return 7;
    case DType::kBool:
      return 9;
  }
  return 0;
}

DType DTypeFromName(const std::string &n) {
  static const std::pair<const char *, DType> kNames[] = {
      {"float32", DType::kFloat32}, {"f32", DType::kFloat32}, {"float", DType::kFloat32},
      {"float16", DType::kFloat16}, {"f16", DType::kFloat16}, {"half", DType::kFloat16},
      {"float64", DType::kFloat64}, {"f64", DType::kFloat64}, {"double", DType::kFloat64},
      {"uint8", DType::kUInt8},     {"u8", DType::kUInt8},    {"int8", DType::kInt8},
      {"i8", DType::kInt8},         {"int32", DType::kInt32}, {"i32", DType::kInt32},
      {"int64", DType::kInt64},     {"i64", DType::kInt64},   {"bool", DType::kBool},
  };
  for (const auto &[name, t] : kNames)
    if (n == name)
      return t;
  return DType::kUndefined;
}

// ---------------------------------------------------------------------------------------------
// Half floats

float HalfToFloat(uint16_t h) {
  return cl::HalfToFloat(h);
}

uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): round abs/2^-24 to nearest even.
    float a;
    std::memcpy(&a, &abs, 4);
    float scaled = a * 16777216.0f;    // 2^24, exact
    float r = std::nearbyint(scaled);  // default rounding mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  // Normal: drop 13 mantissa bits with round to nearest even.
  uint32_t v = abs - 0x38000000u;  // rebias exponent 127 → 15
  uint32_t rest = v & 0x1fffu;
  v >>= 13;
  if (rest > 0x1000u || (rest == 0x1000u && (v & 1u)))
    v += 1;  // may carry into the exponent
  return static_cast<uint16_t>(sign | v);
}

// ---------------------------------------------------------------------------------------------
// Shape

bool Shape::IsStatic() const {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

int64_t Shape::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return -1;
    // Hostile files can declare dims whose product overflows: treat it as unknown.
    if (d != 0 && n > (int64_t{1} << 62) / d)
      return -1;
    n *= d;
  }
  return n;
}

std::string Shape::ToString() const {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ",";
    s += dims[i] < 0 ? "?" : std::to_string(dims[i]);
  }
  return s + ")";
}

Status OneLineStatus(Status s) {
  if (s.ok())
    return s;
  std::string m;
  for (char c : s.message()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      m += buf;
    } else {
      m += c;
    }
  }
  return Status(s.code(), m);
}

std::vector<int64_t> Strides(const Shape &s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (size_t i = s.rank(); i-- > 1;)
    st[i - 1] = st[i] * s.dims[i];
  return st;
}

StatusOr<Shape> BroadcastShapes(const Shape &a, const Shape &b) {
  const size_t r = std::max(a.rank(), b.rank());
  Shape out(std::vector<int64_t>(r, 1));
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.rank() ? 1 : a.dims[i - (r - a.rank())];
    int64_t db = i < r - b.rank() ? 1 : b.dims[i - (r - b.rank())];
    if (da == db || db == 1) {
      out.dims[i] = da;
    } else if (da == 1) {
      out.dims[i] = db;
    } else {
      return InvalidArgument("shapes " + a.ToString() + " and " + b.ToString() +
                             " do not broadcast");
    }
  }
  return out;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " +
                           std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// ---------------------------------------------------------------------------------------------
// Tensors

size_t Tensor::ByteSize() const {
  int64_t n = shape.NumElements();
  return n < 0 ? 0 : static_cast<size_t>(n) * DTypeSize(dtype);
}

StatusOr<std::vector<int64_t>> ConstantInts(const Tensor &t) {
  if (!t.is_constant())
    return InvalidArgument("tensor '" + t.name + "' is not a constant");
  const int64_t n = t.shape.NumElements();
  if (n < 0 || t.data->size() < static_cast<size_t>(n) * DTypeSize(t.dtype))
    return Corrupt("constant '" + t.name + "' has fewer bytes than its shape needs");
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::kInt64:
        v[i] = t.Data<int64_t>()[i];
        break;
      case DType::kInt32:
        v[i] = t.Data<int32_t>()[i];
        break;
      case DType::kUInt8:
      case DType::kBool:
        v[i] = t.Data<uint8_t>()[i];
        break;
      case DType::kInt8:
        v[i] = t.Data<int8_t>()[i];
        break;
      case DType::kFloat32:
      case DType::kFloat16:
      case DType::kFloat64:
      case DType::kUndefined:
        return InvalidArgument("tensor '" + t.name + "' holds " + DTypeName(t.dtype) +
                               ", expected integers");
    }
  }
  return v;
}

StatusOr<std::vector<double>> ConstantDoubles(const Tensor &t) {
  if (!t.is_constant())
    return InvalidArgument("tensor '" + t.name + "' is not a constant");
  const int64_t n = t.shape.NumElements();
  if (n < 0 || t.data->size() < static_cast<size_t>(n) * DTypeSize(t.dtype))
    return Corrupt("constant '" + t.name + "' has fewer bytes than its shape needs");
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::kFloat32:
        v[i] = t.Data<float>()[i];
        break;
      case DType::kFloat16:
        v[i] = HalfToFloat(t.Data<uint16_t>()[i]);
        break;
      case DType::kFloat64:
        v[i] = t.Data<double>()[i];
        break;
      case DType::kInt64:
        v[i] = static_cast<double>(t.Data<int64_t>()[i]);
        break;
      case DType::kInt32:
        v[i] = t.Data<int32_t>()[i];
        break;
      case DType::kUInt8:
      case DType::kBool:
        v[i] = t.Data<uint8_t>()[i];
        break;
      case DType::kInt8:
        v[i] = t.Data<int8_t>()[i];
        break;
      case DType::kUndefined:
        return InvalidArgument("tensor '" + t.name + "' has no dtype");
    }
  }
  return v;
}

Tensor MakeConstant(DType dtype, Shape shape, Bytes bytes) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = std::make_shared<const Bytes>(std::move(bytes));
  return t;
}

Tensor MakeInt64Constant(const std::vector<int64_t> &values, Shape shape) {
  Bytes b(values.size() * 8);
  if (!values.empty())
    std::memcpy(b.data(), values.data(), b.size());
  return MakeConstant(DType::kInt64, std::move(shape), std::move(b));
}

Tensor MakeFloatConstant(const std::vector<float> &values, Shape shape) {
  Bytes b(values.size() * 4);
  if (!values.empty())
    std::memcpy(b.data(), values.data(), b.size());
  return MakeConstant(DType::kFloat32, std::move(shape), std::move(b));
}

// ---------------------------------------------------------------------------------------------
// Attributes

namespace {
template <typename T>
const T *Find(const std::map<std::string, AttrValue> &m, const std::string &name) {
  auto it = m.find(name);
  if (it == m.end())
    return nullptr;
  return std::get_if<T>(&it->second);
}
}  // namespace

int64_t Attributes::Int(const std::string &name, int64_t def) const {
  if (auto *v = Find<int64_t>(map_, name))
    return *v;
  return def;
}
float Attributes::Float(const std::string &name, float def) const {
  if (auto *v = Find<float>(map_, name))
    return *v;
  // ONNX writers sometimes store a float attribute as an int (e.g. Pad's value).
  if (auto *v = Find<int64_t>(map_, name))
    return static_cast<float>(*v);
  return def;
}
std::string Attributes::String(const std::string &name, const std::string &def) const {
  if (auto *v = Find<std::string>(map_, name))
    return *v;
  return def;
}
std::vector<int64_t> Attributes::Ints(const std::string &name, std::vector<int64_t> def) const {
  if (auto *v = Find<std::vector<int64_t>>(map_, name))
    return *v;
  return def;
}
std::vector<float> Attributes::Floats(const std::string &name, std::vector<float> def) const {
  if (auto *v = Find<std::vector<float>>(map_, name))
    return *v;
  return def;
}
std::vector<std::string> Attributes::Strings(const std::string &name,
                                             std::vector<std::string> def) const {
  if (auto *v = Find<std::vector<std::string>>(map_, name))
    return *v;
  return def;
}
const Tensor *Attributes::GetTensor(const std::string &name) const {
  return Find<Tensor>(map_, name);
}

// ---------------------------------------------------------------------------------------------
// Ops

const char *OpName(OpKind op) {
  switch (op) {
#define OP(Name, Class) \
  case OpKind::k##Name: \
    return #Name;
#include "nn/ops.def"
#undef OP
  }
  return "?";
}

OpClass ClassOf(OpKind op) {
  switch (op) {
#define OP(Name, Class) \
  case OpKind::k##Name: \
    return OpClass::k##Class;
#include "nn/ops.def"
#undef OP
  }
  return OpClass::kOther;
}

bool OpFromName(const std::string &name, OpKind *op) {
  static const std::unordered_map<std::string, OpKind> kTable = [] {
    std::unordered_map<std::string, OpKind> m;
#define OP(Name, Class)                     \
  if (OpClass::k##Class != OpClass::kFused) \
    m.emplace(#Name, OpKind::k##Name);
#include "nn/ops.def"
#undef OP
    return m;
  }();
  auto it = kTable.find(name);
  if (it == kTable.end())
    return false;
  *op = it->second;
  return true;
}

std::string Node::Describe() const {
  if (name.empty())
    return std::string(OpName(op)) + " (unnamed node)";
  return std::string(OpName(op)) + " '" + name + "'";
}

// ---------------------------------------------------------------------------------------------
// Graph

TensorId Graph::AddTensor(Tensor t) {
  tensors.push_back(std::move(t));
  return static_cast<TensorId>(tensors.size() - 1);
}

TensorId Graph::FindTensor(const std::string &name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name)
      return static_cast<TensorId>(i);
  return kNoTensor;
}

std::string Graph::UniqueName(const std::string &prefix) const {
  std::set<std::string> used;
  for (const Tensor &t : tensors)
    used.insert(t.name);
  if (!used.count(prefix))
    return prefix;
  for (int i = 2;; ++i) {
    std::string n = prefix + "_" + std::to_string(i);
    if (!used.count(n))
      return n;
  }
}

std::vector<int> Graph::Producers() const {
  std::vector<int> p(tensors.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (TensorId o : nodes[n].outputs)
      if (o != kNoTensor)
        p[static_cast<size_t>(o)] = static_cast<int>(n);
  return p;
}

std::vector<int> Graph::UseCounts() const {
  std::vector<int> c(tensors.size(), 0);
  for (const Node &n : nodes)
    for (TensorId i : n.inputs)
      if (i != kNoTensor)
        ++c[static_cast<size_t>(i)];
  for (TensorId o : outputs)
    ++c[static_cast<size_t>(o)];
  return c;
}

Status Graph::Validate() const {
  const auto n_t = static_cast<TensorId>(tensors.size());
  auto bad = [&](TensorId id) { return id != kNoTensor && (id < 0 || id >= n_t); };
  std::vector<bool> defined(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor &t = tensors[i];
    if (t.is_constant()) {
      defined[i] = true;
      if (t.shape.IsStatic() && t.data->size() != t.ByteSize())
        return Internal("constant '" + t.name + "' has " + std::to_string(t.data->size()) +
                        " bytes, its shape " + t.shape.ToString() + " of " + DTypeName(t.dtype) +
                        " needs " + std::to_string(t.ByteSize()));
    }
  }
  for (TensorId id : inputs) {
    if (bad(id) || id == kNoTensor)
      return Internal("graph input id out of range");
    defined[static_cast<size_t>(id)] = true;
  }
  for (const Node &n : nodes) {
    for (TensorId id : n.inputs) {
      if (bad(id))
        return Internal(n.Describe() + ": input id out of range");
      if (id != kNoTensor && !defined[static_cast<size_t>(id)])
        return Internal(n.Describe() + ": input '" + tensor(id).name +
                        "' is not computed before it is used");
    }
    for (TensorId id : n.outputs) {
      if (bad(id))
        return Internal(n.Describe() + ": output id out of range");
      if (id == kNoTensor)
        continue;
      if (defined[static_cast<size_t>(id)])
        return Internal(n.Describe() + ": output '" + tensor(id).name + "' is written twice");
      defined[static_cast<size_t>(id)] = true;
    }
  }
  for (TensorId id : outputs) {
    if (bad(id) || id == kNoTensor)
      return Internal("graph output id out of range");
    if (!defined[static_cast<size_t>(id)])
      return Internal("graph output '" + tensor(id).name + "' is never computed");
  }
  return Status::Ok();
}

void Graph::RemoveNodes(const std::vector<bool> &gone) {
  std::vector<Node> kept;
  for (size_t k = 0; k < nodes.size(); ++k)
    if (k >= gone.size() || !gone[k])
      kept.push_back(std::move(nodes[k]));
  nodes = std::move(kept);
}

void Graph::ReplaceNodes(const std::vector<int> &absorbed, Node fused) {
  const int last = *std::max_element(absorbed.begin(), absorbed.end());
  std::vector<bool> gone(nodes.size(), false);
  for (int a : absorbed)
    gone[static_cast<size_t>(a)] = a != last;
  nodes[static_cast<size_t>(last)] = std::move(fused);
  RemoveNodes(gone);
}

void Graph::RemoveDeadCode() {
  // Walk backwards from the outputs: a node lives if any output is needed.
  std::vector<bool> needed(tensors.size(), false);
  for (TensorId o : outputs)
    needed[static_cast<size_t>(o)] = true;
  std::vector<bool> keep(nodes.size(), false);
  for (size_t k = nodes.size(); k-- > 0;) {
    const Node &n = nodes[k];
    for (TensorId o : n.outputs)
      if (o != kNoTensor && needed[static_cast<size_t>(o)])
        keep[k] = true;
    if (!keep[k])
      continue;
    for (TensorId i : n.inputs)
      if (i != kNoTensor)
        needed[static_cast<size_t>(i)] = true;
  }
  for (TensorId i : inputs)
    needed[static_cast<size_t>(i)] = true;  // inputs stay, even unused
  keep.flip();
  RemoveNodes(keep);
  // Outputs of kept nodes that nobody reads are still written; keep those tensors too.
  for (const Node &n : nodes)
    for (TensorId o : n.outputs)
      if (o != kNoTensor)
        needed[static_cast<size_t>(o)] = true;
  std::vector<TensorId> remap(tensors.size(), kNoTensor);
  std::vector<Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!needed[i])
      continue;
    remap[i] = static_cast<TensorId>(out.size());
    out.push_back(std::move(tensors[i]));
  }
  tensors = std::move(out);
  auto fix = [&](TensorId &id) {
    if (id != kNoTensor)
      id = remap[static_cast<size_t>(id)];
  };
  for (Node &n : nodes) {
    for (TensorId &id : n.inputs)
      fix(id);
    for (TensorId &id : n.outputs)
      fix(id);
  }
  for (TensorId &id : inputs)
    fix(id);
  for (TensorId &id : outputs)
    fix(id);
}

}  // namespace op::nn
