#!/usr/bin/env python3
"""Golden test of the message logs: the real `capnp decode` reads every message our writer
produced from a fixed raw-output tensor, and its text matches golden/decode.txt.

Also: the .zst log decompresses with the zstd tool to exactly the plain log; a writer killed
after its last flush leaves a .zst whose every message still decodes; `oplog list` matches
golden/list.txt for .zst, plain and .bz2 logs.

  golden_test.py --writer W --oplog O --schema log.capnp --golden DIR [--update]
--update rewrites the golden files instead of comparing (review the diff before committing).
"""
import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, stdin=None, ok=(0,)):
    p = subprocess.run(cmd, input=stdin, capture_output=True)
    if p.returncode not in ok:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout


def compare(name, actual, golden_dir, update):
    path = os.path.join(golden_dir, name)
    if update:
        with open(path, "wb") as f:
            f.write(actual)
        print(f"updated {path}")
        return
    with open(path, "rb") as f:
        expected = f.read()
    if actual != expected:
        diff = difflib.unified_diff(expected.decode().splitlines(), actual.decode().splitlines(),
                                    "golden/" + name, "actual", lineterm="", n=2)
        sys.exit("FAIL: differs from golden " + name + "\n" + "\n".join(list(diff)[:60]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--writer", required=True)
    ap.add_argument("--oplog", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    missing = [tool for tool in ("capnp", "zstd", "bzip2") if shutil.which(tool) is None]
    if missing:
        print("SKIP: missing command-line tools: " + ", ".join(missing))
        sys.exit(77)

    with tempfile.TemporaryDirectory() as tmp:
        zst, plain, killed, bz2 = (os.path.join(tmp, n)
                                   for n in ("rlog.zst", "rlog", "killed.zst", "rlog.bz2"))
        run([a.writer, zst])
        run([a.writer, plain])
        run([a.writer, killed, "--kill"])
        with open(plain, "rb") as f:
            plain_bytes = f.read()

        # One complete zstd stream that the zstd tool reads back to the plain log's bytes.
        run(["zstd", "-q", "-t", zst])
        if run(["zstd", "-q", "-dc", zst]) != plain_bytes:
            sys.exit("FAIL: zstd -dc of the .zst log differs from the plain log")

        # The real capnp tool reads every message (it exits non-zero on a bad one).
        text = run(["capnp", "decode", a.schema, "Event"], stdin=plain_bytes)
        if text.count(b"logMonoTime") != 9:
            sys.exit(f"FAIL: capnp decode printed {text.count(b'logMonoTime')} messages, expected 9")
        compare("decode.txt", text, a.golden, a.update)

        # Killed after the last flush: the stream is unfinished (zstd -t fails) but all of its
        # data decompresses and every message decodes.
        p = subprocess.run(["zstd", "-q", "-dc", killed], capture_output=True)
        if p.returncode == 0:
            sys.exit("FAIL: the killed writer's stream was ended, the test cannot show anything")
        if p.stdout != plain_bytes:
            sys.exit("FAIL: the killed writer's log lost messages")
        if run(["capnp", "decode", a.schema, "Event"], stdin=p.stdout) != text:
            sys.exit("FAIL: the killed writer's messages decode differently")

        listing = run([a.oplog, "list", zst])
        compare("list.txt", listing, a.golden, a.update)
        if run([a.oplog, "list", plain]) != listing:
            sys.exit("FAIL: oplog list of the plain log differs")
        with open(bz2, "wb") as f:
            f.write(run(["bzip2", "-c", plain]))
        if run([a.oplog, "list", bz2]) != listing:
            sys.exit("FAIL: oplog list of the .bz2 log differs")
        # A cut-short log lists its whole messages and says so (exit 2).
        if run([a.oplog, "list", killed], ok=(2,)) != listing:
            sys.exit("FAIL: oplog list of the killed writer's log differs")
        # oplog's pretty text is capnp's own.
        if run([a.oplog, "decode", "--pretty", zst]) != text:
            sys.exit("FAIL: oplog decode --pretty differs from capnp decode")
    print("golden: ok")


if __name__ == "__main__":
    main()
