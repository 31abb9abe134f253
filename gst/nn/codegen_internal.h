// Code generation internals shared by codegen.cpp (driver, plan, compute kernels) and
// codegen_eltwise.cpp (the snippet table, elementwise kernels and index maps).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nn/codegen.h"

namespace op::nn::gen {

// A kernel argument before the memory plan: tensors are still ids.
struct PendingArg {
  // kImage: a constant tensor read as an RGBA image2d (one kernel argument).
  enum class Kind { kTensor, kInt, kFloat, kImage } kind = Kind::kInt;
  TensorId tensor = kNoTensor;
  int32_t i = 0;
  float f = 0.f;
};

// A #define block ahead of a template.
class Defines {
 public:
  Defines &Def(const std::string &name, const std::string &value);
  Defines &Int(const std::string &name, int64_t value);
  Defines &Flt(const std::string &name, double value);
  Defines &Append(const Defines &other);
  const std::string &text() const { return text_; }

 private:
  std::string text_;
};

// The epilogue of a conv2d_vec, conv2d_dw or matmul_vec kernel kept apart from its other
// #defines, so that MergeEpilogues (codegen.cpp) can give the kernels of a model that differ only
// there one program, the activation and the residual switched by arguments.
struct EpilogueVariant {
  Defines base;          // the kernel's #defines but the epilogue's
  bool vector = false;   // the vector epilogue (ACTV) is defined
  Defines act;           // the activation's #defines (none for no activation)
  Defines act_switched;  // the same, applied where the argument epi_act says so
  bool has_res = false, res_after = false;
  Defines res;  // the residual's #defines (TR, and matmul_vec's R_IDX)
  // Flags that only compile a path some sizes take, checked again at run time (EDGE: a partial
  // vector or block; K_TAIL: k not all in fours): they do not tell kernels apart either.
  std::vector<std::pair<std::string, bool>> paths;
  size_t out_arg = 0;  // the output's place in the arguments (the residual's is before it)
};

struct Pending {
  std::string label;
  std::string entry;
  std::string source;  // the #define block followed by the template
  std::vector<uint64_t> global;
  std::vector<uint64_t> local;
  std::vector<PendingArg> args;  // tensors expand to (buffer, element offset)
  std::vector<TensorId> writes;  // tensors the kernel writes (the others are read)
  uint64_t flops = 0;
  std::optional<EpilogueVariant> epilogue;  // where MergeEpilogues may switch it
};

// A float literal that round-trips ("1.5f", "-INFINITY", "NAN").
std::string FloatLit(double v);

class Emitter {
 public:
  Emitter(const Graph &graph, const CodegenOptions &options);

  Graph graph;  // a working copy: code generation may add tensors (copies, temporaries)
  const CodegenOptions &opt;
  std::vector<TensorId> alias;  // alias[t]: the tensor whose storage t shares (t itself if none)
  std::map<TensorId, int64_t> view_offset;  // AliasView: where t starts in its root, in elements
  std::vector<Pending> kernels;
  // Tensors whose storage is an output buffer: tensor → output index.
  std::map<TensorId, uint32_t> io_output;
  // Float tensors kept in float32 storage whatever the precision: quantization scales, which
  // half storage would round (a scale off by 2^-11 moves every quantized value near a tie).
  std::set<TensorId> keep_f32;
  // Float16 constants kept in half storage whatever the precision: weights laid out for a kernel
  // that widens them as it loads them (vload_half), exactly, in half the bytes.
  std::set<TensorId> keep_half;
  // What the one Concat reading a tensor computes itself as it copies, so that the tensor's
  // own node gets no launch (FoldIntoConcats in codegen.cpp, ConcatRows in codegen_eltwise.cpp):
  // a rounding Cast (float32 to float16 held in float32 storage) of `source`, or the mean of
  // `count` consecutive rows of `source` (a ReduceMean over one axis with only ones before it).
  struct ConcatFold {
    enum class Kind { kRound, kMean } kind = Kind::kRound;
    TensorId source = kNoTensor;
    int64_t count = 0;  // kMean: the rows averaged
  };
  std::map<TensorId, ConcatFold> folded_by_concat;
  // Chains of small matrix products lowered as one launch (FindProductChains in codegen.cpp),
  // by the first product's output: the products' node indices, in order, and the row-copying
  // Concat (ConcatRowsApply) whose one row the chain computes itself as its input, if any.
  struct ProductChain {
    std::vector<size_t> nodes;
    int concat = -1;
  };
  std::map<TensorId, ProductChain> product_chains;
  // Outputs of nodes that get no launch of their own because a launch reading them computes
  // them: a chain's later products, and the Concats of product_chains and product_concats.
  std::set<TensorId> computed_by_reader;
  // Concats whose rows the one product reading them copies itself (FindProductConcats in
  // codegen.cpp; matmul_vec's A_CAT): the Concat's output → its node index.
  std::map<TensorId, int> product_concats;
  // Host processor extensions the emitted kernels need (CompiledModel::cpu_features).
  std::set<std::string> cpu_features;

  const Tensor &T(TensorId t) const { return graph.tensor(t); }
  const std::vector<int64_t> &Dims(TensorId t) const { return graph.tensor(t).shape.dims; }
  TensorId Root(TensorId t) const;
  // `out` shares the storage of `in` (Reshape and friends); no kernel.
  void Alias(TensorId out, TensorId in) {
    alias[out] = Root(in);
    if (IsView(in))
      view_offset[out] = ViewOffset(in);
  }
  // `out` is the contiguous part of `in` that starts `elements` in (a Gather of one index along
  // an axis with only ones before it); no kernel.
  void AliasView(TensorId out, TensorId in, int64_t elements) {
    alias[out] = Root(in);
    view_offset[out] = ViewOffset(in) + elements;
  }
  // Whether t is a part of its root's storage (AliasView, or an alias of one), and where it
  // starts there, in elements (0 for any other tensor).
  bool IsView(TensorId t) const { return view_offset.count(t) != 0; }
  int64_t ViewOffset(TensorId t) const {
    auto it = view_offset.find(t);
    return it == view_offset.end() ? 0 : it->second;
  }
  // A new intermediate tensor (for epilogues that cannot be fused).
  TensorId NewTensor(const std::string &name, DType dtype, std::vector<int64_t> dims);
  // A new constant (weights re-laid out for a kernel); packed like the model's own constants.
  TensorId NewConstant(const std::string &name, DType dtype, std::vector<int64_t> dims,
                       Bytes bytes);

  // Storage tag of a tensor ("f32", "f16", "h16", "i64", ...) and its element size.
  std::string Tag(TensorId t) const;
  uint32_t StorageBytes(TensorId t) const;
  // Storage tag of a dtype when kept in the arena or weights.
  std::string TagOf(DType dtype, bool io) const;
  bool IsIo(TensorId t) const;

  // `defines` followed by the embedded template `name` (kernels/NAME.cl).
  StatusOr<std::string> Source(const char *name, const Defines &defines) const;
  void Emit(Pending k) { kernels.push_back(std::move(k)); }
};

// Index expressions over a linear index variable `lin` of a tensor with dims `dims`.
// The coordinate d of `lin`.
std::string CoordExpr(const std::vector<int64_t> &dims, size_t d, const std::string &lin);
// The index into a tensor of dims `in` (numpy-broadcast to `out`) of output element `lin`.
std::string BroadcastIndex(const std::vector<int64_t> &out, const std::vector<int64_t> &in,
                           const std::string &lin);
int64_t Product(const std::vector<int64_t> &dims, size_t from = 0,
                size_t to = static_cast<size_t>(-1));

// The expression of a Unary op (or activation name) applied to float expression `x`;
// Unsupported for names it does not know.
StatusOr<std::string> ActivationExpr(const std::string &op, float alpha, float beta,
                                     const std::string &x);
// The `#define ACT(x) ...` value for the fused activation attributes of a node; for the
// activation "Chain" (an element-wise chain fused into the epilogue) a call of nn_act_chain,
// which DefineActivation defines.
StatusOr<std::string> FusedActivation(const Node &node);
// Defines ACT(x) as `act` (FusedActivation's) and, for a chain, the body of nn_act_chain. With a
// `gate` (an expression of the kernel's), ACT(x) is `act` where the gate is true, else x.
Status DefineActivation(Defines &d, const Node &node, const std::string &act,
                        const std::string &gate = "");
// Defines ACTV(x), the activation of a fused epilogue on a whole float vector VF (and the body of
// nn_act_chain_v for a chain), where every step of it has a vector form; defines nothing
// otherwise, and the kernel keeps its lane-by-lane epilogue. Without a fused epilogue (the
// activation runs in a separate add), ACTV is the identity. `gate` as DefineActivation's.
Status DefineVectorActivation(Defines &d, const Node &node, bool fused_epilogue,
                              const std::string &gate = "");
// A fused activation other than a chain as an expression in (x) on a float vector VF ("(x)"
// without one), or none where it has no vector form.
std::optional<std::string> VectorActivationExpr(const Node &node);

// Elementwise ops, Cast, Where, BatchNormalization, ElementwiseChain.
Status LowerElementwise(Emitter &e, const Node &node);
// Index maps: Transpose, Slice, Pad, Tile, Expand, Concat, Split, Gather, GatherElements,
// DepthToSpace, SpaceToDepth, Trilu, CumSum, Dropout's mask.
Status LowerLayout(Emitter &e, const Node &node);
// dst = src (same element count), converting between their storage tags.
Status EmitCopy(Emitter &e, TensorId src, TensorId dst, const std::string &label);
// Whether `node` (a Concat) takes the CPU profile's row-copying kernel, with what it computes
// itself already in Emitter::folded_by_concat.
bool ConcatRowsApply(const Emitter &e, const Node &node);
// That kernel's work as statements for item `i` of `items` (a block of up to 16 values of one
// input's part of one row each): the tensors it reads (as in0, in0_off, ...: float32 pointers
// and element offsets) and the body, which writes through `<out_space> float *` pointers from
// out0 + out0_off (so that another kernel can write the rows into local memory).
struct ConcatRowsCode {
  std::vector<TensorId> inputs;
  std::string body;
  int64_t items = 0;
};
ConcatRowsCode ConcatRowsBody(const Emitter &e, const Node &node, size_t ax,
                              const std::string &out_space);
// dst = a + b (broadcast), with an optional activation applied before or after the add: the
// epilogue of a fused node whose residual the compute kernel could not take.
Status EmitAddActivation(Emitter &e, TensorId a, TensorId b, TensorId dst, const std::string &act,
                         bool act_after_add, const std::string &label);

// "Conv 'name' (opset 13)": how generation errors name a node.
std::string NodeWhere(const Node &node);

}  // namespace op::nn::gen
