// Shape inference (see shape_inference.h): binds inputs, types every node (op_types), folds.
#include "nn/shape_inference.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "nn/op_params.h"
#include "nn/op_types.h"
#include "nn/reference.h"

namespace op::nn {
namespace {

Status Bad(const Node &n, const std::string &why) {
  return InvalidArgument(n.Describe() + ": " + why);
}

}  // namespace

Status ParseShapeBinding(const std::string &option, ShapeBindings *bindings) {
  const size_t eq = option.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return InvalidArgument("shape option '" + option + "' is not name=d0,d1,...");
  Shape s;
  std::string dims = option.substr(eq + 1);
  size_t pos = 0;
  while (pos <= dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string d = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char *end = nullptr;
    long long v = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || v < 0)
      return InvalidArgument("shape option '" + option + "': '" + d + "' is not a dim");
    s.dims.push_back(v);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  (*bindings)[option.substr(0, eq)] = s;
  return Status::Ok();
}

Status InferNode(Graph &graph, const Node &node) {
  Inputs in;
  for (TensorId id : node.inputs)
    in.push_back(id == kNoTensor ? nullptr : &graph.tensor(id));
  OP_ASSIGN_OR_RETURN(auto outs, InferOutputTypes(node, in));
  OP_RETURN_IF_ERROR(CheckConstantIndices(node, in));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoTensor)
      continue;
    Tensor &t = graph.tensor(node.outputs[i]);
    // A declared graph output type (from the model) must agree with what we compute.
    if (t.is_output && t.dtype != DType::kUndefined && t.dtype != outs[i].dtype)
      return Bad(node, "output '" + t.name + "' is declared " + DTypeName(t.dtype) +
                           " but computes " + DTypeName(outs[i].dtype));
    t.dtype = outs[i].dtype;
    t.shape = outs[i].shape;
  }
  return Status::Ok();
}

StatusOr<bool> FoldNode(Graph &graph, const Node &node, bool fold_dequantize) {
  if (node.op == OpKind::kDequantizeLinear && !fold_dequantize)
    return false;
  bool all_const = !node.inputs.empty();
  for (TensorId id : node.inputs)
    if (id != kNoTensor && !graph.tensor(id).is_constant())
      all_const = false;
  const bool shape_only = (node.op == OpKind::kShape || node.op == OpKind::kSize) &&
                          node.input(0) != kNoTensor && !node.outputs.empty() &&
                          node.outputs[0] != kNoTensor &&
                          graph.tensor(node.input(0)).shape.IsStatic();
  if (!all_const && !shape_only)
    return false;
  if (!all_const) {
    // Shape and Size read only the input's (static) shape: no values needed.
    const Tensor &o = graph.tensor(node.outputs[0]);
    const Shape &xs = graph.tensor(node.inputs[0]).shape;
    std::vector<int64_t> v;
    if (node.op == OpKind::kSize) {
      v.push_back(xs.NumElements());
    } else {
      const int64_t r = static_cast<int64_t>(xs.rank());
      int64_t start = node.attrs.Int("start", 0), end = node.attrs.Int("end", r);
      if (start < 0)
        start += r;
      if (end < 0)
        end += r;
      for (int64_t i = std::clamp<int64_t>(start, 0, r); i < std::clamp<int64_t>(end, 0, r); ++i)
        v.push_back(xs[static_cast<size_t>(i)]);
    }
    graph.tensor(node.outputs[0]).data = MakeInt64Constant(v, o.shape).data;
    return true;
  }
  Inputs in;
  for (TensorId id : node.inputs)
    in.push_back(id == kNoTensor ? nullptr : &graph.tensor(id));
  auto vals = EvaluateNode(node, in);
  if (!vals.ok())
    return Status(vals.status()).Prepend("constant folding");
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (node.outputs[i] != kNoTensor)
      graph.tensor(node.outputs[i]).data = (*vals)[i].data;
  return true;
}

static Status InferShapesImpl(Graph &graph, const ShapeBindings &bindings);

Status InferShapes(Graph &graph, const ShapeBindings &bindings) {
  return OneLineStatus(InferShapesImpl(graph, bindings));
}

static Status InferShapesImpl(Graph &graph, const ShapeBindings &bindings) {
  for (const auto &[name, shape] : bindings) {
    TensorId id = graph.FindTensor(name);
    if (id == kNoTensor || !graph.tensor(id).is_input)
      return NotFound("shape option names '" + name + "', which is not an input of the model");
    Tensor &t = graph.tensor(id);
    if (!t.shape.dims.empty() && t.shape.rank() != shape.rank())
      return InvalidArgument("input '" + name + "' has rank " + std::to_string(t.shape.rank()) +
                             ", the option gives " + shape.ToString());
    for (size_t i = 0; i < t.shape.rank(); ++i)
      if (t.shape[i] >= 0 && t.shape[i] != shape[i])
        return InvalidArgument("input '" + name + "' has fixed shape " + t.shape.ToString() +
                               ", the option gives " + shape.ToString());
    t.shape = shape;
  }
  // A symbolic dim bound in one input ("batch" = 2) has that value in every input naming it.
  std::map<std::string, int64_t> named;
  for (TensorId id : graph.inputs) {
    const Tensor &t = graph.tensor(id);
    if (!bindings.count(t.name))
      continue;
    for (size_t i = 0; i < t.dim_params.size() && i < t.shape.rank(); ++i)
      if (!t.dim_params[i].empty())
        named[t.dim_params[i]] = t.shape[i];
  }
  for (TensorId id : graph.inputs) {
    Tensor &t = graph.tensor(id);
    for (size_t i = 0; i < t.dim_params.size() && i < t.shape.rank(); ++i) {
      auto it = named.find(t.dim_params[i]);
      if (t.shape[i] < 0 && it != named.end())
        t.shape[i] = it->second;
    }
  }
  for (TensorId id : graph.inputs) {
    const Tensor &t = graph.tensor(id);
    if (!t.shape.IsStatic() || t.dtype == DType::kUndefined) {
      std::string dims;
      for (size_t i = 0; i < t.dim_params.size(); ++i)
        if (!t.dim_params[i].empty())
          dims += (dims.empty() ? "" : ", ") + t.dim_params[i];
      return InvalidArgument("input '" + t.name + "' has shape " + t.shape.ToString() +
                             (dims.empty() ? "" : " (symbolic: " + dims + ")") +
                             "; bind it with a shape option " + t.name + "=d0,d1,...");
    }
  }
  std::vector<bool> folded(graph.nodes.size(), false);
  for (const Node &node : graph.nodes) {
    OP_RETURN_IF_ERROR(InferNode(graph, node));
    // Folding here removes shape computations before any pass looks at the graph.
    OP_ASSIGN_OR_RETURN(folded[&node - graph.nodes.data()], FoldNode(graph, node));
  }
  // Folded nodes are gone: their outputs are constants now.
  graph.RemoveNodes(folded);
  return Status::Ok();
}

}  // namespace op::nn
