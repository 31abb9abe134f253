# The compiled-model file (.opm): everything the executor needs to run a network on one device
# profile, with no ONNX parsing and no code generation at load time.
#
# Rules (as in openpilot's cereal): never renumber a field; add fields at the end; deprecate by
# renaming to `deprecatedFoo`. A change that old readers cannot ignore bumps `formatVersion`.
# Sizes and offsets are in bytes unless a name says otherwise. The executor validates every
# offset, size and argument against the arena, weights and I/O sizes before it touches a device.
@0xc8a3e1f2b4d6a901;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("op::nn::schema");

struct CompiledModel {
  # 1 for this layout. A reader refuses files with a version it does not know.
  formatVersion @0 :UInt32;
  # FNV-1a 64 of the source ONNX file's bytes, plus the options that shaped the compilation.
  sourceHash @1 :UInt64;
  sourceName @2 :Text;
  # The device profile the kernels were generated for ("cpu", "adreno", "amd") and the storage
  # precision of float tensors inside the arena and weights ("fp32" or "fp16").
  profile @3 :Text;
  precision @4 :Text;
  # The device the file was compiled on ("" for device-independent output); informational.
  deviceName @5 :Text;

  inputs @6 :List(TensorDesc);
  outputs @7 :List(TensorDesc);

  # Distinct program sources; kernels refer to them by index (many kernels share a template).
  sources @8 :List(Text);
  kernels @9 :List(Kernel);

  # One read-only buffer holding every constant tensor at aligned offsets.
  weights @10 :Data;
  # One scratch buffer for every intermediate tensor (see the memory plan).
  arenaBytes @11 :UInt64;
  # The sum of the sizes of all intermediate tensors: what the arena would cost without reuse.
  intermediateBytes @12 :UInt64;
  # The alignment (bytes) offsets were planned with.
  alignment @13 :UInt32;
  # Optional: images created from regions of the weights at load time (adreno weights).
  images @14 :List(WeightImage);
  # Instruction-set extensions of the host processor the kernels use, comma-separated (the CPU
  # profile's "avx512vnni": int8 products by vpdpbusd); "" for none. A reader refuses to run the
  # file on a processor that lacks one: such a kernel would stop the process.
  cpuFeatures @15 :Text;
}

enum DataType {
  float32 @0;
  float16 @1;
  int64 @2;
  int32 @3;
  uint8 @4;
  int8 @5;
  bool @6;
}

struct Slice {
  # A named range of the flattened last axis of an output (openpilot's output_slices).
  name @0 :Text;
  start @1 :Int64;
  end @2 :Int64;
}

struct TensorDesc {
  name @0 :Text;
  type @1 :DataType;
  dims @2 :List(Int64);
  slices @3 :List(Slice);
}

enum BufferKind {
  arena @0;
  weights @1;
  input @2;    # `index` into inputs; bound per run
  output @3;   # `index` into outputs; bound per run
}

struct BufferRef {
  # Occupies two kernel arguments: the cl_mem, then a uint offset in elements of
  # `elementBytes` (offsetBytes must be a multiple of it).
  kind @0 :BufferKind;
  index @1 :UInt32;
  offsetBytes @2 :UInt64;
  # How many bytes from offsetBytes the kernel may touch.
  sizeBytes @3 :UInt64;
  elementBytes @4 :UInt32;
}

struct Arg {
  union {
    buffer @0 :BufferRef;
    int32 @1 :Int32;
    float32 @2 :Float32;
    # One kernel argument: an image2d_t from `images`.
    image @3 :UInt32;
  }
}

struct WeightImage {
  # A read-only image2d of RGBA texels created from a region of the weights.
  offsetBytes @0 :UInt64;
  width @1 :UInt32;
  height @2 :UInt32;
  # "float" (CL_FLOAT) or "half" (CL_HALF_FLOAT) channels.
  channelType @3 :Text;
}

struct Kernel {
  # The node(s) the kernel computes, for errors and profiles.
  label @0 :Text;
  # The __kernel function name and the index of its program source.
  entry @1 :Text;
  source @2 :UInt32;
  buildOptions @3 :Text;
  globalSize @4 :List(UInt64);
  # Empty: the driver chooses.
  localSize @5 :List(UInt64);
  args @6 :List(Arg);
  # Floating-point operations of this launch, for reports.
  flops @7 :UInt64;
}
