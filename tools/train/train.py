#!/usr/bin/env python3
"""Trains the small driving networks (models/nets.py) on tools/train/dataset.py's data, data-parallel
with torch.distributed (DistributedDataParallel, gloo backend), started by torchrun:

  torchrun --standalone --nproc_per_node 2 tools/train/train.py --data DATA --run RUN --steps 40
  # several machines: the same script, torchrun's rendezvous instead of --standalone:
  torchrun --nnodes 2 --node_rank R --nproc_per_node 2 --rdzv_backend c10d \\
      --rdzv_endpoint HOST:29500 --rdzv_id factory tools/train/train.py --data DATA --run RUN
  .venv/bin/python3 tools/train/train.py --run RUN --export OUT   # ONNX from the last checkpoint

What one step does (global batch = --batch × world size): each process takes its share of the
step's samples from a seeded permutation of all frames (epoch e uses PCG64(seed, e)), runs the
vision network on both warped images, and the policy on the hidden-state history as the pipeline
builds it (the last 100 hidden states of that drive, every 4th from −97, zeros before the drive
starts), taken from a cache that the vision network refreshes every --refresh steps (the policy
learns on detached features; the vision network learns from its own heads). Losses:

- Laplace negative log-likelihood |x − μ|/b + log b for every (mean, log-std) head: lane lines,
  road edges, leads, plan; Gaussian NLL for pose, road_transform and wide_from_device_euler;
  by default each weighted as β-NLL (β = 1: by its std, held constant, over the label's scale),
  so that every head's mean learns at the same rate (laplace_nll); the lead's NLL weighs
  --lead-weight times the others (vision_weights);
- winner-takes-all over the hypotheses of the multi-hypothesis `lead` (2 hypotheses, per
  selection) and `plan` (5): only the hypothesis closest to the truth gets the NLL, and the
  selection logits learn to pick it (cross-entropy);
- binary cross-entropy for lane-line and lead probabilities and meta, cross-entropy for
  desire_state and for each row of desire_pred.

The policy's desire_pulse input is built from the desire labels as the pipeline builds it from
the car's desire (rising edges, a 100-entry queue reduced by max over groups of 4).

The networks are models/nets.py's at --size, with the vision backbone's read-out flattened
(--readout N: a 1×1 conv to N channels of the 4×8 token map, whose positions the heads then see;
0 = the reference models' mean over the tokens), started from nets.init_for_training()'s weights,
which keep the image's signal through the backbone.

The recipe: the last layers' mean outputs are scaled and shifted by the labels' std and mean
(output_scale; folded into the weights on export), so that a lead 50 m ahead or a 300 m path is
one step of Adam's size away instead of thousands; labels that never change in the data get no
loss (varying); the learning rate warms up over --warmup steps and decays by a cosine (lr_at);
with --policy-steps, the last steps train the policy alone on the hidden states of the final,
frozen vision network, which are exactly the features it sees once exported (before that it
learns on a cache that is up to --refresh steps old). Each process computes its share of a
hidden-state refresh.

Optional: --augment varies contrast, brightness and noise of the vision inputs (augment(): the
warp's geometry is untouched); --pad-history P fills the policy queue before a drive's start with
the drive's first hidden state for a share P of samples (short drives would otherwise show the
policy mostly empty queues, while a replay fills it after 5 s); --holdout DRIVE prints the
held-out drive's accuracy table figures every --holdout-every steps (and plots them), so that
overfitting shows while training; --validation DATA does the same for the vision figures on
seeded drives never trained on (Validation), which a run may look at without using up the
held-out drive.

Checkpoints (RUN/checkpoint.pt) hold the weights, the optimiser, the step, the hidden-state
cache and the loss history; a rerun with the same RUN resumes at the saved step, and because the
data order is a function of (seed, step) it continues at the same data position. One progress
line per step; RUN/loss.png at the end.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
import generate  # noqa: E402
import nets  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset  # noqa: E402

VISION_SLICES = nets.MHP_VISION_SLICES + [("pad", nets.PAD)]
POLICY_SLICES = nets.MHP_POLICY_SLICES
PLAN_HYP, PLAN_N = 5, 33 * 15
LEAD_HYP, LEAD_N, LEAD_SEL = 2, 6 * 4, 3


def offsets(slices):
    out, start = {}, 0
    for k, n in slices:
        out[k] = slice(start, start + n)
        start += n
    return out


V_OFF, P_OFF = offsets(VISION_SLICES), offsets(POLICY_SLICES)
LABEL_KEYS = ["lane_lines", "lane_lines_prob", "road_edges", "plan", "lead", "lead_prob", "pose",
              "desire_state", "desire_pred", "meta", "road_transform", "wide_from_device_euler"]


class Data:
    """Every data_* folder of DATA, loaded into memory (the small sets fit)."""

    def __init__(self, root):
        dirs = sorted(d for d in os.listdir(root) if d.startswith("data_"))
        if not dirs:
            raise SystemExit(f"train: no data_* folders in {root} (tools/train/dataset.py build)")
        self.names, self.img, self.big, self.labels, self.index = [], [], [], [], []
        for di, d in enumerate(dirs):
            p = os.path.join(root, d)
            # Memory-mapped: the processes share the page cache instead of a copy each.
            img = np.load(os.path.join(p, "img.npy"), mmap_mode="r")
            big = np.load(os.path.join(p, "big_img.npy"), mmap_mode="r")
            version = dataset.labels_version(p)
            if version != dataset.LABELS_VERSION:
                raise SystemExit(f"train: {p}: labels of version {version}, this dataset.py makes "
                                 f"version {dataset.LABELS_VERSION} (rerun dataset.py build with "
                                 f"the same arguments: it remakes the labels only)")
            lab = dict(np.load(os.path.join(p, "labels.npz")))
            missing = sorted(set(LABEL_KEYS) - set(lab))
            if missing:
                raise SystemExit(f"train: {p}: labels.npz lacks {', '.join(missing)} (made by an "
                                 f"older dataset.py: rebuild it)")
            if len(img) != len(big) or len(img) != len(lab["plan"]):
                raise SystemExit(f"train: {p}: inputs and labels disagree in length")
            self.names.append(d)
            self.img.append(img)
            self.big.append(big)
            self.labels.append(lab)
            self.index += [(di, k) for k in range(len(img))]
        self.n = len(self.index)

    def order(self, seed, epoch):
        return np.random.Generator(np.random.PCG64([seed, epoch])).permutation(self.n)

    def positions(self, seed, step, global_batch):
        """Sample indices of one step (the global batch), as a function of (seed, step) only."""
        first = step * global_batch
        out = []
        for pos in range(first, first + global_batch):
            out.append(int(self.order(seed, pos // self.n)[pos % self.n]))
        return out, first // self.n, first % self.n


def laplace_nll(mu, log_b, x, mask, unit=None):
    """Mean Laplace NLL |x − μ|/b + log b over the elements in mask. With `unit` (each element's
    label scale, as output_scale() sets it) the β-NLL of β = 1: every element's NLL is weighted by
    b/unit with b held constant, so the mean's gradient is sign(μ − x)/unit whatever b is, and b
    still converges to the mean absolute error. Plain NLL weights each mean's gradient by 1/b, so
    heads the network already predicts well (small b) pull the shared layers far harder than
    the ones it has not learned yet: trained that way, the lane lines and the lead hardly moved
    from the labels' mean."""
    log_b = log_b.clamp(-7.0, 11.0)
    nll = (x - mu).abs() * torch.exp(-log_b) + log_b
    if unit is not None:
        nll = nll * (torch.exp(log_b).detach() / unit)
    return (nll * mask).sum() / mask.sum().clamp(min=1.0)


def gauss_nll(mu, log_s, x, vary, unit=None):
    """Mean Gaussian NLL; with `unit`, the β-NLL of β = 1 (weights s²/unit², s held constant:
    the mean's gradient is (μ − x)/unit²), as laplace_nll()."""
    log_s = log_s.clamp(-7.0, 11.0)
    nll = 0.5 * ((x - mu) * torch.exp(-log_s)) ** 2 + log_s
    if unit is not None:
        nll = nll * (torch.exp(2.0 * log_s).detach() / unit ** 2)
    return (nll * vary).sum() / (vary.sum() * len(x)).clamp(min=1.0)


def varying(data):
    """Per label key, a float mask over the flattened label: 1 where the label takes more than
    one value in the data. A label that is the same in every frame (the wide camera's euler
    angles, the plan's height and roll, ...) carries nothing to learn: its NLL would only drive
    the std to the clamp's floor, where 1/std turns every rounding error into a gradient that
    swamps the shared layers. Such outputs keep their starting value, the label's mean (see
    output_scale), and get no loss."""
    out = {}
    for key in ("lane_lines", "road_edges", "lead", "plan", "pose", "road_transform",
                "wide_from_device_euler"):
        x = np.concatenate([lab[key].reshape(len(lab[key]), -1) for lab in data.labels])
        with np.errstate(all="ignore"):
            spread = np.nan_to_num(np.nanmax(x, axis=0) - np.nanmin(x, axis=0))
        out[key] = torch.from_numpy((spread > 1e-4).astype(np.float32))
    return out


def wta(raw, hyp, n, sel, target, mask, vary, unit=None):
    """Winner-takes-all over `hyp` rows of [means (n), log-stds (n), logits (sel)].
    target: (B, sel, n); mask (B, sel); vary (sel · n,) the elements that get a loss; unit (n,)
    the means' label scale (β-NLL, see laplace_nll; it also puts the elements of the distance
    that picks the winner on one scale, metres beside m/s²), or None.
    Returns (NLL of the winners, CE of the selection)."""
    b = raw.shape[0]
    rows = raw.reshape(b, hyp, 2 * n + sel)
    mu, log_b, logits = rows[:, :, :n], rows[:, :, n:2 * n], rows[:, :, 2 * n:]
    per = 1.0 if unit is None else unit
    nll_sum, ce_sum = 0.0, 0.0
    for c in range(sel):
        dist_h = ((mu - target[:, c:c + 1, :]).abs() / per).mean(dim=2)  # (B, hyp)
        win = dist_h.argmin(dim=1)
        pick = win[:, None, None].expand(b, 1, n)
        m = mu.gather(1, pick)[:, 0]
        lb = log_b.gather(1, pick)[:, 0]
        w = mask[:, c:c + 1].expand(b, n) * vary[c * n:(c + 1) * n]
        nll_sum = nll_sum + laplace_nll(m, lb, target[:, c], w, unit)
        ce = nn.functional.cross_entropy(logits[:, :, c], win, reduction="none")
        ce_sum = ce_sum + (ce * mask[:, c]).sum() / mask[:, c].sum().clamp(min=1.0)
    return nll_sum / sel, ce_sum / sel


def mean_units(scale, off, n, hyp=1):
    """The label scale of the n means of an output block (its first n values, or of each
    hypothesis row's first n), from a network's output-scale buffer; None: plain NLL."""
    if scale is None:
        return None
    block = scale[off]
    return block.reshape(hyp, -1)[0, :n] if hyp > 1 else block[:n]


def vision_loss(out, lab, vary, scale=None):
    """scale: the vision network's output-scale buffer for β-NLL (see laplace_nll), or None."""
    parts = {}
    ll = out[:, V_OFF["lane_lines"]]
    t = lab["lane_lines"].reshape(-1, 264)
    m = torch.isfinite(t).float() * vary["lane_lines"]
    parts["lane_lines"] = laplace_nll(ll[:, :264], ll[:, 264:], torch.nan_to_num(t), m,
                                      mean_units(scale, V_OFF["lane_lines"], 264))
    # The ego lane's width (line 2 minus line 1, lateral), mean absolute error in metres where
    # both lines are labelled: the lines' NLL alone let the networks predict the data's mean
    # width whatever the image (docs/training.md); weighted by --width-weight (0: off).
    ly = ll[:, :264].reshape(-1, 4, 33, 2)[..., 0]
    ty = lab["lane_lines"].reshape(-1, 4, 33, 2)[..., 0]
    tw = ty[:, 2] - ty[:, 1]
    mw = torch.isfinite(tw).float()
    parts["lane_width"] = (((ly[:, 2] - ly[:, 1]) - torch.nan_to_num(tw)).abs() * mw).sum() / \
        mw.sum().clamp(min=1.0)
    re = out[:, V_OFF["road_edges"]]
    t = lab["road_edges"].reshape(-1, 132)
    m = torch.isfinite(t).float() * vary["road_edges"]
    parts["road_edges"] = laplace_nll(re[:, :132], re[:, 132:], torch.nan_to_num(t), m,
                                      mean_units(scale, V_OFF["road_edges"], 132))
    # laneLineProbs are the odd entries (present); the even ones their complement.
    p = lab["lane_lines_prob"]
    target = torch.stack([1 - p, p], dim=2).reshape(-1, 8)
    parts["lane_lines_prob"] = nn.functional.binary_cross_entropy_with_logits(
        out[:, V_OFF["lane_lines_prob"]], target)
    lead_nll, lead_ce = wta(out[:, V_OFF["lead"]], LEAD_HYP, LEAD_N, LEAD_SEL,
                            lab["lead"].reshape(-1, LEAD_SEL, LEAD_N), lab["lead_prob"],
                            vary["lead"], mean_units(scale, V_OFF["lead"], LEAD_N, LEAD_HYP))
    parts["lead"] = lead_nll
    parts["lead_select"] = lead_ce
    parts["lead_prob"] = nn.functional.binary_cross_entropy_with_logits(
        out[:, V_OFF["lead_prob"]], lab["lead_prob"])
    for key, n in (("pose", 6), ("road_transform", 6), ("wide_from_device_euler", 3)):
        o = out[:, V_OFF[key]]
        parts[key] = gauss_nll(o[:, :n], o[:, n:], lab[key], vary[key],
                               mean_units(scale, V_OFF[key], n))
    # desire_pred: a softmax per row of (4, 8), so cross-entropy per row.
    dp = out[:, V_OFF["desire_pred"]].reshape(-1, 8)
    parts["desire_pred"] = nn.functional.cross_entropy(dp, lab["desire_pred"].reshape(-1, 8).argmax(1))
    parts["meta"] = nn.functional.binary_cross_entropy_with_logits(out[:, V_OFF["meta"]], lab["meta"])
    return parts


def vision_weights(a):
    """Each part of vision_loss() with its weight in the vision loss. All 1 but the lead's
    (--lead-weight): its NLL is a mean over 3 offsets × 6 times × 4 values, of which the present
    distance is one of the few that two frames can tell, while the lane lines' 264 values move
    together; at weight 1 the shared layers followed the lanes and the predicted distance stayed
    near the data's mean (lead distance on training drives 35 % median after 700 steps; 19 % at
    weight 8)."""
    w = {k: 1.0 for k in ("lane_lines", "road_edges", "lane_lines_prob", "lead", "lead_select",
                          "lead_prob", "pose", "road_transform", "wide_from_device_euler",
                          "desire_pred", "meta")}
    w["lead"] = a.lead_weight
    w["lane_width"] = a.width_weight
    return w


def policy_loss(out, lab, vary, scale=None):
    """scale: the policy network's output-scale buffer for β-NLL, or None."""
    plan_nll, plan_ce = wta(out[:, P_OFF["plan"]], PLAN_HYP, PLAN_N, 1,
                            lab["plan"].reshape(-1, 1, PLAN_N), torch.ones(len(out), 1), vary["plan"],
                            mean_units(scale, P_OFF["plan"], PLAN_N, PLAN_HYP))
    desire = nn.functional.cross_entropy(out[:, P_OFF["desire_state"]], lab["desire_state"].argmax(1))
    return {"plan": plan_nll, "plan_select": plan_ce, "desire_state": desire}


def output_scale(data):
    """Per-output scale and shift of the networks' last layers, from the labels' spread: a mean
    output becomes shift + scale · raw, so the raw outputs start near the labels' mean and one
    unit of raw output is one label std (a lead 50 m ahead or a path 300 m long is out of reach
    of a freshly initialised layer otherwise), and a log-std output starts at log of the labels'
    std. The scale and shift are folded into the last layer's weights on export (see fold()).
    Returns {"vision": (scale, shift), "policy": (scale, shift)} as float32 arrays over the
    outputs of each network's last layer (for vision: the slices before hidden_state)."""
    def stats(key):
        x = np.concatenate([lab[key].reshape(len(lab[key]), -1) for lab in data.labels])
        if key == "lead":  # only where there is a lead (the label is 0 elsewhere)
            present = np.concatenate([lab["lead_prob"] for lab in data.labels])
            x = np.where(np.repeat(present, LEAD_N, axis=1) > 0.5, x, np.nan)
        with np.errstate(all="ignore"):
            mean, std = np.nanmean(x, axis=0), np.nanstd(x, axis=0)
        mean, std = np.nan_to_num(mean), np.nan_to_num(std)
        return mean.astype(np.float32), np.maximum(std, 0.05).astype(np.float32)

    def mean_std(key, n_mu):
        mean, std = stats(key)
        return (np.concatenate([std, np.ones(n_mu, np.float32)]),
                np.concatenate([mean, np.log(std)]))

    def hypotheses(key, hyp, n, sel):
        mean, std = stats(key)
        mean, std = mean.reshape(sel, n).mean(0), std.reshape(sel, n).max(0)
        row_s = np.concatenate([std, np.ones(n + sel, np.float32)])
        row_m = np.concatenate([mean, np.log(std), np.zeros(sel, np.float32)])
        return np.tile(row_s, hyp), np.tile(row_m, hyp)

    parts = {"pose": mean_std("pose", 6), "road_transform": mean_std("road_transform", 6),
             "wide_from_device_euler": mean_std("wide_from_device_euler", 3),
             "lane_lines": mean_std("lane_lines", 264), "road_edges": mean_std("road_edges", 132),
             "lead": hypotheses("lead", LEAD_HYP, LEAD_N, LEAD_SEL),
             "plan": hypotheses("plan", PLAN_HYP, PLAN_N, 1)}
    out = {}
    for net, slices in (("vision", VISION_SLICES), ("policy", POLICY_SLICES)):
        sc, sh = [], []
        for k, n in slices:
            if k == "hidden_state":
                break
            s, m = parts.get(k, (np.ones(n, np.float32), np.zeros(n, np.float32)))
            assert len(s) == n, k
            sc.append(s)
            sh.append(m)
        out[net] = (np.concatenate(sc).astype(np.float32), np.concatenate(sh).astype(np.float32))
    return out


class Both(nn.Module):
    """Vision and policy in one module so that one DDP wrapper averages both gradients. The last
    layers' outputs are scaled and shifted by output_scale()'s buffers (folded on export)."""

    def __init__(self, cfg, scale=None):
        super().__init__()
        self.cfg = cfg
        self.vision = nets.DrivingVision(cfg["vision"], VISION_SLICES[:-1])
        self.policy = nets.DrivingPolicy(cfg["policy"], POLICY_SLICES)
        nv = self.vision.head.n_before
        npol = sum(n for _, n in POLICY_SLICES)
        for name, n in (("vision", nv), ("policy", npol)):
            s, m = scale[name] if scale else (np.ones(n, np.float32), np.zeros(n, np.float32))
            self.register_buffer(f"{name}_scale", torch.from_numpy(np.array(s)))
            self.register_buffer(f"{name}_shift", torch.from_numpy(np.array(m)))

    def forward(self, img, big, feats, desire, traffic):
        v = None
        if img is not None:  # None: a policy-only step
            v = self.vision(img, big)
            nv = self.vision_scale.shape[0]
            v = torch.cat([v[:, :nv] * self.vision_scale + self.vision_shift, v[:, nv:]], dim=1)
        p = self.policy(feats, desire, traffic) * self.policy_scale + self.policy_shift
        return v, p

    @torch.no_grad()
    def fold(self):
        """Folds the scale and shift into the last layers (vision.head.out, policy.policy.out),
        so that the bare networks compute what forward() does; the buffers become 1 and 0."""
        for lin, s, m in ((self.vision.head.out, self.vision_scale, self.vision_shift),
                          (self.policy.policy.out, self.policy_scale, self.policy_shift)):
            lin.weight.mul_(s[:, None])
            lin.bias.mul_(s).add_(m)
            s.fill_(1.0)
            m.zero_()


def training_config(size, readout, widths=None):
    """The network configuration trained at `size`: the reference models' (generate.CONFIGS),
    with the backbone's read-out (nets.Backbone) and, where given, its stages' widths as
    chosen."""
    cfg = json.loads(json.dumps(generate.CONFIGS[size]))
    cfg["vision"]["backbone"]["readout"] = readout
    if widths:
        if len(widths) != len(cfg["vision"]["backbone"]["widths"]):
            raise SystemExit(f"train: --widths needs {len(cfg['vision']['backbone']['widths'])} "
                             f"values, one per stage")
        cfg["vision"]["backbone"]["widths"] = list(widths)
    return cfg


def lr_at(step, peak, warmup, vision_steps, steps):
    """Learning rates (vision, policy) of a step, a function of the step alone (resume gives the
    same): a linear warm-up over `warmup` steps, then a cosine decay to 5 % of the peak at the
    end of the joint phase; in the policy-only phase after it, the vision rate is 0 and the
    policy's decays again from the peak to 5 % over that phase."""
    def cosine(i, n):
        return peak * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(i / max(n, 1), 1.0))))
    if step < vision_steps:
        if step < warmup:
            lr = peak * (step + 1) / warmup
        else:
            lr = cosine(step - warmup, vision_steps - warmup)
        return lr, lr
    return 0.0, cosine(step - vision_steps, steps - vision_steps)


def history(cache, drive, k, pad=False):
    """The policy's features_buffer for frame k: hidden states of frames k−96, k−92, …, k (the
    100-entry queue's entries −97::4), zeros for frames before the drive (as the pipeline's
    queue starts), or with `pad` the drive's first hidden state there instead (as if the car had
    been there before: short training drives otherwise never show the policy a full queue)."""
    out = np.zeros((25, 512), np.float32)
    for j in range(25):
        f = k - 96 + 4 * j
        if f >= 0 or pad:
            out[j] = cache[drive][max(f, 0)]
    return out


# The model inputs' channels (docs/contract.md): per frame four subsampled Y planes, then U, V.
Y_CHANNELS = [0, 1, 2, 3, 6, 7, 8, 9]


def augment(img, big, rng):
    """Photometric augmentation of a batch of opwarp tensors (B, 12, 128, 256) uint8, geometry
    untouched: per sample one contrast (0.75-1.25 about mid-grey) and brightness (±25 levels) on
    the Y planes of both frames and both cameras alike (one scene, one exposure), then Gaussian
    noise (σ up to 4 levels) on every channel, rounded and clipped to uint8."""
    out = []
    n = len(img)
    contrast = rng.uniform(0.75, 1.25, n).astype(np.float32)
    bright = rng.uniform(-25.0, 25.0, n).astype(np.float32)
    sigma = rng.uniform(0.0, 4.0, n).astype(np.float32)
    for x in (img, big):
        x = x.astype(np.float32)
        y = x[:, Y_CHANNELS]
        x[:, Y_CHANNELS] = (y - 128.0) * contrast[:, None, None, None] + 128.0 + bright[:, None, None, None]
        x += rng.standard_normal(x.shape, dtype=np.float32) * sigma[:, None, None, None]
        out.append(np.clip(np.rint(x), 0, 255).astype(np.uint8))
    return out


class Holdout:
    """The accuracy table (tools/train/evaluate.py's) of the networks in training on a held-out
    drive: its opwarp tensors (dataset.py drive) through the vision network, the policy over the
    pipeline's queue, the contract's parse. A check for overfitting while training, in torch; the
    figures that count come from the exported models through opreplay."""

    KEYS = ("lane_y_20m_p50", "lane_y_20m_p90", "lead_presence_acc", "lead_distance_pct_p50",
            "plan_y_30m_p50")

    def __init__(self, drive, data):
        import evaluate
        self.evaluate = evaluate
        with open(os.path.join(drive, "groundtruth.json")) as f:
            self.gt = json.load(f)
        self.truth, self.plan = evaluate.truth_of(self.gt)
        self.img = np.load(os.path.join(data, "img.npy"))
        self.big = np.load(os.path.join(data, "big_img.npy"))
        self.ids = [rec["frame_id"] for rec in self.gt["frames"]][:len(self.img)]

    @torch.no_grad()
    def table(self, both, batch=16):
        import opfleet
        both.eval()
        v_rows = []
        nv = both.vision_scale.shape[0]
        for i in range(0, len(self.img), batch):
            v = both.vision(torch.from_numpy(self.img[i:i + batch]), torch.from_numpy(self.big[i:i + batch]))
            v = torch.cat([v[:, :nv] * both.vision_scale + both.vision_shift, v[:, nv:]], dim=1)
            v_rows.append(v.numpy())
        v_rows = np.concatenate(v_rows)
        h = V_OFF["hidden_state"]
        feats = np.zeros((len(v_rows), 25, 512), np.float32)
        queue = np.zeros((100, 512), np.float32)
        for k in range(len(v_rows)):
            queue[:-1] = queue[1:]
            queue[-1] = v_rows[k, h]
            feats[k] = queue[-97::4]
        p_rows = both.policy(torch.from_numpy(feats), torch.zeros(len(feats), 25, 8),
                             torch.tensor([[1.0, 0.0]]).expand(len(feats), 2))
        p_rows = (p_rows * both.policy_scale + both.policy_shift).numpy()
        both.train()
        msgs = [self.evaluate.to_message(v_rows[k], p_rows[k], V_OFF, P_OFF, self.ids[k])
                for k in range(len(v_rows))]
        return opfleet.model_accuracy_of(msgs, self.truth, self.gt["drive"]["x_idxs_m"], self.plan)


class Validation:
    """Vision figures of the networks in training on seeded drives never trained on (a DATA
    folder of dataset.py build, other seeds): lead distance error (selection 0 now, leads within
    80 m, % of the true distance) and lane-line lateral error at 20 m (every line the road has),
    from the labels. Chosen checkpoints and early stops can look at these instead of the
    held-out sample drive, which is kept for the accuracy table."""

    KEYS = ("lead_distance_pct_p50", "lane_y_20m_p50", "lane_y_20m_p90")

    def __init__(self, root, stride=3):
        self.data = Data(root)
        self.stride = stride

    @torch.no_grad()
    def figures(self, both, batch=16):
        import evaluate
        both.eval()
        nv = both.vision_scale.shape[0]
        x_idxs = np.array(evaluate.X_IDXS)
        lead_err, lane_err = [], []
        for img, big, lab in zip(self.data.img, self.data.big, self.data.labels):
            ks = list(range(4, len(img), self.stride))  # frames with a full 5-frame history
            for i in range(0, len(ks), batch):
                kk = ks[i:i + batch]
                v = both.vision(torch.from_numpy(np.array(img[kk])), torch.from_numpy(np.array(big[kk])))
                v = (v[:, :nv] * both.vision_scale + both.vision_shift).numpy()
                for row, k in zip(v, kk):
                    lead, _ = evaluate.multi_hypothesis(row[V_OFF["lead"]], LEAD_HYP, LEAD_N, LEAD_SEL)
                    truth = float(lab["lead"][k, 0, 0, 0])
                    if lab["lead_prob"][k, 0] > 0.5 and truth <= 80.0:
                        lead_err.append(100.0 * abs(float(lead[0]) - truth) / truth)
                    lines = row[V_OFF["lane_lines"]][:264].reshape(4, 33, 2)
                    for j in range(4):
                        want = lab["lane_lines"][k, j, :, 0]
                        if np.isfinite(want).all():
                            lane_err.append(abs(np.interp(20.0, x_idxs, lines[j, :, 0]) -
                                                np.interp(20.0, x_idxs, want)))
        both.train()
        pct = (lambda v, q: float(np.quantile(v, q)) if v else None)
        return {"lead_distance_pct_p50": pct(lead_err, 0.5), "lane_y_20m_p50": pct(lane_err, 0.5),
                "lane_y_20m_p90": pct(lane_err, 0.9)}


def desire_input(desire_state, k):
    """The policy's desire_pulse for frame k of a drive, as the pipeline builds it: the pulse of a
    frame is one-hot(desire) where the desire is not none and differs from the previous frame's
    (the drive starts after none), and the 100-entry pulse queue is reduced by the maximum over
    each group of 4 to (25, 8); frames before the drive are zeros."""
    d = desire_state.argmax(1)
    out = np.zeros((25, 8), np.float32)
    for f in range(max(0, k - 99), k + 1):
        prev = d[f - 1] if f > 0 else 0
        if d[f] != 0 and d[f] != prev:
            out[(f - (k - 99)) // 4, d[f]] = 1.0
    return out


@torch.no_grad()
def refresh_cache(vision, data, batch=16):
    """The hidden states of every frame under the current vision network. Each process computes
    every world-size-th drive and the processes exchange their parts, so a refresh costs 1/world
    of the whole set per process."""
    vision.eval()
    h = V_OFF["hidden_state"]
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = {}
    for di in range(rank, len(data.img), world):
        img, big = data.img[di], data.big[di]
        rows = []
        for i in range(0, len(img), batch):
            out = vision(torch.from_numpy(np.array(img[i:i + batch])),
                         torch.from_numpy(np.array(big[i:i + batch])))
            rows.append(out[:, h].numpy())
        mine[di] = np.concatenate(rows)
    parts = [None] * world
    dist.all_gather_object(parts, mine)
    vision.train()
    return [next(p[di] for p in parts if di in p) for di in range(len(data.img))]


def plot(history_, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [h["step"] for h in history_]
    held = [h for h in history_ if h.get("holdout") or h.get("validation")]
    fig, axes = plt.subplots(1, 2 if held else 1, figsize=(12 if held else 7, 4), squeeze=False)
    ax = axes[0][0]
    for key in ("total", "vision", "policy"):
        ax.plot(steps, [h[key] for h in history_], label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (beta-NLL + CE, mean over the global batch)")
    ax.set_title("tools/train/train.py")
    ax.legend()
    ax.grid(alpha=0.3)
    if held:  # the held-out drive's (--holdout) and validation drives' figures over the run
        ax = axes[0][1]
        for src, key, label, scale in (
                ("holdout", "lane_y_20m_p50", "held-out: lane line at 20 m, median (m)", 1.0),
                ("holdout", "plan_y_30m_p50", "held-out: plan at 30 m, median (m)", 1.0),
                ("holdout", "lead_distance_pct_p50", "held-out: lead distance, median (% / 100)", 0.01),
                ("validation", "lane_y_20m_p50", "validation: lane line at 20 m, median (m)", 1.0),
                ("validation", "lead_distance_pct_p50", "validation: lead distance, median (% / 100)",
                 0.01)):
            pts = [(h["step"], scale * h[src][key]) for h in held
                   if h.get(src) and h[src].get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", linestyle="--" if src == "validation" else "-",
                        label=label)
        ax.set_xlabel("step")
        ax.set_title("held-out and validation drives")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def export(run, out):
    path = os.path.join(run, "checkpoint.pt")
    if not os.path.isfile(path):
        raise SystemExit(f"train: no checkpoint {path} to export")
    ck = torch.load(path)
    cfg = ck.get("cfg") or generate.CONFIGS[ck["size"]]
    both = Both(cfg)
    both.load_state_dict(ck["model"])
    both.fold()
    os.makedirs(out, exist_ok=True)
    doc = f"trained by tools/train/train.py: {ck['step']} steps, data {ck['data']}, seed {ck['seed']}"
    for name, net, slices in (("driving_vision", both.vision, VISION_SLICES),
                              ("driving_policy", both.policy, POLICY_SLICES)):
        model = generate.export_onnx(net, name, slices, f"{name} ({ck['size']}): {doc}",
                                     producer="gst-op tools/train/train.py")
        path = os.path.join(out, f"{name}_{ck['size']}.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        print(f"train: exported {path}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder of dataset.py's data_* folders")
    ap.add_argument("--run", required=True, help="checkpoint, log and plot folder")
    ap.add_argument("--steps", type=int, default=40, help="train until this step")
    ap.add_argument("--batch", type=int, default=4, help="samples per process per step")
    ap.add_argument("--lr", type=float, default=1e-3,
                    help="peak learning rate (linear warm-up, then cosine decay; see lr_at)")
    ap.add_argument("--warmup", type=int, default=20, help="warm-up steps")
    ap.add_argument("--policy-steps", type=int, default=0,
                    help="the last N of --steps train the policy alone on the final vision "
                         "network's hidden states (the vision network is frozen)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", default="small", choices=sorted(generate.CONFIGS))
    ap.add_argument("--readout", type=int, default=16, metavar="N",
                    help="the backbone's read-out: a 1x1 conv to N channels whose 4x8 map is "
                         "flattened (0: the mean of the tokens, as the reference models)")
    ap.add_argument("--widths", type=lambda v: [int(x) for x in v.split(",")], metavar="W,W,W,W",
                    help="the vision backbone's stage widths (channels), the last the tokens' "
                         "(default: --size's; the exported model keeps the contract's inputs and "
                         "outputs)")
    ap.add_argument("--nll", choices=("beta", "plain"), default="beta",
                    help="beta: each (mean, std) head's NLL weighted by its std (held constant) "
                         "over the label's scale, so every head's mean learns at one rate "
                         "(see laplace_nll); plain: the NLL as it is")
    ap.add_argument("--width-weight", type=float, default=0.0,
                    help="weight of the ego lane's width error (metres, mean absolute) in the "
                         "vision loss; 0 leaves it out (see vision_loss)")
    ap.add_argument("--lead-weight", type=float, default=8.0,
                    help="weight of the lead's NLL in the vision loss (see vision_weights)")
    ap.add_argument("--refresh", type=int, default=10, help="steps between hidden-state refreshes")
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--stop-after", type=int, help="exit after this step (simulates an interruption)")
    ap.add_argument("--export", metavar="OUT", help="export the checkpoint to ONNX and exit")
    ap.add_argument("--augment", action="store_true",
                    help="photometric augmentation of the vision inputs (see augment())")
    ap.add_argument("--pad-history", type=float, default=0.0, metavar="P",
                    help="share of policy samples whose queue before the drive's start holds the "
                         "drive's first hidden state instead of zeros (see history())")
    ap.add_argument("--holdout", metavar="DRIVE",
                    help="a held-out drive (groundtruth.json) whose accuracy is printed every "
                         "--holdout-every steps; needs --holdout-data")
    ap.add_argument("--holdout-data", metavar="DIR",
                    help="that drive's opwarp tensors (dataset.py drive DRIVE DIR)")
    ap.add_argument("--validation", metavar="DATA",
                    help="dataset.py build data of seeds not trained on: vision figures from their "
                         "labels every --holdout-every steps (see Validation)")
    ap.add_argument("--holdout-every", type=int, default=100)
    a = ap.parse_args()
    if a.export:
        return export(a.run, a.export)
    if not a.data:
        ap.error("--data is needed for training")
    if not os.path.isdir(a.data):
        raise SystemExit(f"train: --data {a.data}: no such folder")
    if bool(a.holdout) != bool(a.holdout_data):
        ap.error("--holdout and --holdout-data go together")

    torch.set_num_threads(1)  # one core per process: the processes are the parallelism
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    data = Data(a.data)
    cfg = training_config(a.size, a.readout, a.widths)
    # What a checkpoint must have been trained with to be resumed (the width term only when on,
    # so that checkpoints from before it resume).
    recipe = [a.augment, a.pad_history, a.nll] + ([a.width_weight] if a.width_weight else [])
    both = Both(cfg, output_scale(data))
    vary = varying(data)
    nets.init_for_training(both.vision, 7001, head_outputs=("head.out",))
    nets.init_for_training(both.policy, 7002, head_outputs=("policy.out",))
    # Two groups: the vision group's rate is 0 while the policy trains alone.
    opt = torch.optim.Adam([{"params": both.vision.parameters()},
                            {"params": both.policy.parameters()}], lr=a.lr)
    ckpt = os.path.join(a.run, "checkpoint.pt")
    step, hist, cache, cache_step = 0, [], None, -1
    vision_steps = a.steps - a.policy_steps
    if vision_steps < 0:
        raise SystemExit("train: --policy-steps is more than --steps")
    if os.path.exists(ckpt):
        ck = torch.load(ckpt)
        if ck["data"] != data.names or ck["batch"] != a.batch or ck["world"] != world:
            raise SystemExit(f"train: {ckpt} was made with other data, batch or world size")
        if ck.get("schedule") != [a.lr, a.warmup, vision_steps]:
            raise SystemExit(f"train: {ckpt} was made with another schedule "
                             f"(lr, warmup, vision steps {ck.get('schedule')})")
        if ck.get("recipe", [False, 0.0]) != recipe:
            raise SystemExit(f"train: {ckpt} was made with another --augment / --pad-history / "
                             f"--nll / --width-weight ({ck.get('recipe', [False, 0.0])})")
        if ck.get("cfg") != cfg:
            raise SystemExit(f"train: {ckpt} was made with another network (--size, --readout, "
                             f"--widths; "
                             f"or by an older train.py)")
        both.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step, hist, cache, cache_step = ck["step"], ck["history"], ck["cache"], ck["cache_step"]
    # Policy-only steps leave the vision parameters without gradients.
    ddp = DDP(both, find_unused_parameters=a.policy_steps > 0)
    gb = a.batch * world
    _, epoch, pos = data.positions(a.seed, step, gb)
    if rank == 0:
        os.makedirs(a.run, exist_ok=True)
        print(f"train: {'resumed' if step else 'started'} at step {step}, data position epoch "
              f"{epoch} index {pos} of {data.n} frames ({len(data.names)} drives), {world} "
              f"processes (gloo), global batch {gb}", flush=True)
    tc = torch.tensor([[1.0, 0.0]])
    holdout = Holdout(a.holdout, a.holdout_data) if a.holdout and rank == 0 else None
    validation = Validation(a.validation) if a.validation and rank == 0 else None
    if validation is not None and set(validation.data.names) & set(data.names):
        raise SystemExit("train: --validation shares drives with --data")
    while step < a.steps:
        t0 = time.monotonic()
        vision_on = step < vision_steps
        if (cache is None or (vision_on and step - cache_step >= a.refresh)
                or (not vision_on and cache_step < vision_steps)):
            cache, cache_step = refresh_cache(both.vision, data), step
        lr_v, lr_p = lr_at(step, a.lr, a.warmup, vision_steps, a.steps)
        opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = lr_v, lr_p
        idx, epoch, pos = data.positions(a.seed, step, gb)
        mine = idx[rank::world]
        # Augmentation draws are a function of (seed, step, rank): a resumed run draws the same.
        rng = np.random.Generator(np.random.PCG64([a.seed, step, rank, 0x617567]))
        img = big = None
        if vision_on:
            img = np.stack([data.img[data.index[i][0]][data.index[i][1]] for i in mine])
            big = np.stack([data.big[data.index[i][0]][data.index[i][1]] for i in mine])
            if a.augment:
                img, big = augment(img, big, rng)
            img, big = torch.from_numpy(img), torch.from_numpy(big)
        pad = rng.uniform(size=len(mine)) < a.pad_history
        feats = torch.from_numpy(np.stack([history(cache, *data.index[i], pad=bool(pad[j]))
                                           for j, i in enumerate(mine)]))
        lab = {k: torch.from_numpy(np.stack([data.labels[data.index[i][0]][k][data.index[i][1]]
                                             for i in mine])) for k in data.labels[0]}
        desire = torch.from_numpy(np.stack([desire_input(data.labels[data.index[i][0]]["desire_state"],
                                                         data.index[i][1]) for i in mine]))
        vout, pout = ddp(img, big, feats, desire, tc.expand(len(mine), 2))
        beta = a.nll == "beta"
        pparts = policy_loss(pout, lab, vary, both.policy_scale if beta else None)
        lv = torch.zeros(())
        if vision_on:
            vparts = vision_loss(vout, lab, vary, both.vision_scale if beta else None)
            lv = sum(w * vparts[k] for k, w in vision_weights(a).items())
        lp = sum(pparts.values())
        opt.zero_grad(set_to_none=True)
        (lv + lp).backward()
        opt.step()
        step += 1
        stats = torch.tensor([float(lv), float(lp)])
        dist.all_reduce(stats)
        stats /= world
        dt = time.monotonic() - t0
        hist.append({"step": step, "total": float(stats.sum()), "vision": float(stats[0]),
                     "policy": float(stats[1]), "seconds": dt, "lr": lr_v if vision_on else lr_p})
        if rank == 0:
            print(f"step {step}/{a.steps} loss {float(stats.sum()):.3f} (vision {float(stats[0]):.3f}, "
                  f"policy {float(stats[1]):.3f}) epoch {epoch} index {pos} {dt:.2f} s/step "
                  f"{gb / dt:.1f} samples/s lr {lr_v if vision_on else lr_p:.2e}"
                  f"{'' if vision_on else ' (policy alone)'}", flush=True)
        if holdout is not None and (step % a.holdout_every == 0 or step == a.steps):
            t1 = time.monotonic()
            tab = holdout.table(both)
            hist[-1]["holdout"] = {k: tab.get(k) for k in Holdout.KEYS}
            print(f"holdout at step {step}: " + ", ".join(
                f"{k} {tab[k]:.3f}" if tab.get(k) is not None else f"{k} n/a" for k in Holdout.KEYS) +
                f" ({time.monotonic() - t1:.1f} s)", flush=True)
        if validation is not None and (step % a.holdout_every == 0 or step == a.steps):
            t1 = time.monotonic()
            fig = validation.figures(both)
            hist[-1]["validation"] = fig
            print(f"validation at step {step}: " + ", ".join(
                f"{k} {fig[k]:.3f}" if fig.get(k) is not None else f"{k} n/a" for k in Validation.KEYS) +
                f" ({time.monotonic() - t1:.1f} s)", flush=True)
        if step % a.ckpt_every == 0 or step == a.steps or step == a.stop_after:
            if rank == 0:
                tmp = ckpt + ".tmp"
                torch.save({"model": both.state_dict(), "optimizer": opt.state_dict(), "step": step,
                            "history": hist, "cache": cache, "cache_step": cache_step,
                            "data": data.names, "batch": a.batch, "world": world, "seed": a.seed,
                            "size": a.size, "cfg": cfg, "schedule": [a.lr, a.warmup, vision_steps],
                            "recipe": recipe}, tmp)
                os.replace(tmp, ckpt)
                print(f"train: checkpoint at step {step}", flush=True)
            dist.barrier()
        if a.stop_after and step >= a.stop_after:
            break
    if rank == 0:
        plot(hist, os.path.join(a.run, "loss.png"))
        with open(os.path.join(a.run, "history.json"), "w") as f:
            json.dump(hist, f)
        times = [h["seconds"] for h in hist[1:]] or [0.0]
        print(f"train: stopped at step {step}; median {np.median(times):.2f} s/step; "
              f"{os.path.join(a.run, 'loss.png')}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
