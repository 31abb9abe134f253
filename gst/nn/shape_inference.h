// Shape inference: makes every tensor's dtype and shape static, after binding the graph inputs.
#pragma once

#include <map>
#include <string>

#include "nn/graph.h"

namespace op::nn {

// Input shape bindings: tensor name → full static shape ("img=1,12,128,256").
using ShapeBindings = std::map<std::string, Shape>;

// Parses "name=d0,d1,..." into bindings (several options may be given); errors name the option.
Status ParseShapeBinding(const std::string &option, ShapeBindings *bindings);

// Binds input shapes (a binding replaces an input's symbolic or unknown dims; a binding that
// contradicts a fixed dim is an error), then infers dtype and shape of every node output in
// order. Nodes whose inputs are all constant are evaluated (reference interpreter) and become
// constants, so shape computations (Shape, Gather, Concat, Unsqueeze, ConstantOfShape, Range,
// ...) fold away. On success every tensor has a static shape. Errors name the node and reason.
Status InferShapes(Graph &graph, const ShapeBindings &bindings = {});

// Infers the output dtypes and shapes of one node from its inputs' (which must be static);
// constant inputs that determine shapes (Reshape's shape, Slice's starts, ...) must be constant.
// Used by InferShapes and by passes that build new nodes.
Status InferNode(Graph &graph, const Node &node);

// Folds one typed node whose values are known now: every input constant (evaluated by the
// reference interpreter), or Shape/Size of a statically shaped input. Writes the data of the
// node's outputs, which become constants, and returns true; the caller removes the node. Returns
// false, writing nothing, when a value depends on a graph input. Used by InferShapes and the
// FoldConstants pass. A DequantizeLinear is folded only with `fold_dequantize`: until the
// FuseQuantizedConv pass has looked at it, its integer weights are worth more than their float
// values (the FoldDequantizeLinear pass folds what is left).
StatusOr<bool> FoldNode(Graph &graph, const Node &node, bool fold_dequantize = false);

}  // namespace op::nn
