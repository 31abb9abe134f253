// Hostile models: each test writes its own hostile file (an ONNX model, a pickle, a compiled
// model) and checks that it is refused with an error naming the thing and the limit or reason,
// instead of crashing, hanging or allocating what the file asks for.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/model_file.h"
#include "nn/onnx_import.h"
#include "nn/pickle.h"
#include "nn/reference.h"
#include "nn/shape_inference.h"

using namespace op;
using namespace op::nn;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test process for the files the tests write.
const fs::path &Dir() {
  static const fs::path dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    fs::path d = fs::path(tmp ? tmp : "/tmp") / ("op-hostile-nn-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string Write(const std::string &name, const std::string &bytes) {
  const fs::path p = Dir() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

// A model builder over ONNX's own protobuf classes.
struct Model {
  onnx::ModelProto m;
  explicit Model(int opset = 13) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
  }
  onnx::GraphProto &g() { return *m.mutable_graph(); }
  void Input(const std::string &name, std::vector<int64_t> dims, int type = 1) {
    auto *vi = g().add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  void Output(const std::string &name) {
    auto *vi = g().add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  }
  onnx::TensorProto *Ints(const std::string &name, std::vector<int64_t> v,
                          std::vector<int64_t> dims) {
    auto *t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_INT64);
    for (int64_t d : dims)
      t->add_dims(d);
    for (int64_t x : v)
      t->add_int64_data(x);
    return t;
  }
  onnx::TensorProto *Floats(const std::string &name, std::vector<float> v,
                            std::vector<int64_t> dims) {
    auto *t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    for (float x : v)
      t->add_float_data(x);
    return t;
  }
  onnx::NodeProto *Node(const std::string &op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string &name = "") {
    auto *n = g().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_node" : name);
    for (auto &s : in)
      n->add_input(s);
    for (auto &s : out)
      n->add_output(s);
    return n;
  }
  std::string Save(const std::string &file) { return Write(file, m.SerializeAsString()); }
};

void AttrInts(onnx::NodeProto *n, const std::string &name, std::vector<int64_t> v) {
  auto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_INTS);
  for (int64_t x : v)
    a->add_ints(x);
}

// Imports and infers shapes (which folds constants): the status of the whole load.
Status Load(const std::string &path) {
  auto g = ImportOnnxFile(path);
  if (!g.ok())
    return g.status();
  return InferShapes(*g);
}

#define EXPECT_REFUSED(status, ...)                            \
  do {                                                         \
    const Status st_ = (status);                               \
    EXPECT_FALSE(st_.ok());                                    \
    for (const char *part : {__VA_ARGS__})                     \
      EXPECT_NE(st_.message().find(part), std::string::npos)   \
          << "missing '" << part << "' in: " << st_.message(); \
  } while (0)

std::string Base64(const std::string &raw) {
  static const char *k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < raw.size(); i += 3) {
    uint32_t v = (uint8_t(raw[i]) << 16) | (uint8_t(raw[i + 1]) << 8) | uint8_t(raw[i + 2]);
    for (int s = 18; s >= 0; s -= 6)
      out += k[(v >> s) & 63];
  }
  if (i + 1 == raw.size()) {
    uint32_t v = uint8_t(raw[i]) << 16;
    out += std::string{k[v >> 18], k[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == raw.size()) {
    uint32_t v = (uint8_t(raw[i]) << 16) | (uint8_t(raw[i + 1]) << 8);
    out += std::string{k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
  }
  return out;
}

// A minimal valid model (Relu of one input) carrying `slices` as its output_slices metadata.
std::string ModelWithSlices(const std::string &pickle, const std::string &file) {
  Model m;
  m.Input("x", {1, 4});
  m.Node("Relu", {"x"}, {"y"});
  m.Output("y");
  auto *kv = m.m.add_metadata_props();
  kv->set_key("output_slices");
  kv->set_value(Base64(pickle));
  return m.Save(file);
}

// --- 1. a 64-bit string length that wrapped the unpickler's bounds check
TEST(Pickle, LengthNear2To64IsTruncationNotALoop) {
  // PROTO 4, EMPTY_DICT, BINUNICODE8 at byte 3 with length 2^64 - 9: a read position that
  // wrapped would move back to byte 3 and push the rest of the file again, for ever.
  const char kPickle[] =
      "\x80\x04}\x8d\xf7\xff\xff\xff\xff\xff\xff\xff"
      "abcd";
  const std::string p(kPickle, sizeof kPickle - 1);
  auto s = UnpickleSlices(p);
  EXPECT_REFUSED(s.status(), "truncated");
  // The same pickle as a model's output_slices: the load fails, naming the metadata.
  EXPECT_REFUSED(ImportOnnxFile(ModelWithSlices(p, "len.onnx")).status(), "output_slices",
                 "truncated");
}

// --- 2. tuples nested deeper than any slices pickle, destroyed recursively
TEST(Pickle, DeepTuplesAreRefusedAtTheDepthLimit) {
  const char kHead[] =
      "\x80\x02}X\x01\x00\x00\x00"
      "aN";
  std::string p(kHead, sizeof kHead - 1);
  p += std::string(300000, '\x85');  // TUPLE1 around the previous value, 300,000 times
  p += "s.";
  auto s = UnpickleSlices(p);
  EXPECT_REFUSED(s.status(), "deeper than the limit of 32");
  EXPECT_REFUSED(ImportOnnxFile(ModelWithSlices(p, "deep.onnx")).status(), "output_slices",
                 "deeper than the limit");
  // A pickle larger than any output_slices value is refused before it is parsed.
  EXPECT_REFUSED(UnpickleSlices(std::string(kMaxPickleBytes + 1, 'N')).status(),
                 "above the limit of 1048576");
  // A dict put inside a tuple (and so possibly into itself) is refused.
  EXPECT_REFUSED(UnpickleSlices(std::string("\x80\x02}\x85.", 5)).status(), "dict inside a tuple");
}

// --- 3. constant folding of ConstantOfShape / Range that asks for gigabytes
TEST(Folding, ConstantOfShapeAskingFor16GiBIsRefused) {
  Model m;
  m.Ints("shape", {65536, 65536}, {2});
  m.Node("ConstantOfShape", {"shape"}, {"big"}, "bomb");
  m.Output("big");
  EXPECT_REFUSED(Load(m.Save("cos.onnx")), "bomb", "above the reference interpreter's limit",
                 "268435456");
}

TEST(Folding, RangeAskingFor4GiBIsRefused) {
  Model m;
  m.Floats("start", {0.f}, {});
  m.Floats("limit", {1.0e9f}, {});
  m.Floats("delta", {1.f}, {});
  m.Node("Range", {"start", "limit", "delta"}, {"r"}, "range_bomb");
  m.Output("r");
  EXPECT_REFUSED(Load(m.Save("range.onnx")), "range_bomb", "limit of 268435456");
}

// --- 4. a node without outputs
TEST(Import, NodeWithoutOutputsIsRefused) {
  Model m;
  m.Floats("c", {1.f, -2.f}, {2});
  m.Node("Relu", {"c"}, {}, "orphan");
  m.Node("Neg", {"c"}, {"y"});
  m.Output("y");
  const std::string path = m.Save("noout.onnx");
  EXPECT_REFUSED(ImportOnnxFile(path).status(), "orphan", "has no output");
}

// --- 5. external data: a folder, a FIFO, a length near 2^63
std::string ExternalModel(const std::string &file, const std::string &location,
                          const std::string &offset, const std::string &length) {
  Model m;
  auto *t = m.g().add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto_DataType_FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  auto add = [&](const char *k, const std::string &v) {
    if (v.empty())
      return;
    auto *kv = t->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add("location", location);
  add("offset", offset);
  add("length", length);
  m.Node("Neg", {"w"}, {"y"});
  m.Output("y");
  return m.Save(file);
}

TEST(ExternalData, FolderIsRefused) {
  fs::create_directories(Dir() / "weights.d");
  EXPECT_REFUSED(ImportOnnxFile(ExternalModel("ext_dir.onnx", "weights.d", "", "")).status(),
                 "tensor 'w'", "not a regular file");
}

TEST(ExternalData, FifoIsRefusedWithoutBlocking) {
  const fs::path fifo = Dir() / "weights.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_REFUSED(ImportOnnxFile(ExternalModel("ext_fifo.onnx", "weights.fifo", "", "")).status(),
                 "tensor 'w'", "not a regular file");
}

TEST(ExternalData, LengthNear2To63IsRefused) {
  Write("weights.bin", std::string(64, '\0'));
  EXPECT_REFUSED(
      ImportOnnxFile(ExternalModel("ext_len.onnx", "weights.bin", "16", "9223372036854775800"))
          .status(),
      "tensor 'w'", "past the end");
  EXPECT_REFUSED(
      ImportOnnxFile(ExternalModel("ext_huge.onnx", "weights.bin", "", "99999999999999999999"))
          .status(),
      "tensor 'w'", "not a number");
  // A range of the wrong size for the shape is refused before anything is allocated.
  EXPECT_REFUSED(ImportOnnxFile(ExternalModel("ext_short.onnx", "weights.bin", "0", "8")).status(),
                 "tensor 'w'", "8 bytes, its shape needs 16");
  // The honest case still loads.
  EXPECT_TRUE(ImportOnnxFile(ExternalModel("ext_ok.onnx", "weights.bin", "16", "16")).ok());
}

// --- 8. invalid models onnxruntime refuses: refused too, with the node named
TEST(Agreement, ConstantGatherIndexOutOfRangeIsRefused) {
  Model m;
  m.Input("x", {4, 3});
  m.Ints("idx", {1, 4}, {2});
  m.Node("Gather", {"x", "idx"}, {"y"}, "gather_oob");
  m.Output("y");
  EXPECT_REFUSED(Load(m.Save("gather.onnx")), "gather_oob", "index 4 is out of range");
}

TEST(Agreement, SurplusInputsAreRefused) {
  Model m;
  m.Input("x", {1, 4});
  m.Input("z", {1, 4});
  m.Node("Relu", {"x", "z"}, {"y"}, "relu2");
  m.Output("y");
  EXPECT_REFUSED(ImportOnnxFile(m.Save("surplus.onnx")).status(), "relu2", "2 inputs", "at most 1");
}

TEST(Agreement, PoolPadsNotSmallerThanTheKernelAreRefused) {
  Model m;
  m.Input("x", {1, 1, 4, 4});
  auto *n = m.Node("MaxPool", {"x"}, {"y"}, "pool_pads");
  AttrInts(n, "kernel_shape", {2, 2});
  AttrInts(n, "pads", {2, 0, 0, 0});
  m.Output("y");
  EXPECT_REFUSED(Load(m.Save("pads.onnx")), "pool_pads", "smaller than the kernel");
}

TEST(Agreement, NonScalarClipBoundsAreRefused) {
  Model m;
  m.Input("x", {1, 4});
  m.Floats("lo", {0.f, 1.f}, {2});
  m.Node("Clip", {"x", "lo"}, {"y"}, "clip_vec");
  m.Output("y");
  EXPECT_REFUSED(Load(m.Save("clip.onnx")), "clip_vec", "min must be a scalar");
}

TEST(Agreement, ZeroResizeSizesAreRefused) {
  Model m;
  m.Input("x", {1, 1, 4, 4});
  m.Ints("sizes", {1, 1, 0, 8}, {4});
  m.Node("Resize", {"x", "", "", "sizes"}, {"y"}, "resize_zero");
  m.Output("y");
  EXPECT_REFUSED(Load(m.Save("resize.onnx")), "resize_zero", "sizes must be positive");
}

TEST(Agreement, SliceStepInt64MinIsRefused) {
  Model m;
  m.Input("x", {8});
  m.Ints("starts", {7}, {1});
  m.Ints("ends", {0}, {1});
  m.Ints("axes", {0}, {1});
  m.Ints("steps", {INT64_MIN}, {1});
  m.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, "slice_min");
  m.Output("y");
  EXPECT_REFUSED(Load(m.Save("slice.onnx")), "slice_min", "INT64_MIN");
}

// --- 9. duplicate slice names; .opm outputs larger than what the kernels write
TEST(Silent, DuplicateSliceNamesAreRefused) {
  // {'a': slice(0, 2, None), 'a': slice(2, 4, None)} written opcode by opcode.
  const char kDup[] =
      "\x80\x02}(X\x01\x00\x00\x00"
      "a"
      "c__builtin__\nslice\nK\x00K\x02N\x87R"
      "X\x01\x00\x00\x00"
      "a"
      "c__builtin__\nslice\nK\x02K\x04N\x87Ru.";
  const std::string p(kDup, sizeof kDup - 1);
  EXPECT_REFUSED(UnpickleSlices(p).status(), "'a' is named twice");
  EXPECT_REFUSED(ImportOnnxFile(ModelWithSlices(p, "dup.onnx")).status(), "output_slices",
                 "named twice");
}

CompiledModel TinyCompiledModel() {
  CompiledModel m;
  m.inputs.push_back({"x", DType::kFloat32, {4}, {}});
  m.outputs.push_back({"y", DType::kFloat32, {4}, {}});
  m.sources.push_back("kernel void k(global float *x, uint xo, global float *y, uint yo) {}");
  KernelDesc k;
  k.label = "neg";
  k.entry = "k";
  k.global = {4};
  k.args.push_back(KernelArg::Buffer({BufferKind::kInput, 0, 0, 16, 4}));
  k.args.push_back(KernelArg::Buffer({BufferKind::kOutput, 0, 0, 16, 4}));
  m.kernels.push_back(k);
  return m;
}

TEST(Silent, OpmOutputLargerThanItsKernelsWriteIsRefused) {
  ASSERT_TRUE(ValidateModel(TinyCompiledModel()).ok());
  CompiledModel m = TinyCompiledModel();
  m.outputs[0].dims = {8};  // 32 bytes declared, the one kernel writes 16
  EXPECT_REFUSED(ValidateModel(m), "output 'y'", "write only the first 16");
  EXPECT_FALSE(SerializeModel(m).ok());
  // Two kernels writing the halves cover it.
  CompiledModel two = m;
  KernelDesc k2 = two.kernels[0];
  k2.args[1].buffer.offset = 16;
  two.kernels.push_back(k2);
  EXPECT_TRUE(ValidateModel(two).ok()) << ValidateModel(two).message();
}

TEST(Silent, OpmDuplicateSliceNamesAreRefused) {
  CompiledModel m = TinyCompiledModel();
  m.outputs[0].slices = {{"a", 0, 2}, {"a", 2, 4}};
  EXPECT_REFUSED(ValidateModel(m), "two slices named 'a'");
}

}  // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  fs::remove_all(Dir());
  return rc;
}
