// opc quantize: post-training int8 quantization of an ONNX model into a QDQ model.
//
//   opc quantize MODEL --calibration DIR -o OUT.onnx [--method minmax|percentile|entropy]
//                [--percentile P] [--frames N] [--report] [--keep-float N | --keep NODE,...]
//                [--quantize-outputs]
//
// 1. The model becomes its float32 twin (float16 weights widened, casts to float16 made casts to
//    float32): DequantizeLinear yields float32, and calibration should see float32 values.
// 2. The reference interpreter runs the twin on every calibration frame (DIR holds
//    `<input>-<frame>.npy`, as `opreplay --dump-inputs` or the elements' `dump-inputs` write
//    them) and collects each quantized activation's range and histograms.
// 3. Every Conv, Gemm and MatMul (a "layer") gets QuantizeLinear → DequantizeLinear on its
//    activation inputs (uint8, per tensor) and DequantizeLinear on its constant weight (int8,
//    per output channel); biases stay float. Layers kept in float are left as they were.
// 4. --report (and --keep-float N, which needs it) measures each layer's sensitivity: the
//    outputs' error with that layer alone quantized, simulated with the interpreter (exactly
//    the QuantizeLinear/DequantizeLinear arithmetic on the float values).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "cl/half.h"
#include "nn/npy.h"
#include "nn/onnx_import.h"
#include "nn/reference.h"
#include "opc.h"
#include "quantize.h"

namespace fs = std::filesystem;
using namespace op;
using namespace op::nn;

namespace opc {
namespace {

using quant::ActivationParams;
using quant::ActivationStats;
using quant::Method;

struct Options {
  std::string model, calibration, out;
  Method method = Method::kMinMax;
  double percentile = 99.99;
  size_t max_frames = 0;  // 0: all
  bool report = false;
  bool quantize_outputs = false;
  int keep_float = 0;
  std::vector<std::string> keep;
};

// A Conv / Gemm / MatMul and what of it is quantized.
struct Layer {
  int node = -1;  // index into graph.nodes
  std::string name;
  std::string op;
  int weight_input = -1;  // input index of the constant weight, or -1
  int weight_axis = -1;   // its output-channel axis, -1 for one scale
  std::vector<int> activation_inputs;
  quant::QuantizedWeight qweight;
  Tensor dequantized_weight;  // float32 q · scale, for the simulation
  // --quantize-outputs: the output gets QuantizeLinear → DequantizeLinear and a constant bias
  // (Conv's B, Gemm's C along the weight's channels) becomes int32 with scale
  // activation scale × weight scale[c], so that integer runtimes can fold the layer whole.
  bool quantize_output = false;
  int bias_input = -1;
  std::vector<int32_t> qbias;
  std::vector<float> bias_scale;
  Tensor dequantized_bias;
};

// ---- The float32 twin ---------------------------------------------------------------------

void WidenTensorProto(onnx::TensorProto *t) {
  if (t->data_type() != onnx::TensorProto::FLOAT16)
    return;
  std::vector<float> v;
  if (t->has_raw_data()) {
    const std::string &raw = t->raw_data();
    v.resize(raw.size() / 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      v[i] = cl::HalfToFloat(h);
    }
  } else {
    for (int32_t h : t->int32_data())
      v.push_back(cl::HalfToFloat(static_cast<uint16_t>(h)));
  }
  t->clear_int32_data();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->set_raw_data(std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4));
}

void WidenType(onnx::TypeProto *type) {
  if (type->has_tensor_type() && type->tensor_type().elem_type() == onnx::TensorProto::FLOAT16)
    type->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

void ToFloat32Twin(onnx::ModelProto *model) {
  onnx::GraphProto *g = model->mutable_graph();
  for (auto &init : *g->mutable_initializer())
    WidenTensorProto(&init);
  for (auto &node : *g->mutable_node())
    for (auto &attr : *node.mutable_attribute()) {
      if (attr.has_t())
        WidenTensorProto(attr.mutable_t());
      if (node.op_type() == "Cast" && attr.name() == "to" && attr.i() == onnx::TensorProto::FLOAT16)
        attr.set_i(onnx::TensorProto::FLOAT);
    }
  for (auto &vi : *g->mutable_input())
    WidenType(vi.mutable_type());
  for (auto &vi : *g->mutable_output())
    WidenType(vi.mutable_type());
  g->clear_value_info();  // onnxruntime infers the intermediate types again
}

// ---- Calibration data ---------------------------------------------------------------------

std::string FileStem(const std::string &name) {
  std::string s;
  for (char c : name)
    s += (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return s.empty() ? "input" : s;
}

// frame → (input → path) for the frames that have every input.
StatusOr<std::map<uint64_t, std::map<std::string, std::string>>> ListFrames(
    const std::string &dir, const std::vector<std::string> &inputs) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return NotFound("--calibration " + dir + ": not a folder");
  std::map<uint64_t, std::map<std::string, std::string>> frames;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    for (const std::string &input : inputs) {
      const std::string prefix = FileStem(input) + "-";
      if (file.size() <= prefix.size() + 4 || file.compare(0, prefix.size(), prefix) ||
          file.compare(file.size() - 4, 4, ".npy"))
        continue;
      const std::string num = file.substr(prefix.size(), file.size() - prefix.size() - 4);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos)
        continue;
      frames[std::stoull(num)][input] = entry.path().string();
    }
  }
  if (ec)
    return IoError("--calibration " + dir + ": " + ec.message());
  for (auto it = frames.begin(); it != frames.end();)
    it = it->second.size() == inputs.size() ? std::next(it) : frames.erase(it);
  if (frames.empty()) {
    std::string names;
    for (const std::string &i : inputs)
      names += (names.empty() ? "" : ", ") + FileStem(i) + "-NNNNNN.npy";
    return NotFound("--calibration " + dir + ": no frame has every input of the model (" + names +
                    ")");
  }
  return frames;
}

// Reads one frame's inputs, converting float16 data for a float32 input (a device that ran in
// half precision dumps half).
StatusOr<std::vector<Tensor>> ReadFrame(const Graph &g,
                                        const std::map<std::string, std::string> &files) {
  std::vector<Tensor> out;
  for (TensorId id : g.inputs) {
    const Tensor &want = g.tensor(id);
    const std::string &path = files.at(want.name);
    OP_ASSIGN_OR_RETURN(Tensor t, ReadNpy(path));
    t.name = want.name;
    if (t.dtype == DType::kFloat16 && want.dtype == DType::kFloat32) {
      const size_t n = t.data->size() / 2;
      Bytes b(n * 4);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data->data() + 2 * i, 2);
        const float f = cl::HalfToFloat(h);
        std::memcpy(b.data() + 4 * i, &f, 4);
      }
      t.dtype = DType::kFloat32;
      t.data = std::make_shared<const Bytes>(std::move(b));
    }
    if (t.dtype != want.dtype)
      return InvalidArgument(path + ": " + DTypeName(t.dtype) + ", but the model's input '" +
                             want.name + "' is " + DTypeName(want.dtype));
    // Every frame must fit the shapes bound from the first (the interpreter trusts its values).
    bool fits = t.shape.rank() == want.shape.rank();
    for (size_t i = 0; fits && i < t.shape.rank(); ++i)
      fits = want.shape[i] < 0 || want.shape[i] == t.shape[i];
    if (!fits)
      return InvalidArgument(path + ": shape " + t.shape.ToString() + ", but the model's input '" +
                             want.name + "' is " + want.shape.ToString());
    out.push_back(std::move(t));
  }
  return out;
}

// ---- Running the graph with observation and simulated quantization -------------------------

std::vector<float> Floats(const Tensor &t) {
  std::vector<float> v(t.data->size() / 4);
  std::memcpy(v.data(), t.data->data(), v.size() * 4);
  return v;
}

Tensor WithFloats(const Tensor &like, const std::vector<float> &v) {
  Tensor t = like;
  t.data = std::make_shared<const Bytes>(reinterpret_cast<const uint8_t *>(v.data()),
                                         reinterpret_cast<const uint8_t *>(v.data() + v.size()));
  return t;
}

class Runner {
 public:
  Runner(const Graph &g, const std::vector<Layer> &layers,
         const std::map<TensorId, ActivationParams> &params)
      : g_(g), layers_(layers), params_(params), layer_of_(g.nodes.size(), -1) {
    for (size_t i = 0; i < layers.size(); ++i)
      layer_of_[layers[i].node] = static_cast<int>(i);
  }

  // Float run: every value of the graph, by tensor id. `observe(id, value)` sees each value
  // as it is made (graph inputs first).
  template <typename F>
  StatusOr<std::vector<Tensor>> RunFloat(const std::vector<Tensor> &inputs, F observe) const {
    std::vector<Tensor> vals(g_.tensors.size());
    for (size_t id = 0; id < g_.tensors.size(); ++id)
      if (g_.tensors[id].is_constant())
        vals[id] = g_.tensors[id];
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      vals[g_.inputs[i]] = inputs[i];
      observe(g_.inputs[i], vals[g_.inputs[i]]);
    }
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      OP_RETURN_IF_ERROR(Evaluate(k, false, &vals));
      for (TensorId o : g_.nodes[k].outputs)
        if (o != kNoTensor)
          observe(o, vals[o]);
    }
    return vals;
  }

  // From the float values `base`, recomputes what changes when the layers in `quantized` (one
  // flag per layer) compute with quantized inputs; returns the graph outputs.
  StatusOr<std::vector<Tensor>> RunQuantized(const std::vector<Tensor> &base,
                                             const std::vector<bool> &quantized) const {
    std::vector<Tensor> vals = base;  // shares the bytes
    std::vector<bool> dirty(g_.tensors.size(), false);
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      const int l = layer_of_[k];
      const bool q = l >= 0 && quantized[l];
      bool touched = q;
      for (TensorId in : g_.nodes[k].inputs)
        touched = touched || (in != kNoTensor && dirty[in]);
      if (!touched)
        continue;
      OP_RETURN_IF_ERROR(Evaluate(k, q, &vals));
      for (TensorId o : g_.nodes[k].outputs)
        if (o != kNoTensor)
          dirty[o] = true;
    }
    std::vector<Tensor> outs;
    for (TensorId o : g_.outputs)
      outs.push_back(vals[o]);
    return outs;
  }

 private:
  Status Evaluate(size_t k, bool quantize, std::vector<Tensor> *vals) const {
    const Node &node = g_.nodes[k];
    std::vector<const Tensor *> ins;
    std::vector<Tensor> modified;
    modified.reserve(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorId id = node.inputs[i];
      ins.push_back(id == kNoTensor ? nullptr : &(*vals)[id]);
    }
    if (quantize) {
      const Layer &layer = layers_[layer_of_[k]];
      if (layer.weight_input >= 0)
        ins[layer.weight_input] = &layer.dequantized_weight;
      if (layer.bias_input >= 0)
        ins[layer.bias_input] = &layer.dequantized_bias;
      for (int i : layer.activation_inputs) {
        std::vector<float> v = Floats(*ins[i]);
        quant::FakeQuantize(v.data(), v.size(), params_.at(node.inputs[i]));
        modified.push_back(WithFloats(*ins[i], v));
        ins[i] = &modified.back();
      }
    }
    auto outs = EvaluateNode(node, ins);
    if (!outs.ok())
      return Status(outs.status()).Prepend(node.Describe());
    if (quantize && layers_[layer_of_[k]].quantize_output) {
      std::vector<float> v = Floats((*outs)[0]);
      quant::FakeQuantize(v.data(), v.size(), params_.at(node.outputs[0]));
      (*outs)[0] = WithFloats((*outs)[0], v);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o)
      if (node.outputs[o] != kNoTensor)
        (*vals)[node.outputs[o]] = std::move((*outs)[o]);
    return Status::Ok();
  }

  const Graph &g_;
  const std::vector<Layer> &layers_;
  const std::map<TensorId, ActivationParams> &params_;
  std::vector<int> layer_of_;
};

// Output error against the float model over the calibration frames.
struct Error {
  double err2 = 0, ref2 = 0, max_abs = 0;
  void Add(const std::vector<Tensor> &ref, const std::vector<Tensor> &got) {
    for (size_t i = 0; i < ref.size(); ++i) {
      if (ref[i].dtype != DType::kFloat32)
        continue;
      const std::vector<float> a = Floats(ref[i]), b = Floats(got[i]);
      for (size_t j = 0; j < a.size(); ++j) {
        const double d = double(b[j]) - a[j];
        err2 += d * d;
        ref2 += double(a[j]) * a[j];
        max_abs = std::max(max_abs, std::fabs(d));
      }
    }
  }
  double relative_rms() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2); }
};

// ---- Finding the layers ---------------------------------------------------------------------

std::vector<Layer> FindLayers(const Graph &g) {
  std::vector<Layer> layers;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node &n = g.nodes[k];
    if (n.op != OpKind::kConv && n.op != OpKind::kGemm && n.op != OpKind::kMatMul)
      continue;
    Layer l;
    l.node = static_cast<int>(k);
    l.op = OpName(n.op);
    l.name = !n.name.empty() ? n.name : g.tensor(n.outputs[0]).name;
    for (int i = 0; i < 2 && i < int(n.inputs.size()); ++i) {
      const Tensor &t = g.tensor(n.inputs[i]);
      if (t.dtype != DType::kFloat32)
        continue;
      if (!t.is_constant()) {
        l.activation_inputs.push_back(i);
        continue;
      }
      if (l.weight_input >= 0)
        continue;  // both constant: folded away before this in practice
      l.weight_input = i;
      const int rank = static_cast<int>(t.shape.rank());
      if (n.op == OpKind::kConv && i == 1)
        l.weight_axis = 0;
      else if (n.op == OpKind::kGemm && i == 1)
        l.weight_axis = n.attrs.Int("transB", 0) ? 0 : 1;
      else if (n.op == OpKind::kMatMul && i == 1 && rank >= 2)
        l.weight_axis = rank - 1;
      else
        l.weight_axis = -1;  // a constant left operand: one scale
    }
    if (l.weight_input < 0 && l.activation_inputs.empty())
      continue;
    layers.push_back(std::move(l));
  }
  return layers;
}

// ---- Writing the QDQ model ------------------------------------------------------------------

onnx::TensorProto MakeInit(const std::string &name, int type, const std::vector<int64_t> &dims,
                           const void *data, size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims)
    t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char *>(data), bytes));
  return t;
}

onnx::NodeProto MakeNode(const std::string &op, const std::string &name,
                         const std::vector<std::string> &inputs, const std::string &output,
                         int axis = INT32_MIN) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string &i : inputs)
    n.add_input(i);
  n.add_output(output);
  if (axis != INT32_MIN) {
    onnx::AttributeProto *a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return n;
}

size_t InitializerBytes(const onnx::GraphProto &g) {
  size_t bytes = 0;
  for (const auto &t : g.initializer())
    bytes += t.ByteSizeLong();
  return bytes;
}

// Drops nodes whose outputs nobody reads and initializers nobody reads.
void Prune(onnx::GraphProto *g) {
  for (bool changed = true; changed;) {
    changed = false;
    std::set<std::string> used;
    for (const auto &n : g->node())
      for (const std::string &i : n.input())
        used.insert(i);
    for (const auto &o : g->output())
      used.insert(o.name());
    auto *nodes = g->mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i) {
      bool live = false;
      for (const std::string &o : nodes->Get(i).output())
        live = live || used.count(o);
      if (!live) {
        nodes->DeleteSubrange(i, 1);
        changed = true;
      }
    }
    auto *inits = g->mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i)
      if (!used.count(inits->Get(i).name()))
        inits->DeleteSubrange(i, 1);
  }
}

struct WriteStats {
  int quantize_nodes = 0, dequantize_nodes = 0;
};

Status WriteQdq(onnx::ModelProto model, const Graph &g, const std::vector<Layer> &layers,
                const std::vector<bool> &quantized,
                const std::map<TensorId, ActivationParams> &params, const std::string &out,
                WriteStats *stats) {
  onnx::GraphProto *pg = model.mutable_graph();
  std::set<std::string> taken;
  for (const auto &t : pg->initializer())
    taken.insert(t.name());
  for (const auto &n : pg->node())
    for (const std::string &o : n.output())
      taken.insert(o);
  for (const auto &i : pg->input())
    taken.insert(i.name());
  auto unique = [&](const std::string &base) {
    std::string s = base;
    for (int k = 2; taken.count(s); ++k)
      s = base + "_" + std::to_string(k);
    taken.insert(s);
    return s;
  };
  std::map<std::string, int> producer_of;  // output name → proto node index
  for (int i = 0; i < pg->node_size(); ++i)
    for (const std::string &o : pg->node(i).output())
      producer_of[o] = i;

  std::map<std::string, std::string> weight_dq, act_dq;  // float name → dequantized name
  std::vector<onnx::NodeProto> head;                     // weight DequantizeLinear nodes
  std::map<int, std::vector<onnx::NodeProto>> before;    // proto node → Q/DQ to put before it
  std::map<int, std::vector<onnx::NodeProto>> after;     // proto node → its output's Q/DQ
  std::map<std::string, std::pair<std::string, std::string>> out_qdq;  // y → (its Q, its DQ)
  for (size_t li = 0; li < layers.size(); ++li) {
    if (!quantized[li])
      continue;
    const Layer &l = layers[li];
    const Node &node = g.nodes[l.node];
    const std::string out0 = g.tensor(node.outputs[0]).name;
    auto it = producer_of.find(out0);
    if (it == producer_of.end())
      return Internal("quantize: layer " + l.name + " not found in the model");
    onnx::NodeProto *pn = pg->mutable_node(it->second);
    auto rewire = [&](int input, const std::string &to) -> Status {
      const std::string &from = g.tensor(node.inputs[input]).name;
      if (input >= pn->input_size() || pn->input(input) != from)
        return Internal("quantize: layer " + l.name + " input " + std::to_string(input) +
                        " is not '" + from + "' in the model");
      pn->set_input(input, to);
      return Status::Ok();
    };
    if (l.weight_input >= 0) {
      const Tensor &w = g.tensor(node.inputs[l.weight_input]);
      // By content: an exporter's Identity copies of one weight (folded on import) share one
      // int8 tensor.
      std::string key = w.shape.ToString() + "#" + std::to_string(l.weight_axis) + "#";
      key.append(reinterpret_cast<const char *>(w.data->data()), w.data->size());
      if (!weight_dq.count(key)) {
        const std::string q = unique(w.name + "_quantized"), s = unique(w.name + "_scale"),
                          z = unique(w.name + "_zero_point"), dq = unique(w.name + "_dequantized");
        const std::vector<int8_t> zeros(l.qweight.scale.size(), 0);
        const std::vector<int64_t> sdims =
            l.weight_axis >= 0 ? std::vector<int64_t>{int64_t(l.qweight.scale.size())}
                               : std::vector<int64_t>{};
        *pg->add_initializer() = MakeInit(q, onnx::TensorProto::INT8, w.shape.dims,
                                          l.qweight.q.data(), l.qweight.q.size());
        *pg->add_initializer() = MakeInit(s, onnx::TensorProto::FLOAT, sdims,
                                          l.qweight.scale.data(), l.qweight.scale.size() * 4);
        *pg->add_initializer() =
            MakeInit(z, onnx::TensorProto::INT8, sdims, zeros.data(), zeros.size());
        head.push_back(MakeNode("DequantizeLinear", dq, {q, s, z}, dq,
                                l.weight_axis >= 0 ? l.weight_axis : INT32_MIN));
        ++stats->dequantize_nodes;
        weight_dq[key] = dq;
      }
      OP_RETURN_IF_ERROR(rewire(l.weight_input, weight_dq[key]));
    }
    for (int i : l.activation_inputs) {
      const TensorId id = node.inputs[i];
      const std::string &x = g.tensor(id).name;
      if (!act_dq.count(x)) {
        const ActivationParams p = params.at(id);
        const std::string s = unique(x + "_scale"), z = unique(x + "_zero_point"),
                          q = unique(x + "_quantized"), dq = unique(x + "_dequantized");
        *pg->add_initializer() = MakeInit(s, onnx::TensorProto::FLOAT, {}, &p.scale, 4);
        *pg->add_initializer() = MakeInit(z, onnx::TensorProto::UINT8, {}, &p.zero_point, 1);
        before[it->second].push_back(MakeNode("QuantizeLinear", q, {x, s, z}, q));
        before[it->second].push_back(MakeNode("DequantizeLinear", dq, {q, s, z}, dq));
        ++stats->quantize_nodes;
        ++stats->dequantize_nodes;
        act_dq[x] = dq;
      }
      OP_RETURN_IF_ERROR(rewire(i, act_dq[x]));
    }
    if (l.bias_input >= 0) {
      const std::string &b = g.tensor(node.inputs[l.bias_input]).name;
      const std::string q = unique(b + "_quantized"), s = unique(b + "_scale"),
                        z = unique(b + "_zero_point"), dq = unique(b + "_dequantized");
      const std::vector<int32_t> zeros(l.qbias.size(), 0);
      const std::vector<int64_t> dims{int64_t(l.qbias.size())};
      *pg->add_initializer() =
          MakeInit(q, onnx::TensorProto::INT32, dims, l.qbias.data(), l.qbias.size() * 4);
      *pg->add_initializer() =
          MakeInit(s, onnx::TensorProto::FLOAT, dims, l.bias_scale.data(), l.bias_scale.size() * 4);
      *pg->add_initializer() =
          MakeInit(z, onnx::TensorProto::INT32, dims, zeros.data(), zeros.size() * 4);
      head.push_back(MakeNode("DequantizeLinear", dq, {q, s, z}, dq, 0));
      ++stats->dequantize_nodes;
      OP_RETURN_IF_ERROR(rewire(l.bias_input, dq));
    }
    if (l.quantize_output) {
      const ActivationParams p = params.at(node.outputs[0]);
      const std::string s = unique(out0 + "_scale"), z = unique(out0 + "_zero_point"),
                        q = unique(out0 + "_quantized"), dq = unique(out0 + "_dequantized");
      *pg->add_initializer() = MakeInit(s, onnx::TensorProto::FLOAT, {}, &p.scale, 4);
      *pg->add_initializer() = MakeInit(z, onnx::TensorProto::UINT8, {}, &p.zero_point, 1);
      after[it->second].push_back(MakeNode("QuantizeLinear", q, {out0, s, z}, q));
      after[it->second].push_back(MakeNode("DequantizeLinear", dq, {q, s, z}, dq));
      ++stats->quantize_nodes;
      ++stats->dequantize_nodes;
      out_qdq[out0] = {q, dq};
    }
  }
  // Topological order: weight DequantizeLinear first (they read initializers only), each
  // activation's pair right before its first quantized reader.
  std::vector<onnx::NodeProto> nodes = head;
  for (int i = 0; i < pg->node_size(); ++i) {
    auto b = before.find(i);
    if (b != before.end())
      nodes.insert(nodes.end(), b->second.begin(), b->second.end());
    nodes.push_back(pg->node(i));
    auto a = after.find(i);
    if (a != after.end())
      nodes.insert(nodes.end(), a->second.begin(), a->second.end());
  }
  // Every reader of a quantized layer output but its QuantizeLinear reads the dequantized one.
  for (onnx::NodeProto &n : nodes)
    for (int k = 0; k < n.input_size(); ++k) {
      auto o = out_qdq.find(n.input(k));
      if (o != out_qdq.end() && n.name() != o->second.first)
        n.set_input(k, o->second.second);
    }
  pg->clear_node();
  for (auto &n : nodes)
    *pg->add_node() = std::move(n);
  Prune(pg);
  bool has_opset = false;
  for (auto &os : *model.mutable_opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") {
      has_opset = true;
      if (os.version() < 13)
        return Unsupported("quantize: the model's opset " + std::to_string(os.version()) +
                           " lacks per-channel DequantizeLinear (opset 13)");
    }
  if (!has_opset)
    return Unsupported("quantize: the model imports no default-domain opset");
  std::ofstream f(out, std::ios::binary);
  if (!f || !model.SerializeToOstream(&f))
    return IoError(out + ": cannot write");
  f.close();
  if (!f)
    return IoError(out + ": cannot write");
  return Status::Ok();
}

// ---- The command ---------------------------------------------------------------------------

StatusOr<Options> ParseOptions(const Args &args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    const bool takes = a == "--calibration" || a == "--method" || a == "--percentile" ||
                       a == "--frames" || a == "--keep-float" || a == "--keep" || a == "-o";
    if (takes && i + 1 >= args.size())
      return InvalidArgument("quantize: " + a + " needs a value");
    if (a == "--calibration") {
      o.calibration = args[++i];
    } else if (a == "-o") {
      o.out = args[++i];
    } else if (a == "--method") {
      if (!quant::ParseMethod(args[++i], &o.method))
        return InvalidArgument("quantize: --method is minmax, percentile or entropy, not '" +
                               args[i] + "'");
    } else if (a == "--percentile") {
      char *end = nullptr;
      o.percentile = std::strtod(args[++i].c_str(), &end);
      if (end == args[i].c_str() || *end || !(o.percentile > 50 && o.percentile <= 100))
        return InvalidArgument(
            "quantize: --percentile takes a number above 50 and at most "
            "100, not '" +
            args[i] + "'");
    } else if (a == "--frames" || a == "--keep-float") {
      char *end = nullptr;
      const long v = std::strtol(args[++i].c_str(), &end, 10);
      if (end == args[i].c_str() || *end || v < (a == "--frames" ? 1 : 0) || v > 1000000)
        return InvalidArgument("quantize: " + a + " takes a whole number, not '" + args[i] + "'");
      if (a == "--frames")
        o.max_frames = static_cast<size_t>(v);
      else
        o.keep_float = static_cast<int>(v);
    } else if (a == "--keep") {
      std::stringstream ss(args[++i]);
      for (std::string name; std::getline(ss, name, ',');)
        if (!name.empty())
          o.keep.push_back(name);
    } else if (a == "--report") {
      o.report = true;
    } else if (a == "--quantize-outputs") {
      o.quantize_outputs = true;
    } else if (o.model.empty() && !a.empty() && a[0] != '-') {
      o.model = a;
    } else {
      return InvalidArgument("quantize: unexpected argument '" + a + "'");
    }
  }
  if (o.model.empty())
    return InvalidArgument("quantize: no model given");
  if (o.calibration.empty())
    return InvalidArgument("quantize: --calibration DIR is required (see opreplay --dump-inputs)");
  if (o.out.empty())
    return InvalidArgument("quantize: -o OUT.onnx is required");
  if (o.keep_float > 0 && !o.keep.empty())
    return InvalidArgument("quantize: give --keep-float N or --keep NODE,..., not both");
  // Found before the calibration runs (minutes on a large model), not when writing at the end.
  const fs::path out_dir = fs::path(o.out).parent_path();
  std::error_code ec;
  if (!out_dir.empty() && !fs::is_directory(out_dir, ec))
    return NotFound("quantize: -o " + o.out + ": the folder " + out_dir.string() +
                    " does not exist");
  return o;
}

}  // namespace

int Quantize(const Args &args) {
  for (const std::string &a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(
          "usage: opc quantize MODEL --calibration DIR -o OUT.onnx [options]\n"
          "Writes a QDQ ONNX model: int8 weights per output channel, uint8 activations per\n"
          "tensor, calibrated on the float MODEL's inputs in DIR (<input>-<frame>.npy, as\n"
          "opreplay --dump-inputs DIR writes them; every frame in DIR is used).\n"
          "  --method M          minmax (default), percentile or entropy (KL)\n"
          "  --percentile P      the percentile method's cut, above 50 and at most 100 "
          "(99.99)\n"
          "  --frames N          use only the first N frames of DIR, in frame order\n"
          "  --report            each layer's effect on the outputs when it alone is int8\n"
          "  --keep-float N      keep the N most sensitive layers (by that report) in float\n"
          "  --keep NODE,...     keep these layers (names as the report prints them) in float\n"
          "  --quantize-outputs  also quantize layer outputs and biases (integer runtimes fold\n"
          "                      the whole DQ -> layer -> Q group)\n"
          "MODEL must be a float model (a quantized one is refused).\n",
          stdout);
      return 0;
    }
  auto parsed = ParseOptions(args);
  if (!parsed.ok())
    return Fail(parsed.status());
  const Options &o = *parsed;

  onnx::ModelProto model;
  {
    std::ifstream f(o.model, std::ios::binary);
    if (!f)
      return Fail(NotFound(o.model + ": cannot open"));
    if (!model.ParseFromIstream(&f))
      return Fail(Corrupt(o.model + ": truncated or not an ONNX model (protobuf parse failed)"));
  }
  // Quantizing a quantized model would stack a second QuantizeLinear/DequantizeLinear pair on
  // every layer (and calibrate on already rounded values): the float model is the input.
  for (const auto &n : model.graph().node())
    if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear" ||
        n.op_type() == "DynamicQuantizeLinear" || n.op_type() == "QLinearConv" ||
        n.op_type() == "QLinearMatMul" || n.op_type() == "ConvInteger" ||
        n.op_type() == "MatMulInteger")
      return Fail(InvalidArgument(o.model + ": already quantized (node '" + n.name() + "' is " +
                                  n.op_type() + "): quantize the float model it was made from"));
  for (const auto &t : model.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      return Fail(Unsupported(o.model + ": initializer '" + t.name() +
                              "' has external data, which opc quantize does not read"));
  ToFloat32Twin(&model);
  ImportOptions import_options;
  import_options.base_dir = fs::path(o.model).parent_path().string();
  auto imported = ImportOnnxBytes(model.SerializeAsString(), import_options);
  if (!imported.ok())
    return Fail(Status(imported.status()).Prepend(o.model));
  Graph &g = *imported;

  std::vector<std::string> input_names;
  for (TensorId id : g.inputs)
    input_names.push_back(g.tensor(id).name);
  auto frames = ListFrames(o.calibration, input_names);
  if (!frames.ok())
    return Fail(frames.status());
  std::vector<std::map<std::string, std::string>> files;
  for (auto &[n, f] : *frames)
    if (!o.max_frames || files.size() < o.max_frames)
      files.push_back(f);

  // Shapes from the first frame (the interpreter checks every later one).
  {
    auto first = ReadFrame(g, files[0]);  // checks them against the declared dims
    if (!first.ok())
      return Fail(first.status());
    ShapeBindings shapes;
    for (const Tensor &t : *first)
      shapes[t.name] = t.shape;
    Status st = InferShapes(g, shapes);
    if (!st.ok())
      return Fail(st.Prepend(o.model));
  }

  std::vector<Layer> layers = FindLayers(g);
  if (layers.empty())
    return Fail(Unsupported(o.model + ": no Conv, Gemm or MatMul to quantize"));
  for (Layer &l : layers) {
    if (l.weight_input < 0)
      continue;
    const Tensor &w = g.tensor(g.nodes[l.node].inputs[l.weight_input]);
    l.qweight = quant::QuantizeWeight(Floats(w), w.shape.dims, l.weight_axis);
    l.dequantized_weight =
        WithFloats(w, quant::DequantizeWeight(l.qweight, w.shape.dims, l.weight_axis));
  }
  std::map<TensorId, ActivationStats> stats;
  for (Layer &l : layers) {
    const Node &n = g.nodes[l.node];
    for (int i : l.activation_inputs)
      stats[n.inputs[i]];
    const Tensor &y = g.tensor(n.outputs[0]);
    if (o.quantize_outputs && y.dtype == DType::kFloat32 && !y.is_output) {
      l.quantize_output = true;
      stats[n.outputs[0]];
    }
  }

  // Calibration: pass 1 finds each range, pass 2 (percentile, entropy) fills the histograms.
  const std::map<TensorId, ActivationParams> no_params;
  const std::vector<Layer> no_layers;
  Runner float_runner(g, no_layers, no_params);
  const int passes = o.method == Method::kMinMax ? 1 : 2;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass == 1)
      for (auto &[id, s] : stats)
        s.StartHistograms();
    for (const auto &f : files) {
      auto inputs = ReadFrame(g, f);
      if (!inputs.ok())
        return Fail(inputs.status());
      auto vals = float_runner.RunFloat(*inputs, [&](TensorId id, const Tensor &v) {
        auto it = stats.find(id);
        if (it == stats.end())
          return;
        const float *x = reinterpret_cast<const float *>(v.data->data());
        const size_t n = v.data->size() / 4;
        pass == 0 ? it->second.AddRange(x, n) : it->second.AddHistogram(x, n);
      });
      if (!vals.ok())
        return Fail(vals.status());
    }
  }
  std::map<TensorId, ActivationParams> params;
  for (const auto &[id, s] : stats) {
    quant::Range r = o.method == Method::kMinMax       ? quant::MinMaxRange(s)
                     : o.method == Method::kPercentile ? quant::PercentileRange(s, o.percentile)
                                                       : quant::EntropyRange(s);
    params[id] = quant::Uint8Params(r);
  }
  if (o.quantize_outputs)
    for (Layer &l : layers) {
      const Node &n = g.nodes[l.node];
      const bool biased = n.op == OpKind::kConv || n.op == OpKind::kGemm;
      if (!biased || l.weight_input != 1 || l.weight_axis < 0 ||
          l.activation_inputs != std::vector<int>{0} || n.input(2) == kNoTensor)
        continue;
      const Tensor &b = g.tensor(n.inputs[2]);
      if (!b.is_constant() || b.dtype != DType::kFloat32 || b.shape.rank() != 1 ||
          size_t(b.shape[0]) != l.qweight.scale.size())
        continue;
      const float sx = params.at(n.inputs[0]).scale;
      const std::vector<float> bf = Floats(b);
      std::vector<float> deq(bf.size());
      l.bias_input = 2;
      for (size_t c = 0; c < bf.size(); ++c) {
        const float sc = sx * l.qweight.scale[c];
        const double q = std::nearbyint(double(bf[c]) / sc);
        l.qbias.push_back(static_cast<int32_t>(std::clamp(q, -2147483647.0, 2147483647.0)));
        l.bias_scale.push_back(sc);
        deq[c] = float(l.qbias.back()) * sc;
      }
      l.dequantized_bias = WithFloats(b, deq);
    }

  std::printf("opc quantize: %s, %zu calibration frame%s, method %s", o.model.c_str(), files.size(),
              files.size() == 1 ? "" : "s", quant::MethodName(o.method));
  if (o.method == Method::kPercentile)
    std::printf(" (%g)", o.percentile);
  std::printf(
      "\n  weights int8 symmetric per output channel; activations uint8 per tensor; "
      "%zu layers\n",
      layers.size());

  // Sensitivity and the error of the result, simulated on the float values.
  std::vector<bool> quantized(layers.size(), true);
  for (const std::string &name : o.keep) {
    size_t i = 0;
    while (i < layers.size() && layers[i].name != name)
      ++i;
    if (i == layers.size())
      return Fail(NotFound("quantize: --keep '" + name +
                           "' is no Conv, Gemm or MatMul of the model (see --report)"));
    quantized[i] = false;
  }
  const bool measure = o.report || o.keep_float > 0;
  if (measure) {
    Runner runner(g, layers, params);
    std::vector<Error> alone(layers.size());
    Error all;
    std::vector<bool> one(layers.size(), false);
    // One calibration frame in float: every value (what the quantized runs start from).
    auto run_float =
        [&](const std::map<std::string, std::string> &f) -> StatusOr<std::vector<Tensor>> {
      OP_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, ReadFrame(g, f));
      return runner.RunFloat(inputs, [](TensorId, const Tensor &) {});
    };
    auto outputs_of = [&](const std::vector<Tensor> &values) {
      std::vector<Tensor> ref;
      for (TensorId id : g.outputs)
        ref.push_back(values[id]);
      return ref;
    };
    for (const auto &f : files) {
      auto base = run_float(f);
      if (!base.ok())
        return Fail(base.status());
      const std::vector<Tensor> ref = outputs_of(*base);
      for (size_t l = 0; l < layers.size(); ++l) {
        one.assign(layers.size(), false);
        one[l] = true;
        auto got = runner.RunQuantized(*base, one);
        if (!got.ok())
          return Fail(got.status());
        alone[l].Add(ref, *got);
      }
      auto got = runner.RunQuantized(*base, std::vector<bool>(layers.size(), true));
      if (!got.ok())
        return Fail(got.status());
      all.Add(ref, *got);
    }
    std::vector<size_t> order(layers.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return alone[a].relative_rms() > alone[b].relative_rms();
    });
    if (o.keep_float > 0)
      for (int r = 0; r < o.keep_float && r < int(order.size()); ++r)
        quantized[order[r]] = false;
    if (o.report) {
      std::printf(
          "layer sensitivity: the outputs' error with this layer alone in int8 "
          "(relative RMS over all outputs and frames; largest absolute error)\n");
      std::printf("  %4s  %-56s %-7s %10s %10s\n", "rank", "layer", "op", "rel-rms", "max-abs");
      for (size_t r = 0; r < order.size(); ++r) {
        const size_t l = order[r];
        std::printf("  %4zu  %-56s %-7s %10.3g %10.3g%s\n", r + 1, layers[l].name.c_str(),
                    layers[l].op.c_str(), alone[l].relative_rms(), alone[l].max_abs,
                    quantized[l] ? "" : "  (kept in float)");
      }
    }
    std::printf("every layer int8: rel-rms %.3g, max-abs %.3g\n", all.relative_rms(), all.max_abs);
    bool any_kept = false;
    for (size_t r = 0; r < order.size(); ++r) {
      const size_t l = order[r];
      if (quantized[l])
        continue;
      any_kept = true;
      std::printf("kept in float: %s (%s, sensitivity rank %zu, rel-rms %.3g alone: %s)\n",
                  layers[l].name.c_str(), layers[l].op.c_str(), r + 1, alone[l].relative_rms(),
                  o.keep_float > 0 ? "--keep-float" : "--keep");
    }
    if (any_kept) {
      // Frame by frame again: one frame's values at a time bound the memory.
      Error mixed;
      for (const auto &f : files) {
        auto base = run_float(f);
        if (!base.ok())
          return Fail(base.status());
        auto got = runner.RunQuantized(*base, quantized);
        if (!got.ok())
          return Fail(got.status());
        mixed.Add(outputs_of(*base), *got);
      }
      std::printf("with those in float: rel-rms %.3g, max-abs %.3g\n", mixed.relative_rms(),
                  mixed.max_abs);
    }
  } else {
    for (size_t l = 0; l < layers.size(); ++l)
      if (!quantized[l])
        std::printf("kept in float: %s (%s, --keep)\n", layers[l].name.c_str(),
                    layers[l].op.c_str());
  }

  const size_t before = InitializerBytes(model.graph());
  WriteStats ws;
  Status st = WriteQdq(model, g, layers, quantized, params, o.out, &ws);
  if (!st.ok())
    return Fail(st);
  onnx::ModelProto written;
  {
    std::ifstream f(o.out, std::ios::binary);
    if (!written.ParseFromIstream(&f))
      return Fail(IoError(o.out + ": cannot read back"));
  }
  std::printf(
      "wrote %s: %d QuantizeLinear, %d DequantizeLinear; initializers %zu bytes (float32 "
      "twin) → %zu bytes\n",
      o.out.c_str(), ws.quantize_nodes, ws.dequantize_nodes, before,
      InitializerBytes(written.graph()));
  return 0;
}

}  // namespace opc
