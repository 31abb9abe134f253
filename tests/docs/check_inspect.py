#!/usr/bin/env python3
"""Keeps docs/elements true: each element's committed gst-inspect-1.0 snapshot
(docs/elements/<element>.inspect.txt) must equal what gst-inspect-1.0 prints for the built
plugin now, after normalising what differs between machines (the plugin's path, versions).
A property, pad or caps change therefore fails here until the page and its snapshot are updated:

  check_inspect.py --gst-inspect gst-inspect-1.0 --docs docs/elements [--update] ELEMENT...
"""

import argparse
import difflib
import os
import re
import subprocess
import sys


def normalise(text):
    out = []
    for line in text.splitlines():
        line = re.sub(r"^(\s*Filename\s+).*$", r"\1<plugin>", line)
        line = re.sub(r"^(\s*Version\s+).*$", r"\1<version>", line)
        line = line.rstrip()
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gst-inspect", default="gst-inspect-1.0")
    ap.add_argument("--docs", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the snapshots")
    ap.add_argument("elements", nargs="+")
    a = ap.parse_args()
    env = dict(os.environ)
    env["GST_DEBUG"] = "0"
    env["NO_COLOR"] = "1"
    failed = []
    for element in a.elements:
        proc = subprocess.run([a.gst_inspect, "--no-colors", element], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            print(f"FAIL {element}: gst-inspect-1.0 exit {proc.returncode}\n{proc.stdout[-1000:]}")
            failed.append(element)
            continue
        now = normalise(proc.stdout)
        path = os.path.join(a.docs, f"{element}.inspect.txt")
        if a.update:
            with open(path, "w") as f:
                f.write(now)
            print(f"wrote {path}")
            continue
        if not os.path.exists(path):
            print(f"FAIL {element}: no snapshot {path} (run with --update and review the page)")
            failed.append(element)
            continue
        with open(path) as f:
            then = f.read()
        if then != now:
            diff = difflib.unified_diff(then.splitlines(), now.splitlines(), path, "gst-inspect-1.0",
                                        lineterm="")
            print(f"FAIL {element}: the element changed; update docs/elements/{element}.md and "
                  f"its snapshot (check_inspect.py --update):")
            print("\n".join(list(diff)[:60]))
            failed.append(element)
        else:
            print(f"ok   {element}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
