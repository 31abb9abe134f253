// opc: inspect, compile and run models.
//
//   opc info MODEL [--shape name=d0,d1,...]
//   opc run MODEL --input name=file.npy ... --output-dir DIR [--reference] [--shape ...]
//   opc compile MODEL.onnx -o MODEL.opm [--device D] [--precision PREC] [--shape ...]
//   opc profile MODEL [--runs N] [--top K] [--peak GFLOPS] [--source LAUNCH] [--device D]
//   [--precision PREC]
//   [--shape ...]
//   opc quantize MODEL --calibration DIR -o OUT.onnx [--method minmax|percentile|entropy]
//   [--percentile P] [--frames N] [--report] [--keep-float N | --keep NODE,...]
//   [--quantize-outputs]
#include <cstdio>
#include <cstring>

#include "opc.h"

namespace opc {

int Fail(const op::Status &status) {
  std::fprintf(stderr, "opc: %s\n", status.message().c_str());
  return 1;
}

std::string FormatCount(double v, const char *unit) {
  const char *prefix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, i ? "%.3g %s%s" : "%.0f %s%s", v, prefix[i], unit);
  return buf;
}

}  // namespace opc

static void Usage(FILE *f) {
  std::fprintf(
      f,
      "usage: opc info MODEL [--shape name=d0,d1,...]\n"
      "       opc run MODEL --input name=file.npy ... --output-dir DIR [--reference]\n"
      "               [--shape name=d0,d1,...] [--device D] [--precision PREC]\n"
      "       opc compile MODEL.onnx -o MODEL.opm [--device D] [--precision PREC]\n"
      "               [--shape name=d0,d1,...] [--no-fuse]\n"
      "       opc profile MODEL [--runs N] [--top K] [--peak GFLOPS] [--source LAUNCH]\n"
      "               [--device D] [--precision PREC]\n"
      "               [--shape name=d0,d1,...]\n"
      "       opc quantize MODEL --calibration DIR -o OUT.onnx\n"
      "               [--method minmax|percentile|entropy] [--percentile P] [--frames N]\n"
      "               [--report] [--keep-float N | --keep NODE,...] [--quantize-outputs]\n"
      "PREC: auto (the default: int8 for a quantized model, else fp32; a compiled model keeps its\n"
      "      own), fp32, fp16 or int8 (a quantized model only; a compiled model must record it)\n"
      "opc COMMAND --help: that command's options.\n");
}

// One command's usage and options; quantize prints its own.
static const char *CommandHelp(const std::string &cmd) {
  if (cmd == "info")
    return "usage: opc info MODEL [--shape name=d0,d1,...]\n"
           "Prints a model's inputs, outputs, ops, FLOPs and parameters (an ONNX file), or how a\n"
           "compiled .opm was made (profile, precision, kernels, arena, weights).\n"
           "  --shape name=d0,d1,...  a size for an input's symbolic dims (repeatable)\n";
  if (cmd == "run")
    return "usage: opc run MODEL --input name=file.npy ... --output-dir DIR [options]\n"
           "Runs MODEL once on the inputs and writes each output to DIR/<output>.npy.\n"
           "  --input name=file.npy  one input (repeat for each)\n"
           "  --output-dir DIR       where the outputs go\n"
           "  --reference            run the reference interpreter on the host instead\n"
           "  --device D             auto (default), gpu, cpu, P:D or a device-name part\n"
           "  --precision PREC       auto (default), fp32, fp16 or int8\n"
           "  --shape name=d0,d1,... a size for an input's symbolic dims (repeatable)\n";
  if (cmd == "compile")
    return "usage: opc compile MODEL.onnx -o MODEL.opm [options]\n"
           "Compiles an ONNX model for a device into a .opm file that loads without compiling.\n"
           "  -o MODEL.opm           the output file\n"
           "  --device D             the device it is compiled for (default auto)\n"
           "  --precision PREC       auto (default), fp32, fp16 or int8 (recorded in the file)\n"
           "  --shape name=d0,d1,... a size for an input's symbolic dims (repeatable)\n"
           "  --no-fuse              no operator fusion (for comparing against the fused code)\n";
  if (cmd == "profile")
    return "usage: opc profile MODEL [options]\n"
           "Runs MODEL on random inputs and prints where the start-up and the device time go,\n"
           "kernel by kernel (milliseconds, share, GFLOP/s, template, grid), then by template.\n"
           "  --runs N               timed runs (default 10)\n"
           "  --top K                the K slowest launches listed (default 25)\n"
           "  --peak GFLOPS          the device's peak, to print each kernel's share of it\n"
           "  --source LAUNCH        print launch LAUNCH's OpenCL source (its # in the list)\n"
           "  --device D             auto (default), gpu, cpu, P:D or a device-name part\n"
           "  --precision PREC       auto (default), fp32, fp16 or int8\n"
           "  --shape name=d0,d1,... a size for an input's symbolic dims (repeatable)\n";
  return nullptr;
}

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  // `opc CMD --help` (anywhere after the command) asks for that command's usage: not an error.
  if (const char *help = CommandHelp(argv[1]))
    for (int i = 2; i < argc; i++)
      if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
        std::fputs(help, stdout);
        return 0;
      }
  opc::Args args(argv + 2, argv + argc);
  const std::string cmd = argv[1];
  if (cmd == "info") {
    // A compiled model is reported by the device half; anything else is read as ONNX.
    int rc = args.size() == 1 ? opc::InfoCompiled(args[0]) : -1;
    return rc >= 0 ? rc : opc::Info(args);
  }
  if (cmd == "run")
    return opc::Run(args);
  if (cmd == "compile")
    return opc::Compile(args);
  if (cmd == "profile")
    return opc::Profile(args);
  if (cmd == "quantize")
    return opc::Quantize(args);
  std::fprintf(stderr, "opc: unknown command '%s'\n", cmd.c_str());
  Usage(stderr);
  return 2;
}
