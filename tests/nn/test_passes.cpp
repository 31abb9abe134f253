// Each graph pass computes the same outputs as the graph before it (reference interpreter
// before/after), and really rewrites what it is for (the structure is checked too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "nn/onnx_import.h"
#include "nn/passes.h"
#include "nn/reference.h"
#include "nn/reference_ops.h"
#include "nn/shape_inference.h"

using namespace op;
using namespace op::nn;

namespace {

// Builds small graphs through the IR: inputs, constants, nodes with one output each.
struct Builder {
  Graph g;
  std::mt19937 rng{7};

  TensorId Input(const std::string &name, Shape s, DType t = DType::kFloat32) {
    Tensor x;
    x.name = name;
    x.dtype = t;
    x.shape = s;
    x.is_input = true;
    TensorId id = g.AddTensor(x);
    g.inputs.push_back(id);
    return id;
  }
  TensorId Const(const std::string &name, Shape s, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(s.NumElements()));
    for (float &x : v)
      x = d(rng);
    Tensor t = MakeFloatConstant(v, s);
    t.name = name;
    return g.AddTensor(t);
  }
  TensorId Scalar(const std::string &name, float v) {
    Tensor t = MakeFloatConstant({v}, Shape{});
    t.name = name;
    return g.AddTensor(t);
  }
  TensorId Ints(const std::string &name, std::vector<int64_t> v) {
    Tensor t = MakeInt64Constant(v, Shape{static_cast<int64_t>(v.size())});
    t.name = name;
    return g.AddTensor(t);
  }
  TensorId Add(OpKind op, std::vector<TensorId> in, const std::string &out, Attributes a = {}) {
    Tensor t;
    t.name = out;
    TensorId id = g.AddTensor(t);
    Node n;
    n.op = op;
    n.name = out + "_node";
    n.inputs = std::move(in);
    n.outputs = {id};
    n.attrs = std::move(a);
    n.opset = 17;
    g.nodes.push_back(n);
    return id;
  }
  void Output(TensorId id) {
    g.tensor(id).is_output = true;
    g.outputs.push_back(id);
  }
  // Random values for every input.
  std::vector<Tensor> Inputs() {
    std::vector<Tensor> v;
    std::uniform_real_distribution<float> d(-2, 2);
    for (TensorId id : g.inputs) {
      const Tensor &t = g.tensor(id);
      Tensor x;
      x.name = t.name;
      x.dtype = t.dtype;
      x.shape = t.shape;
      Bytes b(t.ByteSize());
      for (size_t i = 0; i < static_cast<size_t>(t.shape.NumElements()); ++i) {
        float f = d(rng);
        if (t.dtype == DType::kFloat32)
          std::memcpy(&b[4 * i], &f, 4);
        if (t.dtype == DType::kFloat16) {
          uint16_t h = FloatToHalf(f);
          std::memcpy(&b[2 * i], &h, 2);
        }
        if (t.dtype == DType::kUInt8 || t.dtype == DType::kInt8)
          b[i] = static_cast<uint8_t>(rng() & 0xff);
      }
      x.data = std::make_shared<const Bytes>(b);
      v.push_back(x);
    }
    return v;
  }
};

int Count(const Graph &g, OpKind op) {
  int c = 0;
  for (const Node &n : g.nodes)
    c += n.op == op;
  return c;
}

double Value(const Tensor &t, size_t i) {
  return t.dtype == DType::kFloat16 ? HalfToFloat(t.Data<uint16_t>()[i]) : t.Data<float>()[i];
}

// Runs `pass` on a copy of the (shape-inferred) graph and compares outputs on random inputs.
// The tolerance is relative to float32 rounding: passes reassociate a few float operations
// (folded BatchNorm weights, a bias added inside the product), never more.
Graph CheckSame(Builder &b, Status (*pass)(Graph &), double rtol = 1e-5, double atol = 1e-6) {
  EXPECT_TRUE(InferShapes(b.g).ok());
  Graph after = b.g;
  Status st = pass(after);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(after.Validate().ok()) << after.Validate().ToString();
  after.RemoveDeadCode();
  EXPECT_TRUE(after.Validate().ok());
  auto in = b.Inputs();
  auto want = RunReference(b.g, in);
  auto got = RunReference(after, in);
  EXPECT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (!want.ok() || !got.ok())
    return after;
  EXPECT_EQ(got->size(), want->size());
  for (size_t k = 0; k < want->size(); ++k) {
    const Tensor &w = (*want)[k], &o = (*got)[k];
    EXPECT_EQ(o.name, w.name);
    EXPECT_EQ(o.shape, w.shape);
    EXPECT_EQ(o.dtype, w.dtype);
    size_t bad = 0;
    for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i)
      if (std::fabs(Value(o, i) - Value(w, i)) > atol + rtol * std::fabs(Value(w, i)) && bad++ < 3)
        ADD_FAILURE() << "output " << k << " at " << i << ": " << Value(o, i) << " vs "
                      << Value(w, i);
    EXPECT_EQ(bad, 0u);
  }
  return after;
}

Attributes Pads(int64_t p) {
  Attributes a;
  a.Set("pads", std::vector<int64_t>{p, p, p, p});
  return a;
}

}  // namespace

TEST(Passes, BatchNormFoldsIntoConv) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 3, 13, 13});
  TensorId c = b.Add(OpKind::kConv, {x, b.Const("w", Shape{4, 3, 3, 3}), b.Const("cb", Shape{4})},
                     "c", Pads(1));
  TensorId y = b.Add(OpKind::kBatchNormalization,
                     {c, b.Const("s", Shape{4}), b.Const("bb", Shape{4}), b.Const("m", Shape{4}),
                      b.Const("v", Shape{4}, 0.5f, 2.f)},
                     "y");
  b.Output(y);
  Graph after = CheckSame(b, FoldBatchNormIntoConv);
  EXPECT_EQ(Count(after, OpKind::kBatchNormalization), 0);
  EXPECT_EQ(Count(after, OpKind::kConv), 1);
}

TEST(Passes, ConvBiasResidualReluFuse) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 3, 13, 13});
  TensorId r = b.Input("r", Shape{1, 5, 13, 13});
  Attributes a = Pads(1);
  a.Set("group", int64_t{1});
  TensorId c = b.Add(OpKind::kConv, {x, b.Const("w", Shape{5, 3, 3, 3})}, "c", a);
  TensorId s = b.Add(OpKind::kAdd, {c, b.Const("bias", Shape{1, 5, 1, 1})}, "s");
  TensorId t = b.Add(OpKind::kAdd, {r, s}, "t");
  TensorId y = b.Add(OpKind::kRelu, {t}, "y");
  b.Output(y);
  Graph after = CheckSame(b, FuseConvGemm);
  ASSERT_EQ(after.nodes.size(), 1u);
  const Node &f = after.nodes[0];
  EXPECT_EQ(f.op, OpKind::kFusedConv);
  EXPECT_EQ(f.attrs.String("activation"), "Relu");
  EXPECT_EQ(f.attrs.Int("residual_after_activation", -1), 0);
  EXPECT_EQ(f.inputs.size(), 4u);
}

TEST(Passes, ConvActivationThenResidualFuses) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 4, 13, 3});
  Attributes a = Pads(1);
  a.Set("group", int64_t{4});  // depthwise
  TensorId c =
      b.Add(OpKind::kConv, {x, b.Const("w", Shape{4, 1, 3, 3}), b.Const("cb", Shape{4})}, "c", a);
  Attributes lr;
  lr.Set("alpha", 0.1f);
  TensorId l = b.Add(OpKind::kLeakyRelu, {c}, "l", lr);
  TensorId y = b.Add(OpKind::kAdd, {l, x}, "y");
  b.Output(y);
  Graph after = CheckSame(b, FuseConvGemm);
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].attrs.String("activation"), "LeakyRelu");
  EXPECT_EQ(after.nodes[0].attrs.Int("residual_after_activation"), 1);
}

TEST(Passes, GemmAndMatMulFuseBiasAndActivation) {
  Builder b;
  TensorId x = b.Input("x", Shape{3, 13});
  Attributes ga;
  ga.Set("transB", int64_t{1});
  TensorId g1 =
      b.Add(OpKind::kGemm, {x, b.Const("w1", Shape{127, 13}), b.Const("c1", Shape{127})}, "g1", ga);
  TensorId r1 = b.Add(OpKind::kRelu, {g1}, "r1");
  TensorId x3 = b.Input("x3", Shape{2, 3, 13});
  TensorId m = b.Add(OpKind::kMatMul, {x3, b.Const("w2", Shape{13, 7})}, "m");
  TensorId m2 = b.Add(OpKind::kAdd, {m, b.Const("c2", Shape{7})}, "m2");
  TensorId s = b.Add(OpKind::kSigmoid, {m2}, "s");
  b.Output(r1);
  b.Output(s);
  Graph after = CheckSame(b, FuseConvGemm);
  EXPECT_EQ(Count(after, OpKind::kFusedGemm), 2);
  EXPECT_EQ(after.nodes.size(), 2u);
}

// A token-mixing layer (Transpose, product by a constant, bias, activation, Transpose back,
// residual): the transposes go, the product takes W^T on the left, and OptimizeGraph then
// fuses bias, activation and residual into one product. The same sums in the same order: exact.
// Layers that do not fit stay: the second Transpose missing, a non-constant W, a bias along
// the other axis, a Transpose that also reads elsewhere.
TEST(Passes, TokenMixingTransposesGo) {
  Attributes swap;
  swap.Set("perm", std::vector<int64_t>{0, 2, 1});
  {
    Builder b;
    TensorId x = b.Input("x", Shape{1, 25, 16});
    TensorId t = b.Add(OpKind::kTranspose, {x}, "t", swap);
    TensorId m = b.Add(OpKind::kMatMul, {t, b.Const("w", Shape{25, 25})}, "m");
    TensorId a = b.Add(OpKind::kAdd, {b.Const("bias", Shape{25}), m}, "a");
    TensorId r = b.Add(OpKind::kRelu, {a}, "r");
    TensorId back = b.Add(OpKind::kTranspose, {r}, "back", swap);
    b.Output(b.Add(OpKind::kAdd, {x, back}, "y"));
    Graph after = CheckSame(b, MixAlongRows, 0.0, 0.0);
    EXPECT_EQ(Count(after, OpKind::kTranspose), 0);
    EXPECT_EQ(Count(after, OpKind::kMatMul), 1);
    Graph all = b.g;
    ASSERT_TRUE(OptimizeGraph(all).ok());
    ASSERT_EQ(all.nodes.size(), 1u);
    EXPECT_EQ(all.nodes[0].op, OpKind::kFusedGemm);
  }
  {
    Builder b;  // no Transpose back
    TensorId x = b.Input("x", Shape{1, 25, 16});
    TensorId t = b.Add(OpKind::kTranspose, {x}, "t", swap);
    b.Output(b.Add(OpKind::kMatMul, {t, b.Const("w", Shape{25, 25})}, "m"));
    EXPECT_EQ(Count(CheckSame(b, MixAlongRows, 0.0, 0.0), OpKind::kTranspose), 1);
  }
  {
    Builder b;  // W is an input, and a bias along the rows ([16] broadcasts over the last dim)
    TensorId x = b.Input("x", Shape{1, 25, 16});
    TensorId w = b.Input("w", Shape{25, 25});
    TensorId t = b.Add(OpKind::kTranspose, {x}, "t", swap);
    TensorId m = b.Add(OpKind::kMatMul, {t, w}, "m");
    b.Output(b.Add(OpKind::kTranspose, {m}, "back", swap));
    TensorId t2 = b.Add(OpKind::kTranspose, {x}, "t2", swap);
    TensorId m2 = b.Add(OpKind::kMatMul, {t2, b.Const("w2", Shape{25, 16})}, "m2");
    TensorId a2 = b.Add(OpKind::kAdd, {m2, b.Const("rows", Shape{16, 1})}, "a2");
    b.Output(b.Add(OpKind::kTranspose, {a2}, "back2", swap));
    EXPECT_EQ(Count(CheckSame(b, MixAlongRows, 0.0, 0.0), OpKind::kTranspose), 4);
  }
  {
    Builder b;  // the transposed value is read twice
    TensorId x = b.Input("x", Shape{1, 25, 16});
    TensorId t = b.Add(OpKind::kTranspose, {x}, "t", swap);
    TensorId m = b.Add(OpKind::kMatMul, {t, b.Const("w", Shape{25, 25})}, "m");
    b.Output(b.Add(OpKind::kTranspose, {m}, "back", swap));
    b.Output(t);
    EXPECT_EQ(Count(CheckSame(b, MixAlongRows, 0.0, 0.0), OpKind::kTranspose), 2);
  }
}

// A Concat of inputs of two types is a typing error (ONNX requires one type), never a copy of the
// wrong element size.
TEST(Passes, ConcatOfTwoTypesIsRefused) {
  Attributes axis;
  axis.Set("axis", int64_t{2});
  {
    Builder b;
    TensorId f = b.Input("f", Shape{1, 4, 16});
    TensorId h = b.Input("h", Shape{1, 4, 2}, DType::kFloat16);
    b.Output(b.Add(OpKind::kConcat, {f, h}, "y", axis));
    Status st = InferShapes(b.g);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("differ in type"), std::string::npos) << st.ToString();
  }
}

TEST(Passes, AScalarScaleOfAProductBecomesAlpha) {
  Builder b;
  TensorId q = b.Input("q", Shape{1, 2, 13, 7});
  TensorId k = b.Input("k", Shape{1, 2, 7, 13});
  TensorId att = b.Add(OpKind::kMatMul, {q, k}, "att");
  TensorId s = b.Add(OpKind::kMul, {att, b.Scalar("scale", 0.378f)}, "s");
  Attributes ax;
  ax.Set("axis", int64_t{-1});
  TensorId y = b.Add(OpKind::kSoftmax, {s}, "y", ax);
  b.Output(y);
  Graph after = CheckSame(b, FuseConvGemm);
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].op, OpKind::kFusedGemm);
  EXPECT_FLOAT_EQ(after.nodes[0].attrs.Float("alpha"), 0.378f);
}

TEST(Passes, GeluTanhBecomesOneChain) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 3, 13, 127});
  TensorId p = b.Add(OpKind::kPow, {x, b.Scalar("three", 3)}, "p");
  TensorId m1 = b.Add(OpKind::kMul, {p, b.Scalar("k", 0.044715f)}, "m1");
  TensorId a1 = b.Add(OpKind::kAdd, {x, m1}, "a1");
  TensorId m2 = b.Add(OpKind::kMul, {a1, b.Scalar("s", 0.7978845608f)}, "m2");
  TensorId t = b.Add(OpKind::kTanh, {m2}, "t");
  TensorId a2 = b.Add(OpKind::kAdd, {t, b.Scalar("one", 1)}, "a2");
  TensorId h = b.Add(OpKind::kMul, {x, b.Scalar("half", 0.5f)}, "h");
  TensorId y = b.Add(OpKind::kMul, {h, a2}, "y");
  b.Output(y);
  Graph after = CheckSame(b, FuseElementwiseChains);
  EXPECT_EQ(Count(after, OpKind::kElementwiseChain), 1);
  EXPECT_EQ(after.nodes.size(), 2u);  // the chain and x * 0.5
}

// A camera frame's normalisation, Cast(uint8 → float) → x * (2/255) → - 1: one chain that
// reads the bytes (the Cast no node of its own), its output float as the Sub's was. A Cast
// whose value something else reads too stays.
TEST(Passes, AByteCastBeginsTheChainItFeeds) {
  Attributes to_float;  // (float32: the scalars' type; the models' float16 runs in models-small)
  to_float.Set("to", int64_t{1});
  Builder b;
  TensorId img = b.Input("img", Shape{1, 12, 4, 37}, DType::kUInt8);
  TensorId f = b.Add(OpKind::kCast, {img}, "f", to_float);
  TensorId m = b.Add(OpKind::kMul, {f, b.Scalar("k", 2.f / 255.f)}, "m");
  b.Output(b.Add(OpKind::kSub, {m, b.Scalar("one", 1.f)}, "y"));
  Graph after = CheckSame(b, FuseElementwiseChains);
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].op, OpKind::kElementwiseChain);
  EXPECT_EQ(after.tensor(after.nodes[0].inputs[0]).dtype, DType::kUInt8);
  EXPECT_EQ(after.tensor(after.nodes[0].outputs[0]).dtype, DType::kFloat32);
  EXPECT_EQ(after.nodes[0].attrs.Strings("ops").size(), 2u);

  Builder shared;  // the cast value is also an output: the Cast stays, the chain reads it
  img = shared.Input("img", Shape{1, 12, 4, 37}, DType::kUInt8);
  f = shared.Add(OpKind::kCast, {img}, "f", to_float);
  m = shared.Add(OpKind::kMul, {f, shared.Scalar("k", 2.f / 255.f)}, "m");
  shared.Output(shared.Add(OpKind::kSub, {m, shared.Scalar("one", 1.f)}, "y"));
  shared.Output(f);
  after = CheckSame(shared, FuseElementwiseChains);
  EXPECT_EQ(Count(after, OpKind::kCast), 1);
  EXPECT_EQ(Count(after, OpKind::kElementwiseChain), 1);
}

// x * 0.5 * (1 + tanh(0.79788 (x + 0.044715 x^3))) as the exporters write it, on `x`.
TensorId Gelu(Builder &b, TensorId x, const std::string &p) {
  TensorId c = b.Add(OpKind::kMul, {x, x}, p + "sq");
  c = b.Add(OpKind::kMul, {x, c}, p + "cube");
  c = b.Add(OpKind::kMul, {c, b.Scalar(p + "k", 0.044715f)}, p + "m1");
  c = b.Add(OpKind::kAdd, {x, c}, p + "a1");
  c = b.Add(OpKind::kMul, {c, b.Scalar(p + "s", 0.7978845608f)}, p + "m2");
  c = b.Add(OpKind::kTanh, {c}, p + "t");
  c = b.Add(OpKind::kAdd, {c, b.Scalar(p + "one", 1)}, p + "a2");
  c = b.Add(OpKind::kMul, {x, c}, p + "m3");
  return b.Add(OpKind::kMul, {c, b.Scalar(p + "half", 0.5f)}, p + "y");
}

TEST(Passes, GeluAfterConvAndMatMulBecomesTheirEpilogue) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 3, 7, 13});
  TensorId c = b.Add(OpKind::kConv, {x, b.Const("w", Shape{5, 3, 3, 3}), b.Const("cb", Shape{5})},
                     "c", Pads(1));
  TensorId g1 = Gelu(b, c, "g1");
  TensorId m = b.Add(OpKind::kMatMul, {g1, b.Const("w2", Shape{13, 6})}, "m");
  b.Output(Gelu(b, m, "g2"));
  Graph after = CheckSame(b, [](Graph &g) { return OptimizeGraph(g); });
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].op, OpKind::kFusedConv);
  EXPECT_EQ(after.nodes[1].op, OpKind::kFusedGemm);
  for (const Node &n : after.nodes) {
    EXPECT_EQ(n.attrs.String("activation"), "Chain") << n.Describe();
    EXPECT_EQ(n.attrs.Strings("ops").size(), 9u) << n.Describe();
  }
}

TEST(Passes, ChainAfterAnActivationStaysAChain) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 3, 7, 13});
  TensorId c = b.Add(OpKind::kConv, {x, b.Const("w", Shape{5, 3, 3, 3})}, "c", Pads(1));
  TensorId r = b.Add(OpKind::kRelu, {c}, "r");
  b.Output(Gelu(b, r, "g"));
  Graph after = CheckSame(b, [](Graph &g) { return OptimizeGraph(g); });
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].attrs.String("activation"), "Relu");
  EXPECT_EQ(after.nodes[1].op, OpKind::kElementwiseChain);
}

TEST(Passes, Fp16RoundTripCastsGoButRoundingCastsStay) {
  Builder b;
  TensorId x = b.Input("x", Shape{3, 13}, DType::kFloat16);
  Attributes to32, to16;
  to32.Set("to", int64_t{1});
  to16.Set("to", int64_t{10});
  TensorId up = b.Add(OpKind::kCast, {x}, "up", to32);
  TensorId down = b.Add(OpKind::kCast, {up}, "down", to16);
  TensorId y = b.Add(OpKind::kRelu, {down}, "y");
  TensorId f = b.Input("f", Shape{13});
  TensorId f16 = b.Add(OpKind::kCast, {f}, "f16", to16);
  TensorId f32 = b.Add(OpKind::kCast, {f16}, "f32", to32);
  b.Output(y);
  b.Output(f32);
  Graph after = CheckSame(b, RemoveCastPairs, 0, 0);  // exact: nothing may change
  EXPECT_EQ(Count(after, OpKind::kCast), 2);          // only f32 → f16 → f32 remains
}

TEST(Passes, IdentitiesGoAndOutputsKeepTheirNames) {
  Builder b;
  TensorId x = b.Input("x", Shape{3, 13});
  TensorId r = b.Add(OpKind::kRelu, {x}, "r");
  TensorId i = b.Add(OpKind::kIdentity, {r}, "i");
  TensorId d = b.Add(OpKind::kDropout, {i}, "d");
  TensorId s = b.Add(OpKind::kReshape, {d, b.Ints("shape", {3, 13})}, "s");
  TensorId y = b.Add(OpKind::kIdentity, {s}, "y");
  b.Output(y);
  Graph after = CheckSame(b, RemoveIdentities, 0, 0);
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].op, OpKind::kRelu);
  EXPECT_EQ(after.tensor(after.outputs[0]).name, "y");
}

TEST(Passes, ShapeComputationsFoldDuringShapeInference) {
  Builder b;
  TensorId x = b.Input("x", Shape{2, 3, 13});
  TensorId sh = b.Add(OpKind::kShape, {x}, "sh");
  Attributes ax;
  ax.Set("axis", int64_t{0});
  TensorId d0 = b.Add(OpKind::kGather, {sh, b.Ints("i0", {0})}, "d0", ax);
  TensorId cat = b.Add(OpKind::kConcat, {d0, b.Ints("m1", {-1})}, "cat", ax);
  TensorId y = b.Add(OpKind::kReshape, {x, cat}, "y");
  b.Output(y);
  Graph before = b.g;
  Graph after = CheckSame(b, FoldConstants);
  ASSERT_EQ(b.g.nodes.size(), 1u);  // InferShapes already folded Shape, Gather, Concat
  EXPECT_EQ(b.g.nodes[0].op, OpKind::kReshape);
  EXPECT_EQ(b.g.tensor(b.g.outputs[0]).shape, (Shape{2, 39}));
  EXPECT_EQ(before.nodes.size(), 4u);
}

TEST(Passes, OptimizeGraphKeepsResults) {
  Builder b;
  TensorId x = b.Input("x", Shape{1, 3, 13, 13});
  TensorId c = b.Add(OpKind::kConv, {x, b.Const("w", Shape{3, 3, 1, 1})}, "c");
  TensorId bn = b.Add(OpKind::kBatchNormalization,
                      {c, b.Const("s", Shape{3}), b.Const("bb", Shape{3}), b.Const("m", Shape{3}),
                       b.Const("v", Shape{3}, 0.5f, 2.f)},
                      "bn");
  TensorId r = b.Add(OpKind::kAdd, {bn, x}, "r");
  TensorId h = b.Add(OpKind::kHardSwish, {r}, "h");
  TensorId m = b.Add(OpKind::kMul, {h, b.Scalar("two", 2)}, "m");
  TensorId e = b.Add(OpKind::kAdd, {m, b.Scalar("one", 1)}, "e");
  TensorId y = b.Add(OpKind::kIdentity, {e}, "y");
  b.Output(y);
  Graph after = CheckSame(b, [](Graph &g) { return OptimizeGraph(g); });
  EXPECT_EQ(Count(after, OpKind::kFusedConv), 1);
  EXPECT_EQ(Count(after, OpKind::kElementwiseChain), 1);
  EXPECT_EQ(after.nodes.size(), 2u);
}

// FoldConstants after a rewrite made inputs constant: here a graph typed node by node (no
// folding during shape inference), as a pass that builds new constant subgraphs leaves it.
TEST(Passes, FoldConstantsEvaluatesConstantSubgraphs) {
  Builder b;
  TensorId x = b.Input("x", Shape{3, 13});
  TensorId s = b.Add(OpKind::kAdd, {b.Const("a", Shape{13}), b.Const("c", Shape{1})}, "s");
  TensorId e = b.Add(OpKind::kExp, {s}, "e");
  TensorId y = b.Add(OpKind::kMul, {x, e}, "y");
  b.Output(y);
  for (const Node &n : b.g.nodes)
    ASSERT_TRUE(InferNode(b.g, n).ok());
  ASSERT_EQ(b.g.nodes.size(), 3u);
  Graph after = b.g;
  ASSERT_TRUE(FoldConstants(after).ok());
  ASSERT_TRUE(after.Validate().ok());
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].op, OpKind::kMul);
  auto in = b.Inputs();
  auto want = RunReference(b.g, in), got = RunReference(after, in);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(*(*got)[0].data, *(*want)[0].data);  // the same evaluation, so bit-equal
}

TEST(Passes, DeadCodeGoesAndIdsStayConsistent) {
  Builder b;
  TensorId x = b.Input("x", Shape{3, 13});
  TensorId unused = b.Input("unused", Shape{1});
  TensorId dead = b.Add(OpKind::kRelu, {x}, "dead");
  b.Add(OpKind::kNeg, {dead}, "dead2");
  TensorId y = b.Add(OpKind::kTanh, {x}, "y");
  b.Output(y);
  (void)unused;
  Graph after = CheckSame(b, EliminateDeadCode, 0, 0);
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].op, OpKind::kTanh);
  EXPECT_EQ(after.inputs.size(), 2u);  // inputs stay part of the interface, even unread
  EXPECT_EQ(after.FindTensor("dead"), kNoTensor);
  EXPECT_EQ(after.FindTensor("dead2"), kNoTensor);
}

// The committed reference models (fp16 inside, like openpilot's): OptimizeGraph must keep their
// outputs. The fused graph computes chains in float32 where the model rounds to half after every
// op, so the bound is a few half-precision ulps of the output's scale (2^-11 ≈ 4.9e-4 each).
TEST(Passes, ReferenceModelsKeepTheirOutputsAfterOptimizeGraph) {
  const char *root = std::getenv("OP_SOURCE_ROOT");
  if (!root)
    GTEST_SKIP() << "OP_SOURCE_ROOT not set";
  for (const char *name : {"driving_vision_small", "driving_policy_small"}) {
    auto g = ImportOnnxFile(std::string(root) + "/models/" + name + ".onnx");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(InferShapes(*g).ok());
    Builder b;
    b.g = *g;
    // uint8 image inputs get random bytes; float inputs get values in [-2, 2).
    std::vector<Tensor> in = b.Inputs();
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].dtype == DType::kUInt8) {
        Bytes bytes(in[i].ByteSize());
        for (auto &v : bytes)
          v = static_cast<uint8_t>(b.rng());
        in[i].data = std::make_shared<const Bytes>(bytes);
      }
    Graph opt = *g;
    ASSERT_TRUE(OptimizeGraph(opt).ok());
    EXPECT_LT(opt.nodes.size(), g->nodes.size()) << name;  // something fused
    auto want = RunReference(*g, in), got = RunReference(opt, in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Tensor &w = (*want)[0], &o = (*got)[0];
    ASSERT_EQ(o.shape, w.shape);
    double scale = 1, err = 0;
    for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i) {
      scale = std::max(scale, std::fabs(Value(w, i)));
      err = std::max(err, std::fabs(Value(o, i) - Value(w, i)));
    }
    EXPECT_LE(err, 1e-2 * scale) << name;
    std::printf("%s: %zu → %zu nodes, max difference %.3g (scale %.3g)\n", name, g->nodes.size(),
                opt.nodes.size(), err, scale);
  }
}

// LayerNorm written out, as exporters before opset 17 do, with Pow or Mul for the square.
TEST(Passes, DecomposedLayerNormBecomesOneNode) {
  for (bool use_mul : {false, true}) {
    Builder b;
    TensorId x = b.Input("x", Shape{3, 13, 127});
    Attributes ax;
    ax.Set("axes", std::vector<int64_t>{-1});
    TensorId mean = b.Add(OpKind::kReduceMean, {x}, "mean", ax);
    TensorId d = b.Add(OpKind::kSub, {x, mean}, "d");
    TensorId sq = use_mul ? b.Add(OpKind::kMul, {d, d}, "sq")
                          : b.Add(OpKind::kPow, {d, b.Scalar("two", 2)}, "sq");
    TensorId var = b.Add(OpKind::kReduceMean, {sq}, "var", ax);
    TensorId ve = b.Add(OpKind::kAdd, {var, b.Scalar("eps", 1e-5f)}, "ve");
    TensorId sd = b.Add(OpKind::kSqrt, {ve}, "sd");
    TensorId nrm = b.Add(OpKind::kDiv, {d, sd}, "nrm");
    TensorId sc = b.Add(OpKind::kMul, {nrm, b.Const("scale", Shape{1, 127})}, "sc");
    TensorId y = b.Add(OpKind::kAdd, {sc, b.Const("bias", Shape{127})}, "y");
    b.Output(y);
    // The decomposition rounds to float32 after each op; the fused op normalises in double.
    Graph after = CheckSame(b, FuseLayerNormalization, 1e-5, 1e-5);
    ASSERT_EQ(after.nodes.size(), 1u) << "use_mul " << use_mul;
    EXPECT_EQ(after.nodes[0].op, OpKind::kLayerNormalization);
    EXPECT_EQ(after.nodes[0].inputs.size(), 3u);
    EXPECT_EQ(after.tensor(after.nodes[0].inputs[1]).shape, (Shape{127}));  // scale made (127)
    EXPECT_FLOAT_EQ(after.nodes[0].attrs.Float("epsilon"), 1e-5f);
  }
}

TEST(Passes, ReduceOverLeadingAxesIsNotALayerNorm) {
  Builder b;
  TensorId x = b.Input("x", Shape{3, 13});
  Attributes ax;
  ax.Set("axes", std::vector<int64_t>{0});
  TensorId mean = b.Add(OpKind::kReduceMean, {x}, "mean", ax);
  TensorId d = b.Add(OpKind::kSub, {x, mean}, "d");
  TensorId sq = b.Add(OpKind::kMul, {d, d}, "sq");
  TensorId var = b.Add(OpKind::kReduceMean, {sq}, "var", ax);
  TensorId ve = b.Add(OpKind::kAdd, {var, b.Scalar("eps", 1e-5f)}, "ve");
  TensorId sd = b.Add(OpKind::kSqrt, {ve}, "sd");
  TensorId y = b.Add(OpKind::kDiv, {d, sd}, "y");
  b.Output(y);
  Graph after = CheckSame(b, FuseLayerNormalization, 0, 0);
  EXPECT_EQ(Count(after, OpKind::kLayerNormalization), 0);
}

namespace {

// A constant of an int8, uint8, int32 or float32 type.
TensorId Typed(Builder &b, const std::string &name, DType t, Shape s,
               const std::vector<double> &v) {
  Bytes bytes(static_cast<size_t>(s.NumElements()) * DTypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kInt32) {
      const int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(&bytes[4 * i], &x, 4);
    } else if (t == DType::kFloat32) {
      const float x = static_cast<float>(v[i]);
      std::memcpy(&bytes[4 * i], &x, 4);
    } else {
      bytes[i] = static_cast<uint8_t>(static_cast<int>(v[i]));
    }
  }
  Tensor c = MakeConstant(t, s, std::move(bytes));
  c.name = name;
  return b.g.AddTensor(c);
}

// x → Q → DQ → Conv(DQ(int8 w, per-channel scales), DQ(int32 b)) → Relu → Q → DQ: the QDQ form
// of onnxruntime's quantize_static, with the bias on the scale x_scale * w_scale[m].
Builder QdqConv(bool relu, double y_zero_point, bool bias_on_scale = true) {
  Builder b;
  std::uniform_int_distribution<int> w8(-127, 127), b32(-3000, 3000);
  const int64_t m = 4;
  const float xs = 0.02f;
  TensorId x = b.Input("x", Shape{1, 3, 9, 11});
  TensorId xsc = b.Scalar("xs", xs), xzp = Typed(b, "xz", DType::kUInt8, Shape{}, {100});
  TensorId xq = b.Add(OpKind::kQuantizeLinear, {x, xsc, xzp}, "xq");
  TensorId xd = b.Add(OpKind::kDequantizeLinear, {xq, xsc, xzp}, "xd");
  std::vector<double> wv(m * 3 * 9), bv(m), wsv(m), bsv(m);
  for (double &v : wv)
    v = w8(b.rng);
  for (double &v : bv)
    v = b32(b.rng);
  for (int64_t c = 0; c < m; ++c) {
    wsv[c] = 0.001 + 0.0005 * static_cast<double>(c);
    bsv[c] = bias_on_scale ? static_cast<double>(xs * static_cast<float>(wsv[c])) : 1e-4;
  }
  TensorId ws = Typed(b, "ws", DType::kFloat32, Shape{m}, wsv);
  TensorId wd = b.Add(OpKind::kDequantizeLinear,
                      {Typed(b, "wq", DType::kInt8, Shape{m, 3, 3, 3}, wv), ws,
                       Typed(b, "wz", DType::kInt8, Shape{m}, std::vector<double>(m, 0))},
                      "wd");
  Attributes axis0;
  axis0.Set("axis", int64_t{0});
  b.g.nodes.back().attrs = axis0;
  TensorId bd = b.Add(
      OpKind::kDequantizeLinear,
      {Typed(b, "bq", DType::kInt32, Shape{m}, bv), Typed(b, "bs", DType::kFloat32, Shape{m}, bsv)},
      "bd");
  b.g.nodes.back().attrs = axis0;
  Attributes a = Pads(1);
  a.Set("strides", std::vector<int64_t>{2, 1});
  TensorId c = b.Add(OpKind::kConv, {xd, wd, bd}, "c", a);
  if (relu)
    c = b.Add(OpKind::kRelu, {c}, "r");
  TensorId ysc = b.Scalar("ys", 0.02f);
  TensorId yzp = Typed(b, "yz", DType::kUInt8, Shape{}, {y_zero_point});
  TensorId yq = b.Add(OpKind::kQuantizeLinear, {c, ysc, yzp}, "yq");
  b.Output(b.Add(OpKind::kDequantizeLinear, {yq, ysc, yzp}, "y"));
  return b;
}

// x → Q → DQ → Gemm/MatMul(DQ(int8 b, per-column scales), [DQ(int32 c)]) → [Relu] → Q → DQ.
// Gemm takes B as [n, k] when trans_b (its scales along axis 0), MatMul as [k, n] (axis 1).
Builder QdqGemm(OpKind op, bool trans_b, bool bias, bool relu) {
  Builder b;
  std::uniform_int_distribution<int> w8(-127, 127), b32(-3000, 3000);
  const int64_t m = 5, k = 19, n = 6;
  const float xs = 0.02f;
  TensorId x = b.Input("x", Shape{m, k});
  TensorId xsc = b.Scalar("xs", xs), xzp = Typed(b, "xz", DType::kUInt8, Shape{}, {100});
  TensorId xq = b.Add(OpKind::kQuantizeLinear, {x, xsc, xzp}, "xq");
  TensorId xd = b.Add(OpKind::kDequantizeLinear, {xq, xsc, xzp}, "xd");
  std::vector<double> wv(k * n), bv(n), wsv(n), bsv(n);
  for (double &v : wv)
    v = w8(b.rng);
  for (double &v : bv)
    v = b32(b.rng);
  for (int64_t c = 0; c < n; ++c) {
    wsv[c] = 0.001 + 0.0005 * static_cast<double>(c);
    bsv[c] = static_cast<double>(xs * static_cast<float>(wsv[c]));
  }
  Attributes axis;
  axis.Set("axis", int64_t{trans_b ? 0 : 1});
  TensorId wd = b.Add(OpKind::kDequantizeLinear,
                      {Typed(b, "wq", DType::kInt8, trans_b ? Shape{n, k} : Shape{k, n}, wv),
                       Typed(b, "ws", DType::kFloat32, Shape{n}, wsv),
                       Typed(b, "wz", DType::kInt8, Shape{n}, std::vector<double>(n, 0))},
                      "wd", axis);
  std::vector<TensorId> ins = {xd, wd};
  if (bias) {
    Attributes axis0;
    axis0.Set("axis", int64_t{0});
    ins.push_back(b.Add(OpKind::kDequantizeLinear,
                        {Typed(b, "bq", DType::kInt32, Shape{n}, bv),
                         Typed(b, "bs", DType::kFloat32, Shape{n}, bsv)},
                        "bd", axis0));
  }
  Attributes a;
  if (op == OpKind::kGemm)
    a.Set("transB", int64_t{trans_b ? 1 : 0});
  TensorId c = b.Add(op, ins, "mm", a);
  if (relu)
    c = b.Add(OpKind::kRelu, {c}, "r");
  TensorId ysc = b.Scalar("ys", 0.05f);
  TensorId yzp = Typed(b, "yz", DType::kUInt8, Shape{}, {relu ? 0.0 : 128.0});
  TensorId yq = b.Add(OpKind::kQuantizeLinear, {c, ysc, yzp}, "yq");
  b.Output(b.Add(OpKind::kDequantizeLinear, {yq, ysc, yzp}, "y"));
  return b;
}

}  // namespace

// The fused QLinearConv rounds once, from the exact integer sum, as onnxruntime does; the float
// graph rounds the same value computed through float dequantized operands. Both round half to
// even, so they can only differ where the exact value is within float rounding of a tie: by one
// step (0.02), and rarely (at most 2 of the 220 values; none measured).
TEST(Passes, QdqConvBecomesQLinearConv) {
  for (bool relu : {false, true}) {
    Builder b = QdqConv(relu, relu ? 0 : 128);
    ASSERT_TRUE(InferShapes(b.g).ok());
    EXPECT_EQ(Count(b.g, OpKind::kDequantizeLinear), 4);  // shape inference keeps them
    Graph after = b.g;
    ASSERT_TRUE(OptimizeGraph(after).ok());
    EXPECT_EQ(Count(after, OpKind::kQLinearConv), 1) << "relu " << relu;
    EXPECT_EQ(Count(after, OpKind::kConv) + Count(after, OpKind::kFusedConv), 0);
    EXPECT_EQ(Count(after, OpKind::kRelu), 0);
    auto in = b.Inputs();
    auto want = RunReference(b.g, in);
    auto got = RunReference(after, in);
    ASSERT_TRUE(want.ok() && got.ok());
    const Tensor &w = (*want)[0], &o = (*got)[0];
    ASSERT_EQ(o.shape, w.shape);
    size_t differ = 0;
    for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i) {
      const double d = std::fabs(Value(o, i) - Value(w, i));
      EXPECT_LE(d, 0.02 * 1.0001) << "at " << i;
      differ += d > 0.01;
    }
    EXPECT_LE(differ, 2u) << "of " << w.shape.NumElements();
  }
}

// The same for Gemm (B transposed or not, with and without a bias and a Relu) and MatMul: one
// QLinearMatMul, within one output step of the float graph, rarely off.
TEST(Passes, QdqGemmAndMatMulBecomeQLinearMatMul) {
  struct Case {
    OpKind op;
    bool trans_b, bias, relu;
  };
  for (const Case &cs :
       {Case{OpKind::kGemm, true, true, false}, Case{OpKind::kGemm, false, true, true},
        Case{OpKind::kGemm, true, false, true}, Case{OpKind::kMatMul, false, false, false}}) {
    const std::string what = std::string(cs.op == OpKind::kGemm ? "Gemm" : "MatMul") + " transB " +
                             std::to_string(cs.trans_b) + " bias " + std::to_string(cs.bias) +
                             " relu " + std::to_string(cs.relu);
    Builder b = QdqGemm(cs.op, cs.trans_b, cs.bias, cs.relu);
    ASSERT_TRUE(InferShapes(b.g).ok()) << what;
    Graph after = b.g;
    ASSERT_TRUE(OptimizeGraph(after).ok()) << what;
    EXPECT_EQ(Count(after, OpKind::kQLinearMatMul), 1) << what;
    EXPECT_EQ(Count(after, OpKind::kGemm) + Count(after, OpKind::kMatMul) +
                  Count(after, OpKind::kFusedGemm) + Count(after, OpKind::kRelu),
              0)
        << what;
    auto in = b.Inputs();
    auto want = RunReference(b.g, in);
    auto got = RunReference(after, in);
    ASSERT_TRUE(want.ok() && got.ok()) << what;
    const Tensor &w = (*want)[0], &o = (*got)[0];
    ASSERT_EQ(o.shape, w.shape);
    size_t differ = 0, nonzero = 0;
    for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i) {
      const double d = std::fabs(Value(o, i) - Value(w, i));
      EXPECT_LE(d, 0.05 * 1.0001) << what << " at " << i;
      differ += d > 0.025;
      nonzero += Value(w, i) != 0;
    }
    EXPECT_LE(differ, 1u) << what;
    EXPECT_GT(nonzero, 0u) << what;  // the outputs are not all saturated
  }
}

TEST(Passes, QdqConvThatIsNotIntegerStaysFloat) {
  // A Relu whose work saturation would not do (zero point 128), and a bias off the
  // accumulator's scale: both keep the float Conv, and the dequantized weights fold.
  for (int variant = 0; variant < 2; ++variant) {
    Builder b = variant == 0 ? QdqConv(true, 128) : QdqConv(false, 128, false);
    ASSERT_TRUE(InferShapes(b.g).ok());
    Graph after = b.g;
    ASSERT_TRUE(OptimizeGraph(after).ok());
    EXPECT_EQ(Count(after, OpKind::kQLinearConv), 0) << "variant " << variant;
    EXPECT_EQ(Count(after, OpKind::kConv) + Count(after, OpKind::kFusedConv), 1);
    // Only the activation's pair stays: the weights' and bias's DequantizeLinear folded.
    EXPECT_EQ(Count(after, OpKind::kDequantizeLinear), 2);
  }
}

// A QLinearConv's output through DequantizeLinear, the tanh form of GELU written out in float
// steps, and QuantizeLinear (uint8 or int8); or through DequantizeLinear → QuantizeLinear alone
// (requantized to another scale). The steps become a 256-entry table of the QLinearConv,
// computed on the reference interpreter, so the outputs are the unfused graph's exactly.
TEST(Passes, QuantizedStepsAfterAQLinearConvBecomeItsTable) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool gelu = variant < 2, int8_out = variant == 1;
    Builder b = QdqConv(false, 128);
    // QdqConv ends in yq → DQ "y" (the output): make y an inner value instead.
    TensorId y = b.g.outputs[0];
    b.g.tensor(y).is_output = false;
    b.g.outputs.clear();
    auto s = [&](const char *n, float v) { return b.Scalar(n, v); };
    TensorId x2 = y;
    if (gelu) {
      x2 = b.Add(OpKind::kMul, {y, y}, "g0");
      x2 = b.Add(OpKind::kMul, {y, x2}, "g1");
      x2 = b.Add(OpKind::kMul, {s("c0", 0.044715f), x2}, "g2");
      x2 = b.Add(OpKind::kAdd, {y, x2}, "g3");
      x2 = b.Add(OpKind::kMul, {s("c1", 0.7978845608f), x2}, "g4");
      x2 = b.Add(OpKind::kTanh, {x2}, "g5");
      x2 = b.Add(OpKind::kAdd, {s("c2", 1.f), x2}, "g6");
      x2 = b.Add(OpKind::kMul, {y, x2}, "g7");
      x2 = b.Add(OpKind::kMul, {s("c3", 0.5f), x2}, "g8");
    }
    TensorId gs = s("gs", gelu ? 0.013f : 0.031f);
    TensorId gz = Typed(b, "gz", int8_out ? DType::kInt8 : DType::kUInt8, Shape{},
                        {int8_out ? -100.0 : 20.0});
    TensorId gq = b.Add(OpKind::kQuantizeLinear, {x2, gs, gz}, "gq");
    b.Output(b.Add(OpKind::kDequantizeLinear, {gq, gs, gz}, "out"));
    ASSERT_TRUE(InferShapes(b.g).ok());
    Graph after = b.g;
    ASSERT_TRUE(OptimizeGraph(after).ok());
    EXPECT_EQ(Count(after, OpKind::kQLinearConv), 1) << "variant " << variant;
    EXPECT_EQ(Count(after, OpKind::kTanh) + Count(after, OpKind::kElementwiseChain) +
                  Count(after, OpKind::kMul),
              0);
    EXPECT_EQ(Count(after, OpKind::kQuantizeLinear), 1);    // the input's
    EXPECT_EQ(Count(after, OpKind::kDequantizeLinear), 1);  // the output's
    for (const Node &n : after.nodes)
      if (n.op == OpKind::kQLinearConv) {
        ASSERT_EQ(n.inputs.size(), 10u);
        EXPECT_EQ(after.tensor(n.inputs[9]).shape, Shape{256});
        EXPECT_EQ(after.tensor(n.outputs[0]).dtype, int8_out ? DType::kInt8 : DType::kUInt8);
      }
    auto in = b.Inputs();
    auto want = RunReference(b.g, in);
    auto got = RunReference(after, in);
    ASSERT_TRUE(want.ok() && got.ok());
    const Tensor &w = (*want)[0], &o = (*got)[0];
    ASSERT_EQ(o.shape, w.shape);
    std::set<double> distinct;
    for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i) {
      EXPECT_EQ(Value(o, i), Value(w, i)) << "variant " << variant << " at " << i;
      distinct.insert(Value(w, i));
    }
    EXPECT_GT(distinct.size(), 10u) << "variant " << variant;  // not all saturated
  }
}

// A value read outside the steps (here the dequantized output also leaves the graph) keeps
// them as they are; the DequantizeLinear alone becomes a float32 table of the QLinearConv, and
// the Tanh a one-step chain that also writes tq (FuseQuantizeIntoChain).
TEST(Passes, QuantizedStepsWithAnotherReaderStopAtAFloatTable) {
  Builder b = QdqConv(false, 128);
  TensorId y = b.g.outputs[0];
  TensorId t = b.Add(OpKind::kTanh, {y}, "t");
  TensorId ts = b.Scalar("ts", 0.01f);
  TensorId tz = Typed(b, "tz", DType::kUInt8, Shape{}, {128});
  b.Output(b.Add(OpKind::kQuantizeLinear, {t, ts, tz}, "tq"));
  ASSERT_TRUE(InferShapes(b.g).ok());
  Graph after = b.g;
  ASSERT_TRUE(OptimizeGraph(after).ok());
  EXPECT_EQ(Count(after, OpKind::kQuantizeLinear), 1);  // the input's; tq joined the chain
  EXPECT_EQ(Count(after, OpKind::kTanh), 0);
  EXPECT_EQ(Count(after, OpKind::kElementwiseChain), 1);
  EXPECT_EQ(Count(after, OpKind::kDequantizeLinear), 0);
  for (const Node &n : after.nodes) {
    if (n.op == OpKind::kQLinearConv) {
      ASSERT_NE(n.input(9), kNoTensor);
      EXPECT_EQ(after.tensor(n.input(9)).dtype, DType::kFloat32);
      EXPECT_EQ(after.tensor(n.outputs[0]).name, "y");  // the graph output, written directly
    }
  }
  auto in = b.Inputs();
  auto want = RunReference(b.g, in);
  auto got = RunReference(after, in);
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ(want->size(), 2u);
  ASSERT_EQ(got->size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const Tensor &w = (*want)[k], &o = (*got)[k];
    ASSERT_EQ(o.shape, w.shape);
    ASSERT_EQ(o.dtype, w.dtype);
    for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i)
      EXPECT_EQ(ref::GetReal(o, i), ref::GetReal(w, i)) << "output " << k << " at " << i;
  }
}

// QuantizeLinear of an elementwise value with a constant scale and zero point joins the chain
// computing it as a second output; the float value stays where something else reads it, and a
// quantizer with a computed scale stays a node. Values on rounding ties and past the bounds.
TEST(Passes, QuantizeLinearJoinsTheChainOfItsInput) {
  for (bool s8 : {false, true}) {
    Builder b;
    TensorId x = b.Input("x", Shape{2, 3, 41});
    TensorId r = b.Input("r", Shape{2, 3, 41});
    TensorId sum = b.Add(OpKind::kAdd, {x, r}, "sum");
    TensorId qs = b.Scalar("qs", 0.25f);
    TensorId qz = s8 ? Typed(b, "qz", DType::kInt8, Shape{}, {-3})
                     : Typed(b, "qz", DType::kUInt8, Shape{}, {120});
    b.Output(b.Add(OpKind::kQuantizeLinear, {sum, qs, qz}, "q"));
    b.Output(b.Add(OpKind::kMul, {sum, sum}, "sq"));  // another reader of the float value
    TensorId dyn = b.Input("dyn", Shape{});           // a computed scale: not fused
    TensorId m = b.Add(OpKind::kMul, {x, b.Scalar("two", 2.f)}, "m");
    b.Output(b.Add(OpKind::kQuantizeLinear, {b.Add(OpKind::kExp, {m}, "e"), dyn}, "qd"));
    ASSERT_TRUE(InferShapes(b.g).ok());
    Graph after = b.g;
    ASSERT_TRUE(OptimizeGraph(after).ok());
    EXPECT_EQ(Count(after, OpKind::kQuantizeLinear), 1);  // qd's
    int fused = 0;
    for (const Node &n : after.nodes)
      if (n.op == OpKind::kElementwiseChain && n.attrs.Int("quantize", 0) != 0) {
        ++fused;
        ASSERT_EQ(n.outputs.size(), 2u);
        EXPECT_EQ(after.tensor(n.outputs[1]).dtype, s8 ? DType::kInt8 : DType::kUInt8);
      }
    EXPECT_EQ(fused, 1);
    auto in = b.Inputs();
    // quarter steps on both sides of every tie, and beyond the saturation bounds
    for (Tensor *t : {&in[0], &in[1]})
      for (size_t i = 0; i < static_cast<size_t>(t->shape.NumElements()); ++i)
        ref::SetReal(ref::Mut(*t), t->dtype, i, (static_cast<double>(i % 97) - 48.0) * 0.375);
    ref::SetReal(ref::Mut(in[2]), DType::kFloat32, 0, 0.5);
    auto want = RunReference(b.g, in);
    auto got = RunReference(after, in);
    ASSERT_TRUE(want.ok() && got.ok());
    ASSERT_EQ(want->size(), got->size());
    for (size_t k = 0; k < want->size(); ++k) {
      const Tensor &w = (*want)[k], &o = (*got)[k];
      ASSERT_EQ(o.dtype, w.dtype);
      for (size_t i = 0; i < static_cast<size_t>(w.shape.NumElements()); ++i)
        EXPECT_EQ(ref::GetReal(o, i), ref::GetReal(w, i)) << "output " << k << " at " << i;
    }
  }
}
