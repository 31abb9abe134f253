// Elementwise kernels and index maps, one work-item per element of the iteration space.
//
// Code generation defines the parts that depend on the graph (built from the table of per-op
// snippets in codegen_eltwise.cpp), ahead of this file:
//   ELT_PARAMS  the argument list: inputs (pointer + element offset), outputs, in that order
//   ELT_N       the number of elements of the iteration space
//   ELT_BODY    statements that load the operands of element `i`, compute, and store
// This covers unary/binary/variadic math with broadcasting, fused elementwise chains, Cast,
// Where, and the layout ops that are index maps (Transpose, Slice, Pad, Tile, Expand, Concat,
// Split, Gather, DepthToSpace, nearest Resize).
#include "nn_common.cl"
#ifdef ELT_QUANT
// a chain's fused quantizer
#include "quant.cl"
#endif

__kernel void eltwise(ELT_PARAMS) {
  const uint i = get_global_id(0);
  if (i >= ELT_N)
    return;
  ELT_BODY
}
