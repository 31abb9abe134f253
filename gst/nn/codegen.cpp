// Code generation driver: storage decisions (aliases, I/O binding, weights), lowering of the
// compute ops (convolution, matrix products, pooling, reductions, softmax, normalisation,
// resize), the memory plan, and the final launch list. Elementwise ops and index maps are in
// codegen_eltwise.cpp.
#include "nn/codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "nn/codegen_internal.h"
#include "nn/op_params.h"
#include "nn/plan.h"
#include "nn/reference_ops.h"
#include "nn_kernels.h"
#include "nn_op_cases.h"

namespace op::nn {

const char *PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp16:
      return "fp16";
    case Precision::kInt8:
      return "int8";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

StatusOr<Precision> ParsePrecision(const std::string &s) {
  if (s == "fp32")
    return Precision::kFp32;
  if (s == "fp16")
    return Precision::kFp16;
  if (s == "int8")
    return Precision::kInt8;
  return InvalidArgument("precision '" + s + "' (expected fp32, fp16 or int8)");
}

bool HostHasAvx512Vnni() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

// GST_OP_INT8_DOT=0 turns the VNNI kernels off (to compare them with the float-summed ones).
static bool Int8DotAllowed() {
  const char *v = std::getenv("GST_OP_INT8_DOT");
  return v == nullptr || std::string(v) != "0";
}

CodegenOptions OptionsForDevice(const cl::Capabilities &caps, Precision precision) {
  CodegenOptions o;
  // A GPU of no profile of ours (NVIDIA, Intel, Mali...) gets the GPU kernels (one work-item
  // per output, the driver's own scheduling), which the AMD profile also uses: on an NVIDIA H200
  // they ran the full-size vision model 4.5 times as fast as the CPU profile's register blocks
  // (6.9 against 35 ms). Any other device of no profile gets the CPU profile's.
  o.profile =
      caps.profile == cl::Profile::kOther && !caps.is_gpu ? cl::Profile::kCpu : caps.profile;
  o.precision = precision;
  o.fp16_compute = precision == Precision::kFp16 && caps.fp16 && o.profile == cl::Profile::kAdreno;
  o.image_weights = o.profile == cl::Profile::kAdreno && caps.images;
  o.alignment = std::max<uint64_t>(caps.base_address_align_bits / 8, 16);
  o.device_name = caps.device_name;
  if (caps.is_cpu && (caps.native_float_lanes == 4 || caps.native_float_lanes == 8)) {
    o.simd_lanes = static_cast<int>(caps.native_float_lanes);
    // A CPU device is the host's own processor: x86 below AVX-512 has 16 vector registers
    // (xmm/ymm 0-15); AArch64's NEON has 32.
#if defined(__x86_64__) || defined(__i386__)
    o.simd_registers = 16;
#endif
  }
  o.int8_dot = caps.is_cpu && o.profile == cl::Profile::kCpu && o.simd_lanes == 16 &&
               HostHasAvx512Vnni() && Int8DotAllowed();
  return o;
}

StatusOr<CodegenOptions> OptionsForProfile(const std::string &profile, Precision precision) {
  CodegenOptions o;
  o.precision = precision;
  if (profile == "cpu") {
    o.profile = cl::Profile::kCpu;
  } else if (profile == "adreno") {
    o.profile = cl::Profile::kAdreno;
    o.fp16_compute = precision == Precision::kFp16;
    o.image_weights = true;
  } else if (profile == "amd") {
    o.profile = cl::Profile::kAmd;
    o.alignment = 256;
  } else if (profile == "other") {
    o.profile = cl::Profile::kOther;  // another GPU: the GPU kernels, no images, no half math
  } else {
    return InvalidArgument("device profile '" + profile + "' (expected cpu, adreno, amd or other)");
  }
  return o;
}

namespace gen {

Defines &Defines::Def(const std::string &name, const std::string &value) {
  text_ += "#define " + name + " " + value + "\n";
  return *this;
}
Defines &Defines::Append(const Defines &other) {
  text_ += other.text_;
  return *this;
}
Defines &Defines::Int(const std::string &name, int64_t value) {
  return Def(name, std::to_string(value));
}
Defines &Defines::Flt(const std::string &name, double value) {
  return Def(name, FloatLit(value));
}

std::string FloatLit(double v) {
  if (std::isnan(v))
    return "NAN";
  if (std::isinf(v))
    return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(static_cast<float>(v)));
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return "(" + s + "f)";
}

int64_t Product(const std::vector<int64_t> &dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < dims.size() && d < to; d++)
    p *= dims[d];
  return p;
}

std::string CoordExpr(const std::vector<int64_t> &dims, size_t d, const std::string &lin) {
  int64_t inner = Product(dims, d + 1);
  std::string s = inner == 1 ? "(" + lin + ")" : "((" + lin + ") / " + std::to_string(inner) + ")";
  if (d > 0)
    s = "(" + s + " % " + std::to_string(dims[d]) + ")";
  return s;
}

std::string BroadcastIndex(const std::vector<int64_t> &out, const std::vector<int64_t> &in,
                           const std::string &lin) {
  if (in == out)
    return lin;
  std::string s = "0";
  int64_t stride = 1;
  size_t shift = out.size() - std::min(out.size(), in.size());
  for (size_t d = in.size(); d-- > 0;) {
    if (in[d] != 1)
      s += " + " + CoordExpr(out, d + shift, lin) + " * " + std::to_string(stride);
    stride *= in[d];
  }
  return "(" + s + ")";
}

std::string NodeWhere(const Node &node) {
  return node.Describe() + " (opset " + std::to_string(node.opset) + ")";
}

Emitter::Emitter(const Graph &g, const CodegenOptions &o) : graph(g), opt(o) {
  alias.resize(graph.tensors.size());
  for (size_t t = 0; t < alias.size(); t++)
    alias[t] = static_cast<TensorId>(t);
}

TensorId Emitter::Root(TensorId t) const {
  while (alias[static_cast<size_t>(t)] != t)
    t = alias[static_cast<size_t>(t)];
  return t;
}

TensorId Emitter::NewTensor(const std::string &name, DType dtype, std::vector<int64_t> dims) {
  Tensor t;
  t.name = graph.UniqueName(name);
  t.dtype = dtype;
  t.shape = Shape(std::move(dims));
  TensorId id = graph.AddTensor(std::move(t));
  alias.push_back(id);
  return id;
}

TensorId Emitter::NewConstant(const std::string &name, DType dtype, std::vector<int64_t> dims,
                              Bytes bytes) {
  Tensor t = MakeConstant(dtype, Shape(std::move(dims)), std::move(bytes));
  t.name = graph.UniqueName(name);
  TensorId id = graph.AddTensor(std::move(t));
  alias.push_back(id);
  return id;
}

bool Emitter::IsIo(TensorId t) const {
  const Tensor &r = T(Root(t));
  return r.is_input || io_output.count(Root(t)) != 0;
}

std::string Emitter::TagOf(DType dtype, bool io) const {
  bool half_store = opt.precision == Precision::kFp16 && !io;
  switch (dtype) {
    case DType::kFloat32:
      return half_store ? (opt.fp16_compute ? "h16" : "f16") : "f32";
    case DType::kFloat16:
      if (opt.precision != Precision::kFp16 && !io)  // fp32 and int8: float tensors in float32
        return "f32";
      return opt.fp16_compute ? "h16" : "f16";
    case DType::kInt64:
      return "i64";
    case DType::kInt32:
      return "i32";
    case DType::kUInt8:
      return "u8";
    case DType::kInt8:
      return "i8";
    case DType::kBool:
      return "b8";
    case DType::kFloat64:
    case DType::kUndefined:
      break;
  }
  return "";
}

std::string Emitter::Tag(TensorId t) const {
  if (IsFloat(T(t).dtype) && keep_f32.count(Root(t)) != 0)
    return "f32";
  if (T(t).dtype == DType::kFloat16 && keep_half.count(Root(t)) != 0)
    return opt.fp16_compute ? "h16" : "f16";
  return TagOf(T(t).dtype, IsIo(t));
}

uint32_t Emitter::StorageBytes(TensorId t) const {
  std::string tag = Tag(t);
  if (tag == "f16" || tag == "h16")
    return 2;
  if (tag == "f32")  // float16 tensors widened by precision fp32 too
    return 4;
  return static_cast<uint32_t>(DTypeSize(T(t).dtype));
}

StatusOr<std::string> Emitter::Source(const char *name, const Defines &defines) const {
  std::string_view tmpl = kernels::Find(name);
  if (tmpl.empty())
    return Internal(std::string("kernel template ") + name + ".cl is not embedded");
  std::string s = "// Generated by gst/nn/codegen for profile " +
                  std::string(cl::ProfileName(opt.profile)) + "\n";
  if (opt.profile == cl::Profile::kCpu)
    s += "#define NN_CPU_PROFILE 1\n";
  if (opt.fp16_compute)
    s += "#define NN_FP16_COMPUTE 1\n";
  return s + defines.text() + std::string(tmpl);
}

}  // namespace gen

namespace {

using gen::Defines;
using gen::Emitter;
using gen::EpilogueVariant;
using gen::NodeWhere;
using gen::Pending;
using gen::PendingArg;
using gen::Product;

PendingArg TArg(TensorId t) {
  PendingArg a;
  a.kind = PendingArg::Kind::kTensor;
  a.tensor = t;
  return a;
}

// Sizes a kernel takes as int arguments after its buffers (in the order its template declares
// them) instead of as defines: kernels that differ only in them then share one program, which
// is what a cold start spends its time building. Sizes are far below 2^31 (a tensor's element
// count fits a uint offset).
void PushInts(Pending &k, std::initializer_list<int64_t> values) {
  for (int64_t v : values) {
    PendingArg a;
    a.kind = PendingArg::Kind::kInt;
    a.i = static_cast<int32_t>(v);
    k.args.push_back(a);
  }
}

uint64_t CeilDiv(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

// Texels per row of a weight image holding `elements` values, four per RGBA texel.
int64_t ImageWidth(int64_t elements) {
  return std::min<int64_t>(std::max<int64_t>((elements + 3) / 4, 1), 2048);
}

// Spatial geometry of Conv, ConvTranspose and pooling, 1D and 2D (1D as H = 1).
struct Window {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0, ph_end = 0, pw_end = 0;
};

// Reads kernel/stride/dilation/pads for `nsp` spatial dims (1 or 2), with auto_pad SAME_* pads
// derived from the input and output sizes as ONNX defines them.
StatusOr<Window> ReadWindow(const Node &node, const std::vector<int64_t> &kernel,
                            const std::vector<int64_t> &in_sp, const std::vector<int64_t> &out_sp) {
  size_t nsp = kernel.size();
  auto strides = node.attrs.Ints("strides", std::vector<int64_t>(nsp, 1));
  auto dil = node.attrs.Ints("dilations", std::vector<int64_t>(nsp, 1));
  auto pads = node.attrs.Ints("pads", std::vector<int64_t>(2 * nsp, 0));
  std::string auto_pad = node.attrs.String("auto_pad", "NOTSET");
  if (strides.size() != nsp || dil.size() != nsp || pads.size() != 2 * nsp)
    return InvalidArgument(NodeWhere(node) + ": strides, dilations or pads do not match " +
                           std::to_string(nsp) + " spatial dims");
  std::vector<int64_t> begin(nsp), end(nsp);
  for (size_t d = 0; d < nsp; d++) {
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>(
          0, (out_sp[d] - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - in_sp[d]);
      begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[d] = total - begin[d];
    } else if (auto_pad == "VALID") {
      begin[d] = end[d] = 0;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      begin[d] = pads[d];
      end[d] = pads[d + nsp];
    } else {
      return Unsupported(NodeWhere(node) + ": auto_pad '" + auto_pad + "'");
    }
  }
  Window w;
  size_t o = nsp == 2 ? 1 : 0;  // index of the W dim
  w.kw = kernel[o];
  w.sw = strides[o];
  w.dw = dil[o];
  w.pw = begin[o];
  w.pw_end = end[o];
  if (nsp == 2) {
    w.kh = kernel[0];
    w.sh = strides[0];
    w.dh = dil[0];
    w.ph = begin[0];
    w.ph_end = end[0];
  }
  return w;
}

// [N, C, H, W] of a rank-3 (1D) or rank-4 (2D) tensor.
StatusOr<std::array<int64_t, 4>> Nchw(const Node &node, const std::vector<int64_t> &d) {
  if (d.size() == 4)
    return std::array<int64_t, 4>{d[0], d[1], d[2], d[3]};
  if (d.size() == 3)
    return std::array<int64_t, 4>{d[0], d[1], 1, d[2]};
  return Unsupported(NodeWhere(node) + ": " + std::to_string(d.size() >= 2 ? d.size() - 2 : 0) +
                     "-D spatial input (1-D and 2-D are supported)");
}

std::vector<int64_t> Spatial(const std::vector<int64_t> &d) {
  return std::vector<int64_t>(d.begin() + 2, d.end());
}

void DefWindow(Defines &d, const Window &w) {
  d.Int("KH", w.kh).Int("KW", w.kw).Int("SH", w.sh).Int("SW", w.sw).Int("DH", w.dh).Int("DW", w.dw);
  d.Int("PH", w.ph).Int("PW", w.pw).Int("PH_END", w.ph_end).Int("PW_END", w.pw_end);
}

// What LowerConv has worked out about a convolution, for the kernel variants.
struct ConvShape {
  std::array<int64_t, 4> xi, yo;  // NCHW of input and output
  int64_t g;
  Window win;
  std::string act;
  bool res_after;
  TensorId out;  // y, or a temporary when the residual needs its own add
  bool split_epilogue;
};

// Tags with vector loads and stores (LOADV / STOREV in nn_common.cl) on every device.
bool VectorStorable(const std::string &tag) {
  return tag == "f32" || tag == "f16";
}

// The widest float vector a CPU kernel should hold per value: 16 lanes, except where the SIMD
// registers are few (x86 below AVX-512: 16 of them) and narrower than 16 lanes; there a 16-wide
// vector takes two registers, which halves the accumulators a work-item can keep. On AVX2
// (2 cores, the full-size vision model, `opc profile`) 8-wide vectors took the direct
// convolutions from 24.7-27.1 to 23.7-26.6 ms per run in three of four interleaved rounds,
// 31.5 to 27.3 ms in the fourth, noisier one. (qconv_f,
// which widens uint8 inputs, measured slower with them: it keeps 16.)
int64_t WidestVector(const CodegenOptions &opt) {
  return opt.simd_registers < 32 && opt.simd_lanes < 16 ? std::max(opt.simd_lanes, 4) : 16;
}

// dw_rows.cl's taps of a row that leaves the image, as shuffles of three aligned vectors: with
// stride 1, the image's width a multiple of V and p0 + V within it (checked by the kernel; pads
// wider than the window's half put output pixels past the width), output pixels p0 ..
// p0 + V - 1 read inputs p0 - PW .. p0 + V - 1 + KW - 1 - PW, which lie in the vectors before,
// at and after p0 (zeros outside the image). Tap kw is lanes V + kw - PW .. of (before, at)
// when kw < PW, else lanes kw - PW .. of (at, after): one vpermt2ps each instead of a copy of
// the row into private memory, value by value. Without it (stride 2, or a window wider than
// a vector) rows at the edge keep the copy.
void DefineDwEdgeTaps(Defines &d, int64_t v, const Window &win) {
  if (win.sw != 1 || win.pw >= v || win.kw - 1 - win.pw > v)
    return;
  std::string taps;
  for (int64_t kw = 0; kw < win.kw; kw++) {
    const int64_t s = kw - win.pw;
    std::string idx;
    for (int64_t i = 0; i < v; i++)
      idx += ", " + std::to_string(s < 0 ? v + s + i : s + i);
    taps += " xv[" + std::to_string(kw) + "] = __builtin_shufflevector(" +
            (s < 0 ? "before, at" : "at, after") + idx + ");";
  }
  d.Def("NN_DW_EDGE_TAPS(xv, before, at, after)", "do {" + taps + " } while (0)");
}

// An epilogue's activation: `act` (FusedActivation's, where the node has one), as it is and
// switched by the kernel's epi_act; with `vector`, its vector form too where it has one.
Status DefineEpilogueActivation(const Node &node, const std::string &act, bool vector,
                                EpilogueVariant *ep) {
  ep->vector = vector;
  if (node.attrs.String("activation").empty())
    return Status::Ok();
  OP_RETURN_IF_ERROR(gen::DefineActivation(ep->act, node, act));
  OP_RETURN_IF_ERROR(gen::DefineActivation(ep->act_switched, node, act, "epi_act"));
  if (!vector)
    return Status::Ok();
  OP_RETURN_IF_ERROR(gen::DefineVectorActivation(ep->act, node, true));
  OP_RETURN_IF_ERROR(gen::DefineVectorActivation(ep->act_switched, node, true, "epi_act"));
  ep->vector = ep->act.text().find("#define ACTV(x)") != std::string::npos;
  return Status::Ok();
}

// A convolution's epilogue (conv2d_vec, conv2d_dw): its residual `res` (kNoTensor for none, and
// where the epilogue is split off) and its activation (none where split off); `vector`: whole
// vectors of output go through the vector epilogue where the activation has a vector form.
StatusOr<EpilogueVariant> ConvEpilogue(const Emitter &e, const Node &node, const ConvShape &cs,
                                       TensorId res, bool vector) {
  EpilogueVariant ep;
  ep.has_res = res != kNoTensor;
  ep.res_after = ep.has_res && cs.res_after;
  if (ep.has_res)
    ep.res.Def("TR", e.Tag(res));
  if (cs.split_epilogue) {
    ep.vector = vector;
    return ep;
  }
  OP_RETURN_IF_ERROR(DefineEpilogueActivation(node, cs.act, vector, &ep));
  return ep;
}

// `base`, the path flags and the epilogue of `ep` as one #define block; records `base` in `ep`.
Defines EpilogueDefines(const Defines &base, EpilogueVariant &ep) {
  ep.base = base;
  Defines d = base;
  for (const auto &[flag, on] : ep.paths)
    d.Int(flag, on);
  d.Int("HAS_RES", ep.has_res).Int("RES_AFTER", ep.res_after).Append(ep.res);
  if (ep.act.text().empty()) {
    d.Def("ACT(x)", "(x)");
    if (ep.vector)
      d.Def("ACTV(x)", "(x)");
  } else {
    d.Append(ep.act);
  }
  return d;
}

// The CPU profile's depthwise convolution (kernels/conv2d_dw.cl): one input channel per group
// and up to four output channels of it, stride 1 or 2, no dilation. M channels x R output rows
// of V pixels per work-item, each input row loaded once for all of them.
Status LowerConvDw(Emitter &e, const Node &node, const ConvShape &cs) {
  TensorId x = node.inputs[0], w = node.inputs[1], b = node.input(2);
  TensorId res = node.op == OpKind::kFusedConv ? node.input(3) : kNoTensor;
  const auto &xi = cs.xi, &yo = cs.yo;
  const Window &win = cs.win;
  const int64_t v = yo[3] >= 16 ? 16 : (yo[3] >= 8 ? 8 : 4);
  const int64_t rows = std::min<int64_t>(yo[2], 4);
  const bool res_in = res != kNoTensor && !cs.split_epilogue;
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(w)).Def("TY", e.Tag(cs.out));
  d.Int("KH", win.kh).Int("KW", win.kw).Int("SH", win.sh).Int("SW", win.sw);
  d.Int("PH", win.ph).Int("PW", win.pw).Int("M", yo[1] / xi[1]);
  d.Int("R", rows).Int("V", v);
  DefineDwEdgeTaps(d, v, win);
  d.Int("HAS_BIAS", b != kNoTensor);
  if (b != kNoTensor)
    d.Def("TB", e.Tag(b));
  Pending k;
  k.label = node.Describe();
  k.entry = "conv2d_dw";
  OP_ASSIGN_OR_RETURN(
      EpilogueVariant ep,
      ConvEpilogue(e, node, cs, res_in ? res : kNoTensor,
                   VectorStorable(e.Tag(cs.out)) && (!res_in || VectorStorable(e.Tag(res)))));
  ep.paths = {{"EDGE", yo[3] % v != 0}};
  OP_ASSIGN_OR_RETURN(k.source, e.Source("conv2d_dw", EpilogueDefines(d, ep)));
  k.global = {CeilDiv(yo[3], v), CeilDiv(yo[2], rows), static_cast<uint64_t>(xi[0] * xi[1])};
  k.args = {TArg(x), TArg(w)};
  if (b != kNoTensor)
    k.args.push_back(TArg(b));
  if (res_in)
    k.args.push_back(TArg(res));
  ep.out_arg = k.args.size();
  k.epilogue = std::move(ep);
  k.args.push_back(TArg(cs.out));
  PushInts(k, {xi[0], xi[1], xi[2], xi[3], yo[2], yo[3]});
  k.writes = {cs.out};
  k.flops = 2ull * yo[0] * yo[1] * yo[2] * yo[3] * win.kh * win.kw;
  if (Product(e.Dims(node.outputs[0])) == 0)
    return Status::Ok();
  e.Emit(std::move(k));
  if (cs.split_epilogue)
    return gen::EmitAddActivation(e, cs.out, res, node.outputs[0], cs.act, !cs.res_after,
                                  node.Describe());
  return Status::Ok();
}

// The CPU profile's convolution (kernels/conv2d_vec.cl): explicit SIMD over V output pixels and
// OCB output channels per work-item, with the constant weights re-laid out so that the OCB
// weights of one tap are adjacent.
Status LowerConvVec(Emitter &e, const Node &node, const ConvShape &cs) {
  TensorId x = node.inputs[0], w = node.inputs[1], b = node.input(2);
  TensorId res = node.op == OpKind::kFusedConv ? node.input(3) : kNoTensor;
  const auto &xi = cs.xi, &yo = cs.yo;
  const Window &win = cs.win;
  const int64_t g = cs.g, cg = xi[1] / g, ocg = yo[1] / g, taps = win.kh * win.kw;
  // Depthwise with a small channel multiplier: conv2d_vec's channel blocks would be one or two
  // channels wide, each input vector feeding as few FMAs.
  if (cg == 1 && ocg <= 4 && win.sh <= 2 && win.sw <= 2 && win.dh == 1 && win.dw == 1)
    return LowerConvDw(e, node, cs);
  const bool flat = win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.ph == 0 &&
                    win.pw == 0 && win.ph_end == 0 && win.pw_end == 0;
  const int64_t pixels = flat ? yo[2] * yo[3] : yo[3];
  // The widest vector the row fills (stride 2 reads 2 V inputs: two 16-wide loads for V = 16),
  // at most one register where registers are few (WidestVector).
  const int64_t widest = WidestVector(e.opt);
  const int64_t v = pixels >= 16 && widest >= 16 ? 16 : (pixels >= 8 && widest >= 8 ? 8 : 4);
  // A flat 1x1 run computes two pixel vectors per work-item where it has them, each weight
  // broadcast feeding two FMAs.
  const int64_t pv = flat && pixels >= 2 * v ? 2 : 1;
  // Channels per work-item: as many accumulators as three quarters of the SIMD registers hold
  // (the rest keep the inputs and the broadcast weight: 24 on AVX-512, where 16 channels of
  // one pixel vector or 12 of two fit; 12 on AVX2, 12 channels of one 8-wide vector or 6 of
  // two), where they divide the group's channels (no block half empty); else at most 8.
  // A row strided along W on a 16-register device takes all 16: its input vectors cost a load
  // and a deinterleave each, which more channels share (the full-size vision model's first
  // convolutions, 12 -> 48 channels, 3x3 stride 2, on a 2-core EPYC: 16 channels 2.7-3.7 ms
  // against 12 channels 3.4-3.9 ms per run, three interleaved rounds).
  const int64_t regs_per_acc = pv * CeilDiv(v, e.opt.simd_lanes);
  const bool strided = !flat && win.sw > 1 && widest < 16;
  const int64_t budget = strided ? e.opt.simd_registers : e.opt.simd_registers * 3 / 4;
  int64_t ocb = std::min<int64_t>({ocg, 8, std::max<int64_t>(budget / regs_per_acc, 1)});
  for (int64_t cand : {16, 12, 8, 6})
    if (cand * regs_per_acc <= budget && ocg % cand == 0) {
      ocb = std::max(ocb, cand);
      break;
    }
  const int64_t blocks = CeilDiv(ocg, ocb);

  // wt[g * blocks + blk][ic][tap][a] = w[g * ocg + blk * ocb + a][ic][tap], zero past the group.
  const Tensor &wsrc = e.T(e.Root(w));
  const size_t es = DTypeSize(wsrc.dtype);
  Bytes wt(static_cast<size_t>(g * blocks * cg * taps * ocb) * es, 0);
  for (int64_t gi = 0; gi < g; gi++)
    for (int64_t blk = 0; blk < blocks; blk++)
      for (int64_t a = 0; a < ocb; a++) {
        const int64_t oc = blk * ocb + a;
        if (oc >= ocg)
          continue;
        for (int64_t ic = 0; ic < cg; ic++)
          for (int64_t t = 0; t < taps; t++) {
            const size_t src = static_cast<size_t>(((gi * ocg + oc) * cg + ic) * taps + t) * es;
            const size_t dst =
                static_cast<size_t>((((gi * blocks + blk) * cg + ic) * taps + t) * ocb + a) * es;
            std::memcpy(&wt[dst], wsrc.data->data() + src, es);
          }
      }
  TensorId wv =
      e.NewConstant(wsrc.name + "_vec", wsrc.dtype, {g * blocks, cg, taps, ocb}, std::move(wt));

  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(wv)).Def("TY", e.Tag(cs.out)).Int("G", g);
  DefWindow(d, win);
  d.Int("OCB", ocb).Int("V", v).Int("V2", 2 * v).Int("PV", pv).Int("FLAT", flat);
  d.Int("HAS_BIAS", b != kNoTensor);
  if (b != kNoTensor)
    d.Def("TB", e.Tag(b));
  // Whole vectors of output (and residual) go through vector stores where the tags have them.
  const bool res_in = res != kNoTensor && !cs.split_epilogue;
  Pending k;
  k.label = node.Describe();
  k.entry = "conv2d_vec";
  OP_ASSIGN_OR_RETURN(
      EpilogueVariant ep,
      ConvEpilogue(e, node, cs, res_in ? res : kNoTensor,
                   VectorStorable(e.Tag(cs.out)) && (!res_in || VectorStorable(e.Tag(res)))));
  ep.paths = {{"EDGE", pixels % (v * pv) != 0}};
  OP_ASSIGN_OR_RETURN(k.source, e.Source("conv2d_vec", EpilogueDefines(d, ep)));
  k.global = {static_cast<uint64_t>(xi[0] * g * blocks), static_cast<uint64_t>(flat ? 1 : yo[2]),
              CeilDiv(pixels, v * pv)};
  k.args = {TArg(x), TArg(wv)};
  if (b != kNoTensor)
    k.args.push_back(TArg(b));
  if (res_in)
    k.args.push_back(TArg(res));
  ep.out_arg = k.args.size();
  k.epilogue = std::move(ep);
  k.args.push_back(TArg(cs.out));
  PushInts(k, {xi[0], xi[1], xi[2], xi[3], yo[1], yo[2], yo[3]});
  k.writes = {cs.out};
  k.flops = 2ull * yo[0] * yo[1] * yo[2] * yo[3] * cg * taps;
  if (Product(e.Dims(node.outputs[0])) == 0)
    return Status::Ok();
  e.Emit(std::move(k));
  if (cs.split_epilogue)
    return gen::EmitAddActivation(e, cs.out, res, node.outputs[0], cs.act, !cs.res_after,
                                  node.Describe());
  return Status::Ok();
}

Status LowerConv(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], w = node.inputs[1], b = node.input(2);
  TensorId res = node.op == OpKind::kFusedConv ? node.input(3) : kNoTensor;
  TensorId y = node.outputs[0];
  OP_ASSIGN_OR_RETURN(auto xi, Nchw(node, e.Dims(x)));
  OP_ASSIGN_OR_RETURN(auto yo, Nchw(node, e.Dims(y)));
  const std::vector<int64_t> wd = e.Dims(w);  // a copy: NewTensor below grows the graph
  int64_t g = node.attrs.Int("group", 1);
  if (g <= 0 || xi[1] % g || yo[1] % g || wd.size() != e.Dims(x).size() || wd[1] * g != xi[1])
    return InvalidArgument(NodeWhere(node) + ": group " + std::to_string(g) +
                           " does not fit the input, weight and output channels");
  OP_ASSIGN_OR_RETURN(Window win,
                      ReadWindow(node, Spatial(wd), Spatial(e.Dims(x)), Spatial(e.Dims(y))));
  std::string act = "(x)";
  bool res_after = node.attrs.Int("residual_after_activation", 0) != 0;
  if (node.op == OpKind::kFusedConv) {
    OP_ASSIGN_OR_RETURN(act, gen::FusedActivation(node));
  }
  // A residual of another shape goes through a separate add (rare: the fusion pass prefers
  // same-shape residuals).
  TensorId out = y;
  bool split_epilogue = res != kNoTensor && e.Dims(res) != e.Dims(y);
  if (split_epilogue)
    out = e.NewTensor(e.T(y).name + "_conv", e.T(y).dtype, e.Dims(y));

  int64_t ocg = yo[1] / g;
  if (e.opt.profile == cl::Profile::kCpu && e.T(e.Root(w)).is_constant() && IsFloat(e.T(w).dtype))
    return LowerConvVec(e, node, {xi, yo, g, win, act, res_after, out, split_epilogue});
  int64_t ocb = std::min<int64_t>(ocg, 4);
  int64_t owb = std::min<int64_t>(yo[3], ocg == 1 ? 8 : 4);
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(w)).Def("TY", e.Tag(out));
  d.Int("N", xi[0]).Int("C", xi[1]).Int("H", xi[2]).Int("W", xi[3]);
  d.Int("OC", yo[1]).Int("OH", yo[2]).Int("OW", yo[3]).Int("G", g);
  DefWindow(d, win);
  d.Int("OCB", ocb).Int("OWB", owb);
  // Constant weights of float type go through the texture cache where the profile asks.
  bool image = e.opt.image_weights && e.T(e.Root(w)).is_constant() && IsFloat(e.T(w).dtype);
  d.Int("W_IMAGE", image);
  if (image)
    d.Int("IMG_W", ImageWidth(Product(wd)));
  d.Int("HAS_BIAS", b != kNoTensor).Int("HAS_RES", res != kNoTensor && !split_epilogue);
  d.Int("RES_AFTER", res_after);
  if (b != kNoTensor)
    d.Def("TB", e.Tag(b));
  if (res != kNoTensor && !split_epilogue)
    d.Def("TR", e.Tag(res));
  if (!split_epilogue)
    OP_RETURN_IF_ERROR(gen::DefineActivation(d, node, act));
  Pending k;
  k.label = node.Describe();
  k.entry = "conv2d";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("conv2d", d));
  k.global = {CeilDiv(yo[3], owb), static_cast<uint64_t>(yo[2]),
              static_cast<uint64_t>(xi[0] * g * CeilDiv(ocg, ocb))};
  PendingArg warg = TArg(w);
  if (image)
    warg.kind = PendingArg::Kind::kImage;
  k.args = {TArg(x), warg};
  if (b != kNoTensor)
    k.args.push_back(TArg(b));
  if (res != kNoTensor && !split_epilogue)
    k.args.push_back(TArg(res));
  k.args.push_back(TArg(out));
  k.writes = {out};
  k.flops = 2ull * yo[0] * yo[1] * yo[2] * yo[3] * (xi[1] / g) * win.kh * win.kw;
  if (Product(e.Dims(y)) == 0)
    return Status::Ok();
  e.Emit(std::move(k));
  if (split_epilogue)
    return gen::EmitAddActivation(e, out, res, y, act, !res_after, node.Describe());
  return Status::Ok();
}

Status LowerConvTranspose(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], w = node.inputs[1], b = node.input(2), y = node.outputs[0];
  OP_ASSIGN_OR_RETURN(auto xi, Nchw(node, e.Dims(x)));
  OP_ASSIGN_OR_RETURN(auto yo, Nchw(node, e.Dims(y)));
  int64_t g = node.attrs.Int("group", 1);
  const auto &wd = e.Dims(w);
  if (g <= 0 || wd.size() != e.Dims(x).size() || wd[0] != xi[1] || wd[1] * g != yo[1])
    return InvalidArgument(NodeWhere(node) + ": weights do not fit the channels and group");
  // Pads as shape inference and the reference interpreter resolve them (output_shape,
  // auto_pad, output_padding).
  Inputs ins;
  for (TensorId t : node.inputs)
    ins.push_back(t == kNoTensor ? nullptr : &e.T(t));
  OP_ASSIGN_OR_RETURN(WindowParams wp, GetWindowParams(node, ins));
  std::vector<int64_t> ksp = Spatial(wd);
  size_t nsp = ksp.size();
  const auto &strides = wp.strides, &dil = wp.dilations, &begin = wp.pads_begin;
  if (strides.size() != nsp || dil.size() != nsp || begin.size() != nsp)
    return InvalidArgument(NodeWhere(node) + ": attribute lengths do not match the rank");
  Window win;
  size_t o = nsp == 2 ? 1 : 0;
  win.kw = ksp[o];
  win.sw = strides[o];
  win.dw = dil[o];
  win.pw = begin[o];
  if (nsp == 2) {
    win.kh = ksp[0];
    win.sh = strides[0];
    win.dh = dil[0];
    win.ph = begin[0];
  }
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(w)).Def("TY", e.Tag(y));
  d.Int("N", xi[0]).Int("C", xi[1]).Int("H", xi[2]).Int("W", xi[3]);
  d.Int("OC", yo[1]).Int("OH", yo[2]).Int("OW", yo[3]).Int("G", g);
  DefWindow(d, win);
  d.Int("HAS_BIAS", b != kNoTensor);
  if (b != kNoTensor)
    d.Def("TB", e.Tag(b));
  Pending k;
  k.label = node.Describe();
  k.entry = "conv_transpose";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("conv_transpose", d));
  uint64_t n = static_cast<uint64_t>(Product(e.Dims(y)));
  if (n == 0)
    return Status::Ok();
  k.global = {CeilDiv(n, 64) * 64};
  k.local = {64};
  k.args = {TArg(x), TArg(w)};
  if (b != kNoTensor)
    k.args.push_back(TArg(b));
  k.args.push_back(TArg(y));
  k.writes = {y};
  k.flops = 2ull * xi[0] * xi[1] * xi[2] * xi[3] * (yo[1] / g) * win.kh * win.kw;
  e.Emit(std::move(k));
  return Status::Ok();
}

// matmul_vec's register block: RM rows x NV vectors of V columns per work-item, RM x NV vector
// accumulators. The accumulators must stay in registers, and enough of them must be independent
// to hide the FMA latency:
// - 32 SIMD registers (AVX-512): 8 rows x 2 vectors of 16, 16 accumulators;
// - 16 SIMD registers (AVX2): vectors of the device's 8 lanes, 2 rows x 4 vectors, 8
//   accumulators (the loop over k keeps four k's rows of B in registers beside them). Measured
//   on a 2-core EPYC for products of 25 x 512 x 1024, 32 x 384 x 1152 and 32 x 1152 x 384 with
//   a constant B, medians of 200 runs in two interleaved rounds: 0.38-0.61, 0.35-0.65 and
//   0.35-0.57 ms, against 0.91-0.95, 0.47-0.50 and 0.46-0.47 ms for 4 x 3 of 8 (12
//   accumulators); AVX-512's 8 x 2 of 16 (32 registers of accumulators: it spills) took 0.66,
//   0.94 and 1.08 ms in the first sweep of eleven shapes (medians of 100 runs).
// One or two rows take four vectors: a vector-matrix product would otherwise run one dependent
// FMA chain. Fewer vectors where N is narrower than the block.
struct MatMulBlock {
  int64_t rm = 1, v = 4, nv = 1;
};

// matmul_vec's work-groups. Left to choose, PoCL made a few large groups of the full-size
// vision model's products (32 x 384 x 1152: a grid of 4 x 36 work-items), and one of the two
// cores waited for the other: its 28 products took 6.2-7.0 ms per run. Split into at least 16
// groups they took 3.4-3.9 ms, 64 the same (interleaved rounds on a 2-core Xeon). Products
// under 4 MFLOP keep the driver's choice: 16 groups made the small vision model's slower
// (2.6-2.8 ms against 2.5-2.7), each group's start costing more than the balance gained.
constexpr uint64_t kGroupedProductFlops = 4'000'000;
// A vector-matrix product streams its B once and does little else: from 1 MFLOP its columns go
// to work-groups of their own too. The full-size policy's head (three products of about 2 MFLOP,
// 2 MiB of float16 weights each: 16 work-items that PoCL gave one group, one core) took 0.83-0.84
// ms per run against 0.96-0.99 ms (p10 of 100 runs, four interleaved rounds on a 2-core Xeon).
constexpr uint64_t kGroupedVectorProductFlops = 1'000'000;
constexpr uint64_t kProductGroups = 64;

// A local size that divides `global` into at least `groups` work-groups where it has that many
// work-items: the slowest dimensions are split first, each to its largest divisor that gives
// enough groups, so matmul_vec's row blocks (its fastest dimension, sharing B's panel) stay
// together whenever the column blocks alone give enough.
std::vector<uint64_t> SplitIntoGroups(const std::vector<uint64_t> &global, uint64_t groups) {
  std::vector<uint64_t> local = global;
  auto count = [&]() {
    uint64_t n = 1;
    for (size_t d = 0; d < global.size(); d++)
      n *= global[d] / local[d];
    return n;
  };
  for (size_t d = global.size(); d-- > 0 && count() < groups;) {
    while (local[d] > 1 && count() < groups) {
      uint64_t x = local[d] - 1;
      while (global[d] % x != 0)
        x--;
      local[d] = x;
    }
  }
  return local;
}

// The stride per batch of a product operand whose batch dims are `dims` (broadcast against the
// output's batch dims `out`): 0 when all of them are 1, `matrix` (the operand's elements per
// batch) when they are the output's, none otherwise (a partial broadcast).
std::optional<int64_t> BatchStride(const std::vector<int64_t> &out,
                                   const std::vector<int64_t> &dims, int64_t matrix) {
  if (Product(dims) == 1)
    return 0;
  std::vector<int64_t> padded(out.size() - std::min(out.size(), dims.size()), 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return padded == out ? std::optional<int64_t>(matrix) : std::nullopt;
}

// Element strides per batch, row and column of a tensor of dims `dims` broadcast against a
// product's output `yd` (batch dims `ob`, then m x n), where one stride per axis says it:
// 0 along the axes it is broadcast on.
struct ProductStrides {
  int64_t batch = 0, row = 0, col = 0;
};
std::optional<ProductStrides> StridesOf(const std::vector<int64_t> &ob, int64_t m, int64_t n,
                                        const std::vector<int64_t> &yd,
                                        const std::vector<int64_t> &dims) {
  if (yd.size() != ob.size() + 2 || dims.size() > yd.size())
    return std::nullopt;
  std::vector<int64_t> d(yd.size() - dims.size(), 1);
  d.insert(d.end(), dims.begin(), dims.end());
  const int64_t dm = d[d.size() - 2], dn = d.back();
  if ((dm != 1 && dm != m) || (dn != 1 && dn != n))
    return std::nullopt;
  ProductStrides s;
  const std::optional<int64_t> bs =
      BatchStride(ob, std::vector<int64_t>(d.begin(), d.end() - 2), dm * dn);
  if (!bs)
    return std::nullopt;
  s.batch = *bs;
  s.row = dm == 1 ? 0 : dn;
  s.col = dn == 1 ? 0 : 1;
  return s;
}

MatMulBlock ChooseMatMulBlock(const CodegenOptions &opt, int64_t m, int64_t n) {
  const int64_t widest = WidestVector(opt);
  MatMulBlock b;
  b.v = n >= widest ? widest : (n >= 8 ? 8 : 4);
  b.rm = std::min<int64_t>(m, widest < 16 ? 2 : 8);
  if (b.rm == 8) {
    // The row block from 8 down to 5 that pads M least (ties: the larger): the policy's 25 rows
    // as 5 blocks of 5 rather than 4 blocks of 8, a fifth of them padding, took its products
    // from 1.29-1.69 to 1.10-1.50 ms per run (three interleaved rounds on a 2-core Xeon).
    for (int64_t r = 7; r >= 5; r--)
      if (CeilDiv(m, r) * r < CeilDiv(m, b.rm) * b.rm)
        b.rm = r;
  }
  if (b.rm <= 2)
    b.nv = n >= 4 * b.v ? 4 : (n >= 2 * b.v ? 2 : 1);
  else
    b.nv = n >= 2 * b.v ? 2 : 1;
  return b;
}

// How many work-items of a work-group share one sum of `len` terms (a matrix-vector product's
// K, a norm's row), adding their partial sums in local memory: 64 from 512 terms, 32 from 128,
// else 1 (a work-item's own loop). On the amd and other profiles only: a GPU given one work-item
// per sum ran a few hundred of them, each walking all of it (an H200: the full-size vision
// model's head products 1.3 and its norms 0.68 of 8.2 ms). Not adreno's yet: its kernels keep
// the CPU profile's order of summation, which its test of image weights relies on, and no Adreno
// has timed the split. The CPU profile vectorises across work-items instead.
int64_t GroupSplit(const CodegenOptions &opt, int64_t len) {
  if (opt.profile != cl::Profile::kAmd && opt.profile != cl::Profile::kOther)
    return 1;
  return len >= 512 ? 64 : (len >= 128 ? 32 : 1);
}

// A constant B (K x N, or N x K when `tb`) laid out as panels of `cols` columns,
// [panels][K][cols], for matmul_vec and matvec_chain: each work-item streams one contiguous run
// (rows of a wide B are over a page apart, which defeats the prefetchers). Zero panels past N,
// up to a multiple of `nv`: the last work-item reads `nv` whole panels.
TensorId ProductPanels(Emitter &e, TensorId bt, bool tb, int64_t ka, int64_t n, int64_t cols,
                       int64_t nv) {
  const Tensor &src = e.T(e.Root(bt));
  const size_t es = DTypeSize(src.dtype);
  const int64_t panels = CeilDiv(CeilDiv(n, cols), nv) * nv;
  Bytes p(static_cast<size_t>(panels * ka * cols) * es, 0);
  for (int64_t col = 0; col < n; col++)
    for (int64_t kk = 0; kk < ka; kk++) {
      const int64_t from = tb ? col * ka + kk : kk * n + col;
      const int64_t to = ((col / cols) * ka + kk) * cols + col % cols;
      std::memcpy(&p[static_cast<size_t>(to) * es],
                  src.data->data() + static_cast<size_t>(from) * es, es);
    }
  const DType dtype = src.dtype;
  const std::string name = src.name + "_panels";
  const TensorId out = e.NewConstant(name, dtype, {panels, ka, cols}, std::move(p));
  // Float16 weights stay half in memory at every precision: the kernels' B loads widen them
  // (exactly), and a product whose weights outgrow the caches streams half the bytes.
  if (dtype == DType::kFloat16)
    e.keep_half.insert(out);
  return out;
}

Status LowerMatMul(Emitter &e, const Node &node) {
  TensorId a = node.inputs[0], bt = node.inputs[1], y = node.outputs[0];
  TensorId c = kNoTensor, res = kNoTensor;
  bool ta = false, tb = false, res_after = false;
  float alpha = 1.f, beta = 1.f;
  std::string act = "(x)";
  if (node.op == OpKind::kGemm || node.op == OpKind::kFusedGemm) {
    ta = node.attrs.Int("transA", 0) != 0;
    tb = node.attrs.Int("transB", 0) != 0;
    alpha = node.attrs.Float("alpha", 1.f);
    beta = node.attrs.Float("beta", 1.f);
    c = node.input(2);
  }
  if (node.op == OpKind::kFusedGemm) {
    res = node.input(3);
    res_after = node.attrs.Int("residual_after_activation", 0) != 0;
    OP_ASSIGN_OR_RETURN(act, gen::FusedActivation(node));
  }
  std::vector<int64_t> ad = e.Dims(a), bd = e.Dims(bt);
  if (ad.empty() || bd.empty())
    return InvalidArgument(NodeWhere(node) + ": scalar operand");
  if (ad.size() == 1)
    ad.insert(ad.begin(), 1);
  if (bd.size() == 1)
    bd.push_back(1);
  size_t ra = ad.size(), rb = bd.size();
  int64_t m = ta ? ad[ra - 1] : ad[ra - 2], ka = ta ? ad[ra - 2] : ad[ra - 1];
  int64_t kb = tb ? bd[rb - 1] : bd[rb - 2], n = tb ? bd[rb - 2] : bd[rb - 1];
  if (ka != kb)
    return InvalidArgument(NodeWhere(node) + ": inner dimensions " + std::to_string(ka) + " and " +
                           std::to_string(kb) + " differ");
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  OP_ASSIGN_OR_RETURN(Shape ob, BroadcastShapes(Shape(abatch), Shape(bbatch)));
  int64_t batch = Product(ob.dims);
  const std::vector<int64_t> yd = e.Dims(y);  // a copy: NewConstant below grows the graph
  if (batch * m * n != Product(yd))
    return InvalidArgument(NodeWhere(node) + ": output " + Shape(yd).ToString() +
                           " does not hold the product");
  if (batch * m * n == 0)
    return Status::Ok();
  // The CPU profile's vector kernel needs B's rows contiguous (a computed B^T keeps the scalar
  // kernel); a constant B, transposed or not, is laid out once as panels of V columns.
  const bool b_const =
      e.T(e.Root(bt)).is_constant() && IsFloat(e.T(bt).dtype) && Product(bbatch) == 1;
  const bool vec = e.opt.profile == cl::Profile::kCpu && n >= 4 && (!tb || b_const);
  // Block sizes: rows per work-item and columns per work-item (V, one vector, for matmul_vec).
  // An accumulation over K = 0 is all zeros plus the epilogue; handled by the same kernels.
  MatMulBlock blk = vec ? ChooseMatMulBlock(e.opt, m, n) : MatMulBlock{};
  // A work-item that copies its rows of a Concat (A_CAT, below) takes up to four vectors of
  // columns, so that fewer work-items copy the same rows: the small policy's first product
  // 19 -> 17-18 us (one column block of 64 instead of two of 32).
  if (vec && e.product_concats.count(a))
    blk.nv = std::min<int64_t>(4, static_cast<int64_t>(CeilDiv(n, blk.v)));
  const int64_t rm = vec ? blk.rm : std::min<int64_t>(m, 4);
  const int64_t cols = vec ? blk.v : std::min<int64_t>(n, m == 1 ? 8 : 4);
  const int64_t nv = vec ? blk.nv : 1;
  // A matrix-vector product (one row, one batch) splits K across a work-group (matmul.cl's
  // KSPLIT) instead of giving each work-item a whole column block's K.
  const int64_t ksplit = !vec && batch == 1 && m == 1 ? GroupSplit(e.opt, ka) : 1;
  if (vec && b_const)
    bt = ProductPanels(e, bt, tb, ka, n, cols, nv);
  const bool a_vec4 =
      !ta && IsFloat(e.T(a).dtype) && (VectorStorable(e.Tag(a)) || e.Tag(a) == "h16");
  Defines d;
  d.Def("TA", e.Tag(a)).Def("TB", e.Tag(bt)).Def("TY", e.Tag(y));
  d.Int("A_SK", ta ? ad[ra - 1] : 1);
  if (vec)  // sizes and row strides are arguments (PushInts below)
    d.Int("B_PANEL", b_const).Int("V", cols).Int("NV", nv).Int("A_VEC4", a_vec4);
  else
    d.Int("BATCH", batch)
        .Int("M", m)
        .Int("N", n)
        .Int("K", ka)
        .Int("A_SM", ta ? 1 : ad[ra - 1])
        .Int("B_SK", tb ? 1 : bd[rb - 1])
        .Int("B_SN", tb ? bd[rb - 1] : 1)
        .Int("RN", cols);
  if (ksplit > 1)
    d.Int("KSPLIT", ksplit);
  std::string lin = "(((b) * " + std::to_string(m) + " + (m)) * " + std::to_string(n) + " + (n))";
  // matmul_vec takes its sizes and strides as arguments; the index macros use them where one
  // stride per axis says the broadcast (else they keep the constant expressions, and that
  // product gets a program of its own).
  const std::optional<int64_t> a_bs = BatchStride(ob.dims, abatch, m * ka);
  const std::optional<int64_t> b_bs = BatchStride(ob.dims, bbatch, ka * n);
  const std::optional<ProductStrides> cst =
      c == kNoTensor ? ProductStrides{} : StridesOf(ob.dims, m, n, yd, e.Dims(c));
  const std::optional<ProductStrides> rst =
      res == kNoTensor ? ProductStrides{} : StridesOf(ob.dims, m, n, yd, e.Dims(res));
  if (vec && a_bs)
    d.Def("A_BOFF(b)", "((b) * a_bs)");
  else
    d.Def("A_BOFF(b)", "((" + gen::BroadcastIndex(ob.dims, abatch, "(b)") + ") * " +
                           std::to_string(m * ka) + ")");
  if (vec && b_bs)
    d.Def("B_BOFF(b)", "((b) * b_bs)");
  else
    d.Def("B_BOFF(b)", "((" + gen::BroadcastIndex(ob.dims, bbatch, "(b)") + ") * " +
                           std::to_string(ka * n) + ")");
  d.Int("RM", rm).Flt("BETA", beta);
  if (vec)
    d.Def("ALPHA", "alpha");  // an argument (matmul_vec.cl)
  else
    d.Flt("ALPHA", alpha);
  d.Int("HAS_C", c != kNoTensor);
  if (c != kNoTensor)
    d.Def("TC", e.Tag(c))
        .Def("C_IDX(b, m, n)", vec && cst ? "((b) * c_sb + (m) * c_sm + (n) * c_sn)"
                                          : gen::BroadcastIndex(yd, e.Dims(c), lin));
  EpilogueVariant ep;
  if (vec)
    ep.paths = {{"K_TAIL", !a_vec4 || ka % 4 != 0}, {"EDGE", n % (cols * nv) != 0}};
  ep.has_res = res != kNoTensor;
  ep.res_after = ep.has_res && res_after;
  if (res != kNoTensor)
    ep.res.Def("TR", e.Tag(res))
        .Def("R_IDX(b, m, n)", vec && rst ? "((b) * r_sb + (m) * r_sm + (n) * r_sn)"
                                          : gen::BroadcastIndex(yd, e.Dims(res), lin));
  bool vector_epilogue = false;
  if (vec) {
    // The vector epilogue needs the residual running along n like y; C may run along n or be
    // one value per row.
    auto last = [&](TensorId t) {
      const std::vector<int64_t> &td = e.Dims(t);
      return td.empty() ? int64_t{1} : td.back();
    };
    const bool c_contig = c != kNoTensor && last(c) == n && n != 1;
    const bool c_ok = c == kNoTensor || last(c) == 1 || (c_contig && VectorStorable(e.Tag(c)));
    const bool res_ok = res == kNoTensor || (last(res) == n && VectorStorable(e.Tag(res)));
    if (VectorStorable(e.Tag(y)) && c_ok && res_ok) {
      d.Int("C_CONTIG", c_contig);
      vector_epilogue = true;
    }
  }
  OP_RETURN_IF_ERROR(DefineEpilogueActivation(node, act, vector_epilogue, &ep));
  // A Concat's rows that this product copies itself (FindProductConcats).
  std::vector<TensorId> a_parts;
  if (e.product_concats.count(a) && !(vec && b_const))  // FindProductConcats promised it
    return Internal(NodeWhere(node) +
                    ": its Concat's rows were left to it, and it cannot copy them");
  if (auto cat = e.product_concats.find(a); vec && b_const && cat != e.product_concats.end()) {
    const Node &cn = e.graph.nodes[static_cast<size_t>(cat->second)];
    std::string params;
    int64_t offset = 0;
    for (TensorId t : cn.inputs) {
      const std::string p = std::to_string(a_parts.size());
      const int64_t len = Product(e.Dims(t)) / m;
      auto folded = e.folded_by_concat.find(t);
      const bool round = folded != e.folded_by_concat.end();  // a rounding Cast (checked)
      a_parts.push_back(round ? folded->second.source : t);
      params += std::string(params.empty() ? "" : ", ") + "__global const float *ap" + p +
                ", uint ap" + p + "_off";
      d.Int("A_K" + p, len).Int("A_OFF" + p, offset);
      d.Def("A_RND" + p + "(x)", round ? "nn_round_half(x)" : "(x)");
      d.Def("A_RND" + p + "_16(x)", round ? "nn_round_half16(x)" : "(x)");
      offset += len;
    }
    d.Int("A_CAT", static_cast<int64_t>(a_parts.size())).Int("A_CAT_K", ka);
    d.Def("A_CAT_PARAMS", params);
  }
  Pending k;
  k.label = node.Describe();
  if (!a_parts.empty())
    k.label +=
        " (and " + e.graph.nodes[static_cast<size_t>(e.product_concats.at(a))].Describe() + ")";
  k.entry = vec ? "matmul_vec" : "matmul";
  OP_ASSIGN_OR_RETURN(k.source, e.Source(k.entry.c_str(), EpilogueDefines(d, ep)));
  k.global =
      vec ? std::vector<uint64_t>{CeilDiv(m, rm), CeilDiv(n, cols * nv),
                                  static_cast<uint64_t>(batch)}
      : ksplit > 1
          ? std::vector<uint64_t>{CeilDiv(n, cols) * static_cast<uint64_t>(ksplit), 1, 1}
          : std::vector<uint64_t>{CeilDiv(n, cols), CeilDiv(m, rm), static_cast<uint64_t>(batch)};
  if (ksplit > 1)
    k.local = {static_cast<uint64_t>(ksplit), 1, 1};
  if (a_parts.empty())
    k.args = {TArg(a)};
  for (TensorId t : a_parts)
    k.args.push_back(TArg(t));
  k.args.push_back(TArg(bt));
  if (c != kNoTensor)
    k.args.push_back(TArg(c));
  if (res != kNoTensor)
    k.args.push_back(TArg(res));
  if (vec) {
    ep.out_arg = k.args.size();
    k.epilogue = std::move(ep);
  }
  k.args.push_back(TArg(y));
  if (vec) {
    const ProductStrides cs = cst.value_or(ProductStrides{}), rs = rst.value_or(ProductStrides{});
    PushInts(k, {batch, m, n, ka, ta ? 1 : ad[ra - 1], n, a_bs.value_or(0), b_bs.value_or(0),
                 cs.batch, cs.row, cs.col, rs.batch, rs.row, rs.col});
    PendingArg al;
    al.kind = PendingArg::Kind::kFloat;
    al.f = alpha;
    k.args.push_back(al);
  }
  k.writes = {y};
  k.flops = 2ull * batch * m * n * ka;
  if (vec && k.flops >= (batch * m == 1 ? kGroupedVectorProductFlops : kGroupedProductFlops))
    k.local = SplitIntoGroups(k.global, kProductGroups);
  e.Emit(std::move(k));
  return Status::Ok();
}

// ---- Chains of small matrix products (kernels/matvec_chain.cl)
//
// A policy's head is a row vector through two or three small products with activations
// between, and its per-time-step MLP a few rows through two: on the CPU profile each product
// took 1-7 microseconds and its launch about as much again (the small policy: 9 launches, 0.064
// ms per run against onnxruntime's 0.059). A chain of such products runs as one launch, a
// work-group per block of rows (one core each), the rows between layers in local memory. Only
// where a work-group's work is small: on one core a long chain would run longer than its
// products split over all of them.
constexpr int64_t kChainMacs = 262'144;  // per work-group; the small policy's head: 161,000
constexpr int64_t kChainWidth = 4096;    // the longest row in local memory
constexpr int64_t kChainPanels = 8;      // panels of V columns per work-item for one row: NP

// What one product of a chain computes, per row m:
//   y[m][n] = ACT(alpha * sum_k a[m][k] b[k][n] + beta * c[n] (+ r[m][n])).
struct ChainLink {
  size_t node = 0;
  TensorId a = kNoTensor, b = kNoTensor, c = kNoTensor, y = kNoTensor;
  TensorId r = kNoTensor;  // a residual: the chain's input (FindProductChains checks)
  bool tb = false, res_after = false;
  float alpha = 1.f, beta = 1.f;
  int64_t rows = 1, k = 0, n = 0;
  std::string act, actv;  // the activation on one value and on a vector VF
};

// The link `node` can be, or none: a Gemm, MatMul or FusedGemm of rows by a constant 2-D float
// B, with a constant bias along N or none, a residual of the output's shape or none, an
// activation with a vector form, and float storage that matvec_chain reads and writes.
std::optional<ChainLink> AsChainLink(const Emitter &e, const Node &node, size_t index) {
  if (node.op != OpKind::kGemm && node.op != OpKind::kMatMul && node.op != OpKind::kFusedGemm)
    return std::nullopt;
  if (node.inputs.size() < 2 || node.outputs.empty() || node.outputs[0] == kNoTensor)
    return std::nullopt;
  ChainLink l;
  l.node = index;
  l.a = node.inputs[0];
  l.b = node.inputs[1];
  l.y = node.outputs[0];
  if (node.op != OpKind::kMatMul) {
    if (node.attrs.Int("transA", 0) != 0)
      return std::nullopt;
    l.tb = node.attrs.Int("transB", 0) != 0;
    l.alpha = node.attrs.Float("alpha", 1.f);
    l.beta = node.attrs.Float("beta", 1.f);
    l.c = node.input(2);
  }
  if (node.op == OpKind::kFusedGemm) {
    l.r = node.input(3);
    l.res_after = node.attrs.Int("residual_after_activation", 0) != 0;
  }
  const std::vector<int64_t> &bd = e.Dims(l.b);
  const Tensor &broot = e.T(e.Root(l.b));
  if (bd.size() != 2 || !broot.is_constant() || !IsFloat(broot.dtype))
    return std::nullopt;
  l.k = l.tb ? bd[1] : bd[0];
  l.n = l.tb ? bd[0] : bd[1];
  const std::vector<int64_t> &ad = e.Dims(l.a);
  if (ad.empty() || ad.back() != l.k || l.k < 1 || l.n < 1 || l.k > kChainWidth ||
      l.n > kChainWidth || Product(ad) % l.k != 0)
    return std::nullopt;
  l.rows = Product(ad) / l.k;
  if (l.rows < 1 || Product(e.Dims(l.y)) != l.rows * l.n || e.Dims(l.y).back() != l.n)
    return std::nullopt;
  if (l.r != kNoTensor && (Product(e.Dims(l.r)) != l.rows * l.n || e.Dims(l.r).back() != l.n))
    return std::nullopt;
  if (l.c != kNoTensor) {
    const std::vector<int64_t> &cd = e.Dims(l.c);
    if (!e.T(e.Root(l.c)).is_constant() || Product(cd) != l.n || cd.empty() || cd.back() != l.n ||
        !VectorStorable(e.Tag(l.c)))
      return std::nullopt;
  }
  const std::string ta = e.Tag(l.a);
  if (ta != "f32" && ta != "f16" && ta != "h16")
    return std::nullopt;
  if (!VectorStorable(e.Tag(l.y)))
    return std::nullopt;
  auto act = node.op == OpKind::kFusedGemm ? gen::FusedActivation(node)
                                           : StatusOr<std::string>(std::string("(x)"));
  std::optional<std::string> actv =
      node.op == OpKind::kFusedGemm ? gen::VectorActivationExpr(node) : std::string("(x)");
  if (!act.ok() || !actv)  // a chain of steps has no vector form here
    return std::nullopt;
  l.act = *act;
  l.actv = *actv;
  return l;
}

// A chain's rows per work-group: one for one row; else matmul_vec's row block (5 of a policy's
// 25 rows on AVX-512), its rows' accumulators for two panels in registers.
int64_t ChainRows(const CodegenOptions &opt, int64_t rows) {
  return rows == 1 ? 1 : ChooseMatMulBlock(opt, rows, 2 * WidestVector(opt)).rm;
}

// Finds the chains (CPU profile): two or more links of the same rows, each product's output read
// only by the next as its A, held in float32 in between (what matvec_chain keeps in local
// memory), a residual only of the chain's input, with at most kChainMacs multiply-adds per
// work-group.
void FindProductChains(Emitter &e) {
  if (e.opt.profile != cl::Profile::kCpu || !e.opt.fuse_products)
    return;
  const Graph &g = e.graph;
  const std::vector<int> uses = g.UseCounts();  // graph outputs count too
  const std::vector<int> producers = g.Producers();
  std::vector<int> reader(g.tensors.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); i++)
    for (TensorId t : g.nodes[i].inputs)
      if (t != kNoTensor)
        reader[static_cast<size_t>(t)] = static_cast<int>(i);
  std::set<size_t> taken;
  for (size_t i = 0; i < g.nodes.size(); i++) {
    if (taken.count(i))
      continue;
    std::optional<ChainLink> head = AsChainLink(e, g.nodes[i], i);
    if (!head)
      continue;
    // A residual must be the chain's input row (read from its buffer at the end of the layer).
    if (head->r != kNoTensor && (head->r != head->a || head->k != head->n))
      continue;
    const int64_t rb = ChainRows(e.opt, head->rows);
    std::vector<size_t> chain = {i};
    int64_t macs = rb * head->k * head->n;
    ChainLink last = *head;
    while (true) {
      const TensorId y = last.y;
      const size_t yi = static_cast<size_t>(y);
      if (uses[yi] != 1 || reader[yi] < 0 || e.Root(y) != y || e.IsIo(y) || e.Tag(y) != "f32")
        break;
      const size_t next = static_cast<size_t>(reader[yi]);
      std::optional<ChainLink> l = AsChainLink(e, g.nodes[next], next);
      if (!l || l->a != y || taken.count(next) || l->rows != head->rows ||
          macs + rb * l->k * l->n > kChainMacs ||
          (l->r != kNoTensor && (l->r != head->a || l->n != head->k)))
        break;
      macs += rb * l->k * l->n;
      chain.push_back(next);
      last = *l;
    }
    if (chain.size() < 2)
      continue;
    Emitter::ProductChain pc;
    pc.nodes = chain;
    for (size_t j = 0; j < chain.size(); j++) {
      taken.insert(chain[j]);
      if (j > 0)
        e.computed_by_reader.insert(g.nodes[chain[j]].outputs[0]);
    }
    // A row-copying Concat of one row read by the chain alone (a policy's summary of its
    // features: a mean over time, the last step and the traffic convention) is copied into the
    // chain's local memory by the chain itself: one launch fewer.
    const TensorId a = head->a;
    const int p = producers[static_cast<size_t>(a)];
    bool residual = false;
    for (size_t j : chain)
      residual = residual || g.nodes[j].input(3) != kNoTensor;
    if (p >= 0 && head->rows == 1 && !residual && uses[static_cast<size_t>(a)] == 1 &&
        e.Root(a) == a && !e.IsIo(a)) {
      const Node &cat = g.nodes[static_cast<size_t>(p)];
      auto axis = cat.op == OpKind::kConcat ? NormalizeAxis(cat.attrs.Int("axis", 0),
                                                            static_cast<int64_t>(e.Dims(a).size()))
                                            : StatusOr<int64_t>(InvalidArgument("not a Concat"));
      if (axis.ok() && Product(e.Dims(a), 0, static_cast<size_t>(*axis)) == 1 &&
          gen::ConcatRowsApply(e, cat)) {
        pc.concat = p;
        e.computed_by_reader.insert(a);
      }
    }
    e.product_chains[g.nodes[i].outputs[0]] = pc;
  }
}

// A row-copying Concat along K of two to four float32 parts, each as it is or a rounding Cast's
// source, read only by a product that takes matmul_vec with a constant B and one batch: the
// product copies its rows itself (matmul_vec's A_CAT), and the Concat gets no launch. A small
// policy's first layer: its features and desire, rounded to half (4-5 us and a launch before
// a 14 us product).
constexpr int64_t kConcatRowMax = 2048;
void FindProductConcats(Emitter &e) {
  if (e.opt.profile != cl::Profile::kCpu || !e.opt.fuse_products)
    return;
  const Graph &g = e.graph;
  const std::vector<int> uses = g.UseCounts();
  const std::vector<int> producers = g.Producers();
  for (const Node &node : g.nodes) {
    if ((node.op != OpKind::kGemm && node.op != OpKind::kMatMul && node.op != OpKind::kFusedGemm) ||
        node.inputs.size() < 2 || node.outputs.empty() || node.outputs[0] == kNoTensor ||
        e.computed_by_reader.count(node.outputs[0]) || e.product_chains.count(node.outputs[0]))
      continue;
    if (node.op != OpKind::kMatMul && node.attrs.Int("transA", 0) != 0)
      continue;
    const TensorId a = node.inputs[0], b = node.inputs[1];
    const std::vector<int64_t> &ad = e.Dims(a), &bd = e.Dims(b);
    const Tensor &broot = e.T(e.Root(b));
    // The rows go to private memory: up to 8 rows of 2,048 values (64 KiB per work-item).
    if (ad.size() < 2 || bd.size() != 2 || !broot.is_constant() || !IsFloat(broot.dtype) ||
        Product(ad, 0, ad.size() - 2) != 1 || e.Tag(a) != "f32" || ad.back() > kConcatRowMax)
      continue;
    const int64_t n =
        node.op != OpKind::kMatMul && node.attrs.Int("transB", 0) != 0 ? bd[0] : bd[1];
    const int p = producers[static_cast<size_t>(a)];
    if (n < 4 || p < 0 || uses[static_cast<size_t>(a)] != 1 || e.Root(a) != a || e.IsIo(a))
      continue;
    const Node &cat = g.nodes[static_cast<size_t>(p)];
    if (cat.op != OpKind::kConcat || cat.inputs.size() < 2 || cat.inputs.size() > 4 ||
        !gen::ConcatRowsApply(e, cat))
      continue;
    auto axis = NormalizeAxis(cat.attrs.Int("axis", 0), static_cast<int64_t>(ad.size()));
    if (!axis.ok() || static_cast<size_t>(*axis) != ad.size() - 1)
      continue;
    bool ok = true;
    for (TensorId t : cat.inputs) {
      auto folded = e.folded_by_concat.find(t);
      ok = ok && t != kNoTensor && Product(e.Dims(t)) != 0 &&
           (folded == e.folded_by_concat.end() ||
            folded->second.kind == Emitter::ConcatFold::Kind::kRound);
    }
    if (!ok)
      continue;
    e.product_concats[a] = p;
    e.computed_by_reader.insert(a);
  }
}

Status LowerProductChain(Emitter &e, const Emitter::ProductChain &chain) {
  std::vector<ChainLink> links;
  for (size_t i : chain.nodes) {
    std::optional<ChainLink> l = AsChainLink(e, e.graph.nodes[i], i);
    if (!l)
      return Internal(NodeWhere(e.graph.nodes[i]) + ": no longer a link of its product chain");
    links.push_back(*l);
  }
  const int64_t v = WidestVector(e.opt);
  const int64_t rows = links[0].rows, rb = ChainRows(e.opt, rows);
  // Panels per work-item: eight for one row (independent accumulators), two for a row block
  // (RB x 2 accumulators, as matmul_vec's 8 x 2 on AVX-512).
  const int64_t np = rb == 1 ? kChainPanels : 2;
  int64_t wmax = links[0].k, panels = 1;
  for (const ChainLink &l : links) {
    wmax = std::max(wmax, l.n);
    panels = std::max<int64_t>(panels, static_cast<int64_t>(CeilDiv(l.n, v)));
  }
  Pending k;
  k.entry = "matvec_chain";
  k.label = "MatVecChain of";
  for (size_t j = 0; j < links.size(); j++)
    k.label += (j ? ", " : " ") + e.graph.nodes[links[j].node].Describe();
  Defines d;
  std::string params, layers;
  if (chain.concat >= 0) {
    // The input row as the Concat's kernel would write it, into local memory.
    const Node &cat = e.graph.nodes[static_cast<size_t>(chain.concat)];
    OP_ASSIGN_OR_RETURN(
        int64_t axis,
        NormalizeAxis(cat.attrs.Int("axis", 0), static_cast<int64_t>(e.Dims(links[0].a).size())));
    gen::ConcatRowsCode code = gen::ConcatRowsBody(e, cat, static_cast<size_t>(axis), "__local");
    for (size_t j = 0; j < code.inputs.size(); j++) {
      const std::string s = std::to_string(j);
      params += ", __global const float *in" + s + ", uint in" + s + "_off";
      k.args.push_back(TArg(code.inputs[j]));
    }
    k.label += " (and " + cat.Describe() + ")";
    d.Int("MV_CONCAT", 1).Int("MV_CONCAT_ITEMS", code.items).Def("MV_CONCAT_BODY", code.body);
  } else {
    params += ", __global const STYPE(" + e.Tag(links[0].a) + ") *a, uint a_off";
    k.args.push_back(TArg(links[0].a));
  }
  for (size_t j = 0; j < links.size(); j++) {
    const ChainLink &l = links[j];
    const std::string s = std::to_string(j);
    const TensorId panels_id = ProductPanels(e, l.b, l.tb, l.k, l.n, v, np);
    const std::string tb = e.Tag(panels_id);
    params += ", __global const STYPE(" + tb + ") *b" + s + ", uint b" + s + "_off";
    k.args.push_back(TArg(panels_id));
    std::string c = "b" + s, tc = tb;  // without a bias: never read
    if (l.c != kNoTensor) {
      c = "c" + s;
      tc = e.Tag(l.c);
      params += ", __global const STYPE(" + tc + ") *c" + s + ", uint c" + s + "_off";
      k.args.push_back(TArg(l.c));
    }
    const bool last = j + 1 == links.size();
    const char *in = j % 2 == 0 ? "v0" : "v1", *out = j % 2 == 0 ? "v1" : "v0";
    d.Def("MV_ACT" + s + "(x)", l.act).Def("MV_ACTV" + s + "(x)", l.actv);
    layers += std::string("MV_LAYER(") + in + ", " + out + ", b" + s + ", b" + s + "_off, " + tb +
              ", " + std::to_string(l.k) + ", " + std::to_string(l.n) + ", " + c + ", " + c +
              "_off, " + tc + ", " + (l.c != kNoTensor ? "1" : "0") + ", " +
              gen::FloatLit(l.alpha) + ", " + gen::FloatLit(l.beta) + ", MV_ACTV" + s + ", MV_ACT" +
              s + ", " + (last ? "1" : "0") + ", " + (l.r != kNoTensor ? "1" : "0") + ", " +
              (l.res_after ? "1" : "0") + ") ";
    if (!last)
      layers += "barrier(CLK_LOCAL_MEM_FENCE); ";
    k.flops += 2ull * static_cast<uint64_t>(rows * l.k * l.n);
  }
  const TensorId y = links.back().y;
  d.Def("TA", e.Tag(links[0].a)).Def("TY", e.Tag(y)).Int("V", v).Int("NP", np);
  d.Int("M", rows).Int("RB", rb);
  d.Int("K0", links[0].k).Int("WMAX", wmax).Def("MV_PARAMS", params.substr(2));
  d.Def("MV_LAYERS", layers);
  OP_ASSIGN_OR_RETURN(k.source, e.Source("matvec_chain", d));
  k.args.push_back(TArg(y));
  k.writes = {y};
  const uint64_t items = CeilDiv(panels, np);
  k.global = {items, CeilDiv(rows, rb)};
  k.local = {items, 1};
  e.Emit(std::move(k));
  return Status::Ok();
}

Status LowerPool(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], y = node.outputs[0];
  if (node.outputs.size() > 1 && node.outputs[1] != kNoTensor)
    return Unsupported(NodeWhere(node) + ": MaxPool indices output");
  OP_ASSIGN_OR_RETURN(auto xi, Nchw(node, e.Dims(x)));
  OP_ASSIGN_OR_RETURN(auto yo, Nchw(node, e.Dims(y)));
  auto kernel = node.attrs.Ints("kernel_shape");
  if (kernel.size() != e.Dims(x).size() - 2)
    return InvalidArgument(NodeWhere(node) + ": kernel_shape does not match the input rank");
  if (node.attrs.Int("storage_order", 0) != 0)
    return Unsupported(NodeWhere(node) + ": storage_order 1");
  OP_ASSIGN_OR_RETURN(Window win, ReadWindow(node, kernel, Spatial(e.Dims(x)), Spatial(e.Dims(y))));
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TY", e.Tag(y));
  d.Int("N", xi[0]).Int("C", xi[1]).Int("H", xi[2]).Int("W", xi[3]);
  d.Int("OH", yo[2]).Int("OW", yo[3]);
  DefWindow(d, win);
  d.Int("MAX_POOL", node.op == OpKind::kMaxPool);
  d.Int("COUNT_PAD", node.attrs.Int("count_include_pad", 0) != 0);
  Pending k;
  k.label = node.Describe();
  k.entry = "pool";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("pool", d));
  uint64_t n = static_cast<uint64_t>(Product(e.Dims(y)));
  if (n == 0)
    return Status::Ok();
  k.global = {CeilDiv(n, 64) * 64};
  k.local = {64};
  k.args = {TArg(x), TArg(y)};
  k.writes = {y};
  k.flops = n * win.kh * win.kw;
  e.Emit(std::move(k));
  return Status::Ok();
}

Status LowerReduce(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], y = node.outputs[0];
  const auto &xd = e.Dims(x);
  size_t r = xd.size();
  std::vector<bool> reduced(r, false);
  bool arg = node.op == OpKind::kArgMax || node.op == OpKind::kArgMin;
  bool global = node.op == OpKind::kGlobalAveragePool || node.op == OpKind::kGlobalMaxPool;
  if (arg) {
    OP_ASSIGN_OR_RETURN(int64_t a,
                        NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(r)));
    reduced[static_cast<size_t>(a)] = true;
  } else if (global) {
    for (size_t dd = 2; dd < r; dd++)
      reduced[dd] = true;
  } else {
    std::vector<int64_t> axes = node.attrs.Ints("axes");
    if (node.input(1) != kNoTensor) {
      if (!e.T(node.input(1)).is_constant())
        return Unsupported(NodeWhere(node) + ": axes must be constant");
      OP_ASSIGN_OR_RETURN(axes, ConstantInts(e.T(node.input(1))));
    }
    if (axes.empty()) {
      if (node.attrs.Int("noop_with_empty_axes", 0) != 0)
        return gen::EmitCopy(e, x, y, node.Describe());
      for (size_t dd = 0; dd < r; dd++)
        reduced[dd] = true;
    }
    for (int64_t a : axes) {
      OP_ASSIGN_OR_RETURN(int64_t na, NormalizeAxis(a, static_cast<int64_t>(r)));
      reduced[static_cast<size_t>(na)] = true;
    }
  }
  std::vector<int64_t> kept_dims, red_dims, kept_strides, red_strides;
  std::vector<int64_t> strides = Strides(Shape(xd));
  for (size_t dd = 0; dd < r; dd++) {
    (reduced[dd] ? red_dims : kept_dims).push_back(xd[dd]);
    (reduced[dd] ? red_strides : kept_strides).push_back(strides[dd]);
  }
  auto offset_expr = [](const std::vector<int64_t> &dims, const std::vector<int64_t> &st,
                        const std::string &v) {
    std::string s = "(0";
    for (size_t dd = 0; dd < dims.size(); dd++)
      if (dims[dd] != 1)
        s += " + " + gen::CoordExpr(dims, dd, v) + " * " + std::to_string(st[dd]);
    return s + ")";
  };
  int64_t out_n = Product(kept_dims), red_n = Product(red_dims);
  if (out_n == 0)
    return Status::Ok();
  if (red_n == 0)
    return Unsupported(NodeWhere(node) + ": reduction over an empty axis");
  bool fl = e.Tag(x) == "f32" || e.Tag(x) == "f16" || e.Tag(x) == "h16";
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TY", e.Tag(y));
  d.Int("OUT_N", out_n).Int("RED_N", red_n);
  d.Def("OUT_BASE(o)", offset_expr(kept_dims, kept_strides, "(o)"));
  d.Def("RED_OFF(r)", offset_expr(red_dims, red_strides, "(r)"));
  std::string ty = fl ? "float" : "long";
  std::string init = "0", step = "((acc) + (v))", fin = "(acc)";
  switch (node.op) {
    case OpKind::kArgMax:
    case OpKind::kArgMin: {
      bool last = node.attrs.Int("select_last_index", 0) != 0;
      std::string cmp = node.op == OpKind::kArgMax ? (last ? ">=" : ">") : (last ? "<=" : "<");
      d.Def("ARG_MODE", "1").Def("RED_BETTER(v, best)", "((v) " + cmp + " (best))");
      break;
    }
    case OpKind::kReduceSum:
      break;
    case OpKind::kReduceMean:
    case OpKind::kGlobalAveragePool:
      fin = "((acc) / " + (fl ? gen::FloatLit(static_cast<double>(red_n)) : std::to_string(red_n)) +
            ")";
      break;
    case OpKind::kReduceMax:
    case OpKind::kGlobalMaxPool:
      init = fl ? "(-INFINITY)" : "LONG_MIN";
      step = fl ? "fmax(acc, v)" : "max(acc, v)";
      break;
    case OpKind::kReduceMin:
      init = fl ? "INFINITY" : "LONG_MAX";
      step = fl ? "fmin(acc, v)" : "min(acc, v)";
      break;
    case OpKind::kReduceProd:
      init = "1";
      step = "((acc) * (v))";
      break;
    case OpKind::kReduceL1:
      step = fl ? "((acc) + fabs(v))" : "((acc) + ((v) < 0 ? -(v) : (v)))";
      break;
    case OpKind::kReduceL2:
      step = "((acc) + (v) * (v))";
      fin = fl ? "sqrt(acc)" : "(long)rint(sqrt((float)(acc)))";
      break;
    case OpKind::kReduceSumSquare:
      step = "((acc) + (v) * (v))";
      break;
    case OpKind::kReduceLogSum:
      fin = "log((float)(acc))";
      break;
    case OpKind::kReduceLogSumExp:
      if (!fl)
        return Unsupported(NodeWhere(node) + ": ReduceLogSumExp on integers");
      d.Def("RED_NEEDS_MAX", "1");
      step = "((acc) + exp((v) - mx))";
      fin = "(mx + log(acc))";
      break;
    default:
      return Internal(node.Describe() + " is not a reduction");
  }
  d.Def("RED_ACC_T", ty).Def("RED_INIT", init).Def("RED_STEP(acc, v)", step);
  d.Def("RED_FINAL(acc)", fin);
  Pending k;
  k.label = node.Describe();
  k.entry = "reduce";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("reduce", d));
  k.global = {CeilDiv(out_n, 64) * 64};
  k.local = {64};
  k.args = {TArg(x), TArg(y)};
  k.writes = {y};
  k.flops = static_cast<uint64_t>(out_n * red_n);
  e.Emit(std::move(k));
  return Status::Ok();
}

Status LowerSoftmax(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], y = node.outputs[0];
  const auto &xd = e.Dims(x);
  int64_t r = static_cast<int64_t>(xd.size());
  bool old = node.opset < 13;
  OP_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(node.attrs.Int("axis", old ? 1 : -1), std::max<int64_t>(r, 1)));
  size_t ax = static_cast<size_t>(axis);
  int64_t outer = Product(xd, 0, ax);
  int64_t len = old ? Product(xd, ax) : (r ? xd[ax] : 1);
  int64_t inner = old ? 1 : Product(xd, ax + 1);
  if (outer * len * inner == 0)
    return Status::Ok();
  int mode = node.op == OpKind::kSoftmax ? 0 : node.op == OpKind::kLogSoftmax ? 1 : 2;
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TY", e.Tag(y));
  d.Int("OUTER", outer).Int("AXIS", len).Int("INNER", inner).Int("MODE", mode);
  Pending k;
  k.label = node.Describe();
  k.entry = "softmax";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("softmax", d));
  k.global = {CeilDiv(outer * inner, 64) * 64};
  k.local = {64};
  k.args = {TArg(x), TArg(y)};
  k.writes = {y};
  k.flops = static_cast<uint64_t>(outer * len * inner * 5);
  e.Emit(std::move(k));
  return Status::Ok();
}

Status LowerNorm(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], s = node.inputs[1], b = node.input(2), y = node.outputs[0];
  TensorId mean = node.outputs.size() > 1 ? node.outputs[1] : kNoTensor;
  TensorId invstd = node.outputs.size() > 2 ? node.outputs[2] : kNoTensor;
  const auto &xd = e.Dims(x);
  int64_t rows, len;
  std::string sc, bi;
  if (node.op == OpKind::kLayerNormalization) {
    OP_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(node.attrs.Int("axis", -1), static_cast<int64_t>(xd.size())));
    std::vector<int64_t> nd(xd.begin() + axis, xd.end());
    rows = Product(xd, 0, static_cast<size_t>(axis));
    len = Product(nd);
    sc = gen::BroadcastIndex(nd, e.Dims(s), "(j)");
    if (b != kNoTensor)
      bi = gen::BroadcastIndex(nd, e.Dims(b), "(j)");
  } else {
    if (xd.size() < 2)
      return InvalidArgument(NodeWhere(node) + ": rank < 2");
    rows = xd[0] * xd[1];
    len = Product(xd, 2);
    sc = bi = "((row) % " + std::to_string(xd[1]) + ")";
  }
  if (rows * len == 0)
    return Status::Ok();
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TS", e.Tag(s)).Def("TY", e.Tag(y));
  d.Int("ROW_LEN", len).Flt("EPS", node.attrs.Float("epsilon", 1e-5f));
  d.Def("SC_IDX(row, j)", sc).Int("HAS_BIAS", b != kNoTensor);
  if (b != kNoTensor)
    d.Def("TB", e.Tag(b)).Def("B_IDX(row, j)", bi);
  d.Int("HAS_MEAN", mean != kNoTensor).Int("HAS_INVSTD", invstd != kNoTensor);
  if (mean != kNoTensor)
    d.Def("TM", e.Tag(mean));
  if (invstd != kNoTensor)
    d.Def("TI", e.Tag(invstd));
  const int64_t split = GroupSplit(e.opt, len);
  if (split > 1)
    d.Int("NSPLIT", split);
  Pending k;
  k.label = node.Describe();
  k.entry = "norm";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("norm", d));
  if (split > 1) {  // one work-group per row
    k.global = {static_cast<uint64_t>(rows * split)};
    k.local = {static_cast<uint64_t>(split)};
  } else {
    k.global = {CeilDiv(rows, 64) * 64};
    k.local = {64};
  }
  k.args = {TArg(x), TArg(s)};
  if (b != kNoTensor)
    k.args.push_back(TArg(b));
  k.args.push_back(TArg(y));
  k.writes = {y};
  for (TensorId t : {mean, invstd})
    if (t != kNoTensor) {
      k.args.push_back(TArg(t));
      k.writes.push_back(t);
    }
  PushInts(k, {rows});
  k.flops = static_cast<uint64_t>(rows * len * 8);
  e.Emit(std::move(k));
  return Status::Ok();
}

Status LowerResize(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], y = node.outputs[0];
  const auto &xd = e.Dims(x), &yd = e.Dims(y);
  size_t r = xd.size();
  if (r < 2 || yd.size() != r)
    return Unsupported(NodeWhere(node) + ": rank " + std::to_string(r));
  for (size_t dd = 0; dd + 2 < r; dd++)
    if (xd[dd] != yd[dd])
      return Unsupported(NodeWhere(node) + ": resizing an axis other than the last two");
  std::string mode = node.attrs.String("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return Unsupported(NodeWhere(node) + ": mode '" + mode + "'");
  std::vector<double> scales;
  TensorId st = node.opset < 11 ? node.input(1) : node.input(2);
  if (st != kNoTensor && Product(e.Dims(st)) > 0) {
    if (!e.T(st).is_constant())
      return Unsupported(NodeWhere(node) + ": scales must be constant");
    OP_ASSIGN_OR_RETURN(scales, ConstantDoubles(e.T(st)));
    if (scales.size() != r)
      return InvalidArgument(NodeWhere(node) + ": " + std::to_string(scales.size()) +
                             " scales for rank " + std::to_string(r));
  } else {
    for (size_t dd = 0; dd < r; dd++)
      scales.push_back(xd[dd] ? static_cast<double>(yd[dd]) / xd[dd] : 1.0);
  }
  std::string ctm = node.attrs.String("coordinate_transformation_mode",
                                      node.opset < 11 ? "asymmetric" : "half_pixel");
  std::string coord;
  if (ctm == "half_pixel")
    coord = "(((o) + 0.5f) / (scale) - 0.5f)";
  else if (ctm == "pytorch_half_pixel")
    coord = "((in) * (scale) > 1.0f ? ((o) + 0.5f) / (scale) - 0.5f : 0.0f)";
  else if (ctm == "align_corners")
    coord = "((in) * (scale) <= 1.0f ? 0.0f : (o) * (float)((in) - 1) / ((in) * (scale) - 1.0f))";
  else if (ctm == "asymmetric")
    coord = "((o) / (scale))";
  else if (ctm == "tf_half_pixel_for_nearest" || ctm == "tf_half_pixel_for_nn")
    coord = "(((o) + 0.5f) / (scale))";
  else
    return Unsupported(NodeWhere(node) + ": coordinate_transformation_mode '" + ctm + "'");
  std::string nm = node.attrs.String("nearest_mode", "round_prefer_floor"), nearest;
  if (nm == "round_prefer_floor")
    nearest = "ceil((x) - 0.5f)";
  else if (nm == "round_prefer_ceil")
    nearest = "floor((x) + 0.5f)";
  else if (nm == "floor")
    nearest = "floor(x)";
  else if (nm == "ceil")
    nearest = "ceil(x)";
  else
    return Unsupported(NodeWhere(node) + ": nearest_mode '" + nm + "'");
  if (node.opset < 11 && mode == "nearest")
    nearest = "floor(x)";  // Resize-10 rounds nearest down (asymmetric + floor)
  if (node.attrs.Int("exclude_outside", 0) != 0)
    return Unsupported(NodeWhere(node) + ": exclude_outside");
  if (Product(yd) == 0)
    return Status::Ok();
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TY", e.Tag(y));
  d.Int("NC", Product(xd, 0, r - 2)).Int("H", xd[r - 2]).Int("W", xd[r - 1]);
  d.Int("OH", yd[r - 2]).Int("OW", yd[r - 1]);
  d.Flt("SCALE_H", scales[r - 2]).Flt("SCALE_W", scales[r - 1]);
  d.Def("COORD(o, scale, in, out)", coord).Int("LINEAR", mode == "linear");
  d.Def("NEAREST(x, size)", nearest);
  Pending k;
  k.label = node.Describe();
  k.entry = "resize";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("resize", d));
  uint64_t n = static_cast<uint64_t>(Product(yd));
  k.global = {CeilDiv(n, 64) * 64};
  k.local = {64};
  k.args = {TArg(x), TArg(y)};
  k.writes = {y};
  k.flops = n * 8;
  e.Emit(std::move(k));
  return Status::Ok();
}

// --- quantization (kernels/quant.cl, qconv.cl, qmatmul.cl)

// The saturation range of a quantized output type.
void DefQuantRange(Defines &d, DType t) {
  d.Flt("QMIN", t == DType::kInt8 ? -128 : 0).Flt("QMAX", t == DType::kInt8 ? 127 : 255);
}

// Scales (and DynamicQuantizeLinear's computed scale) stay float32: see Emitter::keep_f32.
void MarkQuantScales(Emitter &e) {
  for (const Node &n : e.graph.nodes) {
    std::vector<size_t> scales;
    switch (n.op) {
      case OpKind::kQuantizeLinear:
      case OpKind::kDequantizeLinear:
        scales = {1};
        break;
      case OpKind::kQLinearConv:
        // and a float table (FuseQuantizedLookup): the dequantized values, rounded only where
        // the output is stored
        scales = {1, 4, 6, 9};
        break;
      case OpKind::kQLinearMatMul:
        scales = {1, 4, 6};
        break;
      case OpKind::kDynamicQuantizeLinear:
        if (n.outputs.size() > 1 && n.outputs[1] != kNoTensor)
          e.keep_f32.insert(n.outputs[1]);
        break;
      default:
        break;
    }
    for (size_t i : scales)
      if (n.input(i) != kNoTensor)
        e.keep_f32.insert(n.input(i));
  }
}

// One value, or `count` values along an axis (the front end checked which).
int64_t QuantCount(const Emitter &e, TensorId t) {
  return t == kNoTensor ? 1 : Product(e.Dims(t));
}

Status LowerQuantizeLinear(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0], s = node.inputs[1], z = node.input(2), y = node.outputs[0];
  const std::vector<int64_t> xd = e.Dims(x);
  const int64_t num = Product(xd), count = QuantCount(e, s);
  int64_t inner = 1;
  if (count != 1 || e.Dims(s).size() > 1) {
    OP_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(node.attrs.Int("axis", 1), static_cast<int64_t>(xd.size())));
    inner = Product(xd, static_cast<size_t>(axis) + 1);
  }
  if (num == 0)
    return Status::Ok();
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TS", e.Tag(s)).Def("TY", e.Tag(y));
  d.Int("HAS_ZP", z != kNoTensor).Int("COUNT", count).Int("INNER", inner).Int("NUM", num);
  d.Int("MODE", node.op == OpKind::kQuantizeLinear ? 0 : 1);
  if (z != kNoTensor)
    d.Def("TZ", e.Tag(z));
  DefQuantRange(d, e.T(y).dtype);
  Pending k;
  k.label = node.Describe();
  // The CPU profile quantizes a float32 tensor with one scale 16 elements per work-item.
  const bool vec = e.opt.profile == cl::Profile::kCpu && node.op == OpKind::kQuantizeLinear &&
                   count == 1 && e.Tag(x) == "f32";
  if (vec) {
    d.Int("QV", 1);
    k.entry = "quantize_vec";
    k.global = {CeilDiv(num, 16)};
  } else {
    k.entry = "quantize";
    k.global = {CeilDiv(num, 64) * 64};
    k.local = {64};
  }
  OP_ASSIGN_OR_RETURN(k.source, e.Source("quant", d));
  k.args = {TArg(x), TArg(s)};
  if (z != kNoTensor)
    k.args.push_back(TArg(z));
  k.args.push_back(TArg(y));
  k.writes = {y};
  k.flops = static_cast<uint64_t>(num * 3);
  e.Emit(std::move(k));
  return Status::Ok();
}

// One work-group reduces the whole tensor and quantizes it (a single launch: the op is rare in
// inference graphs, and its scale depends on every element).
Status LowerDynamicQuantizeLinear(Emitter &e, const Node &node) {
  TensorId x = node.inputs[0];
  const int64_t num = Product(e.Dims(x));
  TensorId outs[3];
  for (size_t i = 0; i < 3; i++) {
    outs[i] = node.outputs.size() > i ? node.outputs[i] : kNoTensor;
    if (outs[i] == kNoTensor)  // the kernel writes all three
      outs[i] = e.NewTensor(node.name + "_unused", i == 1 ? DType::kFloat32 : DType::kUInt8,
                            i == 0 ? e.Dims(x) : std::vector<int64_t>{});
  }
  e.keep_f32.insert(outs[1]);
  Defines d;
  d.Def("TX", e.Tag(x)).Int("NUM", num).Int("DQ_LOCAL", 64);
  Pending k;
  k.label = node.Describe();
  k.entry = "dynamic_quantize";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("quant", d));
  k.global = {64};
  k.local = {64};
  k.args = {TArg(x), TArg(outs[0]), TArg(outs[1]), TArg(outs[2])};
  k.writes = {outs[0], outs[1], outs[2]};
  k.flops = static_cast<uint64_t>(num * 5);
  e.Emit(std::move(k));
  return Status::Ok();
}

// A constant zero point's value for output channel (column) i: one for all, or one each; 0
// where there is none.
static int64_t ZeroPointAt(const Tensor *zt, int64_t i) {
  if (zt == nullptr)
    return 0;
  return static_cast<int64_t>(
      ref::GetReal(*zt, zt->shape.NumElements() == 1 ? 0 : static_cast<size_t>(i)));
}

// QLinearConv's requantizing epilogue, shared by the vector and the generic kernel: the input,
// weight and output scales, the output zero point and the optional bias, as defines and as the
// kernel arguments after the input, weight and zero-point arguments.
// With a lookup table (FuseQuantizedLookup), the requantized value (in the range of the output
// zero point's type) indexes it, and the table's value is the output.
static void AddQLinearConvEpilogue(Emitter &e, const Node &node, Defines &d, Pending &k) {
  const TensorId b = node.input(8), lut = node.input(9);
  d.Def("TXS", e.Tag(node.inputs[1])).Def("TWS", e.Tag(node.inputs[4]));
  d.Def("TYS", e.Tag(node.inputs[6])).Def("TYZ", e.Tag(node.inputs[7]));
  d.Int("WS_N", QuantCount(e, node.inputs[4])).Int("HAS_BIAS", b != kNoTensor);
  d.Int("HAS_LUT", lut != kNoTensor);
  if (lut != kNoTensor)
    d.Def("TL", e.Tag(lut));
  // A float table that is only a DequantizeLinear (FuseQuantizedLookup's lut_dq_* attributes):
  // the kernels compute its values (quant.cl, NN_DQ_OUT) into float32 storage.
  if (lut != kNoTensor && node.attrs.Has("lut_dq_scale") && e.Tag(node.outputs[0]) == "f32" &&
      e.T(lut).dtype == DType::kFloat32)
    d.Int("LUT_DQ", 1)
        .Flt("DQ_SCALE", node.attrs.Float("lut_dq_scale", 1.f))
        .Flt("DQ_ZP", static_cast<double>(node.attrs.Int("lut_dq_zero_point", 0)));
  DefQuantRange(d, e.T(node.inputs[7]).dtype);
  for (size_t i : {1, 4, 6, 7})
    k.args.push_back(TArg(node.inputs[i]));
  if (b != kNoTensor)
    k.args.push_back(TArg(b));
  if (lut != kNoTensor)
    k.args.push_back(TArg(lut));
}

// What every quantized convolution kernel of the CPU profile shares once its own defines (D) and
// re-laid-out weights (WV) are made: the input zero point, the QLinearConv epilogue, the output
// and the launch. The defines are appended after the kernel's own, in one order for all three.
static Status EmitQuantizedConv(Emitter &e, const Node &node, Defines &d, TensorId wv,
                                const char *entry, std::vector<uint64_t> global, uint64_t flops,
                                std::initializer_list<int64_t> sizes = {}) {
  const bool ql = node.op == OpKind::kQLinearConv;
  TensorId x = node.inputs[0], xz = node.input(2), y = node.outputs[0];
  d.Int("HAS_XZP", xz != kNoTensor).Int("QLINEAR", ql);
  if (xz != kNoTensor)
    d.Def("TXZ", e.Tag(xz));
  Pending k;
  k.args = {TArg(x), TArg(wv)};
  if (xz != kNoTensor)
    k.args.push_back(TArg(xz));
  if (ql)
    AddQLinearConvEpilogue(e, node, d, k);
  k.args.push_back(TArg(y));
  PushInts(k, sizes);
  k.label = node.Describe();
  k.entry = entry;
  OP_ASSIGN_OR_RETURN(k.source, e.Source(entry, d));
  k.global = std::move(global);
  k.writes = {y};
  k.flops = flops;
  if (Product(e.Dims(y)) != 0)
    e.Emit(std::move(k));
  return Status::Ok();
}

// The CPU profile's quantized depthwise convolution (kernels/qconv_dw.cl): one input channel
// per group and up to four output channels of it, stride 1 or 2, no dilation; conv2d_dw's
// blocking with the integer products summed exactly in float32, which holds every partial sum
// while KH * KW * 255 * 255 < 2^24 (at most 258 taps). Weights re-laid out as float32
// w - wzp[m], [OC][KH][KW].
bool LowerQuantizedConvDw(Emitter &e, const Node &node, const std::array<int64_t, 4> &xi,
                          const std::array<int64_t, 4> &yo, const Window &win, Status &status) {
  const bool ql = node.op == OpKind::kQLinearConv;
  TensorId x = node.inputs[0], w = ql ? node.inputs[3] : node.input(1);
  TensorId wz = ql ? node.input(5) : node.input(3);
  TensorId y = node.outputs[0];
  const int64_t taps = win.kh * win.kw;
  if (win.sh > 2 || win.sw > 2 || win.dh != 1 || win.dw != 1 || taps > 258)
    return false;
  const Tensor &wsrc = e.T(e.Root(w));
  const Tensor *wzt = wz == kNoTensor ? nullptr : &e.T(e.Root(wz));
  const int64_t oc_count = yo[1];
  std::vector<float> shifted(static_cast<size_t>(oc_count * taps));
  for (int64_t m = 0; m < oc_count; m++) {
    const double zp = static_cast<double>(ZeroPointAt(wzt, m));
    for (int64_t t = 0; t < taps; t++)
      shifted[static_cast<size_t>(m * taps + t)] = static_cast<float>(
          static_cast<double>(ref::GetReal(wsrc, static_cast<size_t>(m * taps + t))) - zp);
  }
  Bytes wt(shifted.size() * 4);
  std::memcpy(wt.data(), shifted.data(), wt.size());
  TensorId wv =
      e.NewConstant(wsrc.name + "_qdw", DType::kFloat32, {oc_count, win.kh, win.kw}, std::move(wt));
  const int64_t v = yo[3] >= 16 ? 16 : (yo[3] >= 8 ? 8 : 4);
  const int64_t rows = std::min<int64_t>(yo[2], 4);
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(wv)).Def("TY", e.Tag(y));
  d.Int("KH", win.kh).Int("KW", win.kw).Int("SH", win.sh).Int("SW", win.sw);
  d.Int("PH", win.ph).Int("PW", win.pw).Int("M", yo[1] / xi[1]);
  d.Int("R", rows).Int("V", v);
  DefineDwEdgeTaps(d, v, win);
  status = EmitQuantizedConv(
      e, node, d, wv, "qconv_dw",
      {CeilDiv(yo[3], v), CeilDiv(yo[2], rows), static_cast<uint64_t>(xi[0] * xi[1])},
      2ull * yo[0] * yo[1] * yo[2] * yo[3] * taps, {xi[0], xi[1], xi[2], xi[3], yo[2], yo[3]});
  return true;
}

// The largest |x - xzp| of a quantized input: from its constant zero point, or 255.
static double MaxShiftedInput(Emitter &e, TensorId x, TensorId xz) {
  const bool s8 = e.T(x).dtype == DType::kInt8;
  if (xz == kNoTensor || !e.T(e.Root(xz)).is_constant())
    return xz == kNoTensor ? (s8 ? 128.0 : 255.0) : 255.0;
  const double zp = static_cast<double>(ref::GetReal(e.T(e.Root(xz)), 0));
  return std::max(zp - (s8 ? -128.0 : 0.0), (s8 ? 127.0 : 255.0) - zp);
}

// The CPU profile's quantized convolution with the integer products summed in float32
// (kernels/qconv_f.cl, conv2d_vec's blocking): taken where that is exact, i.e. for every output
// channel the largest |x - xzp| times the sum of its |w - wzp| is below 2^24, so that every
// partial sum is an integer float32 holds. Weights re-laid out as float32 w - wzp,
// [g * blocks + blk][ic][tap][a].
bool LowerQuantizedConvF(Emitter &e, const Node &node, const std::array<int64_t, 4> &xi,
                         const std::array<int64_t, 4> &yo, const Window &win, Status &status) {
  const bool ql = node.op == OpKind::kQLinearConv;
  TensorId x = node.inputs[0], w = ql ? node.inputs[3] : node.input(1);
  TensorId xz = node.input(2), wz = ql ? node.input(5) : node.input(3);
  TensorId y = node.outputs[0];
  const int64_t g = node.attrs.Int("group", 1);
  const int64_t cg = xi[1] / g, ocg = yo[1] / g, taps = win.kh * win.kw;
  const Tensor &wsrc = e.T(e.Root(w));
  const Tensor *wzt = wz == kNoTensor ? nullptr : &e.T(e.Root(wz));
  const double xmax = MaxShiftedInput(e, x, xz);
  std::vector<float> shifted(static_cast<size_t>(yo[1] * cg * taps));
  for (int64_t m = 0; m < yo[1]; m++) {
    const double zp = static_cast<double>(ZeroPointAt(wzt, m));
    double bound = 0;
    for (int64_t i = 0; i < cg * taps; i++) {
      const size_t at = static_cast<size_t>(m * cg * taps + i);
      shifted[at] = static_cast<float>(static_cast<double>(ref::GetReal(wsrc, at)) - zp);
      bound += std::fabs(static_cast<double>(shifted[at])) * xmax;
    }
    if (bound >= 16777216.0)
      return false;
  }
  const bool flat = win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.ph == 0 &&
                    win.pw == 0 && win.ph_end == 0 && win.pw_end == 0;
  const int64_t pixels = flat ? yo[2] * yo[3] : yo[3];
  const int64_t v = pixels >= 16 ? 16 : (pixels >= 8 ? 8 : 4);
  const int64_t pv = flat && pixels >= 2 * v ? 2 : 1;
  // Channels per work-item as conv2d_vec chooses them (accumulators in the 32 registers of
  // AVX-512 beside the inputs).
  int64_t ocb = std::min<int64_t>(ocg, 8);
  for (int64_t cand : {16, 12})
    if (cand * pv <= 24 && ocg % cand == 0) {
      ocb = cand;
      break;
    }
  const int64_t blocks = CeilDiv(ocg, ocb);
  std::vector<float> wl(static_cast<size_t>(g * blocks * cg * taps * ocb), 0.f);
  for (int64_t gi = 0; gi < g; gi++)
    for (int64_t blk = 0; blk < blocks; blk++)
      for (int64_t a = 0; a < ocb; a++) {
        const int64_t oc = blk * ocb + a;
        if (oc >= ocg)
          continue;
        for (int64_t ic = 0; ic < cg; ic++)
          for (int64_t t = 0; t < taps; t++)
            wl[static_cast<size_t>((((gi * blocks + blk) * cg + ic) * taps + t) * ocb + a)] =
                shifted[static_cast<size_t>(((gi * ocg + oc) * cg + ic) * taps + t)];
      }
  Bytes wt(wl.size() * 4);
  std::memcpy(wt.data(), wl.data(), wt.size());
  TensorId wv =
      e.NewConstant(wsrc.name + "_qf", DType::kFloat32, {g * blocks, cg, taps, ocb}, std::move(wt));
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(wv)).Def("TY", e.Tag(y));
  d.Int("N", xi[0]).Int("C", xi[1]).Int("H", xi[2]).Int("W", xi[3]);
  d.Int("OC", yo[1]).Int("OH", yo[2]).Int("OW", yo[3]).Int("G", g);
  DefWindow(d, win);
  d.Int("OCB", ocb).Int("V", v).Int("PV", pv).Int("FLAT", flat);
  status = EmitQuantizedConv(e, node, d, wv, "qconv_f",
                             {static_cast<uint64_t>(xi[0] * g * blocks),
                              static_cast<uint64_t>(flat ? 1 : yo[2]), CeilDiv(pixels, v * pv)},
                             2ull * yo[0] * yo[1] * yo[2] * yo[3] * cg * taps);
  return true;
}

// The CPU profile's quantized convolution by AVX-512 VNNI (kernels/qconv_dot.cl): a qpack4
// launch lays the input out as dwords of four channels (padded rows for a window), then
// qconv_dot sums u8 x s8 products 64 per instruction. Taken for 1x1 convolutions and windows
// with a horizontal stride of 1 or 2 and at least four channels per group, of a u8 or i8 input
// with constant weights whose shifted values w - wzp fit int8, on hosts that have the
// instruction (CodegenOptions::int8_dot); depthwise ones (one channel in a dword of four) stay
// on qconv_dw. Weights re-laid out as dwords wt[g * blocks + blk][c4][tap][a], and each output
// channel's sum of w - wzp as int32 (the zero point's term).
bool LowerQuantizedConvDot(Emitter &e, const Node &node, const std::array<int64_t, 4> &xi,
                           const std::array<int64_t, 4> &yo, const Window &win, Status &status) {
  const bool ql = node.op == OpKind::kQLinearConv;
  TensorId x = node.inputs[0], w = ql ? node.inputs[3] : node.input(1);
  TensorId xz = node.input(2), wz = ql ? node.input(5) : node.input(3);
  TensorId y = node.outputs[0];
  const bool flat = win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.ph == 0 &&
                    win.pw == 0 && win.ph_end == 0 && win.pw_end == 0;
  const DType xt = e.T(x).dtype;
  const int64_t g = node.attrs.Int("group", 1);
  const int64_t cg = xi[1] / g, ocg = yo[1] / g, c4 = CeilDiv(cg, 4), pixels = yo[2] * yo[3];
  const int64_t taps = win.kh * win.kw;
  // |sum (u - z) * w| <= 255 * 128 per channel and tap, and z * sum w as much: int32 below
  // 32,768 of them.
  if (!e.opt.int8_dot || (xt != DType::kUInt8 && xt != DType::kInt8) || cg * taps >= 32768 ||
      (!flat && (cg < 4 || (win.sw != 1 && win.sw != 2))))
    return false;
  const bool s8 = xt == DType::kInt8;
  // (references into the tensor list: read before NewConstant adds to it)
  const Tensor &wsrc = e.T(e.Root(w));
  const Tensor *wzt = wz == kNoTensor ? nullptr : &e.T(e.Root(wz));
  const std::string wname = wsrc.name, xname = e.T(x).name;
  std::vector<int8_t> shifted(static_cast<size_t>(yo[1] * cg * taps));
  std::vector<int32_t> sums(static_cast<size_t>(yo[1]), 0);
  for (int64_t m = 0; m < yo[1]; m++) {
    const int64_t zp = ZeroPointAt(wzt, m);
    int64_t sum = 0;
    for (int64_t i = 0; i < cg * taps; i++) {
      const int64_t v =
          static_cast<int64_t>(ref::GetReal(wsrc, static_cast<size_t>(m * cg * taps + i))) - zp;
      if (v < -128 || v > 127)
        return false;
      shifted[static_cast<size_t>(m * cg * taps + i)] = static_cast<int8_t>(v);
      sum += v;
    }
    sums[static_cast<size_t>(m)] = static_cast<int32_t>(sum);
  }
  // Pixel vectors and channels per work-item: OCB * PV accumulators within 24 of the 32 zmm
  // registers (the PV inputs and a broadcast weight beside them).
  const int64_t row = flat ? pixels : yo[3];  // the pixels a work-item's vectors run along
  const int64_t pv = row >= 32 ? 2 : 1;
  int64_t ocb = std::min<int64_t>(ocg, pv == 2 ? 12 : 16);
  for (int64_t cand : {12, 8, 16, 24})
    if (cand * pv <= 24 && ocg % cand == 0) {
      ocb = cand;
      break;
    }
  const int64_t blocks = CeilDiv(ocg, ocb), step = 16 * pv;
  const int64_t pp = CeilDiv(row, step) * step;  // flat: PP; a window: OWP
  // A window's padded rows: every tap of every vector of the padded output width in bounds.
  const int64_t hp =
      std::max(xi[2] + win.ph + win.ph_end, (yo[2] - 1) * win.sh + (win.kh - 1) * win.dh + 1);
  const int64_t wp = CeilDiv(std::max(xi[3] + win.pw + win.pw_end,
                                      (pp - 1) * win.sw + (win.kw - 1) * win.dw + win.sw),
                             16) *
                     16;
  Bytes wt(static_cast<size_t>(g * blocks * c4 * taps * ocb * 4), 0);
  for (int64_t gi = 0; gi < g; gi++)
    for (int64_t blk = 0; blk < blocks; blk++)
      for (int64_t a = 0; a < ocb; a++) {
        const int64_t oc = blk * ocb + a;
        if (oc >= ocg)
          continue;
        for (int64_t ic = 0; ic < cg; ic++)
          for (int64_t t = 0; t < taps; t++)
            wt[static_cast<size_t>(
                ((((gi * blocks + blk) * c4 + ic / 4) * taps + t) * ocb + a) * 4 + ic % 4)] =
                static_cast<uint8_t>(
                    shifted[static_cast<size_t>(((gi * ocg + oc) * cg + ic) * taps + t)]);
      }
  TensorId wv =
      e.NewConstant(wname + "_qdot", DType::kInt32, {g * blocks, c4 * taps, ocb}, std::move(wt));
  Bytes sb(sums.size() * 4);
  std::memcpy(sb.data(), sums.data(), sb.size());
  TensorId wsum = e.NewConstant(wname + "_qdot_sum", DType::kInt32,
                                {static_cast<int64_t>(sums.size())}, std::move(sb));
  TensorId xp = e.NewTensor(
      xname + "_qpack4", DType::kInt32,
      flat ? std::vector<int64_t>{xi[0] * g, c4, pp} : std::vector<int64_t>{xi[0] * g, c4, hp, wp});

  Defines common;
  common.Def("TX", e.Tag(x)).Int("SIGNED_X", s8);
  common.Int("N", xi[0]).Int("C", xi[1]).Int("OC", yo[1]).Int("P", pixels).Int("G", g);
  common.Int("OCB", ocb).Int("PV", pv).Int("PP", pp).Int("WINDOW", !flat);
  if (!flat) {
    common.Int("H", xi[2]).Int("W", xi[3]).Int("OH", yo[2]).Int("OW", yo[3]);
    DefWindow(common, win);
    common.Int("HP", hp).Int("WP", wp).Int("OWP", pp);
  }
  common.Int("HAS_XZP", xz != kNoTensor);
  if (xz != kNoTensor)
    common.Def("TXZ", e.Tag(xz));
  Defines dp = common;
  dp.Int("QPACK", 1);
  auto pack_src = e.Source("qconv_dot", dp);
  Defines d = common;
  d.Int("QDOT", 1).Int("QLINEAR", ql);
  Pending k;
  k.args = {TArg(xp), TArg(wv), TArg(wsum)};
  if (xz != kNoTensor)
    k.args.push_back(TArg(xz));
  if (ql) {
    d.Def("TY", e.Tag(y));
    AddQLinearConvEpilogue(e, node, d, k);
  }
  k.args.push_back(TArg(y));
  auto dot_src = e.Source("qconv_dot", d);
  if (!pack_src.ok() || !dot_src.ok()) {
    status = pack_src.ok() ? dot_src.status() : pack_src.status();
    return true;
  }
  if (Product(e.Dims(y)) == 0) {
    status = Status::Ok();
    return true;
  }
  Pending pack;
  pack.label = node.Describe();
  pack.entry = "qpack4";
  pack.source = std::move(*pack_src);
  if (flat) {
    pack.global = {static_cast<uint64_t>(pp / 16), static_cast<uint64_t>(c4),
                   static_cast<uint64_t>(xi[0] * g)};
    pack.args = {TArg(x), TArg(xp)};
  } else {
    pack.global = {static_cast<uint64_t>(wp / 16), static_cast<uint64_t>(hp),
                   static_cast<uint64_t>(xi[0] * g * c4)};
    pack.args = {TArg(x)};
    if (xz != kNoTensor)
      pack.args.push_back(TArg(xz));
    pack.args.push_back(TArg(xp));
  }
  pack.writes = {xp};
  e.Emit(std::move(pack));
  k.label = node.Describe();
  k.entry = "qconv_dot";
  k.source = std::move(*dot_src);
  k.global = {static_cast<uint64_t>(xi[0] * g * blocks), static_cast<uint64_t>(pp / step)};
  if (!flat)
    k.global.push_back(static_cast<uint64_t>(yo[2]));
  k.writes = {y};
  k.flops = 2ull * yo[0] * yo[1] * pixels * cg * taps;
  e.Emit(std::move(k));
  e.cpu_features.insert("avx512vnni");
  status = Status::Ok();
  return true;
}

// The CPU profile's quantized convolution (kernels/qconv_vec.cl): OCB output channels by V
// pixels per work-item, input channels in pairs, the constant weights re-laid out as
// wt[g * blocks + blk][pair][tap][a][2] with their zero point subtracted (int8 when every
// shifted weight fits, else int32), so that each output channel's weight pair is one load.
// Needs 2-D, constant weights and a constant (or absent) weight zero point. Depthwise (stride 1
// or 2, up to four output channels per input channel) and every convolution whose sums float32
// holds exactly go to qconv_dw / qconv_f first; this kernel takes the rest.
bool LowerQuantizedConvVec(Emitter &e, const Node &node, Status &status) {
  const bool ql = node.op == OpKind::kQLinearConv;
  TensorId x = node.inputs[0], w = ql ? node.inputs[3] : node.input(1);
  TensorId wz = ql ? node.input(5) : node.input(3);
  TensorId y = node.outputs[0];
  if (e.opt.profile != cl::Profile::kCpu || w == kNoTensor || e.Dims(w).size() != 4 ||
      !e.T(e.Root(w)).is_constant() || (wz != kNoTensor && !e.T(e.Root(wz)).is_constant()))
    return false;
  auto xi_or = Nchw(node, e.Dims(x));
  auto yo_or = Nchw(node, e.Dims(y));
  if (!xi_or.ok() || !yo_or.ok())
    return false;
  const auto xi = *xi_or, yo = *yo_or;
  const std::vector<int64_t> wd = e.Dims(w);
  const int64_t g = node.attrs.Int("group", 1);
  if (g <= 0 || xi[1] % g || yo[1] % g || wd[1] * g != xi[1])
    return false;  // the generic path reports it
  auto win_or = ReadWindow(node, Spatial(wd), Spatial(e.Dims(x)), Spatial(e.Dims(y)));
  if (!win_or.ok())
    return false;
  const Window win = *win_or;
  const int64_t cg = xi[1] / g, ocg = yo[1] / g, taps = win.kh * win.kw, pairs = (cg + 1) / 2;
  if (cg == 1 && ocg <= 4 && LowerQuantizedConvDw(e, node, xi, yo, win, status))
    return true;
  if (LowerQuantizedConvDot(e, node, xi, yo, win, status))
    return true;
  if (LowerQuantizedConvF(e, node, xi, yo, win, status))
    return true;
  const bool flat = win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.ph == 0 &&
                    win.pw == 0 && win.ph_end == 0 && win.pw_end == 0;
  // One input channel per group (depthwise): pairs of horizontal taps instead of channels.
  const bool tap_pairs = cg == 1 && win.kw > 1;
  const int64_t kwp = (win.kw + 1) / 2;
  const int64_t pixels = flat ? yo[2] * yo[3] : yo[3];
  const int64_t v = pixels >= 16 ? 16 : 8;
  const int64_t ocb = std::min<int64_t>(ocg, 8), blocks = CeilDiv(ocg, ocb);

  // Shifted weights w - wzp[oc] in the pair layout; 0 for the odd channel's missing partner and
  // for output channels past the group's end.
  const Tensor &wsrc = e.T(e.Root(w));
  const Tensor *wzt = wz == kNoTensor ? nullptr : &e.T(e.Root(wz));
  const int64_t slots = tap_pairs ? win.kh * kwp : pairs * taps;  // weight pairs per channel
  std::vector<int32_t> shifted(static_cast<size_t>(g * blocks * slots * ocb * 2), 0);
  bool fits8 = true;
  for (int64_t gi = 0; gi < g; gi++)
    for (int64_t blk = 0; blk < blocks; blk++)
      for (int64_t a = 0; a < ocb; a++) {
        const int64_t oc = blk * ocb + a;
        if (oc >= ocg)
          continue;
        const int64_t m = gi * ocg + oc;
        const int32_t zp = static_cast<int32_t>(ZeroPointAt(wzt, m));
        for (int64_t ic = 0; ic < cg; ic++)
          for (int64_t t = 0; t < taps; t++) {
            const int32_t v8 = static_cast<int32_t>(ref::GetReal(
                                   wsrc, static_cast<size_t>((m * cg + ic) * taps + t))) -
                               zp;
            fits8 = fits8 && v8 >= -128 && v8 <= 127;
            // (pair slot, element): channel pairs, or (row, tap pair) of one channel
            const int64_t slot =
                tap_pairs ? (t / win.kw) * kwp + (t % win.kw) / 2 : (ic / 2) * taps + t;
            const int64_t el = tap_pairs ? (t % win.kw) % 2 : ic % 2;
            shifted[static_cast<size_t>((((gi * blocks + blk) * slots + slot) * ocb + a) * 2 +
                                        el)] = v8;
          }
      }
  const DType wt_type = fits8 ? DType::kInt8 : DType::kInt32;
  Bytes wt(shifted.size() * DTypeSize(wt_type));
  for (size_t i = 0; i < shifted.size(); i++) {
    if (fits8)
      wt[i] = static_cast<uint8_t>(static_cast<int8_t>(shifted[i]));
    else
      std::memcpy(&wt[i * 4], &shifted[i], 4);
  }
  TensorId wv =
      e.NewConstant(wsrc.name + "_qvec", wt_type, {g * blocks, slots, ocb * 2}, std::move(wt));

  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(wv)).Def("TY", e.Tag(y));
  d.Int("N", xi[0]).Int("C", xi[1]).Int("H", xi[2]).Int("W", xi[3]);
  d.Int("OC", yo[1]).Int("OH", yo[2]).Int("OW", yo[3]).Int("G", g);
  DefWindow(d, win);
  d.Int("OCB", ocb).Int("V", v).Int("FLAT", flat).Int("TAP_PAIRS", tap_pairs);
  status = EmitQuantizedConv(e, node, d, wv, "qconv_vec",
                             {CeilDiv(pixels, v), static_cast<uint64_t>(flat ? 1 : yo[2]),
                              static_cast<uint64_t>(xi[0] * g * blocks)},
                             2ull * yo[0] * yo[1] * yo[2] * yo[3] * cg * taps);
  return true;
}

Status LowerQuantizedConv(Emitter &e, const Node &node) {
  {
    Status vec_status;
    if (LowerQuantizedConvVec(e, node, vec_status))
      return vec_status;
  }
  const bool ql = node.op == OpKind::kQLinearConv;
  TensorId x = node.inputs[0], w = ql ? node.inputs[3] : node.input(1);
  TensorId xz = node.input(2), wz = ql ? node.input(5) : node.input(3);
  TensorId y = node.outputs[0];
  OP_ASSIGN_OR_RETURN(auto xi, Nchw(node, e.Dims(x)));
  OP_ASSIGN_OR_RETURN(auto yo, Nchw(node, e.Dims(y)));
  const std::vector<int64_t> wd = e.Dims(w);
  const int64_t g = node.attrs.Int("group", 1);
  if (g <= 0 || xi[1] % g || yo[1] % g || wd[1] * g != xi[1])
    return InvalidArgument(NodeWhere(node) + ": group " + std::to_string(g) +
                           " does not fit the input, weight and output channels");
  OP_ASSIGN_OR_RETURN(Window win,
                      ReadWindow(node, Spatial(wd), Spatial(e.Dims(x)), Spatial(e.Dims(y))));
  const int64_t num = Product(e.Dims(y));
  if (num == 0)
    return Status::Ok();
  Defines d;
  d.Def("TX", e.Tag(x)).Def("TW", e.Tag(w)).Def("TY", e.Tag(y));
  d.Int("N", xi[0]).Int("C", xi[1]).Int("H", xi[2]).Int("W", xi[3]);
  d.Int("OC", yo[1]).Int("OH", yo[2]).Int("OW", yo[3]).Int("G", g);
  DefWindow(d, win);
  d.Int("HAS_XZP", xz != kNoTensor).Int("HAS_WZP", wz != kNoTensor).Int("QLINEAR", ql);
  if (xz != kNoTensor)
    d.Def("TXZ", e.Tag(xz));
  if (wz != kNoTensor)
    d.Def("TWZ", e.Tag(wz)).Int("WZP_N", QuantCount(e, wz));
  Pending k;
  k.args = {TArg(x), TArg(w)};
  if (xz != kNoTensor)
    k.args.push_back(TArg(xz));
  if (wz != kNoTensor)
    k.args.push_back(TArg(wz));
  if (ql)
    AddQLinearConvEpilogue(e, node, d, k);
  k.args.push_back(TArg(y));
  k.label = node.Describe();
  k.entry = "qconv";
  OP_ASSIGN_OR_RETURN(k.source, e.Source("qconv", d));
  k.global = {CeilDiv(num, 64) * 64};
  k.local = {64};
  k.writes = {y};
  k.flops = 2ull * yo[0] * yo[1] * yo[2] * yo[3] * (xi[1] / g) * win.kh * win.kw;
  e.Emit(std::move(k));
  return Status::Ok();
}

// QLinearMatMul's requantizing epilogue, shared by its kernels: the A, B and output scales, the
// output zero point and the optional bias, as defines and as the kernel arguments after the
// operand and zero-point arguments.
static void AddQLinearMatMulEpilogue(Emitter &e, const Node &node, Defines &d, Pending &k) {
  d.Def("TAS", e.Tag(node.inputs[1])).Def("TBS", e.Tag(node.inputs[4]));
  d.Def("TYS", e.Tag(node.inputs[6])).Def("TYZ", e.Tag(node.inputs[7]));
  d.Int("BS_N", QuantCount(e, node.inputs[4])).Int("HAS_BIAS", node.input(8) != kNoTensor);
  DefQuantRange(d, e.T(node.outputs[0]).dtype);
  for (size_t i : {1, 4, 6, 7})
    k.args.push_back(TArg(node.inputs[i]));
  if (node.input(8) != kNoTensor)
    k.args.push_back(TArg(node.input(8)));
}

// The CPU profile's quantized matrix product with a constant 2-D B, summed in float32 where that
// is exact (kernels/qmatmul_f.cl): for every column, the largest |a - azp| times the sum of its
// |b - bzp| below 2^24. B re-laid out as float32 b - bzp[n] in panels of 16 columns,
// [N / 16][K][16].
bool LowerQuantizedMatMulF(Emitter &e, const Node &node, int64_t batch, int64_t m, int64_t ka,
                           int64_t n, const Shape &ob) {
  const bool ql = node.op == OpKind::kQLinearMatMul;
  TensorId a = node.inputs[0], bt = ql ? node.inputs[3] : node.input(1);
  TensorId az = node.input(2), bz = ql ? node.input(5) : node.input(3), y = node.outputs[0];
  if (e.Dims(bt).size() != 2 || !e.T(e.Root(bt)).is_constant() ||
      (bz != kNoTensor && !e.T(e.Root(bz)).is_constant()) ||
      (az != kNoTensor && QuantCount(e, az) != 1))
    return false;
  const Tensor &bsrc = e.T(e.Root(bt));
  const Tensor *bzt = bz == kNoTensor ? nullptr : &e.T(e.Root(bz));
  const double amax = MaxShiftedInput(e, a, az);
  const int64_t np = CeilDiv(n, 16) * 16;
  std::vector<float> wl(static_cast<size_t>(ka * np), 0.f);  // panels [n / 16][k][16]
  for (int64_t j = 0; j < n; j++) {
    const double zp = static_cast<double>(ZeroPointAt(bzt, j));
    double bound = 0;
    for (int64_t k = 0; k < ka; k++) {
      const float v = static_cast<float>(
          static_cast<double>(ref::GetReal(bsrc, static_cast<size_t>(k * n + j))) - zp);
      wl[static_cast<size_t>(((j / 16) * ka + k) * 16 + j % 16)] = v;
      bound += std::fabs(static_cast<double>(v)) * amax;
    }
    if (bound >= 16777216.0)
      return false;
  }
  Bytes wt(wl.size() * 4);
  std::memcpy(wt.data(), wl.data(), wt.size());
  TensorId bv = e.NewConstant(bsrc.name + "_qf", DType::kFloat32, {np / 16, ka, 16}, std::move(wt));
  const std::vector<int64_t> ad = e.Dims(a);
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2);
  const int64_t rb = std::min<int64_t>(m, 8);  // rows per work-item
  Defines d;
  d.Def("TA", e.Tag(a)).Def("TB", e.Tag(bv)).Def("TY", e.Tag(y));
  d.Int("BATCH", batch).Int("M", m).Int("N", n).Int("K", ka).Int("RB", rb);
  d.Def("A_BOFF(b)",
        "((" + gen::BroadcastIndex(ob.dims, abatch, "(b)") + ") * " + std::to_string(m * ka) + ")");
  d.Int("HAS_AZP", az != kNoTensor).Int("QLINEAR", ql);
  if (az != kNoTensor)
    d.Def("TAZ", e.Tag(az));
  Pending k;
  k.args = {TArg(a), TArg(bv)};
  if (az != kNoTensor)
    k.args.push_back(TArg(az));
  if (ql)
    AddQLinearMatMulEpilogue(e, node, d, k);
  k.args.push_back(TArg(y));
  k.label = node.Describe();
  k.entry = "qmatmul_f";
  auto src = e.Source("qmatmul_f", d);
  if (!src.ok())
    return false;  // the other kernels report it
  k.source = std::move(*src);
  k.global = {CeilDiv(m, rb), CeilDiv(n, 16), static_cast<uint64_t>(batch)};
  k.writes = {y};
  k.flops = 2ull * batch * m * n * ka;
  e.Emit(std::move(k));
  return true;
}

// The CPU profile's quantized matrix product with a constant 2-D B by AVX-512 VNNI
// (kernels/qmatmul_dot.cl): A u8 or i8 with one zero point, B's shifted values b - bzp[n]
// fitting int8, K below 32,768 (int32 sums), on hosts that have the instruction. B re-laid out
// as dwords of four k, [NP][K4][16], and each column's sum of b - bzp.
bool LowerQuantizedMatMulDot(Emitter &e, const Node &node, int64_t batch, int64_t m, int64_t ka,
                             int64_t n, const Shape &ob) {
  const bool ql = node.op == OpKind::kQLinearMatMul;
  TensorId a = node.inputs[0], bt = ql ? node.inputs[3] : node.input(1);
  TensorId az = node.input(2), bz = ql ? node.input(5) : node.input(3), y = node.outputs[0];
  const DType at = e.T(a).dtype;
  if (!e.opt.int8_dot || (at != DType::kUInt8 && at != DType::kInt8) || ka >= 32768 ||
      e.Dims(bt).size() != 2 || !e.T(e.Root(bt)).is_constant() ||
      (bz != kNoTensor && !e.T(e.Root(bz)).is_constant()) ||
      (az != kNoTensor && QuantCount(e, az) != 1))
    return false;
  const Tensor &bsrc = e.T(e.Root(bt));
  const Tensor *bzt = bz == kNoTensor ? nullptr : &e.T(e.Root(bz));
  const std::string bname = bsrc.name;
  // Two panels per work-item where there are two, and 8 rows: 16 accumulators.
  const int64_t cb = CeilDiv(n, 16) >= 2 ? 2 : 1, k4 = CeilDiv(ka, 4);
  const int64_t np = CeilDiv(CeilDiv(n, 16), cb) * cb;
  Bytes wt(static_cast<size_t>(np * k4 * 16 * 4), 0);
  std::vector<int32_t> sums(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; j++) {
    const int64_t zp = ZeroPointAt(bzt, j);
    int64_t sum = 0;
    for (int64_t k = 0; k < ka; k++) {
      const int64_t v =
          static_cast<int64_t>(ref::GetReal(bsrc, static_cast<size_t>(k * n + j))) - zp;
      if (v < -128 || v > 127)
        return false;
      wt[static_cast<size_t>((((j / 16) * k4 + k / 4) * 16 + j % 16) * 4 + k % 4)] =
          static_cast<uint8_t>(static_cast<int8_t>(v));
      sum += v;
    }
    sums[static_cast<size_t>(j)] = static_cast<int32_t>(sum);
  }
  TensorId bv = e.NewConstant(bname + "_qdot", DType::kInt32, {np, k4, 16}, std::move(wt));
  Bytes sb(sums.size() * 4);
  std::memcpy(sb.data(), sums.data(), sb.size());
  TensorId bsum = e.NewConstant(bname + "_qdot_sum", DType::kInt32, {n}, std::move(sb));
  const std::vector<int64_t> ad = e.Dims(a);
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2);
  const int64_t rb = std::min<int64_t>(m, 8);
  Defines d;
  d.Def("TA", e.Tag(a)).Int("SIGNED_A", at == DType::kInt8).Def("TY", e.Tag(y));
  d.Int("BATCH", batch).Int("M", m).Int("N", n).Int("K", ka).Int("RB", rb).Int("CB", cb);
  d.Int("NP", np);
  d.Def("A_BOFF(b)",
        "((" + gen::BroadcastIndex(ob.dims, abatch, "(b)") + ") * " + std::to_string(m * ka) + ")");
  d.Int("HAS_AZP", az != kNoTensor).Int("QLINEAR", ql);
  if (az != kNoTensor)
    d.Def("TAZ", e.Tag(az));
  Pending k;
  k.args = {TArg(a), TArg(bv), TArg(bsum)};
  if (az != kNoTensor)
    k.args.push_back(TArg(az));
  if (ql)
    AddQLinearMatMulEpilogue(e, node, d, k);
  k.args.push_back(TArg(y));
  k.label = node.Describe();
  k.entry = "qmatmul_dot";
  auto src = e.Source("qmatmul_dot", d);
  if (!src.ok())
    return false;  // the other kernels report it
  k.source = std::move(*src);
  k.global = {CeilDiv(m, rb), static_cast<uint64_t>(np / cb), static_cast<uint64_t>(batch)};
  k.writes = {y};
  k.flops = 2ull * batch * m * n * ka;
  e.Emit(std::move(k));
  e.cpu_features.insert("avx512vnni");
  return true;
}

Status LowerQuantizedMatMul(Emitter &e, const Node &node) {
  const bool ql = node.op == OpKind::kQLinearMatMul;
  TensorId a = node.inputs[0], bt = ql ? node.inputs[3] : node.input(1);
  TensorId az = node.input(2), bz = ql ? node.input(5) : node.input(3), y = node.outputs[0];
  const std::vector<int64_t> ad = e.Dims(a), bd = e.Dims(bt), yd = e.Dims(y);
  if (ad.size() < 2 || bd.size() < 2)
    return Unsupported(NodeWhere(node) + ": a rank-1 operand");
  const int64_t m = ad[ad.size() - 2], ka = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != ka)
    return InvalidArgument(NodeWhere(node) + ": inner dimensions " + std::to_string(ka) + " and " +
                           std::to_string(bd[bd.size() - 2]) + " differ");
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  OP_ASSIGN_OR_RETURN(Shape ob, BroadcastShapes(Shape(abatch), Shape(bbatch)));
  const int64_t batch = Product(ob.dims);
  if (batch * m * n != Product(yd))
    return InvalidArgument(NodeWhere(node) + ": output " + Shape(yd).ToString() +
                           " does not hold the product");
  if (batch * m * n == 0)
    return Status::Ok();
  if (e.opt.profile == cl::Profile::kCpu && LowerQuantizedMatMulDot(e, node, batch, m, ka, n, ob))
    return Status::Ok();
  if (e.opt.profile == cl::Profile::kCpu && LowerQuantizedMatMulF(e, node, batch, m, ka, n, ob))
    return Status::Ok();
  Defines d;
  d.Def("TA", e.Tag(a)).Def("TB", e.Tag(bt)).Def("TY", e.Tag(y));
  d.Int("BATCH", batch).Int("M", m).Int("N", n).Int("K", ka);
  d.Def("A_BOFF(b)",
        "((" + gen::BroadcastIndex(ob.dims, abatch, "(b)") + ") * " + std::to_string(m * ka) + ")");
  d.Def("B_BOFF(b)",
        "((" + gen::BroadcastIndex(ob.dims, bbatch, "(b)") + ") * " + std::to_string(ka * n) + ")");
  d.Int("HAS_AZP", az != kNoTensor).Int("HAS_BZP", bz != kNoTensor).Int("QLINEAR", ql);
  if (az != kNoTensor)
    d.Def("TAZ", e.Tag(az)).Int("AZP_N", QuantCount(e, az));
  if (bz != kNoTensor)
    d.Def("TBZ", e.Tag(bz)).Int("BZP_N", QuantCount(e, bz));
  Pending k;
  k.args = {TArg(a), TArg(bt)};
  if (az != kNoTensor)
    k.args.push_back(TArg(az));
  if (bz != kNoTensor)
    k.args.push_back(TArg(bz));
  if (ql)
    AddQLinearMatMulEpilogue(e, node, d, k);
  k.args.push_back(TArg(y));
  k.label = node.Describe();
  if (e.opt.profile == cl::Profile::kCpu) {
    // RB rows by 16 columns per work-item, k in pairs through pmaddwd (kernels/qmatmul_vec.cl).
    const int64_t rb = 4;
    d.Int("RB", rb);
    k.entry = "qmatmul_vec";
    OP_ASSIGN_OR_RETURN(k.source, e.Source("qmatmul_vec", d));
    k.global = {CeilDiv(n, 16), CeilDiv(m, rb), static_cast<uint64_t>(batch)};
  } else {
    k.entry = "qmatmul";
    OP_ASSIGN_OR_RETURN(k.source, e.Source("qmatmul", d));
    k.global = {CeilDiv(batch * m * n, 64) * 64};
    k.local = {64};
  }
  k.writes = {y};
  k.flops = 2ull * batch * m * n * ka;
  e.Emit(std::move(k));
  return Status::Ok();
}

bool IsAliasOp(OpKind op) {
  return op == OpKind::kReshape || op == OpKind::kFlatten || op == OpKind::kSqueeze ||
         op == OpKind::kUnsqueeze || op == OpKind::kIdentity || op == OpKind::kDropout;
}

Status LowerNode(Emitter &e, const Node &node) {
  switch (node.op) {
    case OpKind::kConv:
    case OpKind::kFusedConv:
      return LowerConv(e, node);
    case OpKind::kConvTranspose:
      return LowerConvTranspose(e, node);
    case OpKind::kGemm:
    case OpKind::kMatMul:
    case OpKind::kFusedGemm:
      return LowerMatMul(e, node);
    case OpKind::kAveragePool:
    case OpKind::kMaxPool:
      return LowerPool(e, node);
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
    case NN_REDUCE_OPS:
      return LowerReduce(e, node);
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kHardmax:
      return LowerSoftmax(e, node);
    case OpKind::kLayerNormalization:
    case OpKind::kInstanceNormalization:
      return LowerNorm(e, node);
    case OpKind::kResize:
      return LowerResize(e, node);
    case OpKind::kQuantizeLinear:
    case OpKind::kDequantizeLinear:
      return LowerQuantizeLinear(e, node);
    case OpKind::kDynamicQuantizeLinear:
      return LowerDynamicQuantizeLinear(e, node);
    case OpKind::kQLinearConv:
    case OpKind::kConvInteger:
      return LowerQuantizedConv(e, node);
    case OpKind::kQLinearMatMul:
    case OpKind::kMatMulInteger:
      return LowerQuantizedMatMul(e, node);
    case OpKind::kTranspose:
    case OpKind::kSlice:
    case OpKind::kPad:
    case OpKind::kTile:
    case OpKind::kExpand:
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kGather:
    case OpKind::kGatherElements:
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth:
    case OpKind::kTrilu:
    case OpKind::kCumSum:
    case OpKind::kDropout:
      return gen::LowerLayout(e, node);
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
      return Status::Ok();  // aliases: no kernel
    case OpKind::kShape:
    case OpKind::kSize:
    case OpKind::kConstantOfShape:
    case OpKind::kRange:
      return Unsupported(NodeWhere(node) + ": its output is not constant after folding");
    case NN_UNARY_OPS:
    case NN_BINARY_OPS:
    case NN_VARIADIC_OPS:
    case OpKind::kCast:
    case OpKind::kWhere:
    case OpKind::kBatchNormalization:
    case OpKind::kCastLike:
    case OpKind::kElementwiseChain:
      if (node.op == OpKind::kIdentity)
        return Status::Ok();  // an alias, like Reshape: no kernel
      return gen::LowerElementwise(e, node);
  }
  return Internal(node.Describe() + ": unknown op");
}

// Appends a constant's bytes in its storage form (float32 as half under fp16 storage).
void PackConstant(const Tensor &t, const std::string &tag, std::vector<uint8_t> *w) {
  const Bytes &b = *t.data;
  if (t.dtype == DType::kFloat16 && tag == "f32") {
    size_t n = b.size() / 2;
    for (size_t i = 0; i < n; i++) {
      float f = HalfToFloat(static_cast<uint16_t>(b[2 * i] | (b[2 * i + 1] << 8)));
      uint8_t bytes[4];
      std::memcpy(bytes, &f, 4);
      w->insert(w->end(), bytes, bytes + 4);
    }
  } else if (t.dtype == DType::kFloat32 && (tag == "f16" || tag == "h16")) {
    size_t n = b.size() / 4;
    for (size_t i = 0; i < n; i++) {
      float f;
      std::memcpy(&f, b.data() + 4 * i, 4);
      uint16_t h = FloatToHalf(f);
      w->push_back(static_cast<uint8_t>(h & 0xff));
      w->push_back(static_cast<uint8_t>(h >> 8));
    }
  } else {
    w->insert(w->end(), b.begin(), b.end());
  }
}

// Output copies the launch list needs: (computed tensor, output buffer tensor).
using OutputCopies = std::vector<std::pair<TensorId, TensorId>>;

// Binds graph I/O to storage. Aliases first: they decide which tensor's storage an output binds
// to. Then the storage of each output's root becomes that output's buffer, unless the root is an
// input, a constant or already bound (then a copy kernel writes the output).
// At float32 storage a float16 intermediate is held in float32, unrounded, so a Cast of it to
// float32 copies bits. Where a product or convolution writes it and that Cast alone reads it,
// the tensor becomes float32 and the Cast an alias: the product writes the Cast's output itself
// (the policies' output Cast: one launch fewer).
void AliasWideningCasts(Emitter &e) {
  if (e.opt.precision == Precision::kFp16)
    return;
  Graph &g = e.graph;
  const std::vector<int> producers = g.Producers();
  const std::vector<int> uses = g.UseCounts();  // graph outputs count too
  for (const Node &node : g.nodes) {
    if (node.op != OpKind::kCast || node.outputs.empty() || node.input(0) == kNoTensor)
      continue;
    const TensorId in = node.input(0), out = node.outputs[0];
    Tensor &t = g.tensor(in);
    const int p = producers[static_cast<size_t>(in)];
    if (p < 0 || t.dtype != DType::kFloat16 || g.tensor(out).dtype != DType::kFloat32 ||
        t.is_input || t.is_constant() || uses[static_cast<size_t>(in)] != 1)
      continue;
    const OpKind w = g.nodes[static_cast<size_t>(p)].op;
    if (w != OpKind::kGemm && w != OpKind::kMatMul && w != OpKind::kFusedGemm &&
        w != OpKind::kConv && w != OpKind::kFusedConv)
      continue;
    t.dtype = DType::kFloat32;
    e.Alias(out, in);
  }
}

// What a Concat that copies rows (gen::ConcatRowsApply) can compute as it copies, so that the
// node producing its input gets no launch; the input must be read by that Concat alone:
// - a Cast from float32 to float16 held in float32 storage (a rounding): the policies' input
//   Casts, two launches fewer and no pass over the inputs before the Concat's;
// - a ReduceMean over one axis with only ones before it, into a Concat whose rows are one (the
//   policies' mean over time): summed in the reduce kernel's order and divided alike, the same
//   values.
void FoldIntoConcats(Emitter &e) {
  const Graph &g = e.graph;
  const std::vector<int> producers = g.Producers();
  const std::vector<int> uses = g.UseCounts();  // graph outputs count too
  using Fold = Emitter::ConcatFold;
  for (const Node &node : g.nodes) {
    if (node.op != OpKind::kConcat || node.outputs.empty() || node.outputs[0] == kNoTensor)
      continue;
    const std::vector<int64_t> &out = e.Dims(node.outputs[0]);
    auto axis = NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(out.size()));
    if (!axis.ok())
      continue;
    const int64_t rows = Product(out, 0, static_cast<size_t>(*axis));
    std::vector<TensorId> folded;
    for (TensorId t : node.inputs) {
      if (t == kNoTensor || uses[static_cast<size_t>(t)] != 1 || e.Root(t) != t || e.IsIo(t) ||
          e.Tag(t) != "f32")
        continue;
      const int p = producers[static_cast<size_t>(t)];
      if (p < 0)
        continue;
      const Node &src = g.nodes[static_cast<size_t>(p)];
      if (src.input(0) == kNoTensor || e.Tag(src.input(0)) != "f32")
        continue;
      const TensorId x = src.input(0);
      if (src.op == OpKind::kCast && g.tensor(x).dtype == DType::kFloat32 &&
          g.tensor(t).dtype == DType::kFloat16) {
        e.folded_by_concat[t] = Fold{Fold::Kind::kRound, x, 0};
        folded.push_back(t);
        continue;
      }
      if (src.op != OpKind::kReduceMean || rows != 1 || src.input(1) != kNoTensor ||
          g.tensor(x).dtype != g.tensor(t).dtype)
        continue;
      const std::vector<int64_t> axes = src.attrs.Ints("axes");
      const std::vector<int64_t> &xd = e.Dims(x);
      if (axes.size() != 1)
        continue;
      auto a = NormalizeAxis(axes[0], static_cast<int64_t>(xd.size()));
      if (!a.ok())
        continue;
      const int64_t count = xd[static_cast<size_t>(*a)];
      if (Product(xd, 0, static_cast<size_t>(*a)) != 1 || count < 1 ||
          Product(xd) != count * Product(e.Dims(t)))
        continue;
      e.folded_by_concat[t] = Fold{Fold::Kind::kMean, x, count};
      folded.push_back(t);
    }
    if (!folded.empty() && !gen::ConcatRowsApply(e, node))
      for (TensorId t : folded)
        e.folded_by_concat.erase(t);
  }
}

// A Gather of one constant index along an axis with only ones before it picks a contiguous
// part of its input: the part's offset, in elements, or nothing. Not where the input is a
// constant (kernels read a constant root's data whole) or the output is a graph output.
std::optional<int64_t> ContiguousGather(const Emitter &e, const Node &node) {
  if (node.op != OpKind::kGather || node.inputs.size() != 2 || node.outputs.empty() ||
      node.outputs[0] == kNoTensor)
    return std::nullopt;
  const TensorId x = node.inputs[0], idx = node.inputs[1], y = node.outputs[0];
  if (x == kNoTensor || idx == kNoTensor || !e.T(idx).is_constant() ||
      e.T(e.Root(x)).is_constant() || e.T(y).is_output || e.T(x).dtype != e.T(y).dtype ||
      Product(e.Dims(idx)) != 1)
    return std::nullopt;
  const std::vector<int64_t> &dims = e.Dims(x);
  auto axis = NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(dims.size()));
  if (!axis.ok())
    return std::nullopt;
  const size_t a = static_cast<size_t>(*axis);
  if (Product(dims, 0, a) != 1)
    return std::nullopt;
  const auto ints = ConstantInts(e.T(idx));
  if (!ints.ok() || ints->empty())
    return std::nullopt;
  int64_t i = (*ints)[0];
  if (i < 0)
    i += dims[a];
  if (i < 0 || i >= dims[a])
    return std::nullopt;
  const int64_t inner = Product(dims) / std::max<int64_t>(dims[a], 1);
  if (Product(e.Dims(y)) != inner)
    return std::nullopt;
  return i * inner;
}

Status BindIo(Emitter &e, OutputCopies *copies) {
  Graph &g = e.graph;
  AliasWideningCasts(e);
  for (const Node &node : g.nodes) {
    if (const std::optional<int64_t> at = ContiguousGather(e, node)) {
      e.AliasView(node.outputs[0], node.inputs[0], *at);  // the policies' last time step
      continue;
    }
    if (!IsAliasOp(node.op) || node.outputs.empty() || node.outputs[0] == kNoTensor)
      continue;
    TensorId in = node.inputs[0], out = node.outputs[0];
    if (g.tensor(out).is_constant())
      continue;
    if (g.tensor(in).dtype != g.tensor(out).dtype)
      return Internal(node.Describe() + " changes the dtype");
    e.Alias(out, in);
  }
  for (size_t j = 0; j < g.outputs.size(); j++) {
    TensorId o = g.outputs[j];
    TensorId r = e.Root(o);
    const Tensor &rt = g.tensor(r);
    if (rt.is_input || rt.is_constant() || e.io_output.count(r) || e.IsView(o)) {
      TensorId dst = e.NewTensor(g.tensor(o).name + "_out", g.tensor(o).dtype, e.Dims(o));
      copies->push_back({o, dst});
      e.io_output[dst] = static_cast<uint32_t>(j);
    } else {
      e.io_output[r] = static_cast<uint32_t>(j);
    }
  }
  FoldIntoConcats(e);
  FindProductChains(e);
  FindProductConcats(e);
  return Status::Ok();
}

// Lowers every node that computes something at run time, then the output copies.
Status LowerGraph(Emitter &e, const OutputCopies &copies) {
  const Graph &g = e.graph;
  for (const Node &node : g.nodes) {
    bool live = false;
    for (TensorId t : node.outputs)
      if (t != kNoTensor && !g.tensor(t).is_constant())
        live = true;
    if (!live)
      continue;
    // No kernel for an op that BindIo made an alias of its input (a widening Cast, a contiguous
    // Gather), or whose one reader computes it (FoldIntoConcats, FindProductChains,
    // FindProductConcats).
    const TensorId out = node.outputs[0];
    if (out != kNoTensor &&
        ((!IsAliasOp(node.op) && e.Root(out) != out) || e.folded_by_concat.count(out) != 0 ||
         e.computed_by_reader.count(out) != 0))
      continue;
    for (TensorId t : node.inputs)
      if (t != kNoTensor && e.Tag(t).empty())
        return Unsupported(NodeWhere(node) + ": input '" + g.tensor(t).name + "' of type " +
                           DTypeName(g.tensor(t).dtype));
    for (TensorId t : node.outputs)
      if (t != kNoTensor && e.Tag(t).empty())
        return Unsupported(NodeWhere(node) + ": output '" + g.tensor(t).name + "' of type " +
                           DTypeName(g.tensor(t).dtype));
    for (TensorId t : node.outputs)
      if (t != kNoTensor && !g.tensor(t).shape.IsStatic())
        return InvalidArgument(NodeWhere(node) + ": output '" + g.tensor(t).name +
                               "' has no static shape (bind the input shapes)");
    if (auto chain = e.product_chains.find(out); chain != e.product_chains.end()) {
      OP_RETURN_IF_ERROR(LowerProductChain(e, chain->second));
      continue;
    }
    OP_RETURN_IF_ERROR(LowerNode(e, node));
  }
  for (auto [src, dst] : copies) {
    if (e.Tag(src).empty())
      return Unsupported("output '" + g.tensor(src).name + "' of type " +
                         DTypeName(g.tensor(src).dtype));
    OP_RETURN_IF_ERROR(gen::EmitCopy(e, src, dst, "copy to output '" + g.tensor(src).name + "'"));
  }
  return Status::Ok();
}

// Kernels of one template whose #defines differ only in their epilogue compile to one program:
// a block's 1 x 1 convolution with its activation and the next with the block's residual
// instead, or a product with and without a bias's activation. Their activation and residual
// become switches (EPI_SWITCH, nn_common.cl: the arguments epi_act and epi_res, a uniform branch
// per output), the residual's buffer, where a kernel has none, one it reads anyway (never read
// as the residual). On PoCL each distinct source costs a cold start 0.3-0.5 s of code
// generation. A group merges where its kernels apply one activation at most (two different ones
// keep their programs) and read their residuals alike (tag, index, before or after it). The
// flags that only compile a path the sizes may take (EDGE: a partial vector or block; K_TAIL:
// k not all in fours), each checked again at run time, are not told apart either: where one
// kernel of the group needs the path, the group's program has it.
void MergeEpilogues(Emitter &e) {
  if (e.opt.profile != cl::Profile::kCpu || !e.opt.merge_epilogues)
    return;
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < e.kernels.size(); i++) {
    const Pending &k = e.kernels[i];
    if (k.epilogue && k.entry != "matmul")  // matmul_vec, conv2d_vec, conv2d_dw
      groups[k.entry + (k.epilogue->vector ? " vector\n" : "\n") + k.epilogue->base.text()]
          .push_back(i);
  }
  for (const auto &[key, members] : groups) {
    if (members.size() < 2)
      continue;
    const EpilogueVariant *act = nullptr, *res = nullptr;
    std::set<std::pair<std::string, bool>> variants;
    std::set<std::string> sources;
    // The group's path flags: each on where some kernel of the group needs its path.
    std::vector<std::pair<std::string, bool>> paths = e.kernels[members[0]].epilogue->paths;
    bool alike = true;
    for (size_t i : members) {
      const EpilogueVariant &ep = *e.kernels[i].epilogue;
      variants.insert({ep.act.text(), ep.has_res});
      sources.insert(e.kernels[i].source);
      alike = alike && ep.paths.size() == paths.size();
      for (size_t f = 0; f < paths.size() && f < ep.paths.size(); f++)
        paths[f].second = paths[f].second || ep.paths[f].second;
      if (!ep.act.text().empty()) {
        alike = alike && (!act || act->act.text() == ep.act.text());
        act = &ep;
      }
      if (ep.has_res) {
        alike =
            alike && (!res || (res->res.text() == ep.res.text() && res->res_after == ep.res_after));
        res = &ep;
      }
    }
    if (!alike || sources.size() < 2)
      continue;
    const Pending &first = e.kernels[members[0]];
    Defines d = first.epilogue->base;
    const bool switched = variants.size() > 1;
    if (switched) {
      for (const auto &[flag, on] : paths)
        d.Int(flag, on);
      d.Int("EPI_SWITCH", 1).Int("HAS_RES", res != nullptr).Int("RES_AFTER", res && res->res_after);
      if (res)
        d.Append(res->res);
      if (act) {
        d.Append(act->act_switched);
      } else {
        d.Def("ACT(x)", "(x)");
        if (first.epilogue->vector)
          d.Def("ACTV(x)", "(x)");
      }
    } else {  // one epilogue: only the paths differed
      EpilogueVariant ep = *first.epilogue;
      ep.paths = paths;
      d = EpilogueDefines(d, ep);
    }
    auto source = e.Source(first.entry.c_str(), d);
    if (!source.ok())  // the kernels keep their own programs
      continue;
    for (size_t i : members) {
      Pending &k = e.kernels[i];
      const EpilogueVariant &ep = *k.epilogue;
      k.source = *source;
      if (!switched)
        continue;
      if (res && !ep.has_res) {
        // The kernel's first tensor (its input, read anyway); the output where it has none.
        auto read = std::find_if(k.args.begin(), k.args.end(), [](const PendingArg &a) {
          return a.kind == PendingArg::Kind::kTensor;
        });
        const PendingArg r = read != k.args.end() ? *read : k.args[ep.out_arg];
        k.args.insert(k.args.begin() + static_cast<std::ptrdiff_t>(ep.out_arg), r);
      }
      PushInts(k, {!ep.act.text().empty(), ep.has_res});
    }
  }
}

// Where each root tensor a kernel reads or writes lives in the compiled model.
struct Storage {
  std::map<TensorId, uint32_t> input_index;
  std::map<TensorId, uint64_t> weight_offset;
  std::map<TensorId, uint32_t> image_index;
  std::map<TensorId, size_t> arena_index;  // into plan.offsets
  MemoryPlan plan;
};

// The model's input and output descriptions.
Status DescribeIo(const Emitter &e, CompiledModel *m, Storage *st) {
  const Graph &g = e.graph;
  for (size_t i = 0; i < g.inputs.size(); i++) {
    st->input_index[g.inputs[i]] = static_cast<uint32_t>(i);
    const Tensor &t = g.tensor(g.inputs[i]);
    if (!t.shape.IsStatic())
      return InvalidArgument("input '" + t.name + "' has shape " + t.shape.ToString() +
                             ": bind it with --shape " + t.name + "=d0,d1,...");
    if (e.TagOf(t.dtype, true).empty())
      return Unsupported("input '" + t.name + "' of type " + DTypeName(t.dtype));
    m->inputs.push_back({t.name, t.dtype, t.shape.dims, {}});
  }
  for (size_t j = 0; j < g.outputs.size(); j++) {
    const Tensor &t = g.tensor(g.outputs[j]);
    if (e.TagOf(t.dtype, true).empty())
      return Unsupported("output '" + t.name + "' of type " + DTypeName(t.dtype));
    TensorDesc d{t.name, t.dtype, t.shape.dims, {}};
    if (g.outputs.size() == 1 || t.name == "outputs")
      d.slices = g.slices;
    m->outputs.push_back(std::move(d));
  }
  return Status::Ok();
}

// Packs each constant the kernels read into the weights blob once, in first-use order: images
// (texels, rows padded) and plain buffers, each at an aligned offset.
void PackWeights(const Emitter &e, size_t alignment, CompiledModel *m, Storage *st) {
  const Graph &g = e.graph;
  auto align = [&]() {
    m->weights.resize((m->weights.size() + alignment - 1) / alignment * alignment);
  };
  for (const Pending &p : e.kernels) {
    for (const PendingArg &a : p.args) {
      if (a.kind == PendingArg::Kind::kImage) {
        TensorId r = e.Root(a.tensor);
        if (st->image_index.count(r))
          continue;
        align();
        WeightImage wi;
        wi.offset = m->weights.size();
        int64_t n = Product(g.tensor(r).shape.dims);
        wi.width = static_cast<uint32_t>(ImageWidth(n));
        wi.height = static_cast<uint32_t>(CeilDiv(CeilDiv(n, 4), wi.width));
        wi.half = e.StorageBytes(r) == 2;
        PackConstant(g.tensor(r), e.Tag(r), &m->weights.mutable_bytes());
        m->weights.resize(wi.offset + wi.ByteSize());  // the last row's unused texels are zero
        st->image_index[r] = static_cast<uint32_t>(m->images.size());
        m->images.push_back(wi);
        continue;
      }
      if (a.kind != PendingArg::Kind::kTensor)
        continue;
      TensorId r = e.Root(a.tensor);
      const Tensor &t = g.tensor(r);
      if (t.is_input || e.io_output.count(r) || !t.is_constant() || st->weight_offset.count(r))
        continue;
      align();
      st->weight_offset[r] = m->weights.size();
      PackConstant(t, e.Tag(r), &m->weights.mutable_bytes());
    }
  }
}

// Plans the arena: every intermediate lives from the first to the last kernel that touches it.
Status PlanArena(const Emitter &e, size_t alignment, CompiledModel *m, Storage *st,
                 CodegenReport *report) {
  const Graph &g = e.graph;
  std::vector<Lifetime> lifetimes;
  std::vector<TensorId> arena_tensors;
  for (size_t k = 0; k < e.kernels.size(); k++) {
    for (const PendingArg &a : e.kernels[k].args) {
      if (a.kind != PendingArg::Kind::kTensor)
        continue;
      TensorId r = e.Root(a.tensor);
      const Tensor &t = g.tensor(r);
      if (t.is_input || e.io_output.count(r) || t.is_constant())
        continue;
      auto it = st->arena_index.find(r);
      if (it == st->arena_index.end()) {
        st->arena_index[r] = lifetimes.size();
        uint64_t bytes = static_cast<uint64_t>(Product(t.shape.dims)) * e.StorageBytes(r);
        lifetimes.push_back({bytes, static_cast<int>(k), static_cast<int>(k)});
        arena_tensors.push_back(r);
      } else {
        Lifetime &l = lifetimes[it->second];
        l.first = std::min(l.first, static_cast<int>(k));
        l.last = std::max(l.last, static_cast<int>(k));
      }
    }
  }
  OP_ASSIGN_OR_RETURN(st->plan, PlanMemory(lifetimes, alignment));
  m->arena_bytes = st->plan.arena_bytes;
  m->intermediate_bytes = st->plan.total_bytes;
  if (report) {
    report->arena_tensors.clear();
    for (TensorId t : arena_tensors)
      report->arena_tensors.push_back(g.tensor(t).name);
    report->lifetimes = lifetimes;
    report->plan = st->plan;
  }
  return Status::Ok();
}

// The launch list: each kernel with its deduplicated source and its arguments resolved to
// inputs, outputs, weights, images or arena offsets.
void EmitLaunchList(const Emitter &e, const Storage &st, CompiledModel *m) {
  const Graph &g = e.graph;
  std::map<std::string, uint32_t> source_index;
  for (const Pending &p : e.kernels) {
    KernelDesc kd;
    kd.label = p.label;
    kd.entry = p.entry;
    auto [it, fresh] = source_index.emplace(p.source, static_cast<uint32_t>(m->sources.size()));
    if (fresh)
      m->sources.push_back(p.source);
    kd.source = it->second;
    kd.global = p.global;
    kd.local = p.local;
    kd.flops = p.flops;
    for (const PendingArg &a : p.args) {
      switch (a.kind) {
        case PendingArg::Kind::kInt:
          kd.args.push_back(KernelArg::Int(a.i));
          continue;
        case PendingArg::Kind::kFloat:
          kd.args.push_back(KernelArg::Float(a.f));
          continue;
        case PendingArg::Kind::kImage: {
          KernelArg arg;
          arg.kind = KernelArg::Kind::kImage;
          arg.image = st.image_index.at(e.Root(a.tensor));
          kd.args.push_back(arg);
          continue;
        }
        case PendingArg::Kind::kTensor:
          break;
      }
      TensorId r = e.Root(a.tensor);
      const Tensor &t = g.tensor(r);
      BufferRef b;
      b.element_bytes = e.StorageBytes(r);
      // A view (AliasView) is its own size, at its offset into the root's storage.
      const int64_t view = e.ViewOffset(a.tensor);
      b.size = static_cast<uint64_t>(
                   Product(e.IsView(a.tensor) ? g.tensor(a.tensor).shape.dims : t.shape.dims)) *
               b.element_bytes;
      if (t.is_input) {
        b.kind = BufferKind::kInput;
        b.index = st.input_index.at(r);
      } else if (e.io_output.count(r)) {
        b.kind = BufferKind::kOutput;
        b.index = e.io_output.at(r);
      } else if (t.is_constant()) {
        b.kind = BufferKind::kWeights;
        b.offset = st.weight_offset.at(r);
      } else {
        b.kind = BufferKind::kArena;
        b.offset = st.plan.offsets[st.arena_index.at(r)];
      }
      b.offset += static_cast<uint64_t>(view) * b.element_bytes;
      kd.args.push_back(KernelArg::Buffer(b));
    }
    m->kernels.push_back(std::move(kd));
  }
}

}  // namespace

StatusOr<CompiledModel> GenerateCode(const Graph &graph, const CodegenOptions &options,
                                     CodegenReport *report) {
  Emitter e(graph, options);
  MarkQuantScales(e);
  OutputCopies copies;
  OP_RETURN_IF_ERROR(BindIo(e, &copies));
  OP_RETURN_IF_ERROR(LowerGraph(e, copies));
  MergeEpilogues(e);

  // Storage: inputs, outputs, weights (each constant packed once), arena (planned).
  CompiledModel m;
  m.profile = cl::ProfileName(options.profile);
  m.precision = PrecisionName(options.precision);
  m.device_name = options.device_name;
  for (const std::string &f : e.cpu_features)
    m.cpu_features += (m.cpu_features.empty() ? "" : ",") + f;
  m.alignment = static_cast<uint32_t>(options.alignment);
  Storage st;
  OP_RETURN_IF_ERROR(DescribeIo(e, &m, &st));
  PackWeights(e, options.alignment, &m, &st);
  OP_RETURN_IF_ERROR(PlanArena(e, options.alignment, &m, &st, report));
  EmitLaunchList(e, st, &m);
  OP_RETURN_IF_ERROR(ValidateModel(m).Prepend("generated model"));
  return m;
}

}  // namespace op::nn
