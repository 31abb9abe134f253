"""PyTorch definitions of the reference driving networks (see README.md for the model cards).

They keep openpilot's contract (inputs, outputs, slices) and the kind of compute of its networks
(a FastViT-style vision backbone, an MLP/Gemm temporal policy), with random weights. Only the
generator imports this file: the test suite never needs torch.
"""

import math

import numpy as np
import torch
from torch import nn

# Slices of the vision output, in openpilot's order, and of the policy output (docs/contract.md: vision and policy networks).
VISION_SLICES = [
    ("pose", 12), ("wide_from_device_euler", 6), ("road_transform", 12), ("lane_lines", 528),
    ("road_edges", 264), ("lane_lines_prob", 8), ("desire_pred", 32), ("meta", 55),
    ("lead_prob", 3), ("lead", 144), ("hidden_state", 512),
]
POLICY_SLICES = [("plan", 990), ("desire_state", 8)]
# The multi-hypothesis layouts the contract also knows: `lead` as 2 hypotheses × 3 selections
# (102) and `plan` as 5 hypotheses (4955). The trained models use them (winner-takes-all).
MHP_VISION_SLICES = [(k, 102 if k == "lead" else n) for k, n in VISION_SLICES]
MHP_POLICY_SLICES = [("plan", 4955), ("desire_state", 8)]
HIDDEN = 512
PAD = 24  # trailing `pad` slice: rounds the vision output to 1600 values


def gelu():
    """openpilot's networks use GELU in its tanh form; opset 17 exports it as Tanh/Pow/Mul/Add."""
    return nn.GELU(approximate="tanh")


class ConvFFN(nn.Module):
    """FastViT's convolutional FFN: 7×7 depthwise conv, then a 1×1 expand / GELU / 1×1 project."""

    def __init__(self, c, expand):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.fc1 = nn.Conv2d(c, c * expand, 1)
        self.act = gelu()
        self.fc2 = nn.Conv2d(c * expand, c, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(self.dw(x))))


class RepMixerBlock(nn.Module):
    """Token mixing by a 7×7 depthwise conv (RepMixer in its reparameterised inference form:
    the training-time BatchNorms are already folded into the conv), then the ConvFFN."""

    def __init__(self, c, expand):
        super().__init__()
        self.mixer = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ffn = ConvFFN(c, expand)

    def forward(self, x):
        x = x + self.mixer(x)
        return x + self.ffn(x)


class Downsample(nn.Module):
    """FastViT's patch embedding: a stride-2 grouped 7×7 conv followed by a 1×1 conv. FastViT
    uses one group per input channel; gcd(cin, cout) groups allows widths that do not double."""

    def __init__(self, cin, cout):
        super().__init__()
        self.grouped = nn.Conv2d(cin, cout, 7, stride=2, padding=3, groups=math.gcd(cin, cout))
        self.act1 = gelu()
        self.pw = nn.Conv2d(cout, cout, 1)
        self.act2 = gelu()

    def forward(self, x):
        return self.act2(self.pw(self.act1(self.grouped(x))))


class Attention(nn.Module):
    """Multi-head self-attention over tokens (B, N, C), written out so that it exports to plain
    MatMul / Softmax / Transpose / Reshape (no fused attention op)."""

    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)

    def forward(self, x):
        b, n, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(x).split(c, dim=-1)
        q = q.reshape(b, n, self.heads, d).transpose(1, 2)
        k = k.reshape(b, n, self.heads, d).transpose(1, 2)
        v = v.reshape(b, n, self.heads, d).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(d)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(y)


class AttentionBlock(nn.Module):
    """FastViT's last stage: conditional positional encoding (7×7 depthwise conv), then
    pre-norm attention and MLP with LayerNorm over channels."""

    def __init__(self, c, heads, expand):
        super().__init__()
        self.cpe = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm1 = nn.LayerNorm(c)
        self.attn = Attention(c, heads)
        self.norm2 = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, c * expand)
        self.act = gelu()
        self.fc2 = nn.Linear(c * expand, c)

    def forward(self, x):
        b, c, h, w = x.shape
        x = x + self.cpe(x)
        t = x.reshape(b, c, h * w).transpose(1, 2)  # (B, N, C) tokens
        t = t + self.attn(self.norm1(t))
        t = t + self.fc2(self.act(self.fc1(self.norm2(t))))
        return t.transpose(1, 2).reshape(b, c, h, w)


class Backbone(nn.Module):
    """FastViT-style image encoder for one (1, 12, 128, 256) uint8 input → (1, C_last) features.

    The stem brings the image to 32×64; the conv (RepMixer) stages run at 32×64, 16×32, 8×16 and
    the last stage, attention, at 4×8 = 32 tokens. widths/depths list all four stages.

    readout: how the 4×8 tokens become one feature vector. 0 (the reference models): their mean,
    which keeps what is in the image but not where. N > 0: a 1×1 conv to N channels, then the
    4×8×N values flattened (as openpilot's networks do), so that the heads see where a lane line
    or a car is: a lane line's lateral offset and a lead's distance are positions in the image."""

    TOKENS = 4 * 8

    def __init__(self, widths, depths, heads, expand, readout=0):
        super().__init__()
        c0 = widths[0]
        # Conv stem (MobileOne-like, reparameterised): 3×3 s2 conv, 3×3 s2 depthwise, 1×1 conv.
        self.stem = nn.Sequential(
            nn.Conv2d(12, c0, 3, stride=2, padding=1), gelu(),
            nn.Conv2d(c0, c0, 3, stride=2, padding=1, groups=c0), gelu(),
            nn.Conv2d(c0, c0, 1), gelu())
        layers = []
        for i in range(len(widths) - 1):
            if i > 0:
                layers.append(Downsample(widths[i - 1], widths[i]))
            layers += [RepMixerBlock(widths[i], expand) for _ in range(depths[i])]
        self.stages = nn.Sequential(*layers)
        self.down_attn = Downsample(widths[-2], widths[-1])
        self.attn = nn.Sequential(*[AttentionBlock(widths[-1], heads, expand)
                                    for _ in range(depths[-1])])
        self.readout = nn.Conv2d(widths[-1], readout, 1) if readout else None
        self.out_channels = readout * self.TOKENS if readout else widths[-1]
        self.norm = nn.LayerNorm(self.out_channels)

    def forward(self, img):
        # Normalisation inside the network, as openpilot's models do: uint8 0..255 → [-1, 1].
        x = img.float() * (2.0 / 255.0) - 1.0
        x = self.stages(self.stem(x))
        x = self.attn(self.down_attn(x))
        if self.readout is not None:
            return self.norm(self.readout(x).flatten(1))
        b, c, h, w = x.shape
        return self.norm(x.reshape(b, c, h * w).mean(dim=2))


class VisionHead(nn.Module):
    """Both images' features → hidden state (512) → every other vision slice."""

    def __init__(self, c_feat, head_hidden, slices=None):
        super().__init__()
        self.fuse = nn.Linear(2 * c_feat, HIDDEN)
        self.act = gelu()
        self.fc = nn.Linear(HIDDEN, head_hidden)
        n_before = sum(n for name, n in (slices or VISION_SLICES) if name != "hidden_state")
        self.out = nn.Linear(head_hidden, n_before)
        self.n_before = n_before

    def forward(self, f_road, f_wide):
        hidden = self.act(self.fuse(torch.cat([f_road, f_wide], dim=1)))
        return self.out(self.act(self.fc(hidden))), hidden


class TemporalPolicy(nn.Module):
    """The policy: per-step embedding of (features, desire), MLP mixing across the 25 steps and
    across channels, mean over time, then Gemm/Relu heads with the traffic convention."""

    def __init__(self, d, blocks, head_hidden, n_out):
        super().__init__()
        self.embed = nn.Linear(HIDDEN + 8, d)
        self.time_mix = nn.ModuleList([nn.Linear(25, 25) for _ in range(blocks)])
        self.ch_fc1 = nn.ModuleList([nn.Linear(d, 2 * d) for _ in range(blocks)])
        self.ch_fc2 = nn.ModuleList([nn.Linear(2 * d, d) for _ in range(blocks)])
        self.relu = nn.ReLU()
        self.fc1 = nn.Linear(2 * d + 2, head_hidden)
        self.fc2 = nn.Linear(head_hidden, head_hidden)
        self.out = nn.Linear(head_hidden, n_out)

    def forward(self, features, desire, traffic):
        x = self.relu(self.embed(torch.cat([features, desire], dim=2)))  # (1, 25, d)
        for tm, f1, f2 in zip(self.time_mix, self.ch_fc1, self.ch_fc2):
            x = x + self.relu(tm(x.transpose(1, 2))).transpose(1, 2)
            x = x + f2(self.relu(f1(x)))
        # Summary of the whole window plus the newest step; 2-D from here on, so Linear is Gemm.
        z = torch.cat([x.mean(dim=1), x[:, -1, :], traffic], dim=1)
        z = self.relu(self.fc1(z))
        z = self.relu(self.fc2(z))
        return self.out(z)


class DrivingVision(nn.Module):
    """slices: the output layout (default VISION_SLICES; training uses the multi-hypothesis
    `lead` of 102, see MHP_VISION_SLICES)."""

    def __init__(self, cfg, slices=None):
        super().__init__()
        self.backbone = Backbone(**cfg["backbone"])
        self.head = VisionHead(self.backbone.out_channels, cfg["head_hidden"], slices)
        self.pad = nn.Linear(HIDDEN, PAD)

    def forward(self, img, big_img):
        # One backbone, called on both images: the two calls share every weight.
        before, hidden = self.head(self.backbone(img), self.backbone(big_img))
        return torch.cat([before, hidden, self.pad(hidden)], dim=1)


class DrivingPolicy(nn.Module):
    def __init__(self, cfg, slices=None):
        super().__init__()
        n_out = sum(n for _, n in (slices or POLICY_SLICES))
        self.policy = TemporalPolicy(cfg["d"], cfg["blocks"], cfg["head_hidden"], n_out)

    def forward(self, features_buffer, desire_pulse, traffic_convention):
        return self.policy(features_buffer, desire_pulse, traffic_convention)


class DrivingSupercombo(nn.Module):
    """Vision and policy in one network (the newer openpilot form): the policy sees the feature
    buffer shifted by one with this frame's hidden state as the newest step."""

    def __init__(self, cfg):
        super().__init__()
        self.vision = DrivingVision(cfg["vision"])
        self.policy = DrivingPolicy(cfg["policy"])

    def forward(self, img, big_img, features_buffer, desire_pulse, traffic_convention):
        v = self.vision(img, big_img)
        n_before = self.vision.head.n_before
        hidden = v[:, n_before:n_before + HIDDEN]
        feats = torch.cat([features_buffer[:, 1:, :], hidden.unsqueeze(1)], dim=1)
        p = self.policy(feats, desire_pulse, traffic_convention)
        return torch.cat([v[:, :n_before + HIDDEN], p, v[:, n_before + HIDDEN:]], dim=1)


def vision_slices():
    return VISION_SLICES + [("pad", PAD)]


def supercombo_slices():
    return VISION_SLICES + POLICY_SLICES + [("pad", PAD)]


# Residual branches (mixers, FFN outputs, projections): their last layers, by parameter name.
RESIDUAL_BRANCHES = ("mixer", "ffn.fc2", "cpe", "attn.proj", ".fc2", "ch_fc2", "time_mix")


def init_for_training(model, seed, head_outputs=()):
    """Starting weights for training, from numpy's PCG64 like init_weights().

    init_weights() makes the reference models' random outputs varied, but its small fan-in
    weights and bias-dominated GELU layers let the image's signal fade: at the backbone's output
    the part that depends on the image is about 0.5 % of the features, and a network trained
    from there learned the labels' mean and ignored its input. Here the signal keeps its size
    through the whole backbone: weights N(0, g²/fan_in) with g = 1.53 (the gain that keeps a
    GELU layer's second moment), zero biases, LayerNorms at identity, residual branches at
    g = 0.3 so that each block starts near the identity, and the layers named in head_outputs
    (the last layers of the heads) at g = 0.1, so that every prediction starts near the
    labels' mean that the training's output scale puts there."""
    rng = np.random.Generator(np.random.PCG64(seed))
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = tuple(p.shape)
            if name.endswith("bias"):
                v = np.zeros(shape)
            elif p.dim() == 1:  # LayerNorm gain
                v = np.ones(shape)
            else:
                fan_in = int(np.prod(shape[1:]))
                gain = 1.53
                if any(name.startswith(h + ".") for h in head_outputs):
                    gain = 0.1
                elif any(k in name for k in RESIDUAL_BRANCHES):
                    gain = 0.3
                v = rng.standard_normal(shape) * (gain / math.sqrt(fan_in))
            p.copy_(torch.from_numpy(v.astype(np.float32)))


def init_weights(model, seed):
    """Sets every parameter from numpy's PCG64 so the weights are the same bits on any machine
    (torch's own RNG takes different vectorised paths on different CPUs).

    Scales keep activations O(1) through the random network, so every output slice is finite and
    varied: fan-in scaled weights, residual branches damped, LayerNorm gains near 1, and biases
    small but non-zero so each output differs from its neighbours.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = tuple(p.shape)
            if name.endswith("bias"):
                v = rng.standard_normal(shape) * 0.05
            elif p.dim() == 1:  # LayerNorm gain
                v = 1.0 + rng.standard_normal(shape) * 0.1
            else:
                fan_in = int(np.prod(shape[1:]))
                gain = 1.0
                # Residual branches (mixers, FFN outputs, projections) start small.
                if any(k in name for k in RESIDUAL_BRANCHES):
                    gain = 0.3
                v = rng.standard_normal(shape) * (gain / math.sqrt(fan_in))
            p.copy_(torch.from_numpy(v.astype(np.float32)))
