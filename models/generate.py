#!/usr/bin/env python3
"""Generates the reference driving models from fixed seeds and writes their model cards.

  .venv/bin/python3 models/generate.py --size small      # models/*_small.onnx (committed)
  .venv/bin/python3 models/generate.py --size full       # models/full/*_full.onnx (gitignored)
  .venv/bin/python3 models/generate.py --info            # cards of existing files, no torch

Needs torch (tools/venv.sh --models) except with --info. The output is byte-for-byte
deterministic; the hashes of both sizes are recorded in models/small.sha256 and
models/full.sha256 (`--check` compares freshly generated files against them; `--record` rewrites
them after an intended change; `--cards` rewrites the generated part of README.md).
"""

import argparse
import hashlib
import io
import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onnx_util  # noqa: E402

# Sizes. `full` matches openpilot's compute (vision ≈ 2 GFLOP for both images, policy a few
# million parameters); `small` is for tests on PoCL and the reference interpreter.
CONFIGS = {
    "full": {
        "vision": {"backbone": {"widths": [48, 96, 192, 384], "depths": [2, 2, 6, 2],
                                "heads": 8, "expand": 3},
                   "head_hidden": 1024},
        "policy": {"d": 512, "blocks": 2, "head_hidden": 1024},
    },
    "small": {
        "vision": {"backbone": {"widths": [12, 16, 32, 64], "depths": [1, 1, 1, 1],
                                "heads": 2, "expand": 2},
                   "head_hidden": 128},
        "policy": {"d": 64, "blocks": 1, "head_hidden": 128},
    },
}
SEEDS = {"driving_vision": 5001, "driving_policy": 5002, "driving_supercombo": 5003}
MODELS = ("driving_vision", "driving_policy", "driving_supercombo")
OPSET = 17


def input_specs(name):
    """(name, dtype, shape) of each graph input, as the contract states them."""
    vision = [("img", np.uint8, (1, 12, 128, 256)), ("big_img", np.uint8, (1, 12, 128, 256))]
    policy = [("features_buffer", np.float32, (1, 25, 512)), ("desire_pulse", np.float32, (1, 25, 8)),
              ("traffic_convention", np.float32, (1, 2))]
    return {"driving_vision": vision, "driving_policy": policy,
            "driving_supercombo": vision + policy}[name]


def build(name, size):
    """Returns the ONNX ModelProto of one model, ready to serialise."""
    import nets  # only here (it needs torch): --info and the tests work without torch
    cfg = CONFIGS[size]
    if name == "driving_vision":
        net, slices = nets.DrivingVision(cfg["vision"]), nets.vision_slices()
    elif name == "driving_policy":
        net, slices = nets.DrivingPolicy(cfg["policy"]), nets.POLICY_SLICES
    else:
        net, slices = nets.DrivingSupercombo(cfg), nets.supercombo_slices()
    nets.init_weights(net, SEEDS[name])
    return export_onnx(net, name, slices,
                       f"{name} ({size}): random weights from seed {SEEDS[name]}, not trained")


def export_onnx(net, name, slices, doc, producer="gst-op models/generate.py"):
    """Exports a torch network with the inputs of `name` to the form every committed model has
    (opset 17, no Constant nodes, fp16 weights and compute, `output_slices` metadata, only ops
    the runtime supports) and checks it. Returns the ModelProto. tools/train exports through it."""
    import torch  # only here: --info and the tests work without torch

    net.eval()

    specs = input_specs(name)
    # Example inputs only fix shapes and dtypes for tracing; values do not reach the file.
    args = tuple(torch.zeros(shape, dtype=torch.uint8 if dt == np.uint8 else torch.float32)
                 for _, dt, shape in specs)
    buf = io.BytesIO()
    torch.onnx.export(net, args, buf, opset_version=OPSET, do_constant_folding=True,
                      input_names=[n for n, _, _ in specs], output_names=["outputs"],
                      training=torch.onnx.TrainingMode.EVAL)
    model = onnx.load_from_string(buf.getvalue())

    onnx_util.constants_to_initializers(model)
    onnx_util.to_fp16(model)
    # Stable, readable node names, independent of the exporter's counters.
    for i, node in enumerate(model.graph.node):
        node.name = f"{node.op_type}_{i}"
        node.doc_string = ""
    model.graph.name = name
    model.producer_name = producer
    model.producer_version = "1"
    model.doc_string = doc

    offsets, start = {}, 0
    for sname, n in slices:
        offsets[sname] = slice(start, start + n)
        start += n
    total = start
    meta = model.metadata_props.add()
    meta.key, meta.value = "output_slices", onnx_util.encode_slices(offsets)

    onnx.checker.check_model(model, full_check=True)
    ops = {n.op_type for n in model.graph.node}
    if not ops <= onnx_util.SUPPORTED_OPS:
        extra = sorted(ops - onnx_util.SUPPORTED_OPS)
        raise SystemExit(f"{name}: ops outside the runtime's list: {extra}")
    out_dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    if out_dims != [1, total]:
        raise SystemExit(f"{name}: output is {out_dims}, slices need [1, {total}]")
    return model


def path_of(name, size, outdir):
    return os.path.join(outdir, f"{name}_{size}.onnx")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_check(model_bytes, name):
    """Runs the model in onnxruntime on random inputs: every output value finite, every slice
    varied (non-zero std). Returns {slice: (min, max, std)} for the card."""
    import onnxruntime as ort
    model = onnx.load_from_string(model_bytes)
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    rng = np.random.Generator(np.random.PCG64(1))
    feeds = {}
    for n, dt, shape in input_specs(name):
        if dt == np.uint8:
            feeds[n] = rng.integers(0, 256, shape, dtype=np.uint8)
        elif n == "traffic_convention":
            feeds[n] = np.array([[1.0, 0.0]], np.float32)
        else:
            feeds[n] = rng.standard_normal(shape).astype(np.float32)
    out = sess.run(["outputs"], feeds)[0]
    if not np.isfinite(out).all():
        raise SystemExit(f"{name}: non-finite outputs")
    slices = onnx_util.decode_slices({p.key: p.value for p in model.metadata_props}["output_slices"])
    stats = {}
    for k, s in slices.items():
        part = out[0, s]
        stats[k] = (float(part.min()), float(part.max()), float(part.std()))
        if part.std() < 1e-3:
            raise SystemExit(f"{name}: slice {k} is flat (std {part.std():.2g})")
    return stats


def describe(path, name):
    """Text block for the model card: I/O, slices, parameters, FLOPs."""
    model = onnx.load(path)
    ins, outs = onnx_util.io_signature(model)
    flops, by_op = onnx_util.count_flops(model)
    params = onnx_util.count_params(model)
    slices = onnx_util.decode_slices({p.key: p.value for p in model.metadata_props}["output_slices"])
    ops = sorted({n.op_type for n in model.graph.node})
    lines = [f"- file: `{os.path.relpath(path, HERE)}`, {os.path.getsize(path):,} bytes, "
             f"sha256 `{sha256(path)[:16]}…`"]
    for label, sigs in (("input", ins), ("output", outs)):
        for n, t, dims in sigs:
            lines.append(f"- {label} `{n}`: {t} {tuple(dims)}")
    lines.append("- output_slices: " + ", ".join(f"`{k}` {s.start}:{s.stop}" for k, s in slices.items()))
    big = by_op.get("Conv", 0) + by_op.get("Gemm", 0) + by_op.get("MatMul", 0)
    lines.append(f"- parameters: {params:,} (float16)")
    lines.append(f"- FLOPs per run: {flops / 1e6:,.1f} M ({big / 1e6:,.1f} M in Conv/Gemm/MatMul; "
                 "multiply-add = 2)")
    lines.append(f"- nodes: {len(model.graph.node)}; ops: {', '.join(ops)}")
    return "\n".join(lines), flops, params


def write_cards(size, cards):
    """Replaces the text between the `cards:<size>` markers of README.md with fresh cards."""
    readme = os.path.join(HERE, "README.md")
    with open(readme) as f:
        text = f.read()
    begin, end = f"<!-- cards:{size} begin -->", f"<!-- cards:{size} end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{readme}: markers {begin} / {end} are missing")
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    with open(readme, "w") as f:
        f.write(head + begin + "\n" + "\n".join(cards) + end + tail)
    print(f"updated the {size} cards in {readme}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=["small", "full", "all"], default="small")
    ap.add_argument("--out", help="output folder (default: models/ for small, models/full/ for full)")
    ap.add_argument("--info", action="store_true", help="describe existing files, generate nothing")
    ap.add_argument("--check", action="store_true",
                    help="compare generated files with the recorded hashes")
    ap.add_argument("--record", action="store_true", help="rewrite the recorded hash file(s)")
    ap.add_argument("--cards", action="store_true", help="rewrite the generated part of README.md")
    a = ap.parse_args()

    sizes = ["small", "full"] if a.size == "all" else [a.size]
    status = 0
    for size in sizes:
        outdir = a.out or (HERE if size == "small" else os.path.join(HERE, "full"))
        os.makedirs(outdir, exist_ok=True)
        hashes, cards = [], []
        for name in MODELS:
            path = path_of(name, size, outdir)
            if not a.info:
                model = build(name, size)
                data = model.SerializeToString()
                stats = run_check(data, name)
                with open(path, "wb") as f:
                    f.write(data)
                low = min(v[2] for v in stats.values())
                print(f"{name}_{size}: onnxruntime ok, smallest slice std {low:.3g}")
            text, flops, params = describe(path, name)
            print(f"## {name}_{size}\n{text}\n")
            cards.append(f"### `{name}_{size}`\n\n{text}\n")
            hashes.append(f"{sha256(path)}  {os.path.relpath(path, HERE)}")
        record = os.path.join(HERE, f"{size}.sha256")
        if a.record:
            with open(record, "w") as f:
                f.write("\n".join(hashes) + "\n")
            print(f"recorded {record}")
        if a.check:
            # Compared by file name, so files generated into another folder (--out) check too.
            with open(record) as f:
                want = {os.path.basename(p): h for h, p in (ln.split() for ln in f if ln.strip())}
            for line in hashes:
                h, p = line.split()
                ok = want.get(os.path.basename(p)) == h
                status |= 0 if ok else 1
                print(("same as recorded: " if ok else "DIFFERENT from recorded: ") + line)
        if a.cards:
            write_cards(size, cards)
    return status


if __name__ == "__main__":
    sys.exit(main())
