// Differential tests: every op's kernel on the device against the reference interpreter, with
// odd shapes (1, 3, 13, 127), for fp32 and fp16 storage of intermediates and weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "graph_builder.h"
#include "nn/passes.h"

using namespace op;
using namespace op::nn;
using namespace op::nn::testing;

namespace {

Attributes A(std::initializer_list<std::pair<const char *, AttrValue>> kv) {
  Attributes a;
  for (auto &[k, v] : kv)
    a.Set(k, v);
  return a;
}

using Ints = std::vector<int64_t>;

// How many of `model`'s launches compute a node of `g` that `which` picks; `labels` gets every
// launch's label, for a failure's message.
int LaunchesOf(const CompiledModel &model, const Graph &g,
               const std::function<bool(const Node &)> &which, std::string *labels) {
  int n = 0;
  for (const KernelDesc &k : model.kernels) {
    *labels += k.label + "; ";
    for (const Node &node : g.nodes)
      n += which(node) && k.label == node.Describe();
  }
  return n;
}

// GELU in tanh form as the steps of a chain (an ElementwiseChain's, or a fused epilogue's with
// activation "Chain"): 0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3))).
void SetGeluSteps(Attributes &at) {
  at.Set("ops",
         std::vector<std::string>{"Mul", "Mul", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul"});
  at.Set("operand", Ints{0, 0, -1, 0, -1, -1, -1, 0, -1});
  at.Set("swap", Ints{0, 0, 0, 0, 0, 0, 0, 0, 0});
  at.Set("step_alpha", std::vector<float>{0, 0, 0.044715f, 0, 0.7978845608f, 0, 1.f, 0, 0.5f});
  at.Set("step_beta", std::vector<float>(9, 0.f));
}

struct Case {
  std::string name;
  std::function<void(Builder &)> build;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  // --- elementwise, unary (each on an odd shape)
  struct U {
    OpKind op;
    float lo, hi;
    Attributes attrs;
  };
  std::vector<U> unary = {
      {OpKind::kSqrt, 0.1f, 4.f, {}},
      {OpKind::kExp, -3.f, 3.f, {}},
      {OpKind::kLog, 0.1f, 4.f, {}},
      {OpKind::kNeg, -2.f, 2.f, {}},
      {OpKind::kAbs, -2.f, 2.f, {}},
      {OpKind::kReciprocal, 0.5f, 3.f, {}},
      {OpKind::kRelu, -2.f, 2.f, {}},
      {OpKind::kLeakyRelu, -2.f, 2.f, A({{"alpha", 0.2f}})},
      {OpKind::kElu, -2.f, 2.f, A({{"alpha", 0.7f}})},
      {OpKind::kSigmoid, -4.f, 4.f, {}},
      {OpKind::kHardSigmoid, -4.f, 4.f, A({{"alpha", 0.3f}, {"beta", 0.4f}})},
      {OpKind::kHardSwish, -4.f, 4.f, {}},
      {OpKind::kTanh, -3.f, 3.f, {}},
      {OpKind::kErf, -2.f, 2.f, {}},
      {OpKind::kSoftplus, -3.f, 3.f, {}},
      {OpKind::kFloor, -3.f, 3.f, {}},
      {OpKind::kCeil, -3.f, 3.f, {}},
      {OpKind::kSin, -3.f, 3.f, {}},
      {OpKind::kCos, -3.f, 3.f, {}},
      {OpKind::kAtan, -3.f, 3.f, {}},
      {OpKind::kSoftsign, -3.f, 3.f, {}},
      {OpKind::kSelu, -3.f, 3.f, {}},
  };
  for (const U &u : unary)
    c.push_back({std::string(OpName(u.op)), [u](Builder &b) {
                   TensorId x = b.Input("x", {3, 13}, u.lo, u.hi);
                   b.Output(b.Add(u.op, {x}, u.attrs));
                 }});
  // --- binary with broadcasting
  for (OpKind op : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kMax,
                    OpKind::kMin, OpKind::kPRelu})
    c.push_back({std::string(OpName(op)) + "_broadcast", [op](Builder &b) {
                   TensorId x = b.Input("x", {3, 1, 13}, 0.5f, 2.f);
                   TensorId y = b.Input("y", {7, 1}, 0.5f, 2.f);
                   b.Output(b.Add(op, {x, y}));
                 }});
  c.push_back({"Clip", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 13}, -3.f, 3.f);
                 TensorId lo = b.Const(MakeFloatConstant({-1.f}, Shape({})));
                 TensorId hi = b.Const(MakeFloatConstant({0.5f}, Shape({})));
                 b.Output(b.Add(OpKind::kClip, {x, lo, hi}));
               }});
  c.push_back({"Pow", [](Builder &b) {
                 TensorId x = b.Input("x", {127}, 0.1f, 2.f);
                 TensorId y = b.Input("y", {1}, -1.f, 2.f);
                 b.Output(b.Add(OpKind::kPow, {x, y}));
               }});
  for (OpKind op : {OpKind::kLess, OpKind::kGreater, OpKind::kEqual})
    c.push_back({std::string(OpName(op)), [op](Builder &b) {
                   TensorId x = b.Input("x", {13, 3});
                   TensorId y = b.Input("y", {3});
                   TensorId cmp = b.Add(op, {x, y});
                   b.Output(cmp);
                   b.Output(b.Add(OpKind::kWhere, {cmp, x, y}));
                 }});
  c.push_back({"Cast_fp16_roundtrip", [](Builder &b) {
                 TensorId x = b.Input("x", {13});
                 b.Output(b.Add(OpKind::kCast, {x}, A({{"to", int64_t{10}}})));
               }});
  c.push_back({"ElementwiseChain_gelu_tanh", [](Builder &b) {
                 // 0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3)))
                 TensorId x = b.Input("x", {3, 127});
                 Attributes at;
                 at.Set("ops", std::vector<std::string>{"Mul", "Mul", "Mul", "Add", "Mul", "Tanh",
                                                        "Add", "Mul", "Mul"});
                 at.Set("operand", Ints{0, 0, -1, 0, -1, -1, -1, 0, -1});
                 at.Set("swap", Ints{0, 0, 0, 0, 0, 0, 0, 0, 0});
                 at.Set("step_alpha",
                        std::vector<float>{0, 0, 0.044715f, 0, 0.7978845608f, 0, 1.f, 0, 0.5f});
                 at.Set("step_beta", std::vector<float>(9, 0.f));
                 b.Output(b.Add(OpKind::kElementwiseChain, {x}, at));
               }});
  // --- convolutions
  c.push_back({"Conv_pad_stride", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 13, 13});
                 TensorId w = b.Weights({5, 3, 3, 3});
                 TensorId bias = b.Weights({5});
                 b.Output(b.Add(OpKind::kConv, {x, w, bias},
                                A({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}})));
               }});
  c.push_back(
      {"Conv_grouped_7x7_s2", [](Builder &b) {
         TensorId x = b.Input("x", {1, 6, 13, 13});
         TensorId w = b.Weights({6, 2, 7, 7});
         b.Output(b.Add(
             OpKind::kConv, {x, w},
             A({{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}, {"group", int64_t{3}}})));
       }});
  c.push_back({"Conv_depthwise_dilated_same", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 3, 13, 1 + 12});
                 TensorId w = b.Weights({3, 1, 3, 3});
                 b.Output(b.Add(OpKind::kConv, {x, w},
                                A({{"auto_pad", std::string("SAME_UPPER")},
                                   {"dilations", Ints{2, 2}},
                                   {"group", int64_t{3}}})));
               }});
  c.push_back({"Conv_1d", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 127});
                 TensorId w = b.Weights({13, 3, 5});
                 b.Output(b.Add(OpKind::kConv, {x, w}, A({{"pads", Ints{2, 1}}})));
               }});
  c.push_back({"FusedConv_act_residual", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 13, 13});
                 TensorId r = b.Input("r", {1, 7, 13, 13});
                 TensorId w = b.Weights({7, 3, 3, 3});
                 TensorId bias = b.Weights({7});
                 b.Output(b.Add(OpKind::kFusedConv, {x, w, bias, r},
                                A({{"pads", Ints{1, 1, 1, 1}},
                                   {"activation", std::string("LeakyRelu")},
                                   {"activation_alpha", 0.1f},
                                   {"residual_after_activation", int64_t{1}}})));
               }});
  // Shapes that reach every path of the CPU profile's vector kernel (conv2d_vec.cl): full and
  // partial vectors, flat 1x1 runs, stride-2 pairs, partial channel blocks, edges and taps.
  c.push_back({"Conv_1x1_flat_partial_blocks", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 19, 9, 23});
                 TensorId w = b.Weights({20, 19, 1, 1});
                 TensorId bias = b.Weights({20});
                 b.Output(b.Add(OpKind::kConv, {x, w, bias}));
               }});
  c.push_back({"Conv_3x3_wide_rows", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 5, 7, 37});
                 TensorId w = b.Weights({11, 5, 3, 3});
                 b.Output(b.Add(OpKind::kConv, {x, w}, A({{"pads", Ints{1, 1, 1, 1}}})));
               }});
  c.push_back({"Conv_3x3_s2_wide_rows", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 4, 9, 41});
                 TensorId w = b.Weights({9, 4, 3, 3});
                 b.Output(b.Add(OpKind::kConv, {x, w},
                                A({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}})));
               }});
  // A row of whole vectors, as the stems': the first vector's leftmost tap starts in the padding
  // (a zero, then odd lanes), the last one's rightmost ends on the row's last value (odd lanes of
  // a load one value earlier).
  c.push_back({"Conv_3x3_s2_rows_of_whole_vectors", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 5, 64});
                 TensorId w = b.Weights({16, 3, 3, 3});
                 TensorId bias = b.Weights({16});
                 b.Output(b.Add(OpKind::kConv, {x, w, bias},
                                A({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}})));
               }});
  // Channel blocks of 16 (one pixel vector) and 12 (two pixel vectors of a flat 1x1 run), per
  // group and over two images, with partial pixel vectors at the row's end.
  c.push_back({"Conv_3x3_s2_blocks_of_16", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 9, 41});
                 TensorId w = b.Weights({32, 3, 3, 3});
                 TensorId bias = b.Weights({32});
                 b.Output(b.Add(OpKind::kConv, {x, w, bias},
                                A({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}})));
               }});
  c.push_back({"Conv_3x3_grouped_blocks_of_16", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 4, 7, 20});
                 TensorId w = b.Weights({32, 2, 3, 3});
                 b.Output(b.Add(OpKind::kConv, {x, w},
                                A({{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{2}}})));
               }});
  c.push_back({"FusedConv_1x1_flat_blocks_of_12_two_images", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 5, 7, 9});
                 TensorId r = b.Input("r", {2, 24, 7, 9});
                 TensorId w = b.Weights({24, 5, 1, 1});
                 TensorId bias = b.Weights({24});
                 b.Output(b.Add(OpKind::kFusedConv, {x, w, bias, r},
                                A({{"activation", std::string("Relu")}})));
               }});
  c.push_back({"Conv_depthwise_7x7_wide_rows", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 6, 11, 35});
                 TensorId w = b.Weights({6, 1, 7, 7});
                 TensorId bias = b.Weights({6});
                 b.Output(b.Add(OpKind::kConv, {x, w, bias},
                                A({{"pads", Ints{3, 3, 3, 3}}, {"group", int64_t{6}}})));
               }});
  c.push_back({"FusedConv_1x1_relu_residual", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 8, 6, 10});
                 TensorId r = b.Input("r", {1, 12, 6, 10});
                 TensorId w = b.Weights({12, 8, 1, 1});
                 TensorId bias = b.Weights({12});
                 b.Output(b.Add(OpKind::kFusedConv, {x, w, bias, r},
                                A({{"activation", std::string("Relu")}})));
               }});
  // Whole vectors of output take the vector epilogue (activation on a float vector), the row's
  // edge the lane-by-lane one: GELU with a residual before it, Clip with one after it.
  c.push_back(
      {"FusedConv_3x3_gelu_residual_vector_epilogue", [](Builder &b) {
         TensorId x = b.Input("x", {1, 5, 7, 37});
         TensorId r = b.Input("r", {1, 11, 7, 37});
         TensorId w = b.Weights({11, 5, 3, 3});
         TensorId bias = b.Weights({11});
         Attributes at = A({{"pads", Ints{1, 1, 1, 1}}, {"activation", std::string("Chain")}});
         SetGeluSteps(at);
         b.Output(b.Add(OpKind::kFusedConv, {x, w, bias, r}, at));
       }});
  c.push_back({"FusedConv_1x1_clip_residual_after_vector_epilogue", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 8, 6, 10});
                 TensorId r = b.Input("r", {1, 12, 6, 10});
                 TensorId w = b.Weights({12, 8, 1, 1});
                 b.Output(b.Add(OpKind::kFusedConv, {x, w, kNoTensor, r},
                                A({{"activation", std::string("Clip")},
                                   {"activation_alpha", -0.3f},
                                   {"activation_beta", 0.4f},
                                   {"residual_after_activation", int64_t{1}}})));
               }});
  // The depthwise kernel (conv2d_dw.cl): row blocks with a partial last one, a window wider
  // than the row (every row is an edge), two images, a fused GELU and a residual after it.
  c.push_back({"FusedConv_depthwise_7x7_narrow_gelu_residual", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 5, 5, 8});
                 TensorId r = b.Input("r", {2, 5, 5, 8});
                 TensorId w = b.Weights({5, 1, 7, 7});
                 TensorId bias = b.Weights({5});
                 Attributes at = A({{"pads", Ints{3, 3, 3, 3}},
                                    {"group", int64_t{5}},
                                    {"activation", std::string("Chain")},
                                    {"residual_after_activation", int64_t{1}}});
                 SetGeluSteps(at);
                 b.Output(b.Add(OpKind::kFusedConv, {x, w, bias, r}, at));
               }});
  c.push_back({"Conv_depthwise_3x5_asymmetric_pads", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 9, 21});
                 TensorId w = b.Weights({3, 1, 3, 5});
                 b.Output(b.Add(OpKind::kConv, {x, w},
                                A({{"pads", Ints{0, 1, 2, 3}}, {"group", int64_t{3}}})));
               }});
  // Widths that are whole vectors: rows at the edge take their taps as shuffles of the vectors
  // before, at and after their pixels (zeros outside the image), interior rows load them; a
  // multiplier of 2, asymmetric pads, two images and a fused Relu.
  c.push_back({"Conv_depthwise_7x7_three_whole_vectors_multiplier_2", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 5, 48});
                 TensorId w = b.Weights({6, 1, 7, 7});
                 TensorId bias = b.Weights({6});
                 b.Output(b.Add(OpKind::kConv, {x, w, bias},
                                A({{"pads", Ints{3, 3, 3, 3}}, {"group", int64_t{3}}})));
               }});
  c.push_back({"FusedConv_depthwise_5x5_two_whole_vectors_asymmetric_pads_relu", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 2, 4, 32});
                 TensorId w = b.Weights({2, 1, 5, 5});
                 b.Output(b.Add(OpKind::kFusedConv, {x, w},
                                A({{"pads", Ints{2, 1, 2, 3}},
                                   {"group", int64_t{2}},
                                   {"activation", std::string("Relu")}})));
               }});
  // Pads wider than the window's half: the output outgrows the input, and a vector of output
  // pixels past the input's width has no input vector of its own (the copy path, zeros).
  c.push_back({"Conv_depthwise_3x3_pads_past_the_row", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 2, 3, 16});
                 TensorId w = b.Weights({2, 1, 3, 3});
                 b.Output(b.Add(OpKind::kConv, {x, w},
                                A({{"pads", Ints{1, 3, 1, 3}}, {"group", int64_t{2}}})));
               }});
  // Stride 2 (taps from the even and odd lanes of double-width loads) and channel multipliers
  // (M output channels of one input channel): interior and edge segments, partial vectors.
  c.push_back(
      {"Conv_depthwise_7x7_s2_multiplier_2_wide_rows", [](Builder &b) {
         TensorId x = b.Input("x", {1, 4, 13, 70});
         TensorId w = b.Weights({8, 1, 7, 7});
         TensorId bias = b.Weights({8});
         b.Output(b.Add(
             OpKind::kConv, {x, w, bias},
             A({{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}, {"group", int64_t{4}}})));
       }});
  c.push_back(
      {"Conv_depthwise_3x3_s2_two_images", [](Builder &b) {
         TensorId x = b.Input("x", {2, 3, 10, 37});
         TensorId w = b.Weights({3, 1, 3, 3});
         b.Output(b.Add(
             OpKind::kConv, {x, w},
             A({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{3}}})));
       }});
  c.push_back({"FusedConv_depthwise_5x4_strides_1x2_multiplier_3_relu_residual", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 2, 9, 40});
                 TensorId r = b.Input("r", {1, 6, 9, 20});
                 TensorId w = b.Weights({6, 1, 5, 4});
                 TensorId bias = b.Weights({6});
                 b.Output(b.Add(OpKind::kFusedConv, {x, w, bias, r},
                                A({{"pads", Ints{2, 1, 2, 2}},
                                   {"strides", Ints{1, 2}},
                                   {"group", int64_t{2}},
                                   {"activation", std::string("Relu")}})));
               }});
  c.push_back({"ConvTranspose", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 5, 7});
                 TensorId w = b.Weights({3, 4, 3, 3});
                 TensorId bias = b.Weights({4});
                 b.Output(b.Add(OpKind::kConvTranspose, {x, w, bias},
                                A({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}})));
               }});
  // --- matrix products
  c.push_back(
      {"Gemm_trans_bias", [](Builder &b) {
         TensorId a = b.Input("a", {13, 3});
         TensorId w = b.Weights({127, 13});
         TensorId bias = b.Weights({127});
         b.Output(b.Add(
             OpKind::kGemm, {a, w, bias},
             A({{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.f}})));
       }});
  c.push_back({"MatMul_batched_broadcast", [](Builder &b) {
                 TensorId a = b.Input("a", {2, 1, 13, 3});
                 TensorId bm = b.Input("b", {3, 3, 127});
                 b.Output(b.Add(OpKind::kMatMul, {a, bm}));
               }});
  c.push_back({"MatMul_batched_a_constant_b", [](Builder &b) {
                 TensorId a = b.Input("a", {2, 9, 21});
                 TensorId w = b.Weights({21, 37});
                 b.Output(b.Add(OpKind::kMatMul, {a, w}));
               }});
  c.push_back({"Gemm_computed_b_transposed", [](Builder &b) {
                 TensorId a = b.Input("a", {9, 21});
                 TensorId bm = b.Input("b", {19, 21});
                 b.Output(b.Add(OpKind::kGemm, {a, bm}, A({{"transB", int64_t{1}}})));
               }});
  c.push_back({"MatMul_vector", [](Builder &b) {
                 TensorId a = b.Input("a", {13});
                 TensorId bm = b.Input("b", {13, 3});
                 b.Output(b.Add(OpKind::kMatMul, {a, bm}));
               }});
  // Four column vectors per work-item (one or two rows): constant panels padded to a multiple
  // of four, and a computed B whose last block is partly and wholly past N.
  c.push_back({"MatMul_two_rows_wide_constant_b", [](Builder &b) {
                 TensorId a = b.Input("a", {2, 45});
                 TensorId w = b.Weights({45, 133});
                 b.Output(b.Add(OpKind::kMatMul, {a, w}));
               }});
  c.push_back({"MatMul_row_wide_computed_b", [](Builder &b) {
                 TensorId a = b.Input("a", {1, 21});
                 TensorId bm = b.Input("b", {21, 100});
                 b.Output(b.Add(OpKind::kMatMul, {a, bm}));
               }});
  c.push_back({"FusedGemm_relu_residual", [](Builder &b) {
                 TensorId a = b.Input("a", {1, 127});
                 TensorId w = b.Weights({127, 13});
                 TensorId bias = b.Weights({13});
                 TensorId r = b.Input("r", {1, 13});
                 b.Output(b.Add(OpKind::kFusedGemm, {a, w, bias, r},
                                A({{"activation", std::string("Relu")}})));
               }});
  c.push_back({"FusedGemm_gelu_bias_residual_vector_epilogue", [](Builder &b) {
                 TensorId a = b.Input("a", {9, 21});
                 TensorId w = b.Weights({21, 37});
                 TensorId bias = b.Weights({37});
                 TensorId r = b.Input("r", {9, 37});
                 Attributes at = A({{"activation", std::string("Chain")}, {"alpha", 0.5f}});
                 SetGeluSteps(at);
                 b.Output(b.Add(OpKind::kFusedGemm, {a, w, bias, r}, at));
               }});
  c.push_back({"Gemm_row_bias_vector_epilogue", [](Builder &b) {
                 TensorId a = b.Input("a", {9, 21});
                 TensorId w = b.Weights({21, 37});
                 TensorId cm = b.Input("c", {9, 1});
                 b.Output(b.Add(OpKind::kGemm, {a, w, cm}, A({{"beta", 0.5f}})));
               }});
  // --- pooling, reductions, softmax, normalisation
  c.push_back({"MaxPool_ceil", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 13, 13});
                 b.Output(b.Add(OpKind::kMaxPool, {x},
                                A({{"kernel_shape", Ints{3, 3}},
                                   {"strides", Ints{2, 2}},
                                   {"ceil_mode", int64_t{1}}})));
               }});
  c.push_back({"AveragePool_pad", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 3, 13, 13});
                 b.Output(b.Add(OpKind::kAveragePool, {x},
                                A({{"kernel_shape", Ints{3, 3}},
                                   {"pads", Ints{1, 1, 1, 1}},
                                   {"count_include_pad", int64_t{1}}})));
                 b.Output(b.Add(OpKind::kAveragePool, {x},
                                A({{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}})));
               }});
  c.push_back({"GlobalAveragePool", [](Builder &b) {
                 TensorId x = b.Input("x", {1, 13, 7, 3});
                 b.Output(b.Add(OpKind::kGlobalAveragePool, {x}));
               }});
  for (OpKind op : {OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceSumSquare,
                    OpKind::kReduceLogSumExp})
    c.push_back({std::string(OpName(op)), [op](Builder &b) {
                   TensorId x = b.Input("x", {3, 13, 7});
                   b.Output(b.Add(op, {x}, A({{"axes", Ints{0, 2}}, {"keepdims", int64_t{1}}})));
                 }});
  c.push_back(
      {"ReduceSum_axes_input", [](Builder &b) {
         TensorId x = b.Input("x", {3, 13, 7});
         b.Output(b.Add(OpKind::kReduceSum, {x, b.Ints({-1})}, A({{"keepdims", int64_t{0}}})));
       }});
  c.push_back({"ArgMax", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 13});
                 b.Output(b.Add(OpKind::kArgMax, {x}, A({{"axis", int64_t{1}}})));
               }});
  c.push_back({"Softmax", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 13, 7}, -5.f, 5.f);
                 b.Output(b.Add(OpKind::kSoftmax, {x}, A({{"axis", int64_t{1}}})));
                 b.Output(b.Add(OpKind::kLogSoftmax, {x}));
               }});
  c.push_back({"LayerNormalization", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 127});
                 TensorId s = b.Weights({127});
                 TensorId bias = b.Weights({127});
                 b.Output(b.Add(OpKind::kLayerNormalization, {x, s, bias}));
               }});
  c.push_back({"BatchNormalization", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 3, 13});
                 TensorId s = b.Weights({3}), bias = b.Weights({3}), m = b.Weights({3});
                 TensorId v = b.Weights({3}, 0.5f, 2.f);
                 b.Output(b.Add(OpKind::kBatchNormalization, {x, s, bias, m, v}));
               }});
  // --- layout
  c.push_back({"Transpose", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 13, 7});
                 b.Output(b.Add(OpKind::kTranspose, {x}, A({{"perm", Ints{2, 0, 1}}})));
               }});
  c.push_back({"Slice_negative_step", [](Builder &b) {
                 TensorId x = b.Input("x", {13, 7});
                 b.Output(b.Add(OpKind::kSlice, {x, b.Ints({-2, 1}), b.Ints({0, 7}), b.Ints({0, 1}),
                                                 b.Ints({-3, 2})}));
               }});
  c.push_back(
      {"Concat_Split", [](Builder &b) {
         TensorId x = b.Input("x", {3, 13});
         TensorId y = b.Input("y", {3, 1});
         TensorId cat = b.Add(OpKind::kConcat, {x, y}, A({{"axis", int64_t{1}}}));
         TensorId s0 = b.Add(OpKind::kSplit, {cat, b.Ints({4, 10})}, A({{"axis", int64_t{-1}}}), 2);
         b.Output(s0);
         b.Output(s0 + 1);
       }});
  c.push_back({"Concat_three_inputs_middle_axis", [](Builder &b) {
                 TensorId x = b.Input("x", {2, 3, 5});
                 TensorId y = b.Input("y", {2, 1, 5});
                 TensorId z = b.Input("z", {2, 4, 5});
                 b.Output(b.Add(OpKind::kConcat, {x, y, z, x}, A({{"axis", int64_t{1}}})));
               }});
  for (const char *mode : {"constant", "reflect", "edge"})
    c.push_back({std::string("Pad_") + mode, [mode](Builder &b) {
                   TensorId x = b.Input("x", {3, 13});
                   b.Output(b.Add(OpKind::kPad, {x, b.Ints({1, 2, 2, 1})},
                                  A({{"mode", std::string(mode)}})));
                 }});
  c.push_back({"Tile_Expand", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 1});
                 b.Output(b.Add(OpKind::kTile, {x, b.Ints({2, 13})}));
                 b.Output(b.Add(OpKind::kExpand, {x, b.Ints({2, 3, 7})}));
               }});
  c.push_back({"Gather", [](Builder &b) {
                 TensorId x = b.Input("x", {13, 3, 7});
                 TensorId ind = b.Const(MakeInt64Constant({0, -1, 5, 12, 3, 3}, Shape({2, 3})));
                 b.Output(b.Add(OpKind::kGather, {x, ind}, A({{"axis", int64_t{0}}})));
                 b.Output(b.Add(OpKind::kGather, {x, b.Ints({2})}, A({{"axis", int64_t{2}}})));
               }});
  c.push_back({"Reshape_chain_to_output", [](Builder &b) {
                 TensorId x = b.Input("x", {3, 13});
                 TensorId r = b.Add(OpKind::kRelu, {x});
                 b.Output(b.Add(OpKind::kReshape, {r, b.Ints({13, 3})}));
                 b.Output(b.Add(OpKind::kFlatten, {x}, A({{"axis", int64_t{0}}})));
               }});
  for (const char *mode : {"nearest", "linear"})
    c.push_back(
        {std::string("Resize_") + mode, [mode](Builder &b) {
           TensorId x = b.Input("x", {1, 3, 7, 13});
           TensorId scales = b.Const(MakeFloatConstant({1, 1, 2, 0.5f}, Shape({4})));
           TensorId roi = b.Const(MakeFloatConstant({}, Shape({0})));
           b.Output(b.Add(OpKind::kResize, {x, roi, scales}, A({{"mode", std::string(mode)}})));
         }});
  return c;
}

class OpsOnDevice : public ::testing::TestWithParam<std::tuple<size_t, Precision>> {};

TEST_P(OpsOnDevice, MatchesReference) {
  static const std::vector<Case> cases = Cases();
  auto [i, precision] = GetParam();
  Builder b;
  cases[i].build(b);
  ExpectMatchesReference(b, precision, precision == Precision::kFp32 ? 1e-4f : 2e-2f,
                         cases[i].name);
}

// An elementwise chain with a fused quantizer (FuseQuantizeIntoChain's node): (x + r) * 0.5,
// stored as float and quantized with a constant scale and zero point, exactly as the reference
// quantizes the float. Same-shape inputs take the CPU profile's 16-lane body (246 elements: 15
// vectors and a tail of 6); a broadcast input takes the one-element body. The scales put values
// past both saturation bounds.
TEST(QuantizingChain, MatchesReference) {
  for (int variant = 0; variant < 2; variant++) {
    const bool vec = variant == 0;
    Builder b;
    TensorId x = b.Input("x", {2, 3, 41});
    TensorId r = b.Input("r", vec ? Shape({2, 3, 41}) : Shape({41}));
    TensorId s = b.Const(MakeFloatConstant({vec ? 0.01f : 0.0075f}, Shape({})));
    Bytes zb{static_cast<uint8_t>(vec ? 120 : static_cast<uint8_t>(int8_t{-3}))};
    TensorId z = b.Const(MakeConstant(vec ? DType::kUInt8 : DType::kInt8, Shape({}), zb));
    Attributes at;
    at.Set("ops", std::vector<std::string>{"Add", "Mul"});
    at.Set("operand", Ints{1, -1});
    at.Set("swap", Ints{0, 0});
    at.Set("step_alpha", std::vector<float>{0.f, 0.5f});
    at.Set("step_beta", std::vector<float>{0.f, 0.f});
    at.Set("quantize", int64_t{1});
    at.Set("quantize_inputs", int64_t{2});
    TensorId y = b.Add(OpKind::kElementwiseChain, {x, r, s, z}, at, 2);
    b.Output(y);
    b.Output(y + 1);  // the quantized copy (Builder::Add makes the outputs in order)
    ExpectMatchesReference(b, Precision::kFp32, 1e-6f,
                           vec ? "QuantizingChain_vector" : "QuantizingChain_broadcast");
  }
}

// A chain that begins with a Cast of bytes (FuseElementwiseChains' node for a camera frame's
// normalisation): uint8 and int8 inputs converted as the CPU profile's 16-lane body loads them
// (246 elements: 15 vectors and a tail of 6), (x * 2/255 - 1) + r, with and without a fused
// quantizer; every byte value occurs.
TEST(ByteChain, MatchesReference) {
  for (DType bytes : {DType::kUInt8, DType::kInt8})
    for (bool quantize : {false, true}) {
      Builder b;
      Bytes px(246);
      for (size_t i = 0; i < px.size(); i++)
        px[i] = static_cast<uint8_t>(i * 37 + 11);
      TensorId x = b.InputTyped("x", bytes, Shape({2, 3, 41}), px);
      TensorId r = b.Input("r", Shape({2, 3, 41}), -0.5f, 0.5f);
      Attributes at;
      at.Set("ops", std::vector<std::string>{"Mul", "Sub", "Add"});
      at.Set("operand", Ints{-1, -1, 1});
      at.Set("swap", Ints{0, 0, 0});
      at.Set("step_alpha", std::vector<float>{2.f / 255.f, 1.f, 0.f});
      at.Set("step_beta", std::vector<float>{0.f, 0.f, 0.f});
      at.Set("to", int64_t{1});
      std::vector<TensorId> in = {x, r};
      if (quantize) {
        at.Set("quantize", int64_t{1});
        at.Set("quantize_inputs", int64_t{2});
        in.push_back(b.Const(MakeFloatConstant({0.0078125f}, Shape({}))));
        in.push_back(b.Const(MakeConstant(DType::kUInt8, Shape({}), Bytes{128})));
      }
      TensorId y = b.Add(OpKind::kElementwiseChain, in, at, quantize ? 2 : 1);
      b.Output(y);
      if (quantize)
        b.Output(y + 1);
      ExpectMatchesReference(b, Precision::kFp32, 1e-6f,
                             std::string(bytes == DType::kUInt8 ? "uint8" : "int8") +
                                 (quantize ? " chain, quantized" : " chain"));
    }
}

// A float16 model compiled with fp32 storage computes in float32 throughout: its constants
// widen exactly, its intermediates are not rounded to half, and only an explicit Cast to
// float16 rounds. The twin states that arithmetic in float32 ops; half storage of the
// intermediates would miss the bar by the rounding of the convolution's output (~3e-4 measured).
TEST(HalfModel, Fp32StorageComputesInFloat32) {
  Rng rng(3);
  std::vector<float> wv(5 * 3 * 3 * 3), bv(5);
  for (float &v : wv)
    v = HalfToFloat(FloatToHalf(rng.Uniform(-1, 1)));
  for (float &v : bv)
    v = HalfToFloat(FloatToHalf(rng.Uniform(-1, 1)));
  auto half_const = [](Builder &b, const std::vector<float> &v, Shape shape) {
    Bytes bytes(v.size() * 2);
    for (size_t i = 0; i < v.size(); i++) {
      uint16_t h = FloatToHalf(v[i]);
      bytes[2 * i] = static_cast<uint8_t>(h & 0xff);
      bytes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return b.Const(MakeConstant(DType::kFloat16, shape, std::move(bytes)));
  };
  const Attributes pads = A({{"pads", Ints{1, 1, 1, 1}}});
  Builder half;
  {
    TensorId x = half.Input("x", {1, 3, 9, 21});
    TensorId h = half.Add(OpKind::kCast, {x}, A({{"to", int64_t{10}}}));
    TensorId c = half.Add(OpKind::kConv, {h, half_const(half, wv, Shape({5, 3, 3, 3}))}, pads);
    TensorId a = half.Add(OpKind::kAdd, {c, half_const(half, bv, Shape({1, 5, 1, 1}))});
    TensorId r = half.Add(OpKind::kRelu, {a});
    half.Output(half.Add(OpKind::kCast, {r}, A({{"to", int64_t{1}}})));
  }
  Builder twin;
  {
    TensorId x = twin.Input("x", {1, 3, 9, 21});
    TensorId h = twin.Add(OpKind::kCast, {x}, A({{"to", int64_t{10}}}));
    TensorId f = twin.Add(OpKind::kCast, {h}, A({{"to", int64_t{1}}}));
    TensorId c =
        twin.Add(OpKind::kConv, {f, twin.Const(MakeFloatConstant(wv, Shape({5, 3, 3, 3})))}, pads);
    TensorId a =
        twin.Add(OpKind::kAdd, {c, twin.Const(MakeFloatConstant(bv, Shape({1, 5, 1, 1})))});
    twin.Output(twin.Add(OpKind::kRelu, {a}));
  }
  ExpectMatchesReference(half, Precision::kFp32, 1e-5f, "float16 model, fp32 storage", &twin);
}

// At float32 storage a float16 product's value is held in float32, so the Cast of the model's
// output to float32 is no launch: the product writes the output buffer itself. At float16
// storage the Cast widens half values, one launch. Both match the interpreter (at fp32 storage
// on the model's float32 twin, as everywhere).
TEST(HalfModel, AWideningOutputCastIsNoLaunchAtFp32Storage) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    Builder b;
    TensorId x = b.Input("x", {1, 25, 24});
    TensorId h = b.Add(OpKind::kCast, {x}, A({{"to", int64_t{10}}}));
    Tensor w = MakeFloatConstant(std::vector<float>(24 * 16, 0.25f), Shape({24, 16}));
    TensorId wh = b.Add(OpKind::kCast, {b.Const(w)}, A({{"to", int64_t{10}}}));
    TensorId m = b.Add(OpKind::kMatMul, {h, wh});
    b.Output(b.Add(OpKind::kCast, {m}, A({{"to", int64_t{1}}})));
    ASSERT_TRUE(InferShapes(b.g).ok());
    Graph g = b.g;
    ASSERT_TRUE(OptimizeGraph(g).ok());
    auto model = GenerateCode(g, OptionsForDevice(dev.device->caps(), p));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    // The input's rounding Cast, the product, and at fp16 the output's widening.
    EXPECT_EQ(model->kernels.size(), p == Precision::kFp32 ? 2u : 3u) << PrecisionName(p);
    if (p == Precision::kFp16) {
      ExpectMatchesReference(b, p, 2e-2f, "fp16");
      continue;
    }
    Builder twin;  // float32 storage computes in float32: the model's float32 twin is the oracle
    TensorId tx = twin.Input("x", {1, 25, 24});
    TensorId th = twin.Add(OpKind::kCast, {tx}, A({{"to", int64_t{10}}}));
    TensorId tf = twin.Add(OpKind::kCast, {th}, A({{"to", int64_t{1}}}));
    twin.Output(twin.Add(OpKind::kMatMul, {tf, twin.Const(w)}));
    ExpectMatchesReference(b, p, 1e-6f, "fp32", &twin);
  }
}

// A Cast to float16 held in float32 storage rounds every value as the interpreter does (the
// CPU profile's 16-lane kernel and its scalar tail alike): ties to even at every exponent,
// subnormal halves, the overflow threshold 65520, infinities, NaN (tolerance 0: equal values).
TEST(Cast, RoundsToHalfLikeTheInterpreterInBlocksAndTail) {
  std::vector<float> x;
  Rng rng(9);
  for (int i = 0; i < 4000; i++)
    x.push_back(rng.Uniform(-70000.f, 70000.f) * std::pow(2.f, -static_cast<float>(i % 40)));
  for (int e = -26; e <= 16; e++)  // halfway between neighbouring halves, and either side
    for (float m : {1.0f, 1.5f, 1.25f, 1.75f})
      for (float d : {-1.f, 0.f, 1.f}) {
        const float half_ulp = std::ldexp(1.f, std::max(e, -14) - 11);
        const float v = std::ldexp(m, e) + half_ulp + d * std::ldexp(half_ulp, -12);
        x.push_back(v);
        x.push_back(-v);
      }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {std::nanf(""), inf, -inf, 0.f, -0.f, 65504.f, 65519.996f, 65520.f, -65520.f,
                  6.1035156e-05f, 6.1035152e-05f, 2.9802322e-08f, 2.9802326e-08f, 5.96e-08f})
    x.push_back(v);
  x.resize(x.size() / 16 * 16 + 7, 0.33333334f);  // a tail of 7 after whole blocks of 16
  Bytes bytes(x.size() * sizeof(float));
  std::memcpy(bytes.data(), x.data(), bytes.size());
  Builder b;
  TensorId in = b.InputTyped("x", DType::kFloat32, Shape({static_cast<int64_t>(x.size())}), bytes);
  TensorId h = b.Add(OpKind::kCast, {in}, A({{"to", int64_t{10}}}));
  b.Output(b.Add(OpKind::kCast, {h}, A({{"to", int64_t{1}}})));
  ExpectMatchesReference(b, Precision::kFp32, 0.0f, "Cast to float16");
}

// The CPU profile's Concat copies rows 16 values at a time and rounds to half the inputs that
// are rounding Casts read by it alone (the Casts get no launch): equal to the interpreter's
// values (tolerance 0) on rows with 16-value blocks and tails, ties at many exponents, and an
// input whose Cast has another reader (kept, and not rounded twice).
TEST(Concat, RoundsTheCastsItFoldsLikeTheInterpreter) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  Rng rng(21);
  Builder b;
  auto input = [&](const char *name, int64_t w) {
    const Shape shape({2, 3, w});
    std::vector<float> x;
    for (int64_t i = 0; i < shape.NumElements(); i++) {
      const float m = rng.Uniform(1.f, 2.f);
      // Every third value halfway between two neighbouring halves (a tie), the others random.
      const float tie = 1.f + std::ldexp(2.f * std::floor(m * 512.f) + 1.f, -11);
      const float v = std::ldexp(i % 3 == 0 ? tie : m, static_cast<int>(i % 30) - 16);
      x.push_back(i % 2 ? -v : v);
    }
    Bytes bytes(x.size() * sizeof(float));
    std::memcpy(bytes.data(), x.data(), bytes.size());
    return b.InputTyped(name, DType::kFloat32, shape, bytes);
  };
  const Attributes to_half = A({{"to", int64_t{10}}});
  TensorId h1 = b.Add(OpKind::kCast, {input("x1", 37)}, to_half);  // two blocks and a tail of 5
  TensorId h2 = b.Add(OpKind::kCast, {input("x2", 16)}, to_half);  // one block
  TensorId h3 = b.Add(OpKind::kCast, {input("x3", 9)}, to_half);   // a tail; read twice
  TensorId cat = b.Add(OpKind::kConcat, {h1, h3, h2}, A({{"axis", int64_t{2}}}));
  b.Output(b.Add(OpKind::kCast, {cat}, A({{"to", int64_t{1}}})));
  b.Output(b.Add(OpKind::kCast, {h3}, A({{"to", int64_t{1}}})));
  ASSERT_TRUE(InferShapes(b.g).ok());
  auto model = GenerateCode(b.g, OptionsForDevice(dev.device->caps(), Precision::kFp32));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  if (dev.device->caps().profile == cl::Profile::kCpu) {
    // Of the three rounding Casts only h3's (read twice) is launched.
    std::string labels;
    const int rounding = LaunchesOf(
        *model, b.g,
        [&](const Node &n) {
          return n.op == OpKind::kCast && b.g.tensor(n.outputs[0]).dtype == DType::kFloat16;
        },
        &labels);
    EXPECT_EQ(rounding, 1) << labels;
  }
  ExpectMatchesReference(b, Precision::kFp32, 0.0f, "Concat of rounding Casts");
}

// The CPU profile's Concat computes a ReduceMean it alone reads, over one axis with only ones
// before it (the policies' mean over time, [1, 25, C] -> [1, C]): the mean gets no launch, and
// its values equal, bit for bit, those of the same graph where the mean is also an output (so
// the reduce kernel computes it), and the interpreter's within float rounding; a mean over an
// axis with other sizes before it keeps its kernel.
TEST(Concat, ComputesTheMeansItFoldsLikeTheReduceKernel) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  auto build = [](Builder &b, bool mean_out) {
    TensorId x = b.Add(OpKind::kRelu, {b.Input("x", Shape({1, 25, 37}))});  // blocks and a tail
    TensorId z = b.Input("z", Shape({2, 3, 37}));
    const Attributes over_time = A({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
    TensorId mean = b.Add(OpKind::kReduceMean, {x}, over_time);
    TensorId kept = b.Add(OpKind::kReduceMean, {z}, over_time);  // 2 x 37 means: not folded
    TensorId flat =
        b.Add(OpKind::kReshape, {kept, b.Const(MakeInt64Constant({1, 74}, Shape({2})))});
    b.Output(b.Add(OpKind::kConcat, {mean, flat, b.Input("w", Shape({1, 5}))},
                   A({{"axis", int64_t{1}}})));
    if (mean_out)
      b.Output(mean);
    ASSERT_TRUE(InferShapes(b.g).ok());
  };
  Builder b, kernel;
  build(b, false);
  build(kernel, true);
  const CodegenOptions opt = OptionsForDevice(dev.device->caps(), Precision::kFp32);
  auto model = GenerateCode(b.g, opt);
  auto kernel_model = GenerateCode(kernel.g, opt);
  ASSERT_TRUE(model.ok() && kernel_model.ok());
  if (dev.device->caps().profile == cl::Profile::kCpu) {
    std::string labels;
    const int means = LaunchesOf(
        *model, b.g, [](const Node &n) { return n.op == OpKind::kReduceMean; }, &labels);
    EXPECT_EQ(means, 1) << labels;  // z's
  }
  auto folded = Executor::Create(dev.device, std::move(*model));
  auto reduced = Executor::Create(dev.device, std::move(*kernel_model));
  ASSERT_TRUE(folded.ok() && reduced.ok());
  auto a = (*folded)->RunHost(dev.queue, b.feeds);
  auto r = (*reduced)->RunHost(dev.queue, b.feeds);  // the same inputs
  ASSERT_TRUE(a.ok() && r.ok());
  ASSERT_EQ((*a)[0].data->size(), (*r)[0].data->size());
  EXPECT_EQ(std::memcmp((*a)[0].data->data(), (*r)[0].data->data(), (*a)[0].data->size()), 0)
      << "the folded means differ from the reduce kernel's";
  ExpectMatchesReference(b, Precision::kFp32, 1e-6f, "Concat of means");
}

// A Gather of one constant index along an axis with only ones before it reads a contiguous part
// of its input: no launch, its readers take that part at its offset (the policies' last time
// step), also through a Reshape and as a graph output (copied out). A Gather whose part is not
// contiguous keeps its kernel. Equal to the interpreter's values.
TEST(Gather, OfOneIndexWithOnesBeforeItIsAView) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  Builder b;
  TensorId x = b.Input("x", Shape({1, 25, 24}));
  TensorId h = b.Add(OpKind::kRelu, {x});  // an arena tensor
  const Attributes on_time = A({{"axis", int64_t{1}}});
  TensorId last = b.Add(OpKind::kGather, {h, b.Const(MakeInt64Constant({24}, Shape({})))}, on_time);
  TensorId third = b.Add(OpKind::kGather, {x, b.Const(MakeInt64Constant({-3}, Shape({1})))},
                         on_time);  // of the graph input, negative, kept as [1, 1, 24]
  TensorId column = b.Add(OpKind::kGather, {h, b.Const(MakeInt64Constant({2}, Shape({})))},
                          A({{"axis", int64_t{2}}}));  // 25 values 24 apart: not contiguous
  b.Output(b.Add(OpKind::kAdd, {last, last}));
  b.Output(b.Add(OpKind::kReshape, {third, b.Const(MakeInt64Constant({24}, Shape({1})))}));
  b.Output(b.Add(OpKind::kMul, {column, column}));
  ASSERT_TRUE(InferShapes(b.g).ok());
  auto model = GenerateCode(b.g, OptionsForDevice(dev.device->caps(), Precision::kFp32));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::string labels;
  const int gathers = LaunchesOf(
      *model, b.g, [](const Node &n) { return n.op == OpKind::kGather; }, &labels);
  EXPECT_EQ(gathers, 1) << labels;  // the column's
  ExpectMatchesReference(b, Precision::kFp32, 0.0f, "Gather views");
}

// The value a kernel source of `model` gives the macro `name` (`#define name value`), or "" where
// none defines it.
std::string DefinedIn(const CompiledModel &model, const std::string &name) {
  const std::string key = "#define " + name + " ";
  for (const std::string &src : model.sources) {
    const size_t at = src.find(key);
    if (at != std::string::npos)
      return src.substr(at + key.size(), src.find('\n', at) - at - key.size());
  }
  return "";
}

// `g` compiled with `opt` and run on the test device with `feeds`: its outputs (none after a
// failure, which it reports), its launches and their labels.
std::vector<Tensor> RunCompiled(const Graph &g, const std::vector<Tensor> &feeds,
                                const CodegenOptions &opt, size_t *launches, std::string *labels) {
  Device &dev = TestDevice();
  auto model = GenerateCode(g, opt);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok())
    return {};
  *launches = model->kernels.size();
  for (const KernelDesc &k : model->kernels)
    *labels += k.label + "; ";
  auto exec = Executor::Create(dev.device, std::move(*model));
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok())
    return {};
  auto out = (*exec)->RunHost(dev.queue, feeds);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// The CPU profile runs a chain of small matrix products as one launch (kernels/matvec_chain.cl):
// a policy's head (three products with biases and Relus, 998 outputs); an MLP on each of 25 or 7
// rows with the input added back before or after the activation (a residual of anything else
// ends the chain); and MatMul / Gemm links with alpha, beta, a Tanh and widths that are not whole
// vectors (21, 19, 5), and a chain that copies its input row from a Concat's parts itself (a mean
// over time, the last step, an input). Each against the interpreter, and against the same graph
// compiled with the products launched one by one: equal bit for bit, as the kernel sums and
// finishes in matmul_vec's order. A link with an activation of no vector form (Sigmoid), or an
// output the graph also gives, ends a chain.
TEST(ProductFusions, AChainIsOneLaunchEqualToTheProductsBitForBit) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  auto cpu = OptionsForProfile("cpu", Precision::kFp32);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  // Weights of a trained network's scale (sums of a hundred terms stay near 1).
  auto W = [](Builder &b, Shape s) { return b.Weights(std::move(s), -0.15f, 0.15f); };
  const Attributes relu_t = A({{"transB", int64_t{1}}, {"activation", std::string("Relu")}});
  const struct {
    const char *name;
    std::function<void(Builder &)> build;
    size_t launches;  // with chains
    bool chained;
  } cases[] = {
      {"a policy's head",
       [&](Builder &b) {
         TensorId x = b.Input("x", {1, 130});
         TensorId h = b.Add(OpKind::kFusedGemm, {x, W(b, {128, 130}), W(b, {128})}, relu_t);
         h = b.Add(OpKind::kFusedGemm, {h, W(b, {128, 128}), W(b, {128})}, relu_t);
         b.Output(
             b.Add(OpKind::kGemm, {h, W(b, {998, 128}), W(b, {998})}, A({{"transB", int64_t{1}}})));
       },
       1, true},
      {"MatMul, Gemm with alpha, beta and Tanh, MatMul",
       [&](Builder &b) {
         TensorId x = b.Input("x", {1, 37});
         TensorId h = b.Add(OpKind::kMatMul, {x, W(b, {37, 21})});
         h = b.Add(OpKind::kFusedGemm, {h, W(b, {21, 19}), W(b, {19})},
                   A({{"alpha", 0.5f}, {"beta", 2.f}, {"activation", std::string("Tanh")}}));
         b.Output(b.Add(OpKind::kMatMul, {h, W(b, {19, 5})}));
       },
       1, true},
      {"from a Concat of a mean over time, the last step and an input",
       [&](Builder &b) {
         TensorId x = b.Input("x", {1, 5, 40});
         TensorId h = b.Add(OpKind::kRelu, {x});  // an arena tensor, as a policy's features
         TensorId mean =
             b.Add(OpKind::kReduceMean, {h}, A({{"axes", Ints{1}}, {"keepdims", int64_t{0}}}));
         TensorId last = b.Add(OpKind::kGather, {h, b.Const(MakeInt64Constant({4}, Shape({})))},
                               A({{"axis", int64_t{1}}}));
         TensorId cat =
             b.Add(OpKind::kConcat, {mean, last, b.Input("t", {1, 2})}, A({{"axis", int64_t{1}}}));
         TensorId y = b.Add(OpKind::kFusedGemm, {cat, W(b, {24, 82}), W(b, {24})}, relu_t);
         b.Output(b.Add(OpKind::kGemm, {y, W(b, {24, 16})}));
       },
       2, true},  // the Relu, and the chain with the Concat
      {"an MLP on each of 25 rows, the input added back",
       [&](Builder &b) {
         TensorId x = b.Input("x", {1, 25, 64});
         TensorId h = b.Add(OpKind::kFusedGemm, {x, W(b, {64, 128}), W(b, {128})},
                            A({{"activation", std::string("Relu")}}));
         b.Output(b.Add(OpKind::kFusedGemm, {h, W(b, {128, 64}), W(b, {64}), x}));
       },
       1, true},
      {"7 rows of 37, Tanh, the input added after it",
       [&](Builder &b) {
         TensorId x = b.Input("x", {7, 37});
         TensorId h = b.Add(OpKind::kMatMul, {x, W(b, {37, 21})});
         b.Output(b.Add(
             OpKind::kFusedGemm, {h, W(b, {21, 37}), W(b, {37}), x},
             A({{"activation", std::string("Tanh")}, {"residual_after_activation", int64_t{1}}})));
       },
       1, true},
      {"a residual that is not the chain's input",
       [&](Builder &b) {
         TensorId x = b.Input("x", {3, 16});
         TensorId h = b.Add(OpKind::kMatMul, {x, W(b, {16, 16})});
         b.Output(
             b.Add(OpKind::kFusedGemm, {h, W(b, {16, 16}), W(b, {16}), b.Input("z", {3, 16})}));
       },
       2, false},
      {"a Sigmoid between",
       [&](Builder &b) {
         TensorId x = b.Input("x", {1, 40});
         TensorId h = b.Add(OpKind::kFusedGemm, {x, W(b, {24, 40}), W(b, {24})},
                            A({{"transB", int64_t{1}}, {"activation", std::string("Sigmoid")}}));
         b.Output(b.Add(OpKind::kGemm, {h, W(b, {24, 16})}));
       },
       2, false},
      {"an output between",
       [&](Builder &b) {
         TensorId x = b.Input("x", {1, 40});
         TensorId h = b.Add(OpKind::kFusedGemm, {x, W(b, {24, 40}), W(b, {24})}, relu_t);
         b.Output(h);
         b.Output(b.Add(OpKind::kGemm, {h, W(b, {24, 16})}));
       },
       2, false},
  };
  // AVX-512's blocking (16 lanes, 32 registers) and AVX2's (8 and 16: 2-row blocks), whatever
  // the processor at hand.
  CodegenOptions avx2 = *cpu;
  avx2.simd_lanes = 8;
  avx2.simd_registers = 16;
  for (const CodegenOptions &opt : {*cpu, avx2})
    for (const auto &c : cases) {
      SCOPED_TRACE(std::string(c.name) + ", " + std::to_string(opt.simd_lanes) + " lanes");
      Builder b;
      c.build(b);
      ASSERT_TRUE(InferShapes(b.g).ok());
      CodegenOptions apart = opt;
      apart.fuse_products = false;
      size_t n_chain = 0, n_apart = 0;
      std::string labels, labels_apart;
      const std::vector<Tensor> fused = RunCompiled(b.g, b.feeds, opt, &n_chain, &labels);
      const std::vector<Tensor> each = RunCompiled(b.g, b.feeds, apart, &n_apart, &labels_apart);
      EXPECT_EQ(n_chain, c.launches) << labels;
      EXPECT_EQ(labels.find("MatVecChain") != std::string::npos, c.chained) << labels;
      EXPECT_EQ(("; " + labels).find("; Concat "), std::string::npos) << "a Concat's own launch";
      EXPECT_EQ(labels_apart.find("MatVecChain"), std::string::npos) << labels_apart;
      ASSERT_EQ(fused.size(), each.size());
      for (size_t o = 0; o < fused.size(); o++) {
        ASSERT_TRUE(fused[o].data && each[o].data);
        EXPECT_EQ(*fused[o].data, *each[o].data) << "output " << o << " differs from the products'";
      }
      ExpectMatchesReference(b, Precision::kFp32, 1e-5f, c.name, nullptr, &opt);
    }
}

// The CPU profile's product copies the rows of a Concat it alone reads (matmul_vec's A_CAT): a
// small policy's first layer, its features and desire rounded to half (float16 Casts at float32
// storage), the Concat and the Casts no launch of their own. Equal bit for bit to the same graph
// with the Concat launched, and to the interpreter on the float32 twin.
TEST(ProductFusions, AProductCopiesTheRowsOfAConcatOfRoundingCasts) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  auto cpu = OptionsForProfile("cpu", Precision::kFp32);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  std::vector<float> wv(45 * 20);
  for (size_t i = 0; i < wv.size(); i++)  // multiples of 1/64: float16 holds them exactly
    wv[i] = static_cast<float>(static_cast<int>(i * 37 % 129) - 64) / 64.f;
  const Tensor w = MakeFloatConstant(wv, Shape({45, 20}));
  const Attributes to_half = A({{"to", int64_t{10}}}), to_float = A({{"to", int64_t{1}}});
  Builder b;
  TensorId f = b.Input("features", {1, 25, 37});  // two blocks of 16 and a tail of 5
  TensorId d = b.Input("desire", {1, 25, 8});
  TensorId cat = b.Add(OpKind::kConcat,
                       {b.Add(OpKind::kCast, {f}, to_half), b.Add(OpKind::kCast, {d}, to_half)},
                       A({{"axis", int64_t{2}}}));
  TensorId wh = b.Add(OpKind::kCast, {b.Const(w)}, to_half);
  b.Output(b.Add(OpKind::kCast, {b.Add(OpKind::kMatMul, {cat, wh})}, to_float));
  ASSERT_TRUE(InferShapes(b.g).ok());
  Graph g = b.g;
  ASSERT_TRUE(OptimizeGraph(g).ok());
  CodegenOptions avx2 = *cpu;  // AVX2's blocking too, whatever the processor at hand
  avx2.simd_lanes = 8;
  avx2.simd_registers = 16;
  for (const CodegenOptions &opt : {*cpu, avx2}) {
    SCOPED_TRACE(std::to_string(opt.simd_lanes) + " lanes");
    CodegenOptions apart = opt;
    apart.fuse_products = false;
    size_t n_fused = 0, n_apart = 0;
    std::string labels, labels_apart;
    const std::vector<Tensor> fused = RunCompiled(g, b.feeds, opt, &n_fused, &labels);
    const std::vector<Tensor> each = RunCompiled(g, b.feeds, apart, &n_apart, &labels_apart);
    EXPECT_EQ(n_fused, 1u) << labels;
    EXPECT_NE(labels.find("(and Concat"), std::string::npos) << labels;
    EXPECT_EQ(n_apart, 2u) << labels_apart;  // the Concat (with the Casts), the product
    ASSERT_EQ(fused.size(), 1u);
    ASSERT_EQ(each.size(), 1u);
    ASSERT_TRUE(fused[0].data && each[0].data);
    EXPECT_EQ(*fused[0].data, *each[0].data) << "differs from the Concat launched";
  }
  Builder twin;  // float32 storage computes in float32: the model's float32 twin is the oracle
  TensorId tf =
      twin.Add(OpKind::kCast,
               {twin.Add(OpKind::kCast, {twin.Input("features", {1, 25, 37})}, to_half)}, to_float);
  TensorId td =
      twin.Add(OpKind::kCast,
               {twin.Add(OpKind::kCast, {twin.Input("desire", {1, 25, 8})}, to_half)}, to_float);
  twin.Output(
      twin.Add(OpKind::kMatMul,
               {twin.Add(OpKind::kConcat, {tf, td}, A({{"axis", int64_t{2}}})), twin.Const(w)}));
  ExpectMatchesReference(b, Precision::kFp32, 1e-6f, "fp32", &twin, &*cpu);
}

// The CPU profile gives kernels of one template that differ only in their epilogue one program
// (MergeEpilogues: the activation and the residual switched by arguments): a block's 1 x 1
// convolutions (GELU, then the block's residual; and one with neither), its depthwise ones (Relu,
// then a residual after it) and its products (GELU, then a residual). Each output equal bit for
// bit to the same graph compiled with a program per epilogue, and to the interpreter.
TEST(Epilogues, KernelsThatDifferOnlyInTheirEpilogueShareAProgram) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  auto cpu = OptionsForProfile("cpu", Precision::kFp32);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  Attributes gelu = A({{"activation", std::string("Chain")}});
  SetGeluSteps(gelu);
  Builder b;
  TensorId x = b.Input("x", {1, 16, 6, 37});  // rows of two vectors and a partial one
  auto conv1x1 = [&](TensorId in, const Attributes &at, TensorId res) {
    return b.Add(OpKind::kFusedConv, {in, b.Weights({16, 16, 1, 1}), b.Weights({16}), res}, at);
  };
  TensorId h = conv1x1(x, gelu, kNoTensor);
  h = conv1x1(h, Attributes(), x);  // the block's residual, no activation
  h = conv1x1(h, Attributes(), kNoTensor);
  Attributes dw = A({{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{16}}});
  Attributes dw_relu = dw;
  dw_relu.Set("activation", std::string("Relu"));
  Attributes dw_after = dw_relu;
  dw_after.Set("residual_after_activation", int64_t{1});
  TensorId d = b.Add(OpKind::kFusedConv, {h, b.Weights({16, 1, 3, 3}), b.Weights({16})}, dw_relu);
  d = b.Add(OpKind::kFusedConv, {d, b.Weights({16, 1, 3, 3}), b.Weights({16}), h}, dw_after);
  b.Output(d);
  TensorId a = b.Input("a", {1, 11, 40});  // a partial row block
  TensorId m = b.Add(OpKind::kFusedGemm, {a, b.Weights({40, 40}), b.Weights({40})}, gelu);
  b.Output(b.Add(OpKind::kFusedGemm, {m, b.Weights({40, 40}), b.Weights({40}), a}));
  ASSERT_TRUE(InferShapes(b.g).ok());
  CodegenOptions avx2 = *cpu;  // AVX2's blocking too, whatever the processor at hand
  avx2.simd_lanes = 8;
  avx2.simd_registers = 16;
  for (CodegenOptions opt : {*cpu, avx2}) {
    SCOPED_TRACE(std::to_string(opt.simd_lanes) + " lanes");
    opt.fuse_products = false;  // the products as matmul_vec, not one chain
    CodegenOptions apart = opt;
    apart.merge_epilogues = false;
    auto merged_model = GenerateCode(b.g, opt);
    auto apart_model = GenerateCode(b.g, apart);
    ASSERT_TRUE(merged_model.ok() && apart_model.ok());
    ASSERT_EQ(merged_model->kernels.size(), 7u);
    // Apart: three 1 x 1 epilogues, two depthwise and two product ones; merged: one each.
    EXPECT_EQ(apart_model->sources.size(), 7u);
    EXPECT_EQ(merged_model->sources.size(), 3u);
    size_t n_merged = 0, n_apart = 0;
    std::string labels, labels_apart;
    const std::vector<Tensor> merged = RunCompiled(b.g, b.feeds, opt, &n_merged, &labels);
    const std::vector<Tensor> each = RunCompiled(b.g, b.feeds, apart, &n_apart, &labels_apart);
    ASSERT_EQ(merged.size(), 2u);
    ASSERT_EQ(each.size(), 2u);
    for (size_t o = 0; o < merged.size(); o++) {
      ASSERT_TRUE(merged[o].data && each[o].data);
      EXPECT_EQ(*merged[o].data, *each[o].data) << "output " << o << " differs";
    }
    ExpectMatchesReference(b, Precision::kFp32, 1e-4f, "merged epilogues", nullptr, &opt);
  }
}

// On the CPU profile a Transpose, a Split and a Slice are one strided copy that takes its offset,
// strides and output shape as arguments (four axes at least, the divisions by the sizes as magic
// multiplications): a model's copies share one program whatever their shapes and ranks. Shapes
// of powers of two, of primes, and some of 185,000 and 280,000 elements (indices far past the
// small sizes' divisions), a Slice stepping back, each equal to the interpreter's.
TEST(Maps, StridedCopiesShareAProgramWhateverTheirShapes) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  auto cpu = OptionsForProfile("cpu", Precision::kFp32);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  Builder b;
  const std::vector<std::pair<Shape, Ints>> cases = {
      {Shape({1, 32, 64}), Ints{0, 2, 1}},         {Shape({1, 2, 32, 32}), Ints{0, 2, 1, 3}},
      {Shape({3, 5, 7}), Ints{2, 0, 1}},           {Shape({5, 999, 37}), Ints{1, 2, 0}},
      {Shape({6, 10, 7, 3}), Ints{3, 1, 0, 2}},    {Shape({11, 13}), Ints{1, 0}},
      {Shape({7, 3, 1025, 13}), Ints{2, 3, 0, 1}},
  };
  for (size_t i = 0; i < cases.size(); i++)
    b.Output(b.Add(OpKind::kTranspose, {b.Input("x" + std::to_string(i), cases[i].first)},
                   A({{"perm", cases[i].second}})));
  Node split;  // three parts of a (2, 96, 5) along axis 1: 32 each
  split.op = OpKind::kSplit;
  split.name = "split";
  split.opset = 17;
  split.inputs = {b.Input("s", {2, 96, 5})};
  split.attrs = A({{"axis", int64_t{1}}});
  for (int j = 0; j < 3; j++) {
    Tensor part;
    part.name = "part" + std::to_string(j);
    split.outputs.push_back(b.g.AddTensor(part));
  }
  b.g.nodes.push_back(split);
  for (TensorId t : split.outputs)
    b.Output(t);
  // rows 9, 7, ..., 1 of a (3, 11, 17) and every other column from 1
  b.Output(b.Add(OpKind::kSlice, {b.Input("l", {3, 11, 17}), b.Ints({9, 1}), b.Ints({0, 17}),
                                  b.Ints({1, 2}), b.Ints({-2, 2})}));
  ASSERT_TRUE(InferShapes(b.g).ok());
  auto model = GenerateCode(b.g, *cpu);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->kernels.size(), cases.size() + 4);
  EXPECT_EQ(model->sources.size(), 1u);
  ExpectMatchesReference(b, Precision::kFp32, 0.f, "strided copies", nullptr, &*cpu);
}

// `b` compiled with a GPU profile's options: its code defines the split `name` as `split` ("" for
// none), and the device at hand runs that code to the interpreter's values.
void ExpectSplitMatchesReference(Builder &b, const CodegenOptions &gpu, const std::string &name,
                                 const std::string &split, const std::string &what) {
  ASSERT_TRUE(InferShapes(b.g).ok());
  auto model = GenerateCode(b.g, gpu);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(DefinedIn(*model, name), split) << "the " << name << " of its code";
  ExpectMatchesReference(b, Precision::kFp32, 1e-5f, what, nullptr, &gpu);
}

// GPU profiles split a matrix-vector product's K across a work-group (matmul.cl's KSPLIT) and add
// the partial sums in local memory: the amd profile's code, run on the device at hand, against
// the interpreter, with K a multiple of the split or not, B as given or transposed, a bias, a
// residual and a Relu; a product of two rows keeps one work-item per block of columns.
TEST(GpuProducts, MatrixVectorSplitsKAcrossAWorkGroup) {
  auto amd = OptionsForProfile("amd", Precision::kFp32);
  ASSERT_TRUE(amd.ok()) << amd.status().ToString();
  const struct {
    int64_t m, k, n;
    bool trans_b;
    const char *split;  // the KSPLIT its code must define, or "" for none
  } cases[] = {{1, 130, 37, false, "32"},
               {1, 1000, 19, true, "64"},
               {1, 512, 64, false, "64"},
               {1, 100, 5, false, ""},
               {2, 300, 9, false, ""}};
  for (const auto &c : cases) {
    const std::string what = "m " + std::to_string(c.m) + ", k " + std::to_string(c.k) + ", n " +
                             std::to_string(c.n) + (c.trans_b ? ", B transposed" : "");
    SCOPED_TRACE(what);
    Builder b;
    TensorId a = b.Input("a", {c.m, c.k});
    TensorId w = b.Weights(c.trans_b ? Shape({c.n, c.k}) : Shape({c.k, c.n}));
    TensorId bias = b.Weights({c.n});
    TensorId r = b.Input("r", {c.m, c.n});
    b.Output(b.Add(OpKind::kFusedGemm, {a, w, bias, r},
                   A({{"transB", int64_t{c.trans_b}}, {"activation", std::string("Relu")}})));
    ExpectSplitMatchesReference(b, *amd, "KSPLIT", c.split, what);
  }
}

// GPU profiles give a norm's row to a work-group (norm.cl's NSPLIT), its sums added in local
// memory: the amd profile's code, run on the device at hand, against the interpreter, with rows
// a multiple of the split or not, several rows, a row too short to split, and InstanceNorm.
TEST(GpuNorms, RowsSplitAcrossAWorkGroup) {
  auto amd = OptionsForProfile("amd", Precision::kFp32);
  ASSERT_TRUE(amd.ok()) << amd.status().ToString();
  const struct {
    bool instance;
    Shape x;
    const char *split;  // the NSPLIT its code must define, or "" for none
  } cases[] = {{false, Shape({5, 600}), "64"},
               {false, Shape({2, 3, 130}), "32"},
               {false, Shape({4, 512}), "64"},
               {false, Shape({3, 40}), ""},
               {true, Shape({2, 3, 16, 16}), "32"}};
  for (const auto &c : cases) {
    const std::string what =
        std::string(c.instance ? "InstanceNorm " : "LayerNorm ") + c.x.ToString();
    SCOPED_TRACE(what);
    Builder b;
    TensorId x = b.Input("x", c.x);
    const int64_t per = c.instance ? c.x.dims[1] : c.x.dims.back();
    TensorId s = b.Weights({per}), bias = b.Weights({per});
    b.Output(b.Add(c.instance ? OpKind::kInstanceNormalization : OpKind::kLayerNormalization,
                   {x, s, bias}));
    ExpectSplitMatchesReference(b, *amd, "NSPLIT", c.split, what);
  }
}

// The kernels' tanh (nn_tanh in nn_common.cl) against the C library's double tanh, in units in
// the last place of the float32 result, within what its comment states: 1.5 ulps for the CPU
// profile's form (the compiler's exp), one ulp for every other profile's (our exponential, the
// division corrected), over [-12, 12] and small magnitudes down to 1e-8; and the special values:
// NaN stays NaN, +-inf gives +-1, +-0 keeps its sign.
TEST(Tanh, WithinTheUlpsItsProfileStates) {
  std::vector<float> x;
  for (int i = 0; i <= 240000; i++)
    x.push_back(-12.f + 24.f * static_cast<float>(i) / 240000.f);
  for (double v = 1e-8; v < 1.0; v *= 1.001) {
    x.push_back(static_cast<float>(v));
    x.push_back(static_cast<float>(-v));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {std::nanf(""), inf, -inf, 0.f, -0.f, 9.5f, -9.5f, 100.f};
  x.insert(x.end(), special.begin(), special.end());
  Bytes bytes(x.size() * sizeof(float));
  std::memcpy(bytes.data(), x.data(), bytes.size());
  Builder b;
  const Shape shape({static_cast<int64_t>(x.size())});
  TensorId in = b.InputTyped("x", DType::kFloat32, shape, std::move(bytes));
  b.Output(b.Add(OpKind::kTanh, {in}));
  ASSERT_TRUE(InferShapes(b.g).ok());
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  // The device's own code, and the amd profile's (the exact form, whatever the device): both
  // run here.
  auto amd = OptionsForProfile("amd", Precision::kFp32);
  ASSERT_TRUE(amd.ok()) << amd.status().ToString();
  const std::pair<const char *, CodegenOptions> variants[] = {
      {"device", OptionsForDevice(dev.device->caps(), Precision::kFp32)}, {"amd", *amd}};
  for (const auto &[which, options] : variants) {
    SCOPED_TRACE(std::string("code for the ") + which + " profile");
    auto model = GenerateCode(b.g, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto exec = Executor::Create(dev.device, std::move(*model));
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    auto out = (*exec)->RunHost(dev.queue, b.feeds);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 1u);
    const size_t finite = x.size() - special.size();
    double worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < finite; i++) {
      const double want = std::tanh(static_cast<double>(x[i]));
      const float got = ToFloat((*out)[0], i);
      const float w32 = static_cast<float>(std::fabs(want));
      const double ulp = std::nextafter(w32, inf) - w32;
      const double err = std::fabs(static_cast<double>(got) - want) / ulp;
      if (err > worst) {
        worst = err;
        worst_at = i;
      }
    }
    RecordProperty(std::string("worst_ulps_") + which, std::to_string(worst));
    const double bound = options.profile == cl::Profile::kCpu ? 1.5 : 1.0;
    EXPECT_LE(worst, bound) << "at x = " << x[worst_at] << ": " << ToFloat((*out)[0], worst_at);
    std::vector<float> got(special.size());
    for (size_t i = 0; i < special.size(); i++)
      got[i] = ToFloat((*out)[0], finite + i);
    EXPECT_TRUE(std::isnan(got[0]));
    EXPECT_EQ(got[1], 1.f);
    EXPECT_EQ(got[2], -1.f);
    EXPECT_EQ(got[3], 0.f);
    EXPECT_FALSE(std::signbit(got[3]));
    EXPECT_EQ(got[4], 0.f);
    EXPECT_TRUE(std::signbit(got[4]));
    EXPECT_EQ(got[5], 1.f);  // tanh(9.5) = 1 - 1.1e-8 rounds to 1 in float32
    EXPECT_EQ(got[6], -1.f);
    EXPECT_EQ(got[7], 1.f);
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<size_t, Precision>> &info) {
  static const std::vector<Case> cases = Cases();
  return cases[std::get<0>(info.param)].name + "_" + PrecisionName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, OpsOnDevice,
                         ::testing::Combine(::testing::Range<size_t>(0, Cases().size()),
                                            ::testing::Values(Precision::kFp32, Precision::kFp16)),
                         CaseName);

}  // namespace
