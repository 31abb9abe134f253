// Graph passes (see passes.h). Each pass rewrites node lists and tensor ids only; dead tensors
// are dropped by EliminateDeadCode at the end.
#include "nn/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "nn/op_params.h"
#include "nn/reference.h"
#include "nn/reference_ops.h"
#include "nn/shape_inference.h"

namespace op::nn {
namespace {

// Every node that reads tensor id, as indices into graph.nodes.
std::vector<int> Consumers(const Graph &g, TensorId id) {
  std::vector<int> c;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (TensorId i : g.nodes[k].inputs)
      if (i == id) {
        c.push_back(static_cast<int>(k));
        break;
      }
  return c;
}

bool IsGraphOutput(const Graph &g, TensorId id) {
  return std::find(g.outputs.begin(), g.outputs.end(), id) != g.outputs.end();
}

void ReplaceUses(Graph &g, TensorId from, TensorId to) {
  for (Node &n : g.nodes)
    for (TensorId &i : n.inputs)
      if (i == from)
        i = to;
}

// Makes readers of `out` read `in` instead, so the node computing out from in can go. When
// `out` is a graph output it must keep its name: then the producer of `in` writes `out`
// directly (possible when `in` is an ordinary intermediate). Returns false if neither works.
bool Bypass(Graph &g, int node_index, TensorId in, TensorId out) {
  if (!IsGraphOutput(g, out)) {
    ReplaceUses(g, out, in);
    g.nodes.erase(g.nodes.begin() + node_index);
    return true;
  }
  const Tensor &ti = g.tensor(in);
  if (ti.is_constant() || ti.is_input || IsGraphOutput(g, in))
    return false;
  std::vector<int> prod = g.Producers();
  const int p = prod[static_cast<size_t>(in)];
  if (p < 0)
    return false;
  for (TensorId &o : g.nodes[static_cast<size_t>(p)].outputs)
    if (o == in)
      o = out;
  ReplaceUses(g, in, out);
  g.nodes.erase(g.nodes.begin() + node_index);
  return true;
}

bool IsScalarConstant(const Tensor &t) {
  return t.is_constant() && t.shape.NumElements() == 1;
}

double ScalarValue(const Tensor &t) {
  return static_cast<double>(ref::GetReal(t, 0));
}

}  // namespace

namespace {

// The index of the DequantizeLinear node writing t, or -1.
int DequantizeProducer(const Graph &g, const std::vector<int> &producers, TensorId t) {
  if (t == kNoTensor)
    return -1;
  const int p = producers[static_cast<size_t>(t)];
  return p >= 0 && g.nodes[static_cast<size_t>(p)].op == OpKind::kDequantizeLinear ? p : -1;
}

// The only node reading t (read once, not a graph output), or -1.
int OnlyReader(const Graph &g, TensorId t) {
  if (IsGraphOutput(g, t))
    return -1;
  int reader = -1, uses = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (TensorId i : g.nodes[k].inputs)
      if (i == t) {
        ++uses;
        reader = static_cast<int>(k);
      }
  return uses == 1 ? reader : -1;
}

bool IsQuantized(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

// A constant scale or zero point (absent counts: zero), per tensor unless `count` values along
// axis 0 are allowed.
bool ConstantParam(const Graph &g, TensorId t, int64_t count = 1) {
  if (t == kNoTensor)
    return true;
  const Tensor &v = g.tensor(t);
  const int64_t e = v.shape.NumElements();
  return v.is_constant() && (e == 1 || (count > 1 && v.shape.rank() == 1 && e == count));
}

float ParamAt(const Graph &g, TensorId t, int64_t i) {
  if (t == kNoTensor)
    return 0.f;
  const Tensor &v = g.tensor(t);
  return static_cast<float>(
      ref::GetReal(v, v.shape.NumElements() == 1 ? 0 : static_cast<size_t>(i)));
}

// The zero point of a QuantizeLinear/DequantizeLinear, made explicit (QLinearConv needs it).
TensorId ExplicitZeroPoint(Graph &g, TensorId zp, DType dtype, const std::string &name) {
  if (zp != kNoTensor)
    return zp;
  Tensor t = MakeConstant(dtype, Shape{}, Bytes(1, 0));
  t.name = g.UniqueName(name);
  return g.AddTensor(t);
}

}  // namespace

Status FuseQuantizedConv(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    if (graph.nodes[k].op != OpKind::kConv)
      continue;
    const Node conv = graph.nodes[k];
    const std::vector<int> prod = graph.Producers();
    const int dx = DequantizeProducer(graph, prod, conv.input(0));
    const int dw = DequantizeProducer(graph, prod, conv.input(1));
    const int db = conv.input(2) == kNoTensor ? -2 : DequantizeProducer(graph, prod, conv.input(2));
    if (dx < 0 || dw < 0 || db == -1)
      continue;
    const Node nx = graph.nodes[static_cast<size_t>(dx)], nw = graph.nodes[static_cast<size_t>(dw)];
    const Tensor &xq = graph.tensor(nx.inputs[0]), &wq = graph.tensor(nw.inputs[0]);
    if (!IsQuantized(xq.dtype) || !IsQuantized(wq.dtype) || !wq.is_constant() ||
        wq.shape.rank() < 1)
      continue;
    const int64_t m = wq.shape[0];
    if (!ConstantParam(graph, nx.input(1)) || !ConstantParam(graph, nx.input(2)) ||
        !ConstantParam(graph, nw.input(1), m) || !ConstantParam(graph, nw.input(2), m))
      continue;
    if (graph.tensor(nw.inputs[1]).shape.NumElements() != 1 && nw.attrs.Int("axis", 1) != 0)
      continue;  // per-axis scales along another axis than the output channels
    // The output: read only by a QuantizeLinear, perhaps through a Relu.
    std::vector<int> absorbed = {static_cast<int>(k)};
    TensorId cur = conv.outputs[0];
    int r = OnlyReader(graph, cur);
    bool relu = false;
    if (r >= 0 && graph.nodes[static_cast<size_t>(r)].op == OpKind::kRelu) {
      relu = true;
      absorbed.push_back(r);
      cur = graph.nodes[static_cast<size_t>(r)].outputs[0];
      r = OnlyReader(graph, cur);
    }
    if (r < 0 || graph.nodes[static_cast<size_t>(r)].op != OpKind::kQuantizeLinear)
      continue;
    const Node nq = graph.nodes[static_cast<size_t>(r)];
    if (nq.inputs[0] != cur || !ConstantParam(graph, nq.input(1)) ||
        !ConstantParam(graph, nq.input(2)))
      continue;
    const DType yt = graph.tensor(nq.outputs[0]).dtype;
    if (relu && ParamAt(graph, nq.input(2), 0) != (yt == DType::kInt8 ? -128.f : 0.f))
      continue;
    absorbed.push_back(r);
    // The bias: int32 on the accumulator's scale x_scale * w_scale[m], zero point 0, which is
    // exactly QLinearConv's bias (compared as float32, the product onnxruntime's quantizer
    // writes).
    TensorId bq = kNoTensor;
    if (db >= 0) {
      const Node &nb = graph.nodes[static_cast<size_t>(db)];
      const Tensor &b = graph.tensor(nb.inputs[0]);
      if (!b.is_constant() || b.dtype != DType::kInt32 || b.shape != Shape{m} ||
          !ConstantParam(graph, nb.input(1), m) || !ConstantParam(graph, nb.input(2), m))
        continue;
      bool same_scale = true;
      for (int64_t c = 0; c < m; ++c)
        same_scale = same_scale && ParamAt(graph, nb.input(2), c) == 0.f &&
                     ParamAt(graph, nb.input(1), c) ==
                         ParamAt(graph, nx.input(1), 0) * ParamAt(graph, nw.input(1), c);
      if (!same_scale)
        continue;
      bq = nb.inputs[0];
    }
    Node fused;
    fused.op = OpKind::kQLinearConv;
    fused.name = conv.name;
    fused.opset = conv.opset;
    fused.attrs = conv.attrs;
    const std::string base = graph.tensor(conv.outputs[0]).name;
    // ExplicitZeroPoint may add tensors, which moves the graph's tensors: xq and wq are not read
    // after the first call.
    const DType xt = xq.dtype, wt = wq.dtype;
    const TensorId xz = ExplicitZeroPoint(graph, nx.input(2), xt, base + "_x_zero_point");
    const TensorId wz = ExplicitZeroPoint(graph, nw.input(2), wt, base + "_w_zero_point");
    const TensorId yz = ExplicitZeroPoint(graph, nq.input(2), yt, base + "_y_zero_point");
    fused.inputs = {nx.inputs[0], nx.inputs[1], xz,           nw.inputs[0],
                    nw.inputs[1], wz,           nq.inputs[1], yz};
    if (bq != kNoTensor)
      fused.inputs.push_back(bq);
    fused.outputs = {nq.outputs[0]};
    graph.ReplaceNodes(absorbed, fused);
    --k;  // the node now at k was after the conv; look at it again (k >= 0: a DQ came first)
  }
  return Status::Ok();
}

// The output of a DQ → Gemm/MatMul: read only by a QuantizeLinear with constant per-tensor
// parameters, perhaps through a Relu whose work saturation does; appends what it absorbs.
int QuantizeReader(const Graph &graph, TensorId out, std::vector<int> &absorbed) {
  int r = OnlyReader(graph, out);
  bool relu = false;
  if (r >= 0 && graph.nodes[static_cast<size_t>(r)].op == OpKind::kRelu) {
    relu = true;
    absorbed.push_back(r);
    out = graph.nodes[static_cast<size_t>(r)].outputs[0];
    r = OnlyReader(graph, out);
  }
  if (r < 0 || graph.nodes[static_cast<size_t>(r)].op != OpKind::kQuantizeLinear)
    return -1;
  const Node &nq = graph.nodes[static_cast<size_t>(r)];
  if (nq.inputs[0] != out || !ConstantParam(graph, nq.input(1)) ||
      !ConstantParam(graph, nq.input(2)))
    return -1;
  const DType yt = graph.tensor(nq.outputs[0]).dtype;
  if (relu && ParamAt(graph, nq.input(2), 0) != (yt == DType::kInt8 ? -128.f : 0.f))
    return -1;
  absorbed.push_back(r);
  return r;
}

Status FuseQuantizedMatMul(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const OpKind op = graph.nodes[k].op;
    if (op != OpKind::kMatMul && op != OpKind::kGemm)
      continue;
    const Node mm = graph.nodes[k];
    const bool gemm = op == OpKind::kGemm;
    if (gemm && (mm.attrs.Int("transA", 0) != 0 || mm.attrs.Float("alpha", 1.f) != 1.f ||
                 (mm.input(2) != kNoTensor && mm.attrs.Float("beta", 1.f) != 1.f)))
      continue;
    const bool trans_b = gemm && mm.attrs.Int("transB", 0) != 0;
    const std::vector<int> prod = graph.Producers();
    const int da = DequantizeProducer(graph, prod, mm.input(0));
    const int db = DequantizeProducer(graph, prod, mm.input(1));
    const int dc = mm.input(2) == kNoTensor ? -2 : DequantizeProducer(graph, prod, mm.input(2));
    if (da < 0 || db < 0 || dc == -1)
      continue;
    const Node na = graph.nodes[static_cast<size_t>(da)], nb = graph.nodes[static_cast<size_t>(db)];
    const Tensor &aq = graph.tensor(na.inputs[0]), &bq = graph.tensor(nb.inputs[0]);
    if (!IsQuantized(aq.dtype) || !IsQuantized(bq.dtype) || aq.shape.rank() < 2 ||
        bq.shape.rank() < 2)
      continue;
    // B's scale: per tensor, or (a constant 2-D B) one per output column, which is B's axis 1
    // (axis 0 when Gemm transposes it).
    const int64_t n = trans_b ? bq.shape[0] : bq.shape[bq.shape.rank() - 1];
    const bool per_column = graph.tensor(nb.inputs[1]).shape.NumElements() != 1;
    if (per_column) {
      const int64_t axis = nb.attrs.Int("axis", 1);
      if (!bq.is_constant() || bq.shape.rank() != 2 || axis != (trans_b ? 0 : 1))
        continue;
    }
    if (trans_b && !bq.is_constant())
      continue;
    if (!ConstantParam(graph, na.input(1)) || !ConstantParam(graph, na.input(2)) ||
        !ConstantParam(graph, nb.input(1), n) || !ConstantParam(graph, nb.input(2), n))
      continue;
    std::vector<int> absorbed = {static_cast<int>(k)};
    const int r = QuantizeReader(graph, mm.outputs[0], absorbed);
    if (r < 0)
      continue;
    const Node nq = graph.nodes[static_cast<size_t>(r)];
    const DType yt = graph.tensor(nq.outputs[0]).dtype;
    // The bias: int32 per column on the accumulator's scale (as FuseQuantizedConv's).
    TensorId cq = kNoTensor;
    if (dc >= 0) {
      const Node &nc = graph.nodes[static_cast<size_t>(dc)];
      const Tensor &c = graph.tensor(nc.inputs[0]);
      if (!c.is_constant() || c.dtype != DType::kInt32 || c.shape != Shape{n} ||
          !ConstantParam(graph, nc.input(1), n) || !ConstantParam(graph, nc.input(2), n))
        continue;
      bool same_scale = true;
      for (int64_t j = 0; j < n; ++j)
        same_scale = same_scale && ParamAt(graph, nc.input(2), j) == 0.f &&
                     ParamAt(graph, nc.input(1), j) ==
                         ParamAt(graph, na.input(1), 0) * ParamAt(graph, nb.input(1), j);
      if (!same_scale)
        continue;
      cq = nc.inputs[0];
    }
    const std::string base = graph.tensor(mm.outputs[0]).name;
    // Adding a tensor moves the graph's tensors: aq and bq are not read after the first
    // AddTensor or ExplicitZeroPoint.
    const DType at = aq.dtype, bt = bq.dtype;
    TensorId b_int = nb.inputs[0];
    if (trans_b) {  // B[n][k] → B[k][n], a new constant
      const int64_t kk = bq.shape[1];
      const Bytes &src = *bq.data;
      Bytes t(src.size());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < kk; ++j)
          t[static_cast<size_t>(j * n + i)] = src[static_cast<size_t>(i * kk + j)];
      Tensor transposed = MakeConstant(bt, Shape{kk, n}, std::move(t));
      transposed.name = graph.UniqueName(base + "_b_transposed");
      b_int = graph.AddTensor(std::move(transposed));
    }
    const TensorId az = ExplicitZeroPoint(graph, na.input(2), at, base + "_a_zero_point");
    const TensorId bz = ExplicitZeroPoint(graph, nb.input(2), bt, base + "_b_zero_point");
    const TensorId yz = ExplicitZeroPoint(graph, nq.input(2), yt, base + "_y_zero_point");
    Node fused;
    fused.op = OpKind::kQLinearMatMul;
    fused.name = mm.name;
    fused.opset = mm.opset;
    fused.inputs = {na.inputs[0], na.inputs[1], az, b_int, nb.inputs[1], bz, nq.inputs[1], yz};
    if (cq != kNoTensor)
      fused.inputs.push_back(cq);
    fused.outputs = {nq.outputs[0]};
    graph.ReplaceNodes(absorbed, fused);
    --k;
  }
  return Status::Ok();
}

namespace {
bool ChainOp(OpKind op);
}  // namespace

Status FuseQuantizedLookup(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    if (graph.nodes[k].op != OpKind::kQLinearConv || graph.nodes[k].input(9) != kNoTensor)
      continue;
    const TensorId y = graph.nodes[k].outputs[0];
    const DType yt = graph.tensor(y).dtype;
    const int d = OnlyReader(graph, y);
    if (!IsQuantized(yt) || d < 0)
      continue;
    const Node &dq = graph.nodes[static_cast<size_t>(d)];
    if (dq.op != OpKind::kDequantizeLinear || dq.inputs[0] != y ||
        !ConstantParam(graph, dq.input(1)) || !ConstantParam(graph, dq.input(2)) ||
        graph.tensor(dq.outputs[0]).dtype != DType::kFloat32)
      continue;
    // The float steps between the DequantizeLinear and a QuantizeLinear: elementwise ops of the
    // running values and scalar constants only, each value of the output's shape, read by
    // nothing outside (so every output element is a function of the same element of y alone).
    const Shape &shape = graph.tensor(dq.outputs[0]).shape;
    std::set<TensorId> values = {dq.outputs[0]};
    std::vector<int> steps;
    int q = -1;
    for (size_t j = static_cast<size_t>(d) + 1; j < graph.nodes.size(); ++j) {
      const Node &n = graph.nodes[j];
      bool reads = false, scalars = true;
      for (TensorId i : n.inputs) {
        if (i == kNoTensor)
          continue;
        if (values.count(i))
          reads = true;
        else if (!IsScalarConstant(graph.tensor(i)))
          scalars = false;
      }
      if (!reads)
        continue;
      if (n.op == OpKind::kQuantizeLinear && values.count(n.input(0)) &&
          ConstantParam(graph, n.input(1)) && ConstantParam(graph, n.input(2)) &&
          IsQuantized(graph.tensor(n.outputs[0]).dtype)) {
        q = static_cast<int>(j);
        break;
      }
      if (!scalars || !ChainOp(n.op) || n.outputs.size() != 1 ||
          graph.tensor(n.outputs[0]).dtype != DType::kFloat32 ||
          graph.tensor(n.outputs[0]).shape != shape)
        break;
      steps.push_back(static_cast<int>(j));
      values.insert(n.outputs[0]);
    }
    std::set<int> inside(steps.begin(), steps.end());
    inside.insert(q);
    bool closed = q >= 0;
    for (TensorId v : values) {
      closed = closed && !IsGraphOutput(graph, v);
      for (size_t j = 0; j < graph.nodes.size() && closed; ++j)
        if (!inside.count(static_cast<int>(j)))
          for (TensorId i : graph.nodes[j].inputs)
            closed = closed && i != v;
    }
    // Otherwise the table stops at the DequantizeLinear: 256 float32 values, the QLinearConv's
    // output becomes the dequantized tensor (the float steps, if any, stay as they are).
    if (!closed) {
      steps.clear();
      q = -1;
    }
    // The table: every value y can take through the same nodes on the reference interpreter.
    const int lo = yt == DType::kInt8 ? -128 : 0;
    Bytes all(256);
    for (int i = 0; i < 256; ++i)
      all[static_cast<size_t>(i)] = static_cast<uint8_t>(lo + i);
    std::map<TensorId, Tensor> val;
    val[y] = MakeConstant(yt, Shape{256}, std::move(all));
    std::vector<int> order = {d};
    order.insert(order.end(), steps.begin(), steps.end());
    if (q >= 0)
      order.push_back(q);
    bool ok = true;
    for (int j : order) {
      const Node &n = graph.nodes[static_cast<size_t>(j)];
      std::vector<const Tensor *> in;
      for (TensorId i : n.inputs)
        in.push_back(i == kNoTensor ? nullptr : val.count(i) ? &val.at(i) : &graph.tensor(i));
      auto out = EvaluateNode(n, in);
      if (!out.ok() || out->empty() || (*out)[0].shape.NumElements() != 256) {
        ok = false;
        break;
      }
      val[n.outputs[0]] = (*out)[0];
    }
    if (!ok)
      continue;
    // A table that is the DequantizeLinear alone, of one scale and zero point: its values are
    // (q - zero point) * scale, which a kernel may compute instead of looking them up (quant.cl,
    // NN_DQ_OUT); the table stays, the interpreter's reference.
    std::optional<std::pair<double, double>> dq_params;
    {
      const TensorId s = dq.input(1), z = dq.input(2);
      if (!closed && graph.tensor(s).shape.NumElements() == 1 &&
          (z == kNoTensor || graph.tensor(z).shape.NumElements() == 1))
        dq_params = std::make_pair(ScalarValue(graph.tensor(s)),
                                   z == kNoTensor ? 0.0 : ScalarValue(graph.tensor(z)));
    }
    const TensorId y2 = graph.nodes[static_cast<size_t>(order.back())].outputs[0];
    const Tensor &tv = val.at(y2);
    Tensor table = MakeConstant(tv.dtype, Shape{256}, Bytes(*tv.data));
    table.name = graph.UniqueName(graph.tensor(y2).name + "_lookup");
    const TensorId tid = graph.AddTensor(table);
    Node &p = graph.nodes[k];
    p.inputs.resize(10, kNoTensor);
    p.inputs[9] = tid;
    p.outputs[0] = y2;
    if (dq_params) {
      p.attrs.Set("lut_dq_scale", static_cast<float>(dq_params->first));
      p.attrs.Set("lut_dq_zero_point", static_cast<int64_t>(dq_params->second));
    }
    std::vector<bool> gone(graph.nodes.size(), false);
    for (int j : order)
      gone[static_cast<size_t>(j)] = true;
    graph.RemoveNodes(gone);
  }
  return Status::Ok();
}

Status FoldDequantizeLinear(Graph &graph) {
  std::vector<bool> gone(graph.nodes.size(), false);
  for (size_t k = 0; k < graph.nodes.size(); ++k)
    if (graph.nodes[k].op == OpKind::kDequantizeLinear) {
      OP_ASSIGN_OR_RETURN(gone[k], FoldNode(graph, graph.nodes[k], true));
    }
  graph.RemoveNodes(gone);
  return Status::Ok();
}

Status FoldConstants(Graph &graph) {
  std::vector<bool> gone(graph.nodes.size(), false);
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    OP_ASSIGN_OR_RETURN(gone[k], FoldNode(graph, graph.nodes[k]));
  }
  graph.RemoveNodes(gone);
  return Status::Ok();
}

Status RemoveIdentities(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size();) {
    const Node &n = graph.nodes[k];
    const TensorId in = n.input(0);
    const TensorId out = n.outputs.empty() ? kNoTensor : n.outputs[0];
    bool identity = false;
    if (in != kNoTensor && out != kNoTensor) {
      const Tensor &ti = graph.tensor(in), &to = graph.tensor(out);
      const bool same = ti.dtype == to.dtype && ti.shape == to.shape;
      switch (n.op) {
        case OpKind::kIdentity:
          identity = true;
          break;
        case OpKind::kDropout:
          identity = n.outputs.size() < 2 || n.outputs[1] == kNoTensor;
          break;
        case OpKind::kCast:
        case OpKind::kReshape:
        case OpKind::kFlatten:
        case OpKind::kSqueeze:
        case OpKind::kUnsqueeze:
        case OpKind::kExpand:
          identity = same;
          break;
        case OpKind::kTranspose: {
          auto perm = n.attrs.Ints("perm");
          identity = same && !perm.empty();
          for (size_t i = 0; i < perm.size(); ++i)
            if (perm[i] != static_cast<int64_t>(i))
              identity = false;
          break;
        }
        default:
          break;
      }
    }
    if (identity && Bypass(graph, static_cast<int>(k), in, out))
      continue;
    ++k;
  }
  return Status::Ok();
}

Status RemoveCastPairs(Graph &graph) {
  // Cast(f16 → f32) followed by Cast(f32 → f16): the value comes back unchanged, since every
  // half is exact in float. The reverse pair rounds, so it stays.
  for (size_t k = 0; k < graph.nodes.size();) {
    const Node &n = graph.nodes[k];
    if (n.op == OpKind::kCast && n.input(0) != kNoTensor) {
      std::vector<int> prod = graph.Producers();
      const int p = prod[static_cast<size_t>(n.input(0))];
      if (p >= 0) {
        const Node &first = graph.nodes[static_cast<size_t>(p)];
        const TensorId src = first.input(0);
        if (first.op == OpKind::kCast && src != kNoTensor &&
            graph.tensor(src).dtype == DType::kFloat16 &&
            graph.tensor(n.input(0)).dtype == DType::kFloat32 &&
            graph.tensor(n.outputs[0]).dtype == DType::kFloat16 &&
            Bypass(graph, static_cast<int>(k), src, n.outputs[0]))
          continue;  // the first Cast goes when nobody else reads its output
      }
    }
    ++k;
  }
  return Status::Ok();
}

Status FoldBatchNormIntoConv(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    Node &bn = graph.nodes[k];
    if (bn.op != OpKind::kBatchNormalization || bn.outputs.size() != 1)
      continue;
    const TensorId x = bn.input(0);
    std::vector<int> prod = graph.Producers();
    const int p = prod[static_cast<size_t>(x)];
    if (p < 0 || IsGraphOutput(graph, x) || Consumers(graph, x).size() != 1)
      continue;
    Node &conv = graph.nodes[static_cast<size_t>(p)];
    if (conv.op != OpKind::kConv)
      continue;
    const TensorId w = conv.input(1), b = conv.input(2);
    bool consts =
        graph.tensor(w).is_constant() && (b == kNoTensor || graph.tensor(b).is_constant());
    for (int i = 1; i < 5; ++i)
      consts = consts && graph.tensor(bn.input(static_cast<size_t>(i))).is_constant();
    if (!consts || !IsFloat(graph.tensor(w).dtype))
      continue;
    const Tensor &wt = graph.tensor(w);
    const int64_t m = wt.shape[0];
    const int64_t per = wt.shape.NumElements() / m;
    auto scale = ConstantDoubles(graph.tensor(bn.input(1)));
    auto bias = ConstantDoubles(graph.tensor(bn.input(2)));
    auto mean = ConstantDoubles(graph.tensor(bn.input(3)));
    auto var = ConstantDoubles(graph.tensor(bn.input(4)));
    if (!scale.ok() || !bias.ok() || !mean.ok() || !var.ok())
      continue;
    if (static_cast<int64_t>(scale->size()) != m || static_cast<int64_t>(var->size()) != m)
      continue;
    const double eps = bn.attrs.Float("epsilon", 1e-5f);
    std::vector<double> wv = ref::ToDoubles(wt);
    std::vector<double> bv(static_cast<size_t>(m), 0.0);
    if (b != kNoTensor)
      bv = ref::ToDoubles(graph.tensor(b));
    for (int64_t c = 0; c < m; ++c) {
      const size_t ci = static_cast<size_t>(c);
      const double s = (*scale)[ci] / std::sqrt((*var)[ci] + eps);
      for (int64_t i = 0; i < per; ++i)
        wv[static_cast<size_t>(c * per + i)] *= s;
      bv[ci] = (bv[ci] - (*mean)[ci]) * s + (*bias)[ci];
    }
    Tensor nw = ref::FromDoubles(wt.dtype, wt.shape, wv);
    nw.name = graph.UniqueName(wt.name + "_bnfolded");
    Tensor nb = ref::FromDoubles(wt.dtype, Shape{m}, bv);
    nb.name = graph.UniqueName(conv.name + "_bnfolded_bias");
    const TensorId out = bn.outputs[0];
    const TensorId nw_id = graph.AddTensor(std::move(nw));
    const TensorId nb_id = graph.AddTensor(std::move(nb));
    Node &c2 = graph.nodes[static_cast<size_t>(p)];  // references may move after AddTensor: none
    c2.inputs.resize(3);
    c2.inputs[1] = nw_id;
    c2.inputs[2] = nb_id;
    c2.outputs[0] = out;
    graph.nodes.erase(graph.nodes.begin() + static_cast<long>(k));
    --k;
  }
  return Status::Ok();
}

namespace {

// The activations a fused conv/gemm epilogue may apply.
bool FusableActivation(const Graph &g, const Node &n, Attributes *act) {
  switch (n.op) {
    case OpKind::kRelu:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kHardSwish:
      act->Set("activation", std::string(OpName(n.op)));
      return true;
    case OpKind::kLeakyRelu:
    case OpKind::kElu:
    case OpKind::kHardSigmoid: {
      ref::UnaryParams p = ref::GetUnaryParams(n.op, n.attrs);
      act->Set("activation", std::string(OpName(n.op)));
      act->Set("activation_alpha", static_cast<float>(p.alpha));
      if (n.op == OpKind::kHardSigmoid)
        act->Set("activation_beta", static_cast<float>(p.beta));
      return true;
    }
    case OpKind::kClip: {
      std::vector<const Tensor *> in;
      for (TensorId id : n.inputs)
        in.push_back(id == kNoTensor ? nullptr : &g.tensor(id));
      auto b = GetClipBounds(n, in);
      if (!b.ok())
        return false;
      act->Set("activation", std::string("Clip"));
      act->Set("activation_alpha", static_cast<float>(b->first));
      act->Set("activation_beta", static_cast<float>(b->second));
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

namespace {

// Whether a Transpose swaps its input's last two dims and keeps the others in place.
bool SwapsLastTwo(const Node &n, size_t rank) {
  const std::vector<int64_t> perm = n.attrs.Ints("perm");
  if (rank < 2 || perm.size() != rank)
    return false;
  for (size_t i = 0; i + 2 < rank; ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return perm[rank - 2] == static_cast<int64_t>(rank - 1) &&
         perm[rank - 1] == static_cast<int64_t>(rank - 2);
}

// A 2-D constant transposed, any element type: [rows, cols] → [cols, rows].
Tensor TransposedConstant(const Tensor &t, const std::string &name) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const size_t es = DTypeSize(t.dtype);
  Bytes out(t.data->size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[static_cast<size_t>(c * rows + r) * es],
                  t.data->data() + static_cast<size_t>(r * cols + c) * es, es);
  Tensor w = MakeConstant(t.dtype, Shape({cols, rows}), std::move(out));
  w.name = name;
  return w;
}

}  // namespace

Status MixAlongRows(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    if (graph.nodes[k].op != OpKind::kTranspose)
      continue;
    const TensorId x = graph.nodes[k].inputs[0], xt = graph.nodes[k].outputs[0];
    const Shape xs = graph.tensor(x).shape;
    const DType dt = graph.tensor(x).dtype;
    if (!IsFloat(dt) || !SwapsLastTwo(graph.nodes[k], xs.rank()) || IsGraphOutput(graph, xt))
      continue;
    const int mm = OnlyReader(graph, xt);
    if (mm < 0)
      continue;
    const Node &prod = graph.nodes[static_cast<size_t>(mm)];
    if (prod.op != OpKind::kMatMul || prod.inputs[0] != xt)
      continue;
    const Tensor &w = graph.tensor(prod.inputs[1]);
    if (!w.is_constant() || w.dtype != dt || w.shape.rank() != 2)
      continue;
    const int64_t n = w.shape[1];
    // The chain after the product: constant Adds along its last dim, unary elementwise ops.
    std::vector<int> chain;
    TensorId cur = prod.outputs[0];
    int back = -1;  // the Transpose that swaps the dims back
    for (;;) {
      const int c = OnlyReader(graph, cur);
      if (c < 0)
        break;
      const Node &nd = graph.nodes[static_cast<size_t>(c)];
      if (nd.op == OpKind::kTranspose && SwapsLastTwo(nd, graph.tensor(cur).shape.rank())) {
        back = c;
        break;
      }
      bool ok = ClassOf(nd.op) == OpClass::kUnary && nd.inputs.size() == 1;
      if (nd.op == OpKind::kAdd && nd.inputs.size() == 2) {
        const Tensor &b = graph.tensor(nd.inputs[0] == cur ? nd.inputs[1] : nd.inputs[0]);
        ok = b.is_constant() && b.dtype == dt && b.shape.NumElements() == n &&
             b.shape.rank() >= 1 && b.shape[b.shape.rank() - 1] == n;
      }
      if (!ok || nd.outputs.size() != 1 ||
          graph.tensor(nd.outputs[0]).shape != graph.tensor(cur).shape)
        break;
      chain.push_back(c);
      cur = nd.outputs[0];
    }
    if (back < 0 || IsGraphOutput(graph, graph.nodes[static_cast<size_t>(back)].outputs[0]))
      continue;
    // Rewrite: MatMul(W^T, x), its chain on [.., N, C], and the readers of the swapped-back value
    // read the chain's end. Biases [N] become [N, 1].
    Shape ys = xs;
    ys[ys.rank() - 2] = n;
    const TensorId wt = graph.AddTensor(TransposedConstant(w, graph.UniqueName(w.name + "_rows")));
    Node &m = graph.nodes[static_cast<size_t>(mm)];
    m.inputs = {wt, x};
    graph.tensor(m.outputs[0]).shape = ys;
    for (int c : chain) {
      Node &nd = graph.nodes[static_cast<size_t>(c)];
      if (nd.op == OpKind::kAdd) {
        const size_t bi = graph.tensor(nd.inputs[0]).is_constant() ? 0 : 1;
        Tensor b = graph.tensor(nd.inputs[bi]);
        b.name = graph.UniqueName(b.name + "_rows");
        b.shape = Shape({n, 1});
        nd.inputs[bi] = graph.AddTensor(std::move(b));
      }
      graph.tensor(nd.outputs[0]).shape = ys;
    }
    const TensorId end =
        chain.empty() ? m.outputs[0] : graph.nodes[static_cast<size_t>(chain.back())].outputs[0];
    ReplaceUses(graph, graph.nodes[static_cast<size_t>(back)].outputs[0], end);
    std::vector<bool> gone(graph.nodes.size(), false);
    gone[k] = gone[static_cast<size_t>(back)] = true;
    graph.RemoveNodes(gone);
    --k;
  }
  return Status::Ok();
}

Status FuseConvGemm(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const OpKind op = graph.nodes[k].op;
    if (op != OpKind::kConv && op != OpKind::kGemm && op != OpKind::kMatMul)
      continue;
    Node fused = graph.nodes[k];
    const TensorId y0 = fused.outputs[0];
    const DType dt = graph.tensor(y0).dtype;
    const Shape ys = graph.tensor(y0).shape;
    if (!IsFloat(dt))
      continue;
    if (op == OpKind::kMatMul && (graph.tensor(fused.input(0)).shape.rank() < 2 ||
                                  graph.tensor(fused.input(1)).shape.rank() < 2))
      continue;
    std::vector<int> absorbed;  // node indices taken into the fused node
    TensorId cur = y0;
    bool has_bias = fused.input(2) != kNoTensor, has_res = false, has_act = false;
    auto next = [&]() -> int {
      if (IsGraphOutput(graph, cur))
        return -1;
      std::vector<int> c = Consumers(graph, cur);
      int uses = 0;
      for (const Node &n : graph.nodes)
        for (TensorId i : n.inputs)
          uses += i == cur;
      return c.size() == 1 && uses == 1 ? c[0] : -1;
    };
    for (;;) {
      const int c = next();
      if (c < 0)
        break;
      const Node &n = graph.nodes[static_cast<size_t>(c)];
      const TensorId out = n.outputs.empty() ? kNoTensor : n.outputs[0];
      if (out == kNoTensor || graph.tensor(out).dtype != dt || graph.tensor(out).shape != ys)
        break;
      if (n.op == OpKind::kAdd) {
        const TensorId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
        const Tensor &ot = graph.tensor(other);
        if (ot.dtype != dt)
          break;
        if (!has_bias && !has_act && !has_res && ot.is_constant()) {
          // A per-channel constant for a conv ((M), (M,1,1), (1,M,1,1)), anything that
          // broadcasts to the output for a gemm.
          if (op == OpKind::kConv) {
            const int64_t m = ys[1];
            if (ot.shape.NumElements() != m)
              break;
            Shape want = ys;
            for (size_t d = 0; d < want.rank(); ++d)
              want[d] = d == 1 ? m : 1;
            auto bc = BroadcastShapes(ot.shape, want);
            if (!bc.ok() || *bc != want || ot.shape.rank() > want.rank())
              break;
            if (ot.shape.rank() == 1 && m != 1 && ys.rank() > 2)
              break;  // (M) aligns with the last dim
            Tensor b = ot;
            b.name = graph.UniqueName(ot.name + "_bias");
            b.shape = Shape{m};
            fused.inputs.resize(3);
            fused.inputs[2] = graph.AddTensor(std::move(b));
          } else {
            if (op == OpKind::kGemm && fused.attrs.Float("beta", 1.f) != 1.f)
              break;
            fused.inputs.resize(3);
            fused.inputs[2] = other;
            fused.attrs.Set("beta", 1.f);
          }
          has_bias = true;
        } else if (!has_res && !ot.is_constant() && ot.shape == ys) {
          fused.inputs.resize(4, kNoTensor);
          fused.inputs[3] = other;
          fused.attrs.Set("residual_after_activation", static_cast<int64_t>(has_act ? 1 : 0));
          has_res = true;
        } else {
          break;
        }
      } else if (n.op == OpKind::kMul && op != OpKind::kConv && !has_bias && !has_act && !has_res) {
        // A product scaled by a constant scalar (attention's 1/sqrt(d)) is alpha.
        const TensorId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
        const Tensor &ot = graph.tensor(other);
        if (!IsScalarConstant(ot) || ot.dtype != dt)
          break;
        fused.attrs.Set("alpha",
                        static_cast<float>(fused.attrs.Float("alpha", 1.f) * ScalarValue(ot)));
      } else if (!has_act) {  // after a residual: act(conv + b + R)
        Attributes act;
        if (!FusableActivation(graph, n, &act))
          break;
        for (const auto &[key, v] : act.map())
          fused.attrs.Set(key, v);
        has_act = true;
      } else {
        break;
      }
      absorbed.push_back(c);
      cur = out;
    }
    if (absorbed.empty())
      continue;
    fused.op = op == OpKind::kConv ? OpKind::kFusedConv : OpKind::kFusedGemm;
    if (op == OpKind::kMatMul) {
      if (!fused.attrs.Has("alpha"))
        fused.attrs.Set("alpha", 1.f);
      fused.attrs.Set("beta", 1.f);
    }
    fused.outputs = {cur};
    absorbed.push_back(static_cast<int>(k));
    graph.ReplaceNodes(absorbed, std::move(fused));
    --k;  // the node now at k was after the conv; look at it again
  }
  return Status::Ok();
}

namespace {

bool ChainOp(OpKind op) {
  switch (op) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kPow:
    case OpKind::kSqrt:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kReciprocal:
    case OpKind::kRelu:
    case OpKind::kLeakyRelu:
    case OpKind::kElu:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kTanh:
    case OpKind::kErf:
    case OpKind::kSoftplus:
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace {

// The single node reading `t` (and nothing else reading it), or -1.
int SoleConsumer(const Graph &g, TensorId t) {
  if (IsGraphOutput(g, t))
    return -1;
  int uses = 0, at = -1;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (TensorId i : g.nodes[k].inputs)
      if (i == t) {
        ++uses;
        at = static_cast<int>(k);
      }
  return uses == 1 ? at : -1;
}

// The other input of a binary node given one of them.
TensorId Other(const Node &n, TensorId t) {
  return n.inputs[0] == t ? n.inputs[1] : n.inputs[0];
}

}  // namespace

Status FuseLayerNormalization(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const Node &r1 = graph.nodes[k];
    if (r1.op != OpKind::kReduceMean || r1.outputs.size() != 1)
      continue;
    const TensorId x = r1.inputs[0];
    const Tensor &xt = graph.tensor(x);
    if (!IsFloat(xt.dtype))
      continue;
    std::vector<const Tensor *> rin;
    for (TensorId id : r1.inputs)
      rin.push_back(id == kNoTensor ? nullptr : &graph.tensor(id));
    auto rp = GetReduceParams(r1, rin);
    if (!rp.ok() || !rp->keepdims || rp->axes.empty())
      continue;
    // The reduced axes must be the trailing ones: LayerNormalization normalises [axis, rank).
    const int64_t rank = static_cast<int64_t>(xt.shape.rank());
    const int64_t axis = rp->axes.front();
    bool trailing = rp->axes.back() == rank - 1;
    for (size_t i = 0; i < rp->axes.size(); ++i)
      trailing = trailing && rp->axes[i] == axis + static_cast<int64_t>(i);
    if (!trailing)
      continue;
    // mean → Sub(x, mean) → d; d feeds Pow(d, 2) (or Mul(d, d)) and Div(d, ·).
    const TensorId mean = r1.outputs[0];
    const int s = SoleConsumer(graph, mean);
    if (s < 0 || graph.nodes[static_cast<size_t>(s)].op != OpKind::kSub ||
        graph.nodes[static_cast<size_t>(s)].inputs[0] != x)
      continue;
    const TensorId d = graph.nodes[static_cast<size_t>(s)].outputs[0];
    int sq = -1, div = -1, uses = 0;
    for (size_t j = 0; j < graph.nodes.size(); ++j) {
      const Node &n = graph.nodes[j];
      const int reads = static_cast<int>(std::count(n.inputs.begin(), n.inputs.end(), d));
      if (!reads)
        continue;
      uses += reads;
      if (n.op == OpKind::kPow && n.inputs[0] == d && IsScalarConstant(graph.tensor(n.inputs[1])) &&
          ScalarValue(graph.tensor(n.inputs[1])) == 2.0)
        sq = static_cast<int>(j);
      else if (n.op == OpKind::kMul && n.inputs[0] == d && n.inputs[1] == d)
        sq = static_cast<int>(j);
      else if (n.op == OpKind::kDiv && n.inputs[0] == d)
        div = static_cast<int>(j);
    }
    const bool mul_square = sq >= 0 && graph.nodes[static_cast<size_t>(sq)].op == OpKind::kMul;
    if (sq < 0 || div < 0 || IsGraphOutput(graph, d) || uses != (mul_square ? 3 : 2))
      continue;
    // Pow → ReduceMean (same axes) → Add(eps) → Sqrt → the Div's divisor.
    const int r2 = SoleConsumer(graph, graph.nodes[static_cast<size_t>(sq)].outputs[0]);
    if (r2 < 0 || graph.nodes[static_cast<size_t>(r2)].op != OpKind::kReduceMean)
      continue;
    std::vector<const Tensor *> r2in;
    for (TensorId id : graph.nodes[static_cast<size_t>(r2)].inputs)
      r2in.push_back(id == kNoTensor ? nullptr : &graph.tensor(id));
    auto rp2 = GetReduceParams(graph.nodes[static_cast<size_t>(r2)], r2in);
    if (!rp2.ok() || rp2->axes != rp->axes || !rp2->keepdims)
      continue;
    const TensorId var = graph.nodes[static_cast<size_t>(r2)].outputs[0];
    const int add = SoleConsumer(graph, var);
    if (add < 0 || graph.nodes[static_cast<size_t>(add)].op != OpKind::kAdd)
      continue;
    const Tensor &eps_t = graph.tensor(Other(graph.nodes[static_cast<size_t>(add)], var));
    if (!IsScalarConstant(eps_t))
      continue;
    const double eps = ScalarValue(eps_t);
    const int root = SoleConsumer(graph, graph.nodes[static_cast<size_t>(add)].outputs[0]);
    if (root < 0 || graph.nodes[static_cast<size_t>(root)].op != OpKind::kSqrt)
      continue;
    const TensorId sd = graph.nodes[static_cast<size_t>(root)].outputs[0];
    if (SoleConsumer(graph, sd) != div || graph.nodes[static_cast<size_t>(div)].inputs[1] != sd)
      continue;
    std::vector<int> absorbed{static_cast<int>(k), s, sq, r2, add, root, div};
    TensorId cur = graph.nodes[static_cast<size_t>(div)].outputs[0];
    // Optional affine tail: Mul by a constant scale, then Add a constant bias.
    Shape norm(std::vector<int64_t>(xt.shape.dims.begin() + axis, xt.shape.dims.end()));
    // A constant that broadcasts onto the normalised dims only ((127), (1,127), (1,1,127)).
    auto trimmed = [&](const Tensor &t) {
      Shape ts = t.shape;
      while (ts.rank() > norm.rank() && ts[0] == 1)
        ts.dims.erase(ts.dims.begin());
      return ts;
    };
    auto fits = [&](const Tensor &t) {
      if (!t.is_constant() || t.dtype != xt.dtype)
        return false;
      const Shape ts = trimmed(t);
      if (ts.rank() > norm.rank())
        return false;
      auto b = BroadcastShapes(ts, norm);
      return b.ok() && *b == norm;
    };
    TensorId scale = kNoTensor, bias = kNoTensor;
    int next = SoleConsumer(graph, cur);
    if (next >= 0 && graph.nodes[static_cast<size_t>(next)].op == OpKind::kMul &&
        fits(graph.tensor(Other(graph.nodes[static_cast<size_t>(next)], cur)))) {
      scale = Other(graph.nodes[static_cast<size_t>(next)], cur);
      absorbed.push_back(next);
      cur = graph.nodes[static_cast<size_t>(next)].outputs[0];
      next = SoleConsumer(graph, cur);
      if (next >= 0 && graph.nodes[static_cast<size_t>(next)].op == OpKind::kAdd &&
          fits(graph.tensor(Other(graph.nodes[static_cast<size_t>(next)], cur)))) {
        bias = Other(graph.nodes[static_cast<size_t>(next)], cur);
        absorbed.push_back(next);
        cur = graph.nodes[static_cast<size_t>(next)].outputs[0];
      }
    }
    if (graph.tensor(cur).shape != xt.shape || graph.tensor(cur).dtype != xt.dtype)
      continue;
    // Scale and bias are materialised over the normalised dims, so a kernel can index them
    // directly ((1,127) or a scalar become (127)).
    auto full = [&](TensorId id, const char *what) {
      const Tensor &t = graph.tensor(id);
      if (t.shape == norm)
        return id;
      const std::vector<double> v = ref::ToDoubles(t);
      const std::vector<int64_t> offs = ref::BroadcastOffsets(trimmed(t), norm);
      std::vector<double> e(offs.size());
      for (size_t i = 0; i < offs.size(); ++i)
        e[i] = v[static_cast<size_t>(offs[i])];
      Tensor f = ref::FromDoubles(t.dtype, norm, e);
      f.name = graph.UniqueName(t.name + "_" + what);
      return graph.AddTensor(std::move(f));
    };
    if (scale != kNoTensor)
      scale = full(scale, "ln_scale");
    if (bias != kNoTensor)
      bias = full(bias, "ln_bias");
    if (scale == kNoTensor) {
      // LayerNormalization needs a scale: ones over the normalised dims. (x is looked up again:
      // the bias above may have added a tensor, which moves them.)
      const Tensor &xa = graph.tensor(x);
      Tensor ones = ref::FromDoubles(
          xa.dtype, norm, std::vector<double>(static_cast<size_t>(norm.NumElements()), 1.0));
      ones.name = graph.UniqueName(xa.name + "_ln_scale");
      scale = graph.AddTensor(std::move(ones));
    }
    Node ln;
    ln.op = OpKind::kLayerNormalization;
    ln.name = r1.name.empty() ? graph.tensor(cur).name + "_layernorm" : r1.name;
    ln.opset = 17;
    ln.inputs = {x, scale};
    if (bias != kNoTensor)
      ln.inputs.push_back(bias);
    ln.outputs = {cur};
    ln.attrs.Set("axis", axis);
    ln.attrs.Set("epsilon", static_cast<float>(eps));
    graph.ReplaceNodes(absorbed, std::move(ln));
    k = static_cast<size_t>(-1);  // indices moved; start over (rare, cheap)
  }
  return Status::Ok();
}

namespace {
// A QuantizeLinear reading t (float32) with one constant scale and an absent or constant scalar
// zero point, writing uint8 or int8: what an ElementwiseChain can compute beside its value.
int ChainQuantizer(const Graph &graph, TensorId t) {
  if (graph.tensor(t).dtype != DType::kFloat32)
    return -1;
  for (size_t j = 0; j < graph.nodes.size(); ++j) {
    const Node &q = graph.nodes[j];
    if (q.op != OpKind::kQuantizeLinear || q.inputs.empty() || q.inputs[0] != t ||
        q.outputs.size() != 1)
      continue;
    const TensorId s = q.input(1), z = q.input(2);
    const DType yt = graph.tensor(q.outputs[0]).dtype;
    if (s == kNoTensor || !IsScalarConstant(graph.tensor(s)) ||
        (z != kNoTensor && !IsScalarConstant(graph.tensor(z))) ||
        (yt != DType::kUInt8 && yt != DType::kInt8))
      continue;
    return static_cast<int>(j);
  }
  return -1;
}

bool HasChainQuantizer(const Graph &graph, TensorId t) {
  return ChainQuantizer(graph, t) >= 0;
}

// The Cast node computing t from uint8 or int8 bytes, where t is float32 or float16, read by one
// node once and not a graph output; -1 otherwise.
int ByteCastInto(const Graph &graph, TensorId t) {
  const Tensor &tt = graph.tensor(t);
  if (IsGraphOutput(graph, t) || (tt.dtype != DType::kFloat32 && tt.dtype != DType::kFloat16) ||
      graph.UseCounts()[static_cast<size_t>(t)] != 1)
    return -1;
  const int p = graph.Producers()[static_cast<size_t>(t)];
  if (p < 0)
    return -1;
  const Node &c = graph.nodes[static_cast<size_t>(p)];
  if (c.op != OpKind::kCast || c.inputs.empty() || c.inputs[0] == kNoTensor)
    return -1;
  const DType from = graph.tensor(c.inputs[0]).dtype;
  return from == DType::kUInt8 || from == DType::kInt8 ? p : -1;
}
}  // namespace

Status FuseQuantizeIntoChain(Graph &graph) {
  std::vector<bool> gone(graph.nodes.size(), false);
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    Node &chain = graph.nodes[k];
    if (chain.op != OpKind::kElementwiseChain || chain.outputs.size() != 1 ||
        chain.attrs.Int("quantize", 0) != 0)
      continue;
    const int qi = ChainQuantizer(graph, chain.outputs[0]);
    if (qi < 0 || gone[static_cast<size_t>(qi)])
      continue;
    const Node &q = graph.nodes[static_cast<size_t>(qi)];
    chain.inputs.push_back(q.inputs[1]);
    if (q.input(2) != kNoTensor)
      chain.inputs.push_back(q.inputs[2]);
    chain.attrs.Set("quantize", static_cast<int64_t>(1));
    chain.attrs.Set("quantize_inputs", static_cast<int64_t>(q.input(2) != kNoTensor ? 2 : 1));
    chain.outputs.push_back(q.outputs[0]);
    gone[static_cast<size_t>(qi)] = true;
  }
  graph.RemoveNodes(gone);
  return Status::Ok();
}

Status FuseElementwiseChains(Graph &graph) {
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const Node head = graph.nodes[k];
    if (!ChainOp(head.op) || head.outputs.size() != 1)
      continue;
    const TensorId y0 = head.outputs[0];
    const DType dt = graph.tensor(y0).dtype;
    const Shape ys = graph.tensor(y0).shape;
    if (dt != DType::kFloat32 && dt != DType::kFloat16)
      continue;
    Node chain;
    chain.op = OpKind::kElementwiseChain;
    chain.name = head.name;
    chain.opset = head.opset;
    std::vector<std::string> ops;
    std::vector<int64_t> operand, swap;
    std::vector<float> alpha, beta;
    // Adds one step; `v` is the running value's tensor (input 0 of the chain for the head).
    auto add_step = [&](const Node &n, TensorId v) -> bool {
      if (ClassOf(n.op) == OpClass::kUnary) {
        ref::UnaryParams p = ref::GetUnaryParams(n.op, n.attrs);
        ops.push_back(OpName(n.op));
        operand.push_back(-1);
        swap.push_back(0);
        alpha.push_back(static_cast<float>(p.alpha));
        beta.push_back(static_cast<float>(p.beta));
        return true;
      }
      const bool first = n.inputs[0] == v;
      const TensorId other = first ? n.inputs[1] : n.inputs[0];
      const Tensor &ot = graph.tensor(other);
      if (ot.dtype != dt)
        return false;
      if (BroadcastShapes(ot.shape, ys).ok() == false ||
          BroadcastShapes(ot.shape, ys).value() != ys)
        return false;
      ops.push_back(OpName(n.op));
      swap.push_back(first ? 0 : 1);
      beta.push_back(0.f);
      if (IsScalarConstant(ot)) {
        operand.push_back(-1);
        alpha.push_back(static_cast<float>(ScalarValue(ot)));
        return true;
      }
      alpha.push_back(0.f);
      auto it = std::find(chain.inputs.begin(), chain.inputs.end(), other);
      if (it == chain.inputs.end()) {
        chain.inputs.push_back(other);
        it = chain.inputs.end() - 1;
      }
      operand.push_back(it - chain.inputs.begin());
      return true;
    };
    // The head's running value: its non-constant input (the first one for binary ops).
    TensorId x = head.inputs[0];
    if (ClassOf(head.op) == OpClass::kBinary && graph.tensor(x).is_constant() &&
        !graph.tensor(head.inputs[1]).is_constant())
      x = head.inputs[1];
    if (graph.tensor(x).shape != ys || graph.tensor(x).dtype != dt)
      continue;
    // A Cast of bytes to the chain's type (a camera frame's pixels: exact in float16 and float32)
    // read by the head alone is the chain's first step: the chain reads the bytes and converts
    // them as it loads them (attribute "to", the chain's output type), one launch and three
    // quarters of the reads fewer.
    const int cast = ByteCastInto(graph, x);
    chain.inputs.push_back(cast >= 0 ? graph.nodes[static_cast<size_t>(cast)].inputs[0] : x);
    if (cast >= 0)
      chain.attrs.Set("to", static_cast<int64_t>(DTypeToOnnx(dt)));
    if (!add_step(head, x))
      continue;
    std::vector<int> absorbed{static_cast<int>(k)};
    if (cast >= 0)
      absorbed.push_back(cast);
    TensorId cur = y0;
    for (;;) {
      if (IsGraphOutput(graph, cur))
        break;
      int uses = 0, c = -1;
      for (size_t j = 0; j < graph.nodes.size(); ++j)
        for (TensorId i : graph.nodes[j].inputs)
          if (i == cur) {
            ++uses;
            c = static_cast<int>(j);
          }
      if (uses != 1)
        break;
      const Node &n = graph.nodes[static_cast<size_t>(c)];
      if (!ChainOp(n.op) || n.outputs.size() != 1)
        break;
      const Tensor &o = graph.tensor(n.outputs[0]);
      if (o.dtype != dt || o.shape != ys)
        break;
      if (ClassOf(n.op) == OpClass::kBinary && n.inputs[0] == cur && n.inputs[1] == cur)
        break;
      if (!add_step(n, cur))
        break;
      absorbed.push_back(c);
      cur = n.outputs[0];
    }
    // One step is a chain too where a QuantizeLinear of its value can join it
    // (FuseQuantizeIntoChain), saving that launch.
    if (absorbed.size() < 2 && !HasChainQuantizer(graph, cur))
      continue;
    chain.outputs = {cur};
    chain.attrs.Set("ops", ops);
    chain.attrs.Set("operand", operand);
    chain.attrs.Set("swap", swap);
    chain.attrs.Set("step_alpha", alpha);
    chain.attrs.Set("step_beta", beta);
    graph.ReplaceNodes(absorbed, std::move(chain));
    k -= cast >= 0 ? 2 : 1;  // the Cast, before the head, is gone too
  }
  return Status::Ok();
}

Status FuseChainIntoEpilogue(Graph &graph) {
  const std::vector<int> uses = graph.UseCounts();
  const std::vector<int> producer = graph.Producers();
  std::vector<bool> gone(graph.nodes.size(), false);
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const Node &chain = graph.nodes[k];
    if (chain.op != OpKind::kElementwiseChain || chain.inputs.size() != 1 ||
        chain.outputs.size() != 1)
      continue;
    const TensorId x = chain.inputs[0];
    if (x == kNoTensor || uses[static_cast<size_t>(x)] != 1 || IsGraphOutput(graph, x) ||
        producer[static_cast<size_t>(x)] < 0)
      continue;
    Node &p = graph.nodes[static_cast<size_t>(producer[static_cast<size_t>(x)])];
    const OpKind op = p.op;
    const bool fusable = op == OpKind::kConv || op == OpKind::kFusedConv || op == OpKind::kGemm ||
                         op == OpKind::kFusedGemm || op == OpKind::kMatMul;
    if (!fusable || p.outputs.size() != 1 || p.outputs[0] != x)
      continue;
    if (op == OpKind::kMatMul &&
        (graph.tensor(p.inputs[0]).shape.rank() < 2 || graph.tensor(p.inputs[1]).shape.rank() < 2))
      continue;
    // The chain comes last: after an activation, or after a residual added after one, it
    // cannot be the activation.
    if (!p.attrs.String("activation", "").empty() ||
        p.attrs.Int("residual_after_activation", 0) != 0)
      continue;
    const Tensor &xt = graph.tensor(x), &yt = graph.tensor(chain.outputs[0]);
    if (xt.dtype != yt.dtype || xt.shape != yt.shape)
      continue;
    if (op == OpKind::kConv)
      p.op = OpKind::kFusedConv;
    if (op == OpKind::kGemm || op == OpKind::kMatMul) {
      p.op = OpKind::kFusedGemm;
      if (op == OpKind::kMatMul) {
        p.attrs.Set("alpha", 1.f);
        p.attrs.Set("beta", 1.f);
      }
    }
    p.attrs.Set("activation", std::string("Chain"));
    for (const char *key : {"ops", "operand", "swap", "step_alpha", "step_beta"}) {
      auto it = chain.attrs.map().find(key);
      if (it != chain.attrs.map().end())
        p.attrs.Set(key, it->second);
    }
    p.outputs[0] = chain.outputs[0];
    gone[k] = true;
  }
  graph.RemoveNodes(gone);
  return Status::Ok();
}

Status EliminateDeadCode(Graph &graph) {
  graph.RemoveDeadCode();
  return Status::Ok();
}

Status OptimizeGraph(Graph &graph, const OptimizeOptions &options) {
  if (options.fuse) {
    OP_RETURN_IF_ERROR(FuseQuantizedConv(graph));
    OP_RETURN_IF_ERROR(FuseQuantizedMatMul(graph));
    OP_RETURN_IF_ERROR(FuseQuantizedLookup(graph));
  }
  OP_RETURN_IF_ERROR(FoldDequantizeLinear(graph));
  OP_RETURN_IF_ERROR(FoldConstants(graph));
  OP_RETURN_IF_ERROR(RemoveIdentities(graph));
  OP_RETURN_IF_ERROR(RemoveCastPairs(graph));
  if (options.fuse) {
    OP_RETURN_IF_ERROR(FoldBatchNormIntoConv(graph));
    OP_RETURN_IF_ERROR(FuseLayerNormalization(graph));
    OP_RETURN_IF_ERROR(MixAlongRows(graph));
    OP_RETURN_IF_ERROR(FuseConvGemm(graph));
    OP_RETURN_IF_ERROR(FuseElementwiseChains(graph));
    OP_RETURN_IF_ERROR(FuseChainIntoEpilogue(graph));
    OP_RETURN_IF_ERROR(FuseQuantizeIntoChain(graph));
  }
  OP_RETURN_IF_ERROR(EliminateDeadCode(graph));
  return graph.Validate();
}

}  // namespace op::nn
