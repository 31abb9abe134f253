#!/usr/bin/env python3
"""The model-accuracy table (tools/opfleet/opfleet.py model_accuracy) on a hand-made log whose
errors are known: every lane line 0.1 m right of the truth, road edges 0.3 m left, the lead seen
at 102 % of its distance with speed 1 m/s high, the plan 0.25 m right of the true path; the
lane-line std 0.2 m (so the truth is within one std), the lead's x std 0.1 m (outside).

Exit 0 pass, 1 fail. Usage: check_accuracy_table.py OPFLEET_PY DRIVE
"""
import importlib.util
import json
import os
import sys
import tempfile


def main():
    spec = importlib.util.spec_from_file_location("opfleet", sys.argv[1])
    opfleet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(opfleet)
    gt = json.load(open(os.path.join(sys.argv[2], "groundtruth.json")))
    xs = gt["drive"]["x_idxs_m"]
    frames = gt["frames"][:20]
    # A straight true path 0.5 m left, so the plan rows have a known truth.
    plan = {f["frame_id"]: (xs, [-0.5] * len(xs)) for f in frames}
    ev_type = opfleet.schema().Event
    data = b""
    for f in frames:
        ev = ev_type.new_message()
        m = ev.init("modelV2")
        m.frameId = f["frame_id"]
        lines = m.init("laneLines", 4)
        for k, line in enumerate(lines):
            line.x = xs
            line.y = [v + 0.1 for v in f["lane_lines_y_m"][k]]
        m.laneLineProbs = [0.9] * 4
        m.laneLineStds = [0.2] * 4
        edges = m.init("roadEdges", 2)
        for k, edge in enumerate(edges):
            edge.x = xs
            edge.y = [v - 0.3 for v in f["road_edges_y_m"][k]]
        leads = m.init("leadsV3", 3)
        lead = f["lead"]
        for ld in leads:
            ld.prob = 0.8
            ld.x = [1.02 * lead["distance_m"]] * 6
            ld.xStd = [0.1] * 6
            ld.y = [lead["y_m"]] * 6
            ld.v = [lead["speed_mps"] + 1.0] * 6
            ld.a = [0.0] * 6
        m.position.x = xs
        m.position.y = [-0.25] * len(xs)
        m.position.yStd = [0.5] * len(xs)
        data += ev.to_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        rlog = os.path.join(tmp, "rlog")
        with open(rlog, "wb") as fh:
            fh.write(data)
        t = opfleet.model_accuracy(rlog, {f["frame_id"]: f for f in gt["frames"]}, xs, plan)
    want = {"frames": 20, "lane_y_10m_p50": 0.1, "lane_y_20m_p90": 0.1, "lane_y_40m_p50": 0.1,
            "edge_y_20m_p50": 0.3, "lead_distance_pct_p50": 2.0, "lead_speed_p90": 1.0,
            "plan_y_10m_p50": 0.25, "plan_y_30m_p50": 0.25, "plan_y_50m_p90": 0.25,
            "lane_prob_acc": 1.0, "lead_presence_acc": 1.0, "lane_within_std": 1.0,
            "lead_within_std": 0.0, "plan_within_std": 1.0}
    bad = [f"{k}: got {t.get(k)}, want {v}" for k, v in want.items()
           if t.get(k) is None or abs(t[k] - v) > 1e-3 * max(1.0, abs(v))]
    md = opfleet.model_accuracy_markdown("check", t)
    if "lane-line lateral error at 20 m (m) | 0.100 | 0.100 | <= 0.2: met; <= 0.5: met" not in md:
        bad.append("the Markdown table does not mark the 20 m lane target met")
    if "lead presence accuracy (lead within 80 m) | 100.0 % | | >= 95 %: met" not in md:
        bad.append("the Markdown table does not mark lead presence met")
    for b in bad:
        print("FAIL:", b)
    if not bad:
        print(f"ok: {len(want)} figures of the accuracy table as constructed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
