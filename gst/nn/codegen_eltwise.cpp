// Elementwise kernels and index maps: every op here becomes one launch of kernels/eltwise.cl
// with a generated body. The per-op expression snippets are the tables below, kept in one place.
#include <cmath>
#include <cstdio>

#include "nn/codegen_internal.h"
#include "nn/reference_ops.h"

namespace op::nn::gen {
namespace {

// --- the snippet tables. $x (and $y for binary ops) are the operands, $a/$b the op's alpha and
// beta. Float snippets compute in float; integer snippets in long (nullptr: float only).
struct UnarySnippet {
  OpKind op;
  const char *f;
  const char *i;
};

const UnarySnippet kUnary[] = {
    {OpKind::kIdentity, "$x", "$x"},
    {OpKind::kSqrt, "sqrt($x)", nullptr},
    {OpKind::kExp, "exp($x)", nullptr},
    {OpKind::kLog, "log($x)", nullptr},
    {OpKind::kNeg, "(-$x)", "(-$x)"},
    {OpKind::kAbs, "fabs($x)", "($x < 0 ? -$x : $x)"},
    {OpKind::kReciprocal, "(1.0f / $x)", nullptr},
    {OpKind::kRelu, "($x < 0.0f ? 0.0f : $x)", "($x < 0 ? 0 : $x)"},
    {OpKind::kLeakyRelu, "nn_leaky_relu($x, $a)", nullptr},
    {OpKind::kElu, "nn_elu($x, $a)", nullptr},
    {OpKind::kSigmoid, "nn_sigmoid($x)", nullptr},
    {OpKind::kHardSigmoid, "nn_hard_sigmoid($x, $a, $b)", nullptr},
    {OpKind::kHardSwish, "nn_hard_swish($x)", nullptr},
    {OpKind::kTanh, "nn_tanh($x)", nullptr},
    {OpKind::kErf, "erf($x)", nullptr},
    {OpKind::kSoftplus, "nn_softplus($x)", nullptr},
    {OpKind::kClip, "fmin(fmax($x, $a), $b)", "min(max($x, (long)($a)), (long)($b))"},
    {OpKind::kFloor, "floor($x)", "$x"},
    {OpKind::kCeil, "ceil($x)", "$x"},
    {OpKind::kRound, "nn_round($x)", "$x"},
    {OpKind::kSign, "nn_sign($x)", "nn_isign($x)"},
    {OpKind::kSin, "sin($x)", nullptr},
    {OpKind::kCos, "cos($x)", nullptr},
    {OpKind::kTan, "tan($x)", nullptr},
    {OpKind::kAsin, "asin($x)", nullptr},
    {OpKind::kAcos, "acos($x)", nullptr},
    {OpKind::kAtan, "atan($x)", nullptr},
    {OpKind::kSinh, "sinh($x)", nullptr},
    {OpKind::kCosh, "cosh($x)", nullptr},
    {OpKind::kAsinh, "asinh($x)", nullptr},
    {OpKind::kAcosh, "acosh($x)", nullptr},
    {OpKind::kAtanh, "atanh($x)", nullptr},
    {OpKind::kSelu, "($x > 0.0f ? $b * $x : $b * $a * (exp($x) - 1.0f))", nullptr},
    {OpKind::kCelu, "(fmax(0.0f, $x) + fmin(0.0f, $a * (exp($x / $a) - 1.0f)))", nullptr},
    {OpKind::kSoftsign, "($x / (1.0f + fabs($x)))", nullptr},
    {OpKind::kThresholdedRelu, "($x > $a ? $x : 0.0f)", nullptr},
    {OpKind::kShrink, "($x < -$a ? $x + $b : ($x > $a ? $x - $b : 0.0f))",
     "($x < -$a ? $x + $b : ($x > $a ? $x - $b : 0))"},
    {OpKind::kNot, nullptr, "(!$x)"},
    {OpKind::kIsNaN, "isnan($x)", nullptr},
    {OpKind::kIsInf, "(isinf($x) && ($x > 0.0f ? $a != 0.0f : $b != 0.0f))", nullptr},
};

struct BinarySnippet {
  OpKind op;
  const char *f;
  const char *i;
};

const BinarySnippet kBinary[] = {
    {OpKind::kAdd, "($x + $y)", "($x + $y)"},
    {OpKind::kSub, "($x - $y)", "($x - $y)"},
    {OpKind::kMul, "($x * $y)", "($x * $y)"},
    {OpKind::kDiv, "($x / $y)", "nn_idiv($x, $y)"},
    {OpKind::kPow, "pow($x, $y)", "(long)rint(pow((float)$x, (float)$y))"},
    {OpKind::kEqual, "($x == $y)", "($x == $y)"},
    {OpKind::kLess, "($x < $y)", "($x < $y)"},
    {OpKind::kGreater, "($x > $y)", "($x > $y)"},
    {OpKind::kLessOrEqual, "($x <= $y)", "($x <= $y)"},
    {OpKind::kGreaterOrEqual, "($x >= $y)", "($x >= $y)"},
    {OpKind::kAnd, nullptr, "($x && $y)"},
    {OpKind::kOr, nullptr, "($x || $y)"},
    {OpKind::kXor, nullptr, "(($x != 0) != ($y != 0))"},
    {OpKind::kPRelu, "($x < 0.0f ? $x * $y : $x)", "($x < 0 ? $x * $y : $x)"},
    {OpKind::kMin, "fmin($x, $y)", "min($x, $y)"},
    {OpKind::kMax, "fmax($x, $y)", "max($x, $y)"},
    {OpKind::kSum, "($x + $y)", "($x + $y)"},
    {OpKind::kMean, "($x + $y)", "($x + $y)"},
};

std::string Replace(std::string s, const std::string &from, const std::string &to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

StatusOr<std::string> UnaryExpr(OpKind op, const std::string &x, float a, float b, bool is_float) {
  for (const UnarySnippet &s : kUnary) {
    if (s.op != op)
      continue;
    const char *t = is_float ? s.f : s.i;
    if (!t)
      return Unsupported(std::string(OpName(op)) + " on " + (is_float ? "float" : "integer") +
                         " tensors");
    std::string r = Replace(t, "$x", x);
    r = Replace(r, "$a", FloatLit(a));
    return Replace(r, "$b", FloatLit(b));
  }
  return Unsupported(std::string("elementwise op ") + OpName(op));
}

StatusOr<std::string> BinaryExpr(OpKind op, const std::string &x, const std::string &y,
                                 bool is_float, bool fmod) {
  if (op == OpKind::kMod) {
    if (is_float)
      return (fmod ? "fmod(" : "nn_fmod_floor(") + x + ", " + y + ")";
    return fmod ? "(" + y + " == 0 ? 0 : " + x + " % " + y + ")" : "nn_imod(" + x + ", " + y + ")";
  }
  for (const BinarySnippet &s : kBinary) {
    if (s.op != op)
      continue;
    const char *t = is_float ? s.f : s.i;
    if (!t)
      return Unsupported(std::string(OpName(op)) + " on " + (is_float ? "float" : "integer") +
                         " tensors");
    return Replace(Replace(t, "$x", x), "$y", y);
  }
  return Unsupported(std::string("elementwise op ") + OpName(op));
}

// The alpha and beta of a Unary node's snippet, from its attributes.
void NodeAlphaBeta(const Node &n, float *a, float *b) {
  *a = 0.f;
  *b = 0.f;
  const Attributes &at = n.attrs;
  switch (n.op) {
    case OpKind::kLeakyRelu:
      *a = at.Float("alpha", 0.01f);
      break;
    case OpKind::kElu:
    case OpKind::kCelu:
    case OpKind::kThresholdedRelu:
      *a = at.Float("alpha", 1.0f);
      break;
    case OpKind::kHardSigmoid:
      *a = at.Float("alpha", 0.2f);
      *b = at.Float("beta", 0.5f);
      break;
    case OpKind::kClip:
      *a = at.Float("min", -INFINITY);
      *b = at.Float("max", INFINITY);
      break;
    case OpKind::kSelu:
      *a = at.Float("alpha", 1.67326319217681884765625f);
      *b = at.Float("gamma", 1.05070102214813232421875f);
      break;
    case OpKind::kShrink:
      *a = at.Float("lambd", 0.5f);
      *b = at.Float("bias", 0.0f);
      break;
    case OpKind::kIsInf:
      *a = static_cast<float>(at.Int("detect_positive", 1));
      *b = static_cast<float>(at.Int("detect_negative", 1));
      break;
    default:
      break;
  }
}

bool IsFloatTag(const std::string &tag) {
  return tag == "f32" || tag == "f16" || tag == "h16";
}

// One launch of eltwise.cl: an iteration space, inputs, one output, and a body that may use
// `i` (the linear index), c0.. (its coordinates in `space`), IN(k, index) and the output.
struct MapKernel {
  std::vector<int64_t> space;
  std::vector<TensorId> inputs;
  TensorId output = kNoTensor;
  TensorId output2 = kNoTensor;  // a second output (out1), as a fused quantizer writes
  std::string body;
  uint64_t flops = 0;
  // Integer arguments p0, p1, ... after the outputs: what the body may read at run time instead
  // of literals, so that one program serves maps that differ only there (the strides of a
  // Transpose, the offset of a Split's part).
  std::vector<int64_t> ints;
  // The iteration space as arguments too (after the ints: the element count, then per axis but
  // the first its size and the magic number and shift that divide by it, SpaceDivisor), so that
  // maps of one rank share a program whatever their sizes. Only a body that reads the space
  // through the coordinates c0, c1, ... may set it.
  bool space_args = false;
};

// Division of n < 2^31 by d in [1, 2^31] as (n * magic) >> shift in 64 bits, exact for every
// such n: with l the least power of two 2^l >= d, magic = ceil(2^(31 + l) / d) < 2^32 and
// shift = 31 + l; the rounding error e = magic * d - 2^(31 + l) < d <= 2^l, and n * e < 2^(31
// + l). As cheap as the multiply-and-shift a compiler makes of a division by a literal.
struct SpaceDivisor {
  uint32_t magic = 0;
  int shift = 0;
};
SpaceDivisor DivisorOf(int64_t d) {
  int l = 0;
  while ((int64_t{1} << l) < d)
    l++;
  const uint64_t p = uint64_t{1} << (31 + l);
  return {static_cast<uint32_t>((p + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d)),
          31 + l};
}

std::string In(const Emitter &e, const MapKernel &m, size_t k, const std::string &index) {
  return "LOAD(" + e.Tag(m.inputs[k]) + ", in" + std::to_string(k) + ", in" + std::to_string(k) +
         "_off + (" + index + "))";
}

std::string Out(const Emitter &e, const MapKernel &m, const std::string &index,
                const std::string &value) {
  return "STORE(" + e.Tag(m.output) + ", out0, out0_off + (" + index + "), " + value + ");";
}

Status EmitMap(Emitter &e, const MapKernel &m, const std::string &label) {
  int64_t n = Product(m.space);
  if (n == 0)
    return Status::Ok();
  std::string params;
  for (size_t k = 0; k < m.inputs.size(); k++)
    params += "__global const STYPE(" + e.Tag(m.inputs[k]) + ") *in" + std::to_string(k) +
              ", uint in" + std::to_string(k) + "_off, ";
  params += "__global STYPE(" + e.Tag(m.output) + ") *out0, uint out0_off";
  if (m.output2 != kNoTensor)
    params += ", __global STYPE(" + e.Tag(m.output2) + ") *out1, uint out1_off";
  for (size_t k = 0; k < m.ints.size(); k++)
    params += ", const int p" + std::to_string(k);
  std::string body = "{ ";
  // space_args: the coordinates from the last axis to the first, each a remainder of the
  // division by the axis' size (nn_udiv_magic, nn_common.cl).
  std::vector<int64_t> space_ints;
  if (m.space_args) {
    params += ", const int elt_n";
    space_ints.push_back(n);
    body += "uint sp_t = i; ";
    for (size_t d = m.space.size(); d-- > 1;) {
      const std::string sd = std::to_string(d);
      params += ", const int sp_z" + sd + ", const int sp_m" + sd + ", const int sp_s" + sd;
      const SpaceDivisor div = DivisorOf(m.space[d]);
      space_ints.insert(space_ints.end(),
                        {m.space[d], static_cast<int32_t>(div.magic), int64_t{div.shift}});
      body += "const uint sp_q" + sd + " = nn_udiv_magic(sp_t, sp_m" + sd + ", sp_s" + sd +
              "); const uint c" + sd + " = sp_t - sp_q" + sd + " * (uint)sp_z" + sd +
              "; sp_t = sp_q" + sd + "; ";
    }
    body += "const uint c0 = sp_t; ";
  } else {
    for (size_t d = 0; d < m.space.size(); d++)
      body += "const uint c" + std::to_string(d) + " = " + CoordExpr(m.space, d, "i") + "; ";
  }
  body += m.body + " }";
  Defines defs;
  defs.Def("ELT_PARAMS", params).Def("ELT_BODY", body);
  if (m.space_args)
    defs.Def("ELT_N", "(uint)elt_n");
  else
    defs.Int("ELT_N", n);
  if (m.output2 != kNoTensor)
    defs.Int("ELT_QUANT", 1);  // eltwise.cl takes quant.cl's helpers
  Pending k;
  k.label = label;
  k.entry = "eltwise";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("eltwise", defs));
  // On CPUs a work-group is a loop the driver runs on one thread, and each group costs a
  // dispatch: larger groups for larger spaces (a 12,800-element Cast took 200 groups of 64).
  uint64_t local = 64;
  if (e.opt.profile == cl::Profile::kCpu)
    local = n >= 65536 ? 1024 : (n >= 4096 ? 256 : 64);
  k.global = {(static_cast<uint64_t>(n) + local - 1) / local * local};
  k.local = {local};
  for (TensorId t : m.inputs) {
    PendingArg a;
    a.kind = PendingArg::Kind::kTensor;
    a.tensor = t;
    k.args.push_back(a);
  }
  PendingArg o;
  o.kind = PendingArg::Kind::kTensor;
  o.tensor = m.output;
  k.args.push_back(o);
  k.writes = {m.output};
  if (m.output2 != kNoTensor) {
    o.tensor = m.output2;
    k.args.push_back(o);
    k.writes.push_back(m.output2);
  }
  for (const std::vector<int64_t> *ints :
       std::initializer_list<const std::vector<int64_t> *>{&m.ints, &space_ints})
    for (int64_t v : *ints) {
      PendingArg a;
      a.kind = PendingArg::Kind::kInt;
      a.i = static_cast<int32_t>(v);
      k.args.push_back(a);
    }
  k.flops = m.flops;
  e.Emit(std::move(k));
  return Status::Ok();
}

std::string C(size_t d);

// A copy that reads its input `x` at `offset` plus the output's coordinates times `strides` (one
// per output axis: permuted for a Transpose, a step's multiple for a Slice, negative where it
// steps back): Transpose, Split, Slice. The offset and the strides are arguments, and on the
// CPU profile the output's shape too (four axes at least, leading axes of one element read at
// stride 0), so that such copies share one program whatever their shapes (the small vision
// model's four transposes and its Split took five). Both tensors under 2^31 elements.
Status EmitStridedCopy(Emitter &e, TensorId x, TensorId y, int64_t offset,
                       std::vector<int64_t> strides, const std::string &label) {
  MapKernel m;
  m.output = y;
  m.space = e.Dims(y);
  m.inputs = {x};
  if (e.opt.profile == cl::Profile::kCpu) {
    m.space_args = true;
    while (m.space.size() < 4) {
      m.space.insert(m.space.begin(), 1);
      strides.insert(strides.begin(), 0);
    }
  }
  std::string idx = "p0";
  m.ints.push_back(offset);
  for (size_t d = 0; d < strides.size(); d++) {
    idx += " + " + C(d) + " * p" + std::to_string(d + 1);
    m.ints.push_back(strides[d]);
  }
  m.body = Out(e, m, "i", In(e, m, 0, idx));
  return EmitMap(e, m, label);
}

// Whether a strided copy can take `t`'s indices as 32-bit arguments.
bool StridedCopyFits(const Emitter &e, TensorId t) {
  return Product(e.Dims(t)) < (int64_t{1} << 31);
}

// The linear index of coordinates given as expressions, with row-major strides of `dims`.
std::string Linear(const std::vector<std::string> &coords, const std::vector<int64_t> &dims) {
  std::string s = "0";
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1)
      s += " + (" + coords[d] + ") * " + std::to_string(stride);
    stride *= dims[d];
  }
  return s;
}

std::string C(size_t d) {
  return "c" + std::to_string(d);
}

std::string ValueOf(const Emitter &e, const MapKernel &m, size_t k, bool as_float,
                    const std::vector<int64_t> &out) {
  std::string v = In(e, m, k, BroadcastIndex(out, e.Dims(m.inputs[k]), "i"));
  return as_float ? "(float)" + v : "(long)" + v;
}

Status LowerMath(Emitter &e, const Node &node) {
  TensorId y = node.outputs[0];
  MapKernel m;
  m.space = e.Dims(y);
  m.output = y;
  int64_t n = Product(m.space);
  const std::string label = node.Describe();
  switch (ClassOf(node.op)) {
    case OpClass::kUnary: {
      TensorId x = node.inputs[0];
      bool fl = IsFloatTag(e.Tag(x));
      m.inputs = {x};
      float a, b;
      NodeAlphaBeta(node, &a, &b);
      std::string xv = ValueOf(e, m, 0, fl, m.space);
      std::string expr;
      if (node.op == OpKind::kClip && (node.input(1) != kNoTensor || node.input(2) != kNoTensor)) {
        // Clip with tensor bounds that folding could not turn into attributes.
        std::string v = xv;
        if (node.input(1) != kNoTensor) {
          m.inputs.push_back(node.input(1));
          std::string lo = In(e, m, m.inputs.size() - 1, "0");
          v = fl ? "fmax(" + v + ", (float)" + lo + ")" : "max(" + v + ", (long)" + lo + ")";
        }
        if (node.input(2) != kNoTensor) {
          m.inputs.push_back(node.input(2));
          std::string hi = In(e, m, m.inputs.size() - 1, "0");
          v = fl ? "fmin(" + v + ", (float)" + hi + ")" : "min(" + v + ", (long)" + hi + ")";
        }
        expr = v;
      } else {
        if (node.op == OpKind::kClip && !fl) {
          // Integer bounds: an infinite default is the type's whole range.
          auto bound = [](float v) {
            return std::isinf(v) ? std::string(v < 0 ? "LONG_MIN" : "LONG_MAX")
                                 : std::to_string(static_cast<int64_t>(v));
          };
          expr = "min(max(v0, (long)" + bound(a) + "), (long)" + bound(b) + ")";
        } else {
          OP_ASSIGN_OR_RETURN(expr, UnaryExpr(node.op, "v0", a, b, fl));
        }
        expr = "(" + expr + ")";
        m.body = std::string(fl ? "const float" : "const long") + " v0 = " + xv + "; ";
      }
      m.body += Out(e, m, "i", expr);
      m.flops = static_cast<uint64_t>(n);
      return EmitMap(e, m, label);
    }
    case OpClass::kBinary:
    case OpClass::kVariadic: {
      bool fl = false;
      for (TensorId t : node.inputs)
        if (t != kNoTensor && IsFloatTag(e.Tag(t)))
          fl = true;
      for (TensorId t : node.inputs)
        if (t != kNoTensor)
          m.inputs.push_back(t);
      if (m.inputs.empty())
        return InvalidArgument(label + " has no inputs");
      std::string ty = fl ? "float" : "long";
      for (size_t k = 0; k < m.inputs.size(); k++)
        m.body +=
            "const " + ty + " v" + std::to_string(k) + " = " + ValueOf(e, m, k, fl, m.space) + "; ";
      std::string acc = "v0";
      bool fmod = node.attrs.Int("fmod", 0) != 0;
      for (size_t k = 1; k < m.inputs.size(); k++) {
        OP_ASSIGN_OR_RETURN(acc, BinaryExpr(node.op, acc, "v" + std::to_string(k), fl, fmod));
      }
      if (node.op == OpKind::kMean)
        acc =
            "(" + acc + ") / " + (fl ? FloatLit(m.inputs.size()) : std::to_string(m.inputs.size()));
      m.body += Out(e, m, "i", acc);
      m.flops = static_cast<uint64_t>(n) * (m.inputs.size() > 1 ? m.inputs.size() - 1 : 1);
      return EmitMap(e, m, label);
    }
    case OpClass::kOther:
    case OpClass::kFused:
      break;
  }
  return Internal(label + " is not elementwise");
}

// The steps of a chain as statements on `float v`, which starts as x0; binary steps read a
// scalar literal or x<k>, the chain's input k (one of `num_inputs`). Tanh followed by an Add of
// the literal 1 (GELU's tanh form) is one step, nn_one_plus_tanh: 2 / (1 + e^-2v), the same
// function without tanh's polynomial, select and sign, and without its cancellation where
// tanh is near -1.
StatusOr<std::string> ChainSteps(const Node &node, size_t num_inputs) {
  auto ops = node.attrs.Strings("ops");
  auto operand = node.attrs.Ints("operand");
  auto swap = node.attrs.Ints("swap");
  auto alpha = node.attrs.Floats("step_alpha");
  auto beta = node.attrs.Floats("step_beta");
  if (operand.size() != ops.size() || swap.size() != ops.size() || alpha.size() != ops.size() ||
      beta.size() != ops.size())
    return InvalidArgument(node.Describe() + ": step attribute lists differ in length");
  std::string body;
  for (size_t s = 0; s < ops.size(); s++) {
    OpKind op;
    if (!OpFromName(ops[s], &op))
      return Unsupported(node.Describe() + ": chain step " + ops[s]);
    std::string expr;
    if (op == OpKind::kTanh && s + 1 < ops.size() && ops[s + 1] == "Add" && operand[s + 1] < 0 &&
        alpha[s + 1] == 1.0f) {
      body += "v = nn_one_plus_tanh(v); ";
      s++;
      continue;
    }
    if (ClassOf(op) == OpClass::kUnary) {
      OP_ASSIGN_OR_RETURN(expr, UnaryExpr(op, "v", alpha[s], beta[s], true));
    } else {
      std::string other;
      if (operand[s] < 0)
        other = FloatLit(alpha[s]);
      else if (static_cast<size_t>(operand[s]) < num_inputs)
        other = "x" + std::to_string(operand[s]);
      else
        return InvalidArgument(node.Describe() + ": chain step " + std::to_string(s) +
                               " refers to input " + std::to_string(operand[s]));
      OP_ASSIGN_OR_RETURN(expr, swap[s] ? BinaryExpr(op, other, "v", true, false)
                                        : BinaryExpr(op, "v", other, true, false));
    }
    body += "v = " + expr + "; ";
  }
  return body;
}

bool VectorSafe(OpKind op);

// Whether a chain's steps are valid on float16 values: vector-safe unary ops and the four
// arithmetic ops (on literals or on inputs of the chain's own shape, see LowerChain).
bool VectorChain(const Node &node) {
  for (const std::string &name : node.attrs.Strings("ops")) {
    OpKind op;
    if (!OpFromName(name, &op))
      return false;
    const bool ok = ClassOf(op) == OpClass::kUnary ? VectorSafe(op)
                                                   : (op == OpKind::kAdd || op == OpKind::kSub ||
                                                      op == OpKind::kMul || op == OpKind::kDiv);
    if (!ok)
      return false;
  }
  return true;
}

Status LowerChain(Emitter &e, const Node &node) {
  TensorId y = node.outputs[0];
  MapKernel m;
  m.space = e.Dims(y);
  m.output = y;
  m.inputs = node.inputs;
  // A fused quantizer (FuseQuantizeIntoChain): its constant scale and zero point, the last
  // inputs, become literals, and out1 gets QuantizeLinear's value of the stored float.
  const bool quant = node.attrs.Int("quantize", 0) != 0 && node.outputs.size() > 1;
  std::string qscale, qzp, qlo, qhi;
  if (quant) {
    const size_t qn = static_cast<size_t>(node.attrs.Int("quantize_inputs", 1));
    if (m.inputs.size() < qn + 1)
      return InvalidArgument(node.Describe() + ": a fused quantizer without its scale");
    const TensorId s = m.inputs[m.inputs.size() - qn], q = node.outputs[1];
    const double zp =
        qn == 2 ? static_cast<double>(ref::GetReal(e.T(e.Root(m.inputs.back())), 0)) : 0.0;
    const bool s8 = e.T(q).dtype == DType::kInt8;
    m.inputs.resize(m.inputs.size() - qn);
    m.output2 = q;
    qscale = FloatLit(static_cast<double>(ref::GetReal(e.T(e.Root(s)), 0)));
    qzp = FloatLit(zp);
    qlo = s8 ? "-128.0f" : "0.0f";
    qhi = s8 ? "127.0f" : "255.0f";
  }
  for (TensorId t : m.inputs)
    if (t == kNoTensor)
      return InvalidArgument(node.Describe() + " has an absent input");
  OP_ASSIGN_OR_RETURN(std::string steps, ChainSteps(node, m.inputs.size()));
  const int64_t n = Product(m.space);
  // The CPU profile's 16 elements per work-item, where every input is float32 or bytes (a
  // chain that begins with a Cast of a camera frame) of the chain's own shape.
  bool vec = e.opt.profile == cl::Profile::kCpu && VectorChain(node) && e.Tag(y) == "f32";
  for (TensorId t : m.inputs)
    vec =
        vec && e.Dims(t) == m.space && (e.Tag(t) == "f32" || e.Tag(t) == "u8" || e.Tag(t) == "i8");
  // out1's store of element `index` quantized from float expression `value`
  auto qstore = [&](const std::string &index, const std::string &value) {
    return "STORE(" + e.Tag(m.output2) + ", out1, out1_off + " + index +
           ", nn_requantize(nn_div_for_rint(" + value + ", " + qscale + "), " + qzp + ", " + qlo +
           ", " + qhi + "));";
  };
  if (vec) {
    // 16 elements per work-item as float16 code (one element per work-item stayed scalar code
    // on PoCL: a quantizer's division steps cost more than the chain; a frame's normalisation,
    // 393,216 values, took 0.065 ms so after a 0.081 ms Cast, and 0.046-0.08 ms as one 16-lane
    // chain reading the bytes).
    m.space = {(n + 15) / 16};
    const std::string nn = std::to_string(n);
    std::string vload, sload;
    for (size_t k = 0; k < m.inputs.size(); k++) {
      const std::string ks = std::to_string(k);
      const std::string v = "vload16(0, in" + ks + " + in" + ks + "_off + e0)";
      vload += "const float16 x" + ks + " = " +
               (e.Tag(m.inputs[k]) == "f32" ? v : "convert_float16(" + v + ")") + "; ";
      sload += "const float x" + ks + " = (float)in" + ks + "[in" + ks + "_off + j]; ";
    }
    std::string vquant, squant;
    if (quant) {
      vquant = "const float16 q = nn_div_for_rint16(v, " + qscale + "); " +
               "const float16 r = nn_requantize16(q, " + qzp + ", " + qlo + ", " + qhi + "); " +
               "vstore16(NN_CAT(convert_, NN_CAT(STYPE(" + e.Tag(m.output2) +
               "), 16))(r), 0, out1 + out1_off + e0); ";
      squant = qstore("j", "v") + " ";
    }
    m.body = "const uint e0 = i * 16; if (e0 + 16 <= " + nn + ") { " + vload + "float16 v = x0; " +
             steps + "vstore16(v, 0, out0 + out0_off + e0); " + vquant +
             "} else { for (uint j = e0; j < " + nn + "; j++) { " + sload + "float v = x0; " +
             steps + "out0[out0_off + j] = v; " + squant + "} }";
  } else {
    for (size_t k = 0; k < m.inputs.size(); k++)
      m.body +=
          "const float x" + std::to_string(k) + " = " + ValueOf(e, m, k, true, m.space) + "; ";
    m.body += "float v = x0; " + steps;
    m.body += Out(e, m, "i", "v");
    // The quantizer reads the float as stored (half storage rounds it first), as the separate
    // QuantizeLinear would; a work-item's own store is visible to its later loads.
    if (quant)
      m.body += qstore("i", "LOAD(" + e.Tag(y) + ", out0, out0_off + i)");
  }
  m.flops = static_cast<uint64_t>(n) * node.attrs.Strings("ops").size();
  return EmitMap(e, m, node.Describe());
}

}  // namespace

StatusOr<std::string> ActivationExpr(const std::string &name, float alpha, float beta,
                                     const std::string &x) {
  if (name.empty())
    return x;
  OpKind op;
  if (!OpFromName(name, &op) || ClassOf(op) != OpClass::kUnary)
    return Unsupported("fused activation '" + name + "'");
  return UnaryExpr(op, x, alpha, beta, true);
}

StatusOr<std::string> FusedActivation(const Node &node) {
  if (node.attrs.String("activation") == "Chain")
    return std::string("nn_act_chain(x)");
  return ActivationExpr(node.attrs.String("activation"), node.attrs.Float("activation_alpha"),
                        node.attrs.Float("activation_beta"), "(x)");
}

// `expr` where `gate` is true, else x; `expr` itself without a gate.
static std::string Gated(const std::string &gate, const std::string &expr) {
  return gate.empty() ? expr : "(" + gate + " ? " + expr + " : (x))";
}

Status DefineActivation(Defines &d, const Node &node, const std::string &act,
                        const std::string &gate) {
  d.Def("ACT(x)", Gated(gate, act));
  if (node.attrs.String("activation") != "Chain")
    return Status::Ok();
  OP_ASSIGN_OR_RETURN(std::string steps, ChainSteps(node, 1));
  d.Def("NN_ACT_CHAIN", "{ float v = x0; " + steps + "return v; }");
  return Status::Ok();
}

namespace {

// Unary ops whose float snippet is also valid OpenCL C on a float vector (built-ins with
// vector overloads, arithmetic with scalar literals); the rest stay scalar.
bool VectorSafe(OpKind op) {
  switch (op) {
    case OpKind::kIdentity:
    case OpKind::kSqrt:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kReciprocal:
    case OpKind::kTanh:
    case OpKind::kErf:
    case OpKind::kClip:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status DefineVectorActivation(Defines &d, const Node &node, bool fused_epilogue,
                              const std::string &gate) {
  const std::string name = fused_epilogue ? node.attrs.String("activation") : "";
  if (name.empty()) {
    d.Def("ACTV(x)", "(x)");
    return Status::Ok();
  }
  if (name == "Chain") {
    auto ops = node.attrs.Strings("ops");
    auto operand = node.attrs.Ints("operand");
    for (size_t s = 0; s < ops.size(); s++) {
      OpKind op;
      if (!OpFromName(ops[s], &op))
        return Status::Ok();
      const bool ok = ClassOf(op) == OpClass::kUnary ? VectorSafe(op)
                                                     : (op == OpKind::kAdd || op == OpKind::kSub ||
                                                        op == OpKind::kMul || op == OpKind::kDiv);
      if (!ok || (s < operand.size() && operand[s] > 0))
        return Status::Ok();
    }
    OP_ASSIGN_OR_RETURN(std::string steps, ChainSteps(node, 1));
    d.Def("ACTV(x)", Gated(gate, "nn_act_chain_v(x)"));
    d.Def("NN_ACT_CHAIN_V", "{ VF v = x0; " + steps + "return v; }");
    return Status::Ok();
  }
  if (std::optional<std::string> expr = VectorActivationExpr(node))
    d.Def("ACTV(x)", Gated(gate, *expr));
  return Status::Ok();
}

std::optional<std::string> VectorActivationExpr(const Node &node) {
  const std::string name = node.attrs.String("activation");
  if (name.empty())
    return std::string("(x)");
  OpKind op;
  if (name == "Chain" || !OpFromName(name, &op))
    return std::nullopt;
  if (op == OpKind::kRelu)  // the scalar snippet's NaN behaviour: NaN is not < 0, passes through
    return std::string("select((x), (VF)(0.0f), (x) < 0.0f)");
  if (!VectorSafe(op))
    return std::nullopt;
  auto expr = ActivationExpr(name, node.attrs.Float("activation_alpha"),
                             node.attrs.Float("activation_beta"), "(x)");
  return expr.ok() ? std::optional<std::string>(*expr) : std::nullopt;
}

Status EmitCopy(Emitter &e, TensorId src, TensorId dst, const std::string &label) {
  MapKernel m;
  m.space = e.Dims(dst);
  m.inputs = {src};
  m.output = dst;
  m.body = Out(e, m, "i", In(e, m, 0, "i"));
  return EmitMap(e, m, label);
}

Status EmitAddActivation(Emitter &e, TensorId a, TensorId b, TensorId dst, const std::string &act,
                         bool act_after_add, const std::string &label) {
  if (act.find("nn_act_chain") != std::string::npos)
    return Unsupported(label + ": a fused chain with a residual of another shape");
  MapKernel m;
  m.space = e.Dims(dst);
  m.inputs = {a, b};
  m.output = dst;
  std::string va = ValueOf(e, m, 0, true, m.space), vb = ValueOf(e, m, 1, true, m.space);
  std::string expr = act_after_add ? Replace(act, "(x)", "(" + va + " + " + vb + ")")
                                   : "(" + Replace(act, "(x)", "(" + va + ")") + " + " + vb + ")";
  m.body = Out(e, m, "i", expr);
  m.flops = static_cast<uint64_t>(Product(m.space)) * 2;
  return EmitMap(e, m, label);
}

Status LowerElementwise(Emitter &e, const Node &node) {
  switch (node.op) {
    case OpKind::kElementwiseChain:
      return LowerChain(e, node);
    case OpKind::kCast:
    case OpKind::kCastLike: {
      // A float16 result held in float32 storage (precision fp32) is rounded to half here, as
      // the cast asks; everywhere else the storage tags do the conversion. Bytes and booleans
      // are exact in half (a camera frame's uint8 pixels, typically) and need no rounding.
      TensorId x = node.inputs[0], y = node.outputs[0];
      const DType from = e.T(x).dtype;
      const bool exact = from == DType::kFloat16 || from == DType::kUInt8 || from == DType::kInt8 ||
                         from == DType::kBool;
      if (e.T(y).dtype == DType::kFloat16 && !exact && e.Tag(y) == "f32") {
        MapKernel m;
        m.space = e.Dims(y);
        m.inputs = {x};
        m.output = y;
        if (e.opt.profile == cl::Profile::kCpu && e.Tag(x) == "f32") {
          // 16 elements per work-item: the policies' 12,800 inputs took 0.018-0.025 ms one per
          // work-item (PoCL left nn_round_half's branches unvectorised), 0.008-0.010 so.
          const int64_t n = Product(m.space);
          const std::string nn = std::to_string(n);
          m.space = {(n + 15) / 16};
          m.body = "const uint e0 = i * 16; if (e0 + 16 <= " + nn +
                   ") { vstore16(nn_round_half16(vload16(0, in0 + in0_off + e0)), 0, out0 + "
                   "out0_off + e0); } else { for (uint j = e0; j < " +
                   nn + "; j++) out0[out0_off + j] = nn_round_half(in0[in0_off + j]); }";
          return EmitMap(e, m, node.Describe());
        }
        m.body = Out(e, m, "i", "nn_round_half((float)" + In(e, m, 0, "i") + ")");
        return EmitMap(e, m, node.Describe());
      }
      return EmitCopy(e, x, y, node.Describe());
    }
    case OpKind::kWhere: {
      MapKernel m;
      m.output = node.outputs[0];
      m.space = e.Dims(m.output);
      m.inputs = {node.inputs[0], node.inputs[1], node.inputs[2]};
      auto at = [&](size_t k) {
        return In(e, m, k, BroadcastIndex(m.space, e.Dims(m.inputs[k]), "i"));
      };
      m.body = Out(e, m, "i", "(" + at(0) + " ? " + at(1) + " : " + at(2) + ")");
      return EmitMap(e, m, node.Describe());
    }
    case OpKind::kBatchNormalization: {
      for (size_t o = 1; o < node.outputs.size(); o++)
        if (node.outputs[o] != kNoTensor)
          return Unsupported(NodeWhere(node) + ": training outputs of BatchNormalization");
      MapKernel m;
      m.output = node.outputs[0];
      m.space = e.Dims(m.output);
      m.inputs = {node.inputs[0], node.inputs[1], node.inputs[2], node.inputs[3], node.inputs[4]};
      if (m.space.size() < 2)
        return Unsupported(NodeWhere(node) + ": input of rank < 2");
      float eps = node.attrs.Float("epsilon", 1e-5f);
      auto ch = [&](size_t k) { return "(float)" + In(e, m, k, "c1"); };
      m.body = Out(e, m, "i",
                   "((float)" + In(e, m, 0, "i") + " - " + ch(3) + ") / sqrt(" + ch(4) + " + " +
                       FloatLit(eps) + ") * " + ch(1) + " + " + ch(2));
      m.flops = static_cast<uint64_t>(Product(m.space)) * 4;
      return EmitMap(e, m, node.Describe());
    }
    default:
      return LowerMath(e, node);
  }
}

// Lowers the layout ops (pure index maps: Transpose, Slice, Pad, Concat, Gather, ...), one
// method per op. Each starts from the node's first input (dims and strides) and a map kernel
// over the output's index space.
class LayoutLowering {
 public:
  LayoutLowering(Emitter &e, const Node &node) : e(e), node(node), label(node.Describe()) {
    m.output = node.outputs.empty() ? kNoTensor : node.outputs[0];
    if (m.output != kNoTensor)
      m.space = e.Dims(m.output);
    x = node.input(0);
    if (x != kNoTensor)
      in = e.Dims(x);
    in_strides = Strides(Shape(in));
    r = m.space.size();
    for (size_t d = 0; d < r; d++)
      coords.push_back(C(d));
  }

  Status Transpose();
  Status Expand();
  Status Tile();
  Status Slice();
  Status Pad();
  Status Concat();
  Status Split();
  Status Gather();
  Status GatherElements();
  Status DepthSpace();
  Status Trilu();
  Status CumSum();
  Status Dropout();

 private:
  // A parameter input that must be a constant (Slice's starts, Pad's pads, ...).
  StatusOr<std::vector<int64_t>> ints_of(TensorId t, const char *what) const {
    if (t == kNoTensor || !e.T(t).is_constant())
      return Unsupported(NodeWhere(node) + ": " + what + " must be constant");
    return ConstantInts(e.T(t));
  }

  Emitter &e;
  const Node &node;
  const std::string label;
  MapKernel m;
  TensorId x = kNoTensor;
  std::vector<int64_t> in;
  std::vector<int64_t> in_strides;
  size_t r = 0;
  std::vector<std::string> coords;
};

Status LayoutLowering::Transpose() {
  std::vector<int64_t> perm = node.attrs.Ints("perm");
  if (perm.empty())
    for (size_t d = r; d-- > 0;)
      perm.push_back(static_cast<int64_t>(d));
  if (perm.size() != r)
    return InvalidArgument(label + ": perm has " + std::to_string(perm.size()) + " axes");
  std::vector<int64_t> strides;
  for (size_t d = 0; d < r; d++)
    strides.push_back(in_strides[static_cast<size_t>(perm[d])]);
  if (!StridedCopyFits(e, x))
    return Unsupported(label + ": 2^31 elements or more");
  return EmitStridedCopy(e, x, m.output, 0, strides, label);
}

Status LayoutLowering::Expand() {
  m.inputs = {x};
  m.body = Out(e, m, "i", In(e, m, 0, BroadcastIndex(m.space, in, "i")));
  return EmitMap(e, m, label);
}

Status LayoutLowering::Tile() {
  std::string idx = "0";
  for (size_t d = 0; d < r; d++)
    idx += " + (" + C(d) + " % " + std::to_string(in[d]) + ") * " + std::to_string(in_strides[d]);
  m.inputs = {x};
  m.body = Out(e, m, "i", In(e, m, 0, idx));
  return EmitMap(e, m, label);
}

Status LayoutLowering::Slice() {
  std::vector<int64_t> starts, axes, steps;
  if (node.opset < 10) {
    starts = node.attrs.Ints("starts");
    axes = node.attrs.Ints("axes");
  } else {
    OP_ASSIGN_OR_RETURN(starts, ints_of(node.input(1), "starts"));
    if (node.input(3) != kNoTensor) {
      OP_ASSIGN_OR_RETURN(axes, ints_of(node.input(3), "axes"));
    }
    if (node.input(4) != kNoTensor) {
      OP_ASSIGN_OR_RETURN(steps, ints_of(node.input(4), "steps"));
    }
  }
  if (axes.empty())
    for (size_t j = 0; j < starts.size(); j++)
      axes.push_back(static_cast<int64_t>(j));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return InvalidArgument(label + ": starts, axes and steps differ in length");
  std::vector<int64_t> start(r, 0), step(r, 1);
  for (size_t j = 0; j < starts.size(); j++) {
    OP_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axes[j], static_cast<int64_t>(r)));
    int64_t dim = in[static_cast<size_t>(a)], s = starts[j], st = steps[j];
    if (st == 0)
      return InvalidArgument(label + ": step 0");
    if (s < 0)
      s += dim;
    s = st > 0 ? std::min(std::max<int64_t>(s, 0), dim)
               : std::min(std::max<int64_t>(s, 0), dim - 1);
    start[static_cast<size_t>(a)] = s;
    step[static_cast<size_t>(a)] = st;
  }
  if (StridedCopyFits(e, x)) {
    int64_t offset = 0;
    std::vector<int64_t> strides(r);
    for (size_t d = 0; d < r; d++) {
      offset += start[d] * in_strides[d];
      strides[d] = step[d] * in_strides[d];
    }
    return EmitStridedCopy(e, x, m.output, offset, strides, label);
  }
  std::string idx = "0";
  for (size_t d = 0; d < r; d++)
    idx += " + (" + std::to_string(start[d]) + " + (int)" + C(d) + " * " + std::to_string(step[d]) +
           ") * " + std::to_string(in_strides[d]);
  m.inputs = {x};
  m.body = Out(e, m, "i", In(e, m, 0, idx));
  return EmitMap(e, m, label);
}

Status LayoutLowering::Pad() {
  std::vector<int64_t> pads;
  std::string mode = node.attrs.String("mode", "constant");
  std::string value;
  bool fl = IsFloatTag(e.Tag(x));
  m.inputs = {x};
  if (node.opset < 11) {
    pads = node.attrs.Ints("pads");
    value = fl ? FloatLit(node.attrs.Float("value", 0.f))
               : std::to_string(static_cast<int64_t>(node.attrs.Float("value", 0.f)));
  } else {
    OP_ASSIGN_OR_RETURN(pads, ints_of(node.input(1), "pads"));
    if (node.input(3) != kNoTensor)
      return Unsupported(NodeWhere(node) + ": Pad with axes");
    value = fl ? "0.0f" : "0";
    if (node.input(2) != kNoTensor) {
      m.inputs.push_back(node.input(2));
      value = In(e, m, 1, "0");
    }
  }
  if (pads.size() != 2 * r)
    return InvalidArgument(label + ": " + std::to_string(pads.size()) + " pads for rank " +
                           std::to_string(r));
  std::string decl, inside = "1", idx = "0";
  for (size_t d = 0; d < r; d++) {
    std::string s = "s" + std::to_string(d), dim = std::to_string(in[d]);
    decl += "int " + s + " = (int)" + C(d) + " - " + std::to_string(pads[d]) + "; ";
    if (mode == "edge") {
      decl += s + " = clamp(" + s + ", 0, " + dim + " - 1); ";
    } else if (mode == "reflect") {
      if (in[d] > 1)
        decl += "if (" + s + " < 0) " + s + " = -" + s + "; if (" + s + " >= " + dim + ") " + s +
                " = 2 * (" + dim + " - 1) - " + s + "; " + s + " = clamp(" + s + ", 0, " + dim +
                " - 1); ";
      else
        decl += s + " = 0; ";
    } else if (mode == "constant") {
      inside += " && " + s + " >= 0 && " + s + " < " + dim;
    } else {
      return Unsupported(NodeWhere(node) + ": Pad mode '" + mode + "'");
    }
    idx += " + " + s + " * " + std::to_string(in_strides[d]);
  }
  m.body = decl + Out(e, m, "i", "(" + inside + ") ? " + In(e, m, 0, idx) + " : " + value);
  return EmitMap(e, m, label);
}

// The CPU profile's Concat where the output and every input (a folded Cast's source for a
// folded Cast) are float32 buffers: each output row (the elements before the axis fix a row) is
// the inputs' rows one after the other, and a work-item copies 16 consecutive elements of one
// input's row with one vector load and store, rounding them to half where the input is a
// folded Cast. The generic map below computes every element's coordinates by division and
// picks its input by comparisons: the policies' 13,056-element Concat took 12-15 us so.
bool ConcatRowsApply(const Emitter &e, const Node &node) {
  if (e.opt.profile != cl::Profile::kCpu || node.outputs.empty() || node.outputs[0] == kNoTensor ||
      e.Tag(node.outputs[0]) != "f32")
    return false;
  for (TensorId t : node.inputs) {
    if (t == kNoTensor)
      continue;
    auto folded = e.folded_by_concat.find(t);
    if (e.Tag(folded == e.folded_by_concat.end() ? t : folded->second.source) != "f32")
      return false;
  }
  return true;
}

ConcatRowsCode ConcatRowsBody(const Emitter &e, const Node &node, size_t ax,
                              const std::string &out_space) {
  const TensorId y = node.outputs[0];
  const std::vector<int64_t> &out = e.Dims(y);
  const int64_t rows = Product(out, 0, ax);
  const int64_t row = Product(out) / std::max<int64_t>(rows, 1);  // the output row's length
  ConcatRowsCode code;
  std::string body;
  int64_t offset = 0, chunks = 0;
  for (TensorId t : node.inputs) {
    if (t == kNoTensor || Product(e.Dims(t)) == 0)
      continue;
    const int64_t len = Product(e.Dims(t)) / std::max<int64_t>(rows, 1);
    auto folded = e.folded_by_concat.find(t);
    using Kind = Emitter::ConcatFold::Kind;
    const bool round = folded != e.folded_by_concat.end() && folded->second.kind == Kind::kRound;
    const bool mean = folded != e.folded_by_concat.end() && folded->second.kind == Kind::kMean;
    const std::string k = std::to_string(code.inputs.size());
    code.inputs.push_back(folded != e.folded_by_concat.end() ? folded->second.source : t);
    const int64_t first = chunks;
    chunks += (len + 15) / 16;
    const std::string n = std::to_string(len);
    std::string vec = "vload16(0, s + e0)", one = "s[j]";
    if (round) {
      vec = "nn_round_half16(" + vec + ")";
      one = "nn_round_half(" + one + ")";
    } else if (mean) {
      // As the reduce kernel: from 0, the rows in order, then divided by their count.
      const std::string count = std::to_string(folded->second.count);
      const std::string divisor = FloatLit(static_cast<double>(folded->second.count));
      vec = "nn_mean16(s + e0, " + n + ", " + count + ", " + divisor + ")";
      one = "nn_mean1(s + j, " + n + ", " + count + ", " + divisor + ")";
    }
    body += (body.empty() ? "" : " else ") + std::string("if (c < ") + std::to_string(chunks) +
            ") { const uint e0 = (c - " + std::to_string(first) +
            ") * 16; __global const float *s = in" + k + " + in" + k + "_off + r * " + n + "; " +
            out_space + " float *d = out0 + out0_off + r * " + std::to_string(row) + " + " +
            std::to_string(offset) + "; if (e0 + 16 <= " + n + ") vstore16(" + vec +
            ", 0, d + e0); else for (uint j = e0; j < " + n + "; j++) d[j] = " + one + "; }";
    offset += len;
  }
  code.items = rows * chunks;
  code.body = "const uint r = i / " + std::to_string(chunks) + ", c = i - r * " +
              std::to_string(chunks) + "; " + body;
  return code;
}

Status ConcatRows(Emitter &e, const Node &node, size_t ax) {
  ConcatRowsCode code = ConcatRowsBody(e, node, ax, "__global");
  if (code.inputs.empty())
    return Status::Ok();
  MapKernel m;
  m.output = node.outputs[0];
  m.inputs = std::move(code.inputs);
  m.space = {code.items};
  m.body = std::move(code.body);
  return EmitMap(e, m, node.Describe());
}

Status LayoutLowering::Concat() {
  OP_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(r)));
  const size_t ax = static_cast<size_t>(axis);
  if (ConcatRowsApply(e, node))
    return ConcatRows(e, node, ax);
  // One launch over the output: each element reads the input its coordinate along the axis
  // falls in (a launch per input cost a dispatch each, which small networks feel).
  int64_t offset = 0;
  std::string body;
  for (TensorId t : node.inputs) {
    if (t == kNoTensor)
      continue;
    const std::vector<int64_t> dims = e.Dims(t);
    if (dims.size() != r)
      return InvalidArgument(label + ": input rank differs from the output's");
    if (dims[ax] == 0)
      continue;
    const std::vector<int64_t> strides = Strides(Shape(dims));
    const size_t k = m.inputs.size();
    m.inputs.push_back(t);
    std::string idx = "0";
    for (size_t d = 0; d < r; d++)
      idx += " + (" + C(d) + (d == ax ? " - " + std::to_string(offset) : "") + ") * " +
             std::to_string(strides[d]);
    offset += dims[ax];
    body += (body.empty() ? "" : " else ") + std::string("if (") + C(ax) + " < " +
            std::to_string(offset) + ") { " + Out(e, m, "i", In(e, m, k, idx)) + " }";
  }
  if (m.inputs.empty())
    return Status::Ok();
  m.body = body;
  return EmitMap(e, m, label);
}

Status LayoutLowering::Split() {
  OP_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(in.size())));
  int64_t offset = 0;
  for (TensorId t : node.outputs) {
    if (t == kNoTensor)
      continue;
    if (!StridedCopyFits(e, x))
      return Unsupported(label + ": 2^31 elements or more");
    // Where the part starts is an argument: the parts share a program (a query, key and value
    // split from one product), and with the transposes.
    OP_RETURN_IF_ERROR(EmitStridedCopy(e, x, t, offset * in_strides[static_cast<size_t>(axis)],
                                       in_strides, label));
    offset += e.Dims(t)[static_cast<size_t>(axis)];
  }
  return Status::Ok();
}

Status LayoutLowering::Gather() {
  TensorId ind = node.inputs[1];
  const auto &idims = e.Dims(ind);
  size_t q = idims.size();
  OP_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(in.size())));
  size_t ax = static_cast<size_t>(axis);
  std::vector<std::string> ic(coords.begin() + static_cast<long>(ax),
                              coords.begin() + static_cast<long>(ax + q));
  m.inputs = {x, ind};
  std::string dim = std::to_string(in[ax]);
  std::string body = "long j = " + In(e, m, 1, Linear(ic, idims)) + "; if (j < 0) j += " + dim +
                     "; j = clamp(j, (long)0, (long)" + dim + " - 1); ";
  std::string idx = "0";
  for (size_t d = 0; d < ax; d++)
    idx += " + " + C(d) + " * " + std::to_string(in_strides[d]);
  idx += " + (uint)j * " + std::to_string(in_strides[ax]);
  for (size_t d = ax + 1; d < in.size(); d++)
    idx += " + " + C(d + q - 1) + " * " + std::to_string(in_strides[d]);
  m.body = body + Out(e, m, "i", In(e, m, 0, idx));
  return EmitMap(e, m, label);
}

Status LayoutLowering::GatherElements() {
  TensorId ind = node.inputs[1];
  OP_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(in.size())));
  size_t ax = static_cast<size_t>(axis);
  m.inputs = {x, ind};
  std::string dim = std::to_string(in[ax]);
  std::string body = "long j = " + In(e, m, 1, "i") + "; if (j < 0) j += " + dim +
                     "; j = clamp(j, (long)0, (long)" + dim + " - 1); ";
  std::string idx = "0";
  for (size_t d = 0; d < in.size(); d++)
    idx +=
        " + " + (d == ax ? std::string("(uint)j") : C(d)) + " * " + std::to_string(in_strides[d]);
  m.body = body + Out(e, m, "i", In(e, m, 0, idx));
  return EmitMap(e, m, label);
}

Status LayoutLowering::DepthSpace() {
  if (r != 4)
    return Unsupported(NodeWhere(node) + ": rank " + std::to_string(r));
  int64_t b = node.attrs.Int("blocksize", 0);
  if (b <= 0)
    return InvalidArgument(label + ": blocksize " + std::to_string(b));
  std::string B = std::to_string(b), Cin = std::to_string(in[1]);
  std::string H = std::to_string(in[2]), W = std::to_string(in[3]);
  std::string ic, ih, iw;
  if (node.op == OpKind::kDepthToSpace) {
    std::string Cout = std::to_string(m.space[1]);
    std::string bh = "(c2 % " + B + ")", bw = "(c3 % " + B + ")";
    ic = node.attrs.String("mode", "DCR") == "CRD"
             ? "(c1 * " + B + " * " + B + " + " + bh + " * " + B + " + " + bw + ")"
             : "((" + bh + " * " + B + " + " + bw + ") * " + Cout + " + c1)";
    ih = "(c2 / " + B + ")";
    iw = "(c3 / " + B + ")";
  } else {
    ic = "(c1 % " + Cin + ")";
    ih = "(c2 * " + B + " + c1 / (" + Cin + " * " + B + "))";
    iw = "(c3 * " + B + " + (c1 / " + Cin + ") % " + B + ")";
  }
  m.inputs = {x};
  m.body =
      Out(e, m, "i",
          In(e, m, 0,
             "((c0 * " + Cin + " + " + ic + ") * " + H + " + " + ih + ") * " + W + " + " + iw));
  return EmitMap(e, m, label);
}

Status LayoutLowering::Trilu() {
  if (r < 2)
    return InvalidArgument(label + ": rank " + std::to_string(r));
  int64_t k = 0;
  if (node.input(1) != kNoTensor) {
    OP_ASSIGN_OR_RETURN(auto kv, ints_of(node.input(1), "k"));
    if (!kv.empty())
      k = kv[0];
  }
  bool upper = node.attrs.Int("upper", 1) != 0;
  std::string diff = "((long)" + C(r - 1) + " - (long)" + C(r - 2) + ")";
  std::string keep = diff + (upper ? " >= " : " <= ") + std::to_string(k);
  m.inputs = {x};
  m.body = Out(e, m, "i", "(" + keep + ") ? " + In(e, m, 0, "i") + " : 0");
  return EmitMap(e, m, label);
}

Status LayoutLowering::CumSum() {
  OP_ASSIGN_OR_RETURN(auto av, ints_of(node.input(1), "axis"));
  if (av.empty())
    return InvalidArgument(label + ": empty axis");
  OP_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(av[0], static_cast<int64_t>(r)));
  size_t ax = static_cast<size_t>(axis);
  bool excl = node.attrs.Int("exclusive", 0) != 0, rev = node.attrs.Int("reverse", 0) != 0;
  bool fl = IsFloatTag(e.Tag(x));
  m.inputs = {x};
  std::string c = C(ax), st = std::to_string(in_strides[ax]), n = std::to_string(in[ax]);
  std::string lo = rev ? (excl ? "(int)" + c + " + 1" : "(int)" + c) : "0";
  std::string hi = rev ? n : (excl ? "(int)" + c : "(int)" + c + " + 1");
  m.body = std::string(fl ? "float" : "long") + " acc = 0; const int base = (int)i - (int)" + c +
           " * " + st + "; for (int j = " + lo + "; j < " + hi +
           "; j++) acc += " + In(e, m, 0, "base + j * " + st) + "; " + Out(e, m, "i", "acc");
  return EmitMap(e, m, label);
}

Status LayoutLowering::Dropout() {
  // Output 0 aliases the input (no kernel); the mask, if used, is all true.
  if (node.outputs.size() > 1 && node.outputs[1] != kNoTensor) {
    MapKernel mk;
    mk.output = node.outputs[1];
    mk.space = e.Dims(mk.output);
    mk.body = Out(e, mk, "i", "1");
    return EmitMap(e, mk, label);
  }
  return Status::Ok();
}

Status LowerLayout(Emitter &e, const Node &node) {
  LayoutLowering l(e, node);
  switch (node.op) {
    case OpKind::kTranspose:
      return l.Transpose();
    case OpKind::kExpand:
    case OpKind::kIdentity:
      return l.Expand();
    case OpKind::kTile:
      return l.Tile();
    case OpKind::kSlice:
      return l.Slice();
    case OpKind::kPad:
      return l.Pad();
    case OpKind::kConcat:
      return l.Concat();
    case OpKind::kSplit:
      return l.Split();
    case OpKind::kGather:
      return l.Gather();
    case OpKind::kGatherElements:
      return l.GatherElements();
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth:
      return l.DepthSpace();
    case OpKind::kTrilu:
      return l.Trilu();
    case OpKind::kCumSum:
      return l.CumSum();
    case OpKind::kDropout:
      return l.Dropout();
    default:
      break;
  }
  return Internal(node.Describe() + " is not an index map");
}

}  // namespace op::nn::gen
