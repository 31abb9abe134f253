// The graph IR of the network runtime: what ONNX import produces, what shape inference and the
// passes rewrite, what the reference interpreter runs and what code generation compiles.
//
// A Graph owns a flat list of tensors (indexed by TensorId) and a list of nodes in topological
// order. Nodes refer to tensors by id; a tensor is produced by at most one node, or is a graph
// input, or is a constant (its bytes are in `data`). Everything is plain values: copying a
// Graph is cheap because constant bytes are shared (immutable, reference counted).
//
// Layout conventions: tensors are dense, row-major ("C order"), outermost dim first, like ONNX.
// Constant bytes are little-endian host values of the dtype (float16 as IEEE binary16 bits;
// bool as one byte 0/1).
//
// Adding an op: see the comment at the top of nn/ops.def (op list, shape inference, reference
// interpreter, kernel, test; switches over OpKind have no `default:`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"

namespace op::nn {

// ---------------------------------------------------------------------------------------------
// Element types

enum class DType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kFloat16,
  kFloat64,
  kUInt8,
  kInt8,
  kInt32,
  kInt64,
  kBool,
};

size_t DTypeSize(DType t);       // bytes per element (0 for kUndefined)
const char *DTypeName(DType t);  // "float32", "float16", "uint8", ... (also the caps names)
bool IsFloat(DType t);           // float16/32/64
// ONNX TensorProto.DataType numbers <-> ours. Unknown or unsupported ONNX types give kUndefined.
DType DTypeFromOnnx(int onnx_type);
int DTypeToOnnx(DType t);
// "float32", "f32", "uint8", "u8", ... → DType; kUndefined if unknown.
DType DTypeFromName(const std::string &name);

// IEEE binary16 <-> float, round to nearest even; exact for every half value.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);

// ---------------------------------------------------------------------------------------------
// Shapes

constexpr int64_t kUnknownDim = -1;

struct Shape {
  std::vector<int64_t> dims;  // outermost first; kUnknownDim where not yet known

  Shape() = default;
  Shape(std::vector<int64_t> d) : dims(std::move(d)) {}  // NOLINT: implicit on purpose
  Shape(std::initializer_list<int64_t> d) : dims(d) {}

  size_t rank() const { return dims.size(); }
  int64_t operator[](size_t i) const { return dims[i]; }
  int64_t &operator[](size_t i) { return dims[i]; }
  bool IsStatic() const;         // every dim known (>= 0)
  int64_t NumElements() const;   // product of dims (1 for a scalar); -1 if not static or > 2^62
  std::string ToString() const;  // "(1,12,128,256)"; "?" for unknown dims
  bool operator==(const Shape &o) const { return dims == o.dims; }
  bool operator!=(const Shape &o) const { return dims != o.dims; }
};

// The status with control characters of its message escaped ("\n" → "\\x0a"): names quoted
// from a file may hold anything, and errors must stay one line.
Status OneLineStatus(Status s);

// Row-major strides in elements.
std::vector<int64_t> Strides(const Shape &s);
// Numpy broadcasting of two static shapes; an error names both shapes.
StatusOr<Shape> BroadcastShapes(const Shape &a, const Shape &b);
// Normalises an axis in [-rank, rank) to [0, rank); an error names the axis and rank.
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// ---------------------------------------------------------------------------------------------
// Tensors

using TensorId = int32_t;
constexpr TensorId kNoTensor = -1;  // an absent optional input (ONNX's empty name)

using Bytes = std::vector<uint8_t>;

struct Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  // ONNX dim_param names of graph inputs ("batch", "N"), same length as shape.dims, "" where the
  // dim is a number. Shape inference binds them from options ("name=d0,d1,...").
  std::vector<std::string> dim_params;
  // Constant (initializer, Constant node or folded value): its bytes, else null.
  std::shared_ptr<const Bytes> data;
  bool is_input = false;
  bool is_output = false;

  bool is_constant() const { return data != nullptr; }
  size_t ByteSize() const;  // NumElements * DTypeSize (0 if the shape is not static)
  // Typed view of constant bytes; the caller checks dtype. Null if not constant.
  template <typename T>
  const T *Data() const {
    return data ? reinterpret_cast<const T *>(data->data()) : nullptr;
  }
};

// Reads a constant integer tensor (int32/int64/uint8/int8/bool) as int64 values; an error if the
// tensor is not constant or not of an integer type. Used for shapes, axes, pads, indices.
StatusOr<std::vector<int64_t>> ConstantInts(const Tensor &t);
// Reads a constant float-like or integer tensor as doubles.
StatusOr<std::vector<double>> ConstantDoubles(const Tensor &t);

// Builds constant tensors (name left empty for the caller).
Tensor MakeConstant(DType dtype, Shape shape, Bytes bytes);
Tensor MakeInt64Constant(const std::vector<int64_t> &values, Shape shape);
Tensor MakeFloatConstant(const std::vector<float> &values, Shape shape);

// ---------------------------------------------------------------------------------------------
// Attributes: a typed map, ONNX's attribute kinds.

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

class Attributes {
 public:
  bool Has(const std::string &name) const { return map_.count(name) != 0; }
  void Set(const std::string &name, AttrValue v) { map_[name] = std::move(v); }
  void Erase(const std::string &name) { map_.erase(name); }

  // Getters with a default for absent attributes. An attribute of another kind also yields the
  // default; Validate-style checks use Kind() when that matters.
  int64_t Int(const std::string &name, int64_t def = 0) const;
  float Float(const std::string &name, float def = 0.f) const;
  std::string String(const std::string &name, const std::string &def = "") const;
  std::vector<int64_t> Ints(const std::string &name, std::vector<int64_t> def = {}) const;
  std::vector<float> Floats(const std::string &name, std::vector<float> def = {}) const;
  std::vector<std::string> Strings(const std::string &name,
                                   std::vector<std::string> def = {}) const;
  const Tensor *GetTensor(const std::string &name) const;  // null if absent

  const std::map<std::string, AttrValue> &map() const { return map_; }

 private:
  std::map<std::string, AttrValue> map_;
};

// ---------------------------------------------------------------------------------------------
// Ops and nodes

enum class OpKind : uint16_t {
#define OP(Name, Class) k##Name,
#include "nn/ops.def"
#undef OP
};

enum class OpClass : uint8_t { kUnary, kBinary, kVariadic, kOther, kFused };

const char *OpName(OpKind op);  // "Conv", "FusedConv", ...
OpClass ClassOf(OpKind op);
// ONNX op_type → OpKind (fused ops are never found: they are not ONNX ops).
bool OpFromName(const std::string &name, OpKind *op);
constexpr int kNumOps = 0
#define OP(Name, Class) +1
#include "nn/ops.def"
#undef OP
    ;

struct Node {
  OpKind op = OpKind::kIdentity;
  std::string name;               // ONNX node name (may be empty); used in error messages
  std::vector<TensorId> inputs;   // kNoTensor for an absent optional input
  std::vector<TensorId> outputs;  // kNoTensor for an unused optional output
  Attributes attrs;
  int opset = 0;  // the default-domain opset the model was written against

  // "Conv 'conv1'" (or "Conv (unnamed node)"): how errors name a node.
  std::string Describe() const;
  TensorId input(size_t i) const { return i < inputs.size() ? inputs[i] : kNoTensor; }
};

// ---------------------------------------------------------------------------------------------
// Graph

// A named range of the last axis of an output (openpilot's `output_slices`: dict[str, slice]).
struct OutputSlice {
  std::string name;
  int64_t start = 0;
  int64_t end = 0;  // exclusive
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;                      // topological order
  std::vector<TensorId> inputs;                 // the model's inputs (non-constant), in ONNX order
  std::vector<TensorId> outputs;                // the model's outputs, in ONNX order
  std::map<std::string, std::string> metadata;  // metadata_props (raw strings)
  std::vector<OutputSlice> slices;              // decoded from metadata["output_slices"]
  int opset = 0;                                // default-domain opset of the model
  std::string producer;                         // producer_name + version, for `opc info`

  Tensor &tensor(TensorId id) { return tensors[static_cast<size_t>(id)]; }
  const Tensor &tensor(TensorId id) const { return tensors[static_cast<size_t>(id)]; }
  // Appends a tensor and returns its id.
  TensorId AddTensor(Tensor t);
  // Finds a tensor by name (linear; for tools and tests); kNoTensor if absent.
  TensorId FindTensor(const std::string &name) const;
  // Creates a name not used by any tensor, from a prefix ("conv1_fused", "conv1_fused_2", ...).
  std::string UniqueName(const std::string &prefix) const;

  // producer[id] = index of the node that writes tensor id, or -1.
  std::vector<int> Producers() const;
  // How many node inputs and graph outputs read each tensor.
  std::vector<int> UseCounts() const;

  // Checks the invariants: ids in range, each tensor written once, nodes in topological order,
  // inputs/outputs exist, constants have as many bytes as their shape needs (when static).
  Status Validate() const;
  // Removes nodes whose outputs nobody reads and tensors nobody refers to; renumbers ids.
  void RemoveDeadCode();

  // The one way passes drop nodes: removes every node marked in `gone` (one flag per node),
  // keeping the order of the rest. Tensors stay (RemoveDeadCode drops unused ones).
  void RemoveNodes(const std::vector<bool> &gone);
  // Rewrites a group of nodes into one: `fused` takes the place of the last node in `absorbed`
  // (indices into nodes; after all the group's inputs, so the order stays topological) and the
  // other absorbed nodes are removed.
  void ReplaceNodes(const std::vector<int> &absorbed, Node fused);
};

}  // namespace op::nn
