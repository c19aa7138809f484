"""
Mimetic initialization of self-attention layers, on a Vision Transformer trained on CIFAR-10.

Paper: Trockman & Kolter, "Mimetic Initialization of Self-Attention Layers", ICML 2023,
arXiv 2305.09828. The authors released no code. Read this file top to bottom beside the paper:
config -> ViT -> mimetic_init_ (Sec. 4, in the paper's order, one equation per line, the printed typos
named) -> data -> evaluation -> schedule -> train() -> main(). Everything after the "appendix" banner
is machinery the paper does not need (arguments, checkpoints, downloads, figures, benchmark).

Run (GPU, downloads CIFAR-10 into ./data, the paper's ViT-Tiny for 100 epochs, mimetic init):
    python mimetic_vit.py
    python mimetic_vit.py --init=default             # the same model and pipeline without it
CPU quick run, the laptop recipe (about 9 minutes per arm on one core, fp32; all 50,000 training images,
2 epochs; README.md, "Laptop scale", has it with 5 seeds and every Table 2 row):
    python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128
    python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128 --init=default
CPU smoke run (under a minute; checks that everything runs, not a result):
    python mimetic_vit.py --width=64 --depth=2 --heads=2 --patch_size=4 --train_subset=2048 \
        --epochs=1 --batch_size=128
Other modes:
    python mimetic_vit.py --help                     # every config key with its default and why
    python mimetic_vit.py --benchmark=True           # img/s of forward+backward+step, synthetic input
    python mimetic_vit.py --plot=True                # PNG figures of W_Q W_K^T, W_V W_proj, attention, Fig. 3
Expected results (README.md links every number to its results file and log):
  - paper, Table 1, ViT-Tiny, 100 epochs on CIFAR-10: 86.07% (default init) -> 90.78% (mimetic);
    ours on a GPU: not yet measured.
  - ours, the laptop recipe above (AMD EPYC, 1 thread per arm, fp32, CIFAR-10 JPEG copy), seeds 0-4:
    45.27 +- 1.11% (default init) -> 48.85 +- 1.36% (mimetic), mean +- std; mimetic ahead on every
    seed, by 2.0 to 5.6 points (mean gap 3.58, standard error 0.57).
"""

import hashlib
import json
import math
import os
import pickle
import platform
import shlex
import socket
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from urllib.parse import urlparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

# -----------------------------------------------------------------------------------------------
# config: plain globals, each overridable as --key=value (parsed in main(), never at import)
# model (Sec. 5.1: ViT-Tiny = width 192, depth 12, 3 heads, patch 2 on 32x32 inputs)
width = 192               # embedding dimension d
depth = 12                # number of Transformer blocks (at least 1)
heads = 3                 # attention heads; head dimension k = width / heads
patch_size = 2            # Sec. 5.1: patch 2 on 32x32 inputs -> 256 patches + 1 class token
mlp_ratio = 4             # MLP hidden width = mlp_ratio * width (the standard ViT value)
pos_emb = "sinusoidal"    # sinusoidal (Sec. 5.1) | learned (Table 2 "random pos. embeddings")
pos_scale = 1.0           # g, multiplies the position embeddings (Fig. 4); 1 = standard (our choice)
pos_trainable = True      # position embeddings are a parameter initialised as above (our choice, as timm)
# init (Sec. 4; Sec. 5.1 uses a1 = b1 = 0.7, a2 = b2 = 0.4 for all vision experiments)
init = "mimetic"          # mimetic | default | qk | vo (Table 2: "init only W_Q, W_K" / "only W_V, W_proj")
                          # | simple (Sec. 4's "simplest technique", W_Q = W_K, W_V = -W_proj; Fig. 3)
alpha1 = 0.7              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1)
beta1 = 0.7               # b1: identity weight in eq 1
alpha2 = 0.4              # a2: noise weight in W_V W_proj ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.4               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1 is Table 2's "W_V W_proj ~ +cI" ablation
# data
dataset = "cifar10"       # cifar10 | cifar100 | svhn | tinyimagenet (Table 4)
data_dir = "data"         # holds cifar-10-batches-py/ (official python layout) or receives the download
image_size = 0            # resize to this side before patching (Table 7: 32 to 256); 0 = the dataset's own (32;
                          # 64 for Tiny ImageNet)
train_subset = 0          # use only the first N training images (0 = all)
ra_n = 2                  # RandAugment: ops per image (torchvision's default; the paper gives none)
ra_m = 9                  # RandAugment: magnitude, 0-30 of 31 bins (torchvision's default; our choice)
cutout = 16               # Cutout square side in pixels (DeVries & Taylor 2017 for CIFAR-10; our choice)
hflip = True              # random horizontal flip (standard for CIFAR; our choice, not in the paper)
# optimisation (Sec. 5.1: batch 512, AdamW, lr 3e-3, weight decay 0.01, 100 epochs)
epochs = 100              # passes over the training set
batch_size = 512          # images per step (Sec. 5.1)
lr = 3e-3                 # peak learning rate
weight_decay = 0.01       # applied to matrices only, not to biases, norms, tokens (our choice, as nanoGPT)
warmup_frac = 0.05        # linear warmup over this fraction of steps, then cosine to 0 (our choice: the paper
                          # gives no schedule; 0.05 = 5 of 100 epochs)
grad_clip = 1.0           # clip the global gradient norm (our choice; 0 = off)
# system
seed = 0                  # the default init, the mimetic noise, the data order and augmentation
device = ""               # "" = cuda if available, else mps if available, else cpu
precision = "auto"        # auto | bf16 | fp32. auto = bf16 autocast on CUDA and on CPUs with native bf16
                          # (avx512_bf16 or amx_bf16 in /proc/cpuinfo), fp32 elsewhere (mps included)
compile = "auto"          # torch.compile the model: auto (CUDA only; on CPU it does not pay) | true | false
eval_batch_size = 1024    # test images per forward pass
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/vit-<dataset>-<init>-seed<seed>[-<hash of the other changed keys>]
resume = False            # continue from <out_dir>/ckpt.pt (or plot it, with --plot)
stop_epoch = 0            # end this invocation after this epoch (0 = run to the end); resume later
benchmark = False         # time forward+backward+step on synthetic input, print img/s, exit
plot = False              # write PNG figures of the init (or, with --resume, of the checkpoint), exit
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (bool, int, float, str))]
# -----------------------------------------------------------------------------------------------
# model


@dataclass
class ViTConfig:
    image_size: int = 32
    patch_size: int = 2
    in_channels: int = 3
    num_classes: int = 10
    width: int = 192
    depth: int = 12
    heads: int = 3
    mlp_ratio: int = 4
    pos_emb: str = "sinusoidal"   # sinusoidal | learned
    pos_scale: float = 1.0
    pos_trainable: bool = True

    def __post_init__(self):
        if self.width % self.heads != 0:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}: choose a number of "
                             f"heads that divides the width, or a width that is a multiple of {self.heads}")
        if self.image_size % self.patch_size != 0:
            raise ValueError(f"image_size {self.image_size} is not divisible by patch_size {self.patch_size}: "
                             f"choose a patch size that divides it (e.g. 2, 4 or 8 for 32x32 images)")
        if self.pos_emb not in ("sinusoidal", "learned"):
            raise ValueError(f"unknown pos_emb {self.pos_emb!r}: use 'sinusoidal' or 'learned'")

    @property
    def num_tokens(self):
        return (self.image_size // self.patch_size) ** 2 + 1  # patches + class token


def sinusoidal_embeddings(n, d):
    """Vaswani et al. 2017: P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))."""
    position = torch.arange(n, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    P = torch.zeros(n, d, dtype=torch.float64)
    P[:, 0::2] = torch.sin(position * freq)
    P[:, 1::2] = torch.cos(position * freq)[:, : d // 2]
    return P.float()


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        # one fused Linear; rows: q (head 0, head 1, ...), then k, then v, as timm's qkv / nanoGPT's c_attn
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b n (three h k) -> three b h n k", three=3, h=self.heads)
        y = F.scaled_dot_product_attention(q, k, v)  # (B, h, N, k); softmax(q k^T / sqrt(k)) v
        return self.proj(rearrange(y, "b h n k -> b n (h k)"))



class MLP(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = MLP(width, mlp_ratio * width)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))  # pre-norm, so attention sees X after LayerNorm (Sec. 4, eq 8)
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.patch_embed = nn.Linear(c.in_channels * c.patch_size ** 2, c.width)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.width))
        # position embeddings P (N, d), class token at index 0, patches in raster order after it:
        # 1D sinusoids over the token index (our choice; the paper does not say 1D or 2D)
        pos = torch.zeros(1, c.num_tokens, c.width)
        if c.pos_trainable:
            self.pos_embed = nn.Parameter(pos)
        else:
            self.register_buffer("pos_embed", pos)
        self.blocks = nn.ModuleList([Block(c.width, c.heads, c.mlp_ratio) for _ in range(c.depth)])
        self.norm = nn.LayerNorm(c.width)
        self.head = nn.Linear(c.width, c.num_classes)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """The default init (timm's ViT), before any mimetic init:

        | tensor                          | init                                                    |
        |---------------------------------|---------------------------------------------------------|
        | patch_embed.weight, .bias       | PyTorch default U(+-1/sqrt(fan_in)), as timm's Conv2d    |
        | every other Linear weight       | truncated normal, std 0.02 (timm)                        |
        | every other Linear bias         | 0                                                       |
        | cls_token                       | normal, std 1e-6 (timm)                                 |
        | pos_embed (sinusoidal)          | pos_scale * sinusoids (Sec. 5.1, Fig. 4)                |
        | pos_embed (learned)             | pos_scale * truncated normal, std 0.02 (timm)           |
        | LayerNorm weight, bias          | 1, 0                                                    |
        """
        c = self.config
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear) and name != "patch_embed":
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.cls_token, std=1e-6)
        if c.pos_emb == "sinusoidal":
            P = sinusoidal_embeddings(c.num_tokens, c.width)[None]
        else:
            P = nn.init.trunc_normal_(torch.empty(1, c.num_tokens, c.width), std=0.02)
        self.pos_embed.copy_(c.pos_scale * P)

    def embed(self, x):
        p = self.config.patch_size
        x = rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=p, p2=p)  # (B, N-1, p*p*C)
        x = self.patch_embed(x)                                                 # (B, N-1, d)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)    # (B, N, d)
        return x + self.pos_embed

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))  # classify from the class token


# -----------------------------------------------------------------------------------------------
# mimetic initialization (Sec. 4). Depends on torch alone: copy this function into your own model.

@torch.no_grad()
def mimetic_init_(qkv_weight, proj_weight, num_heads, alpha1=0.7, beta1=0.7, alpha2=0.4, beta2=0.4,
                  generator=None, vo_sign=-1, init_qk=True, init_vo=True):
    """Mimetic init (Trockman & Kolter 2023, Sec. 4) of one self-attention layer, in place.

    | product, as the layer applies it | target                                          | eqs        |
    |----------------------------------|-------------------------------------------------|------------|
    | W_V W_proj (d x d, one per layer) | a2 Z2 - b2 I, exactly (up to float rounding)    | 2, 3, 4    |
    | W_Q^h W_K^h^T (d x d, per head h) | best rank-k approximation of a1 Z1^h + b1 I     | 1, 5, 6, 7 |

    Z1^h (afresh for every head) and Z2 have i.i.d. N(0, 1/d) entries, as the paper says for both.
    The rank-k truncation (Eckart-Young) weakens the diagonal: mean about 0.39, not 0.7, for
    a1 = b1 = 0.7 and k = d/3.

    qkv_weight: (3d, d), the weight of a fused nn.Linear(d, 3d): rows q, then k, then v, each head a
        contiguous block of k = d / num_heads rows (timm `qkv`, nanoGPT `c_attn`,
        nn.MultiheadAttention `in_proj_weight`). Other layouts: README, "Use it in your own model".
    proj_weight: (d, d), the weight of the output projection nn.Linear(d, d).
    nn.Linear computes x @ weight.T, so in the paper's row-vector notation (q = x W_Q) the q rows of
    head h hold (W_Q^h)^T, the v rows hold W_V^T, and proj_weight holds eq 4's W_proj.
    vo_sign=+1 targets a2 Z2 + b2 I (Table 2, "W_V W_proj ~ +cI"); init_qk / init_vo = False leaves
    those weights as they are (Table 2, "init only W_V, W_proj" / "only W_Q, W_K").
    Biases are not touched (the paper speaks only of weights). With a generator the draws are, in
    order, Z1 of head 0, 1, ..., then Z2, whatever is initialised; noise and SVDs are float64 on the
    generator's device, then cast to the weights' dtype.
    """
    d = proj_weight.shape[0]
    if proj_weight.shape != (d, d) or qkv_weight.shape != (3 * d, d):
        raise ValueError(f"expected qkv_weight (3d, d) and proj_weight (d, d) in nn.Linear's (out, in) layout, "
                         f"rows q, k, v; got {tuple(qkv_weight.shape)} and {tuple(proj_weight.shape)}. For a "
                         f"transposed (Conv1D) or split q/k/v layout see README.md, 'Use it in your own model'")
    if d % num_heads != 0:
        raise ValueError(f"width {d} is not divisible by num_heads {num_heads}")
    for name, value in (("alpha1", alpha1), ("beta1", beta1), ("alpha2", alpha2), ("beta2", beta2)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}={value} is outside [0, 1], the range the paper defines (Sec. 4)")
    k = d // num_heads
    dev = generator.device if generator is not None else torch.device("cpu")
    eye = torch.eye(d, dtype=torch.float64, device=dev)

    def Z():  # Z ~ N(0, I/d): entries with variance 1/d (Sec. 4, below eq 2)
        return torch.randn(d, d, generator=generator, dtype=torch.float64, device=dev) / math.sqrt(d)

    Z1 = [Z() for _ in range(num_heads)]  # "we resample [the query/key noise] for each head" (Sec. 4)
    Z2 = Z()

    # value/projection, eqs 2-4. Printed with index 1 and "+ b I", the indices of eqs 3-4 and 5-7 swapped
    if init_vo:
        U, S, Vh = torch.linalg.svd(alpha2 * Z2 + vo_sign * beta2 * eye)  # eq 3: a2 Z2 - b2 I = U S V^T
        W_V = U * S.sqrt()                                     # eq 4: W_V = U S^(1/2) (print: U S, a typo)
        W_proj = Vh.T * S.sqrt()                               # eq 4: W_proj = V S^(1/2), so W_V W_proj^T = U S V^T
        qkv_weight[2 * d:] = W_V.T                             # v rows hold W_V^T
        proj_weight.copy_(W_proj)                              # the layer applies x W_V W_proj^T: eq 2's product
    # query/key, eqs 1 and 5-7 (printed with index 2)
    if init_qk:
        for h in range(num_heads):
            # eq 5: a1 Z1 + b1 I = U S V^T, per head. With a1 = 0 (the language setting, Sec. 7) this is
            # b1 I, whose SVD is not unique: torch's CPU SVD (LAPACK) returns U = V = I, so every head gets
            # W_Q = W_K = sqrt(b1) I[:, :k], the same first k coordinates. We keep eqs 5-7 literal.
            U, S, Vh = torch.linalg.svd(alpha1 * Z1[h] + beta1 * eye)
            W_Q = U[:, :k] * S[:k].sqrt()                      # eq 6: W_Q = U[:, :k] S[:k, :k]^(1/2)   (d, k)
            W_K = Vh[:k].T * S[:k].sqrt()                      # eq 7: W_K = V[:, :k] S[:k, :k]^(1/2); V = Vh^T
            qkv_weight[h * k:(h + 1) * k] = W_Q.T              # q rows of head h hold W_Q^T
            qkv_weight[d + h * k:d + (h + 1) * k] = W_K.T      # k rows of head h hold W_K^T


@torch.no_grad()
def simple_init_(qkv_weight, proj_weight, num_heads, generator=None):
    """Sec. 4's "simplest technique", in place, same weight layout and draw order as mimetic_init_:
    per head W_Q^h = W_K^h = Z_h (d x k, N(0, 1/k) entries), so W_Q^h W_K^h^T = Z_h Z_h^T; and W_V = Z,
    W_proj = -Z (d x d, N(0, 1/d)), so the layer applies W_V W_proj^T = -Z Z^T. Fig. 3: however Z is
    scaled, noise and diagonal keep one ratio, which is why the paper uses mimetic_init_ instead."""
    d = proj_weight.shape[0]
    k = d // num_heads
    dev = generator.device if generator is not None else torch.device("cpu")
    for h in range(num_heads):
        Z_h = torch.randn(d, k, generator=generator, dtype=torch.float64, device=dev) / math.sqrt(k)
        qkv_weight[h * k:(h + 1) * k] = Z_h.T                  # q rows of head h hold W_Q^T
        qkv_weight[d + h * k:d + (h + 1) * k] = Z_h.T          # k rows of head h hold W_K^T = W_Q^T
    Z = torch.randn(d, d, generator=generator, dtype=torch.float64, device=dev) / math.sqrt(d)
    qkv_weight[2 * d:] = Z.T                                   # v rows hold W_V^T
    proj_weight.copy_(-Z)                                      # W_proj = -Z


INITS = ("mimetic", "default", "qk", "vo", "simple")


@torch.no_grad()
def init_attention_(model, init, alpha1, beta1, alpha2, beta2, vo_sign=-1, generator=None):
    """Mimetic init of every block's attention (after the default init, before torch.compile).

    init: mimetic (both products) | qk (only W_Q, W_K) | vo (only W_V, W_proj) | default (none): the
    arms of Table 2. Every arm draws the same noise, so an ablation shares its draws with the full init.
    simple: Sec. 4's simplest technique (simple_init_) instead.
    """
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}: use one of {', '.join(INITS)}")
    if init == "default":
        return
    for block in model.blocks:
        if init == "simple":
            simple_init_(block.attn.qkv.weight, block.attn.proj.weight, block.attn.heads, generator)
            continue
        mimetic_init_(block.attn.qkv.weight, block.attn.proj.weight, block.attn.heads, alpha1, beta1, alpha2,
                      beta2, generator, vo_sign, init_qk=init != "vo", init_vo=init != "qk")


# -----------------------------------------------------------------------------------------------
# data: each dataset lives whole on the training device as uint8 (N, 3, H, W) (load_dataset, at the end
# of the file), augmented there per sample at its own size with torchvision's RandAugment ops (RA_OPS)
# and Cutout, so that they keep their CIFAR meaning, then resized to image_size (Table 7)
DATASETS = {  # name: (folder, classes, image side)
    "cifar10": ("cifar-10-batches-py", 10, 32),
    "cifar100": ("cifar-100-python", 100, 32),
    "svhn": ("", 10, 32),
    "tinyimagenet": ("tiny-imagenet-200", 200, 64),  # Sec. 5.3
}
MEAN_STD = {"cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
            "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
            "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)),
            "tinyimagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))}  # ImageNet's (our choice: a subset)


def norm_stats(name, dev):
    mean, std = MEAN_STD[name]
    return (torch.tensor(mean, device=dev).view(1, 3, 1, 1), torch.tensor(std, device=dev).view(1, 3, 1, 1))


def augment(x, gen, cfg, mean, std):
    """uint8 (B, 3, H, W) on any device -> normalised float (B, 3, H, W): flip, RandAugment, Cutout.
    All randomness comes from `gen`, a CPU generator, so a resumed run draws the same numbers."""
    B, _, H, W = x.shape
    if cfg.hflip:
        flip = (torch.rand(B, generator=gen) < 0.5).to(x.device)
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    signed = torch.tensor([op in RA_SIGNED for op in RA_OPS])
    x = x.clone()  # the groups below are written in place
    for _ in range(cfg.ra_n):
        op = torch.randint(len(RA_OPS), (B,), generator=gen)
        neg = torch.randint(2, (B,), generator=gen).bool() & signed[op]  # a random sign for signed ops
        group = op * 2 + neg  # (op, sign) of each sample
        for g in group.unique().tolist():
            idx = (group == g).nonzero().squeeze(1).to(x.device)
            o, s = divmod(g, 2)
            x[idx] = _ra_apply(x[idx], RA_OPS[o], -cfg.ra_m if s else cfg.ra_m)
    x = (x.float() / 255.0 - mean) / std
    if cfg.cutout > 0:  # DeVries & Taylor 2017: zero a square (clipped at the border) centred anywhere
        cy, cx = (torch.randint(n, (B,), generator=gen).to(x.device) for n in (H, W))
        ys, xs = torch.arange(H, device=x.device), torch.arange(W, device=x.device)
        top, left = cy - cfg.cutout // 2, cx - cfg.cutout // 2
        inside_y = (ys[None] >= top[:, None]) & (ys[None] < top[:, None] + cfg.cutout)  # (B, H)
        inside_x = (xs[None] >= left[:, None]) & (xs[None] < left[:, None] + cfg.cutout)  # (B, W)
        hole = inside_y[:, :, None] & inside_x[:, None, :]  # (B, H, W)
        x = x.masked_fill(hole[:, None], 0.0)
    return x


def resize(x, size):
    """Normalised float (B, 3, H, W) -> (B, 3, size, size), bilinear (our choice: the paper does not say
    how Table 7's 64-256 pixel inputs were made from CIFAR); the batch itself when already that size."""
    if x.shape[-2:] == (size, size):
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", antialias=x.shape[-1] > size)


# -----------------------------------------------------------------------------------------------
# evaluation

@torch.no_grad()
def evaluate(model, x, y, mean, std, batch, amp):
    """Full pass over (x, y) without augmentation: (mean loss, accuracy in %)."""
    model.eval()
    loss, correct = torch.zeros((), device=x.device), torch.zeros((), device=x.device)
    for i in range(0, len(x), batch):
        xb, yb = resize((x[i:i + batch].float() / 255.0 - mean) / std, model.config.image_size), y[i:i + batch]
        with amp:
            logits = model(xb)
        loss += F.cross_entropy(logits.float(), yb, reduction="sum")
        correct += (logits.argmax(-1) == yb).sum()
    model.train()
    return loss.item() / len(x), 100.0 * correct.item() / len(x)


# -----------------------------------------------------------------------------------------------
# schedule (our choice: the paper gives none)

def get_lr(step, total_steps, warmup_steps, peak):
    """Linear warmup to `peak` over warmup_steps, then cosine decay to 0 at total_steps."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total_steps - warmup_steps)))


# -----------------------------------------------------------------------------------------------
# training

def train(model, data, cfg, dev, amp, ckpt=None):
    """AdamW (Sec. 5.1) with the schedule above; evaluates and checkpoints after every epoch. Returns the
    per-epoch history, or None when stopped early by --stop_epoch."""
    train_x, train_y, test_x, test_y = data
    mean, std = norm_stats(cfg.dataset, dev)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay, dev)
    steps_per_epoch = len(train_x) // cfg.batch_size  # the last partial batch is dropped (fixed shapes)
    total_steps = cfg.epochs * steps_per_epoch
    warmup_steps = max(1, round(cfg.warmup_frac * total_steps))
    gen = torch.Generator().manual_seed(cfg.seed)  # all data randomness: order, flips, RandAugment, Cutout
    history, elapsed = restore(ckpt, opt, gen, dev) if ckpt else ([], 0.0)
    net = torch.compile(model) if use_compile(cfg.compile, dev) else model  # checkpoints save `model`
    ckpt_path, start_epoch = os.path.join(cfg.out_dir, "ckpt.pt"), len(history)
    step, t_start = start_epoch * steps_per_epoch, time.perf_counter()
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        perm = torch.randperm(len(train_x), generator=gen).to(dev)
        meter = Meter(dev)
        for i in range(steps_per_epoch):
            idx = perm[i * cfg.batch_size:(i + 1) * cfg.batch_size]
            xb, yb = resize(augment(train_x[idx], gen, cfg, mean, std), model.config.image_size), train_y[idx]
            lr = get_lr(step, total_steps, warmup_steps, cfg.lr)
            for group in opt.param_groups:
                group["lr"] = lr
            with amp:
                logits = net(xb)
            loss = F.cross_entropy(logits.float(), yb)  # the loss in fp32, whatever the precision
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            meter.add(loss, (logits.argmax(-1) == yb).sum(), len(yb))
            if step % cfg.log_interval == 0 or i == steps_per_epoch - 1:
                meter.log(f"step {step}/{total_steps} | epoch {epoch}", lr, "img/s", ckpt_path)
        train_loss, train_acc = meter.epoch_means()
        test_loss, test_acc = evaluate(net, test_x, test_y, mean, std, cfg.eval_batch_size, amp)
        if not math.isfinite(test_loss):  # never checkpoint weights that evaluate to NaN
            stop_on_nan("test loss", f"epoch {epoch}", ckpt_path)
        elapsed_now = round(elapsed + time.perf_counter() - t_start, 1)
        history.append({"epoch": epoch, "train_loss": train_loss, "train_acc": train_acc,
                        "test_loss": test_loss, "test_acc": test_acc, "elapsed_s": elapsed_now})
        print(f"epoch {epoch}/{cfg.epochs} | train loss {train_loss:.4f} | test loss {test_loss:.4f} | "
              f"test acc {test_acc:.2f} | {elapsed_now / 60:.1f} min")
        save_checkpoint(ckpt_path, {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                                    "history": history, "elapsed": elapsed_now, **rng_states(gen, dev),
                                    "config": vars(cfg)})
        if epoch == cfg.stop_epoch and epoch < cfg.epochs:
            print(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None
    return history


def make_optimizer(model, lr, weight_decay, dev):
    """AdamW; weight decay on matrices only, not on biases, norms, class token or position embeddings
    (our choice, as nanoGPT: decaying the position embeddings would erode the sinusoids)."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and n not in ("pos_embed", "cls_token") else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999),
                             fused=dev.type == "cuda")


# -----------------------------------------------------------------------------------------------
# main

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_config(argv)
    dev = pick_device(cfg.device)
    amp, prec = autocast_for(dev, cfg.precision)  # bf16 autocast or fp32; the loss is fp32 either way
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt"), cfg) if cfg.resume else None
    check_out_dir(cfg, ("ckpt.pt", "results.json"))

    # the model with its default init (timm's), then the mimetic init, before any torch.compile
    torch.manual_seed(cfg.seed)
    model = ViT(model_config(cfg))
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    model.to(dev)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{model.config.num_tokens} tokens, {hardware(dev)}, {prec}")
    if cfg.benchmark:
        return run_benchmark(cfg, model, dev, amp, prec)

    data = [t.to(dev) for t in load_dataset(cfg.dataset, cfg.data_dir)]
    if cfg.train_subset:
        data[0], data[1] = data[0][:cfg.train_subset], data[1][:cfg.train_subset]
    if len(data[0]) < cfg.batch_size:
        raise ValueError(f"{len(data[0])} training images but batch_size {cfg.batch_size}: lower --batch_size")
    if cfg.plot:
        return plot_figures(model, data[2][:64], cfg)

    try:
        history = train(model, data, cfg, dev, amp, ckpt)
    except KeyboardInterrupt:
        raise SystemExit(interrupted(cfg, argv))
    if history is None:
        return None
    results = {"config": vars(cfg), "model_config": asdict(model.config),
               "final_test_acc": history[-1]["test_acc"], "epochs_done": len(history), "history": history,
               "wall_time_s": history[-1]["elapsed_s"], "hardware": hardware(dev), "precision": prec,
               "command": shlex.join(["python", "mimetic_vit.py", *argv])}
    write_results(cfg.out_dir, results)
    print(f"final test accuracy {results['final_test_acc']:.2f} | wrote {os.path.join(cfg.out_dir, 'results.json')}")
    return results


# ===============================================================================================
# appendix: not needed to follow the paper. Argument parsing and --help, checks of the config,
# checkpoints, devices and precision, downloads and offline messages, figures, benchmark.

# what each key accepts, checked before any work (the choices of string keys are listed in the config)
RULES = [(k, lambda v: v > 0, "must be positive") for k in
         ("width", "heads", "patch_size", "mlp_ratio", "epochs", "batch_size", "lr", "eval_batch_size",
          "log_interval")] + \
        [(k, lambda v: v >= 0, "must be 0 or more") for k in
         ("train_subset", "ra_n", "cutout", "weight_decay", "grad_clip", "stop_epoch", "pos_scale")] + [
    ("image_size", lambda v: v >= 0, "must be positive (or 0: the dataset's own size)"),
    ("depth", lambda v: v >= 1, "must be at least 1 (a Transformer needs a block for the init to act on)"),
    *[(k, lambda v: 0 <= v <= 1, "is outside [0, 1], the range the paper defines (Sec. 4)")
      for k in ("alpha1", "beta1", "alpha2", "beta2")],
    ("ra_m", lambda v: 0 <= v <= 30, "must be in 0..30 (RandAugment's 31 magnitude bins)"),
    ("warmup_frac", lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    ("vo_sign", lambda v: v in (-1, 1), "must be -1 (the paper) or +1 (Table 2's +cI ablation)"),
    ("init", lambda v: v in INITS, f"must be one of {', '.join(INITS)}"),
    ("dataset", lambda v: v in DATASETS, f"must be one of {', '.join(DATASETS)}"),
    ("pos_emb", lambda v: v in ("sinusoidal", "learned"), "must be sinusoidal or learned"),
]
# keys that may differ between a run and the checkpoint it resumes; they do not name a run's folder either
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir",
               "out_dir", "benchmark", "plot"}
NAME_KEYS = ("dataset", "init", "seed")  # spelled out in the default out_dir
PROGRAM = "vit"


def model_config(cfg):
    _, classes, native = DATASETS[cfg.dataset]
    return ViTConfig(image_size=cfg.image_size or native, patch_size=cfg.patch_size, num_classes=classes,
                     width=cfg.width, depth=cfg.depth, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio,
                     pos_emb=cfg.pos_emb, pos_scale=cfg.pos_scale, pos_trainable=cfg.pos_trainable)
RULES += [("precision", lambda v: v in ("auto", "bf16", "fp32"), "must be auto, bf16 or fp32"),
          ("compile", lambda v: v.lower() in ("auto", "true", "false"), "must be auto, true or false")]


def parse_config(argv):
    """The config globals above, overridden by --key=value, checked before any work."""
    defaults = {k: globals()[k] for k in config_keys}
    cfg = SimpleNamespace(**parse_args(argv, defaults)[0])
    check_config(cfg)
    model_config(cfg)  # shape errors (width and heads, image and patch size) now, not after loading data
    cfg.out_dir = cfg.out_dir or default_out_dir(cfg, defaults)
    return cfg


def parse_args(argv, defaults):
    """--key=value over `defaults`; values take the default's type; unknown keys are errors; -h or --help
    prints the config block and exits. Returns (config dict, the set of keys given)."""
    if "-h" in argv or "--help" in argv:
        print_help()
        raise SystemExit(0)
    cfg, given = dict(defaults), set()
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            raise ValueError(f"bad argument {arg!r}: use --key=value, e.g. --epochs=10 (--help lists the keys)")
        key, val = arg[2:].split("=", 1)
        if key not in defaults:
            raise ValueError(f"unknown config key {key!r}; known keys: {', '.join(defaults)}")
        kind = type(defaults[key])
        try:
            if kind is bool and val.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            cfg[key] = val.lower() in ("true", "1") if kind is bool else kind(val)
        except ValueError:
            raise ValueError(f"--{key}={val}: expected a {kind.__name__} like the default {defaults[key]!r}") from None
        given.add(key)
    return cfg, given


def print_help():
    """The config block of this file: every key with its default and the comment that says why."""
    with open(os.path.abspath(__file__), encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# config:"))
    end = next(i for i, line in enumerate(lines) if line.startswith("config_keys ="))
    print(f"usage: python {os.path.basename(__file__)} [--key=value ...]\n")
    print("\n".join(lines[start:end]))


def check_config(cfg):
    """Every rule in RULES, before any work: a bad value is a one-line error naming the key."""
    for key, ok, want in RULES:
        if not ok(getattr(cfg, key)):
            raise ValueError(f"--{key}={getattr(cfg, key)} {want}")


def default_out_dir(cfg, defaults):
    """out/<program>-<dataset>-<init>-seed<seed>, plus a short hash of the other keys that differ from
    their defaults, so that two runs that differ in any setting never share a folder."""
    changed = sorted((k, v) for k, v in vars(cfg).items()
                     if k not in RESUME_FREE and k not in NAME_KEYS and v != defaults[k])
    name = f"{PROGRAM}-{cfg.dataset}-{cfg.init}-seed{cfg.seed}"
    if changed:
        name += "-" + hashlib.sha1(repr(changed).encode()).hexdigest()[:8]
    return os.path.join("out", name)


def check_out_dir(cfg, products):
    """Before any work: out_dir is a folder that can be written, and a new run never replaces the files of
    another run (products: the files a run leaves there)."""
    path = cfg.out_dir
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"out_dir {path} is a file, not a folder: pass another --out_dir")
    if cfg.benchmark or getattr(cfg, "sample", 0):
        return  # these modes write nothing there
    found = [f for f in products if os.path.exists(os.path.join(path, f))]
    if found and not cfg.resume and not cfg.plot:
        raise ValueError(f"{path} already holds {', '.join(found)} of another run: continue it with "
                         f"--resume=True, or pass another --out_dir (or delete {path} to start afresh)")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write-test-{os.getpid()}")
        open(probe, "w").close()
        os.remove(probe)
    except OSError as e:
        raise ValueError(f"cannot write to out_dir {path} ({e.strerror}): pass a writable --out_dir") from None


def check_resumable(saved, cfg, path):
    diff = [f"{k}={saved.get(k)!r} there, {getattr(cfg, k)!r} here" for k in config_keys
            if k not in RESUME_FREE and saved.get(k, getattr(cfg, k)) != getattr(cfg, k)]
    if diff:
        raise ValueError(f"checkpoint {path} is from another config ({'; '.join(diff)}): pass the same "
                         f"settings to resume, or a new --out_dir to start afresh")


def read_checkpoint(path):
    """A checkpoint written by this program; an unreadable one is a one-line error that changes nothing."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        ckpt["config"]
    except Exception as e:
        why = (str(e).splitlines() or [""])[0][:100]
        raise ValueError(f"checkpoint {path} cannot be read ({type(e).__name__}: {why}); nothing was changed. "
                         f"Start afresh with another --out_dir, or delete {path}") from None
    return ckpt


def load_checkpoint(path, cfg):
    """The checkpoint at path, for --resume; missing, unreadable or made with another config is an error
    that changes nothing."""
    if not os.path.exists(path):
        raise ValueError(f"--resume=True but there is no checkpoint at {path}: check --out_dir")
    ckpt = read_checkpoint(path)
    check_resumable(ckpt["config"], cfg, path)
    return ckpt


def save_checkpoint(path, state):
    """Atomic: a temp file, then a rename, so a crash or Ctrl-C leaves the old file or the new one."""
    tmp = path + ".tmp"
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_results(folder, results):
    path = os.path.join(folder, "results.json")
    with open(path + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)


def rng_states(gen, dev):
    return {"data_rng": gen.get_state(), "cpu_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None}


def restore(ckpt, opt, gen, dev):
    """Optimizer and RNG states from a checkpoint, so that the resumed run continues bit for bit."""
    opt.load_state_dict(ckpt["optimizer"])
    gen.set_state(ckpt["data_rng"])
    torch.set_rng_state(ckpt["cpu_rng"])
    if dev.type == "cuda" and ckpt.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(ckpt["cuda_rng"], dev)
    print(f"resumed after epoch {ckpt['epoch']}")
    return ckpt["history"], ckpt["elapsed"]


class Meter:
    """Sums of (loss x n, correct, n) over the epoch and over the log interval, kept on the device so that
    the training loop waits for them only at log lines; under DDP they are summed over the processes."""

    def __init__(self, dev, metric=None):
        self.epoch, self.interval = torch.zeros(3, device=dev), torch.zeros(3, device=dev)
        self.metric, self.t = metric, time.perf_counter()

    def add(self, loss, correct, n):
        s = torch.stack([loss.detach() * n, correct.to(loss.dtype), torch.full_like(loss.detach(), n)])
        self.epoch += s
        self.interval += s

    @staticmethod
    def read(sums):
        """(mean loss, accuracy in %, count), waiting for the device once."""
        sums = sums.clone()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(sums)
        loss, hits, n = sums.tolist()
        return loss / n, 100 * hits / n, n

    def log(self, where, lr, unit, ckpt_path):
        loss, acc, n = self.read(self.interval)
        if not math.isfinite(loss):
            stop_on_nan("training loss", where, ckpt_path)
        now = time.perf_counter()
        extra = f"{self.metric(loss)} | " if self.metric else ""
        print(f"{where} | loss {loss:.4f} | {extra}acc {acc:.1f} | lr {lr:.1e} | {n / (now - self.t):.0f} {unit}")
        self.interval.zero_()
        self.t = now

    def epoch_means(self):
        return self.read(self.epoch)[:2]


def stop_on_nan(what, where, ckpt_path):
    kept = f"the last good checkpoint ({ckpt_path}) is kept" if os.path.exists(ckpt_path) else "no checkpoint yet"
    raise SystemExit(f"error: the {what} is not finite ({where}); stopping. {kept}. Try a lower --lr "
                     f"(with --grad_clip > 0) in a new --out_dir.")


def interrupted(cfg, argv):
    """After Ctrl-C: one line saying where the last checkpoint is and the exact command that resumes it."""
    path = os.path.join(cfg.out_dir, "ckpt.pt")
    if os.path.exists(path):
        args = [a for a in argv if not a.startswith(("--resume=", "--out_dir="))]
        cmd = shlex.join(["python", os.path.basename(__file__), *args, f"--out_dir={cfg.out_dir}", "--resume=True"])
        print(f"interrupted: the last checkpoint is {path}; resume with: {cmd}", file=sys.stderr)
    else:
        print(f"interrupted before the first checkpoint: nothing to resume in {cfg.out_dir}", file=sys.stderr)
    return 130


def pick_device(name):
    """--device: "" picks cuda, then mps, then cpu; a device that is not here is a one-line error."""
    mps = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    name = name or ("cuda" if torch.cuda.is_available() else "mps" if mps else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device={name} is not a device name: use cpu, cuda, cuda:N or mps") from None
    here = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": mps}
    if not here.get(dev.type) or (dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count()):
        usable = ", ".join(k for k, v in here.items() if v)
        raise ValueError(f"--device={name} is not available on this machine: use one of {usable} (or leave it empty)")
    return dev


def cpu_has_bf16():
    """Whether the CPU has native bf16 matrix instructions (x86 avx512_bf16 or AMX), from the flags in
    /proc/cpuinfo; False where there is none (macOS, Windows), so that auto stays fp32 there."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def autocast_for(dev, precision):
    """(autocast context, name) for --precision: bf16 autocast, or fp32 without autocast. auto: bf16 on CUDA
    and on CPUs with native bf16, fp32 elsewhere (MPS included, where fp32 is what every PyTorch supports)."""
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for any fp32 matmul left outside autocast
        torch.backends.cudnn.allow_tf32 = True
    auto = dev.type == "cuda" or (dev.type == "cpu" and cpu_has_bf16())
    if precision == "fp32" or (precision == "auto" and not auto):
        return nullcontext(), "fp32"
    return torch.autocast(dev.type, dtype=torch.bfloat16), "bf16 autocast"


def use_compile(value, dev):
    """--compile: auto compiles on CUDA only (on a CPU it did not pay in our measurements; README, Speed)."""
    return value.lower() == "true" or (value.lower() == "auto" and dev.type == "cuda")


def hardware(dev):
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}"
    name = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    return f"{dev.type.upper()} {name} x{os.cpu_count()} threads {torch.get_num_threads()}, torch {torch.__version__}"


def _online(url, timeout=5.0):
    """Whether the download host answers at all, so that a machine without network fails at once."""
    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def download_if_missing(name, root, folder, files):
    """<root>/<folder>/, downloaded and unpacked with torchvision when a file is missing and the host answers."""
    import torchvision  # only here: the model and the init need torch alone
    base = os.path.join(root, folder)
    missing = [f for f in files if not os.path.exists(os.path.join(base, f))]
    if missing:
        tv = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
        if not _online(tv.url):
            raise SystemExit(
                f"error: {name} not found: {base}/ lacks {', '.join(missing)}, and the download host cannot "
                f"be reached (no network?). Put the official python-version files ({tv.filename}, unpacked) "
                f"in {base}/, or pass --data_dir=<folder that holds {folder}/>. Without internet, "
                f"README.md shows how to make a local copy.")
        tv(root, train=True, download=True)  # downloads and unpacks into <root>/<folder>/
    return base


def unpickle(path, key):
    """One file of CIFAR's python layout; a truncated or foreign file is a one-line error that names it."""
    try:
        with open(path, "rb") as f:
            d = pickle.load(f, encoding="latin1")  # works for the official files and hand-made copies
        ok = d["data"].ndim == 2 and d["data"].shape[1] == 3 * 32 * 32 and len(d["data"]) == len(d[key])
    except Exception as e:
        ok, why = False, f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:80]}"
    else:
        why = f"data {d['data'].shape}, {len(d[key])} labels"
    if not ok:
        raise ValueError(f"{path} is not a CIFAR batch file ({why}): replace it with the official one, or "
                         f"delete the folder to download it again")
    return d


def load_svhn(root):
    """SVHN's official train_32x32.mat and test_32x32.mat in root, read with scipy as torchvision reads them
    (without its md5 check, so copies work), downloaded with torchvision when missing and online."""
    try:
        import scipy.io
    except ImportError:
        raise SystemExit("error: SVHN's .mat files are read with scipy, which is not installed: pip install scipy")
    paths = [os.path.join(root, f"{split}_32x32.mat") for split in ("train", "test")]
    if not all(os.path.exists(p) for p in paths):
        import torchvision
        url = torchvision.datasets.SVHN.split_list["train"][0]
        if not _online(url):
            raise SystemExit(f"error: SVHN not found in {root}/ and its download host cannot be reached. "
                             f"Put train_32x32.mat and test_32x32.mat (from {url.rsplit('/', 1)[0]}/) "
                             f"into {root}/, or pass --data_dir=<folder that holds them>.")
        for split in ("train", "test"):
            torchvision.datasets.SVHN(root, split=split, download=True)
    out = []
    for path in paths:
        try:
            mat = scipy.io.loadmat(path)
            x = torch.from_numpy(mat["X"]).permute(3, 2, 0, 1).contiguous()  # (32, 32, 3, N) -> (N, 3, 32, 32)
            y = torch.from_numpy(mat["y"].astype("int64")).flatten() % 10    # the digit 0 is labelled 10
        except Exception as e:
            raise ValueError(f"{path} is not an SVHN .mat file ({type(e).__name__}): replace it with the "
                             f"official one") from None
        out += [x, y]
    return tuple(out)


TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"  # the archive the course publishes


def load_tinyimagenet(root):
    """<root>/tiny-imagenet-200/ (downloaded when missing and online), decoded once and cached as uint8
    tensors in <root>/tinyimagenet.cache.pt (delete it to decode again). Test set: the labelled val split."""
    base, cache = os.path.join(root, "tiny-imagenet-200"), os.path.join(root, "tinyimagenet.cache.pt")
    if os.path.exists(cache):
        try:
            return tuple(torch.load(cache, weights_only=True)["data"])
        except Exception as e:
            print(f"warning: the image cache {cache} cannot be read ({type(e).__name__}); decoding again")
    if not os.path.exists(os.path.join(base, "wnids.txt")):
        if not _online(TINY_IMAGENET_URL):
            raise SystemExit(f"error: tinyimagenet not found: {base}/ lacks wnids.txt, and the download host "
                             f"cannot be reached (no network?). Unpack {TINY_IMAGENET_URL} into {root}/, or pass "
                             f"--data_dir=<folder that holds tiny-imagenet-200/>.")
        from torchvision.datasets.utils import download_and_extract_archive
        download_and_extract_archive(TINY_IMAGENET_URL, root)
    t0 = time.perf_counter()
    data = decode_tinyimagenet(base)
    print(f"data: decoded {len(data[0]) + len(data[2]):,} Tiny ImageNet JPEGs in {time.perf_counter() - t0:.1f} s")
    try:
        save_checkpoint(cache, {"data": list(data)})
    except OSError as e:
        print(f"note: cannot write the image cache {cache} ({e.strerror}); the JPEGs are decoded on every run")
    return data


def decode_tinyimagenet(base):
    """(train_x, train_y, val_x, val_y): uint8 (N, 3, 64, 64), labels = line numbers in wnids.txt."""
    from torchvision.io import ImageReadMode, read_image
    with open(os.path.join(base, "wnids.txt")) as f:
        wnids = f.read().split()
    label = {w: i for i, w in enumerate(wnids)}
    train = [(os.path.join(base, "train", w, "images", f), label[w]) for w in wnids
             for f in sorted(os.listdir(os.path.join(base, "train", w, "images")))]
    with open(os.path.join(base, "val", "val_annotations.txt")) as f:  # file, wnid, bounding box; tabs
        rows = [line.split("\t") for line in f if line.strip()]
    val = [(os.path.join(base, "val", "images", r[0]), label[r[1]]) for r in rows]

    def read(items):  # some JPEGs are grayscale: ImageReadMode.RGB makes every image 3 channels
        x = torch.stack([read_image(path, ImageReadMode.RGB) for path, _ in items])
        return x, torch.tensor([y for _, y in items], dtype=torch.long)

    return (*read(train), *read(val))


# data: RandAugment (Cubuk et al. 2020) with torchvision's operations and magnitudes
# (torchvision.transforms.v2.RandAugment._AUGMENTATION_SPACE, 31 bins), applied per sample on the
# training device: each sample draws its own op and sign, and each (op, sign) group of the batch is
# transformed at once. The law of each image's transform is that of torchvision's RandAugment.
RA_OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
          "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]
RA_SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
             "Sharpness"}


def _ra_apply(x, op, m, bins=31):
    """One RandAugment op on a uint8 batch (B, C, H, W) at magnitude bin m (negated if m < 0), computed as
    torchvision does (v2.RandAugment: the magnitude is float32 linspace(0, top, bins)[m], then signed)."""
    from torchvision.transforms.v2 import functional as TF
    H, W = x.shape[-2:]
    top = {"ShearX": 0.3, "ShearY": 0.3, "TranslateX": 150.0 / 331.0 * W, "TranslateY": 150.0 / 331.0 * H,
           "Rotate": 30.0, "Brightness": 0.9, "Color": 0.9, "Contrast": 0.9, "Sharpness": 0.9}.get(op, 0.0)
    v = float(torch.linspace(0.0, top, bins)[abs(m)]) * (-1.0 if m < 0 else 1.0)
    shear = math.degrees(math.atan(v))
    ops = {
        "Identity": lambda: x,
        "ShearX": lambda: TF.affine(x, angle=0.0, translate=[0, 0], scale=1.0, shear=[shear, 0.0], center=[0, 0]),
        "ShearY": lambda: TF.affine(x, angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, shear], center=[0, 0]),
        "TranslateX": lambda: TF.affine(x, angle=0.0, translate=[int(v), 0], scale=1.0, shear=[0.0, 0.0]),
        "TranslateY": lambda: TF.affine(x, angle=0.0, translate=[0, int(v)], scale=1.0, shear=[0.0, 0.0]),
        "Rotate": lambda: TF.rotate(x, angle=v),
        "Brightness": lambda: TF.adjust_brightness(x, 1.0 + v),
        "Color": lambda: TF.adjust_saturation(x, 1.0 + v),
        "Contrast": lambda: TF.adjust_contrast(x, 1.0 + v),
        "Sharpness": lambda: TF.adjust_sharpness(x, 1.0 + v),
        "Posterize": lambda: TF.posterize(x, bits=int((8 - torch.arange(bins) / ((bins - 1) / 4)).round().int()[abs(m)])),
        "Solarize": lambda: TF.solarize(x, threshold=255.0 * float(torch.linspace(1.0, 0.0, bins)[abs(m)])),
        "AutoContrast": lambda: TF.autocontrast(x),
        "Equalize": lambda: TF.equalize(x),
    }
    return ops[op]()


def load_dataset(name, root):
    """Returns (train_x, train_y, test_x, test_y): uint8 (N, 3, H, W) and int64 (N,) CPU tensors."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: use one of {', '.join(DATASETS)}")
    if name == "svhn":
        return load_svhn(root)
    if name == "tinyimagenet":
        return load_tinyimagenet(root)
    folder = DATASETS[name][0]
    if name == "cifar10":
        train_files, test_files, key = [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "labels"
    else:
        train_files, test_files, key = ["train"], ["test"], "fine_labels"
    base = download_if_missing(name, root, folder, train_files + test_files)

    def read(files):  # the official python layout: pickled dicts of (N, 3072) uint8 rows and labels
        parts = [unpickle(os.path.join(base, f), key) for f in files]
        x = torch.cat([torch.as_tensor(p["data"], dtype=torch.uint8).reshape(-1, 3, 32, 32) for p in parts])
        y = torch.cat([torch.as_tensor(p[key], dtype=torch.long) for p in parts])
        return x, y

    return (*read(train_files), *read(test_files))


# figures (Fig. 1: weight products; Fig. 2: attention maps), with torchvision.utils, no matplotlib

def colorize(v, anchors):
    """Map values in [0, 1] (any shape) to RGB by linear interpolation between anchor colours."""
    a = torch.tensor(anchors, dtype=torch.float32)  # (K, 3)
    t = v.clamp(0, 1) * (len(a) - 1)
    i = t.floor().long().clamp(max=len(a) - 2)
    w = (t - i)[..., None]
    return ((1 - w) * a[i] + w * a[i + 1]).movedim(-1, -3)  # (..., 3, H, W)


DIVERGING = [(0.02, 0.19, 0.38), (0.26, 0.58, 0.76), (0.97, 0.97, 0.97), (0.84, 0.38, 0.30), (0.40, 0.0, 0.12)]
SEQUENTIAL = [(0.27, 0.00, 0.33), (0.23, 0.32, 0.55), (0.13, 0.57, 0.55), (0.37, 0.79, 0.38), (0.99, 0.91, 0.14)]


def weight_products(model):
    """Per layer: W_Q^h W_K^h^T for every head (h, d, d) and W_V W_proj (d, d), as the layer applies them."""
    qk, vo = [], []
    for block in model.blocks:
        W, P = block.attn.qkv.weight.detach().float().cpu(), block.attn.proj.weight.detach().float().cpu()
        d, h = P.shape[0], block.attn.heads
        Wq, Wk = rearrange(W[:d], "(h k) d -> h k d", h=h), rearrange(W[d:2 * d], "(h k) d -> h k d", h=h)
        qk.append(Wq.transpose(1, 2) @ Wk)  # W_Q^h W_K^h^T = (q rows)^T (k rows)
        vo.append(W[2 * d:].T @ P.T)        # W_V W_proj = (v rows)^T proj.weight^T
    return qk, vo


def attention_probs(attn, x):
    """The attention maps of one layer, computed explicitly (SDPA does not return them): (B, h, N, N)."""
    q, k, _ = rearrange(attn.qkv(x), "b n (three h k) -> three b h n k", three=3, h=attn.heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if getattr(attn, "causal", False):  # a language model's token i sees only tokens <= i
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1)


@torch.no_grad()
def attention_maps(model, x):
    """Attention probabilities of every layer, averaged over heads and the batch: (depth, N, N)."""
    x, maps = model.embed(x), []
    for block in model.blocks:
        maps.append(attention_probs(block.attn, block.norm1(x)).mean(dim=(0, 1)))
        x = block(x)
    return torch.stack(maps)


def save_figures(model, inputs, folder, clip=64, zoom=2):
    """Write qk.png (Fig. 1 layout: columns are layers, rows are heads), vo.png (one panel a layer) and
    attention.png (each layer's attention averaged over heads and `inputs`, one panel a layer).
    Weight panels are the top-left clip x clip corner with a symmetric diverging scale (blue < 0 < red)."""
    import torchvision.utils as vutils
    os.makedirs(folder, exist_ok=True)

    def panels(mats):  # (n, d, d) -> (n, 3, zoom*clip, zoom*clip), each scaled by its own max |value|
        m = mats[:, :clip, :clip]
        m = m / m.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)
        rgb = colorize((m + 1) / 2, DIVERGING)
        return rgb.repeat_interleave(zoom, -1).repeat_interleave(zoom, -2)

    qk, vo = weight_products(model)
    paths = [os.path.join(folder, f) for f in ("qk.png", "vo.png", "attention.png")]
    by_head = rearrange(torch.stack(qk), "layer head i j -> (head layer) i j")
    vutils.save_image(panels(by_head), paths[0], nrow=len(qk), padding=2, pad_value=1.0)
    vutils.save_image(panels(torch.stack(vo)), paths[1], nrow=len(vo), padding=2, pad_value=1.0)
    maps = attention_maps(model, inputs).float().cpu()  # (depth, N, N); for an LM causal: 0 above the diagonal
    maps = maps / maps.amax(dim=(1, 2), keepdim=True)
    vutils.save_image(colorize(maps, SEQUENTIAL), paths[2], nrow=min(6, len(maps)), padding=2, pad_value=1.0)
    return paths


def plot_figures(model, images, cfg):
    """--plot: the figures for 64 test images, of the fresh model (and Fig. 3) or (with --resume) of the
    checkpoint."""
    mean, std = norm_stats(cfg.dataset, images.device)
    folder = os.path.join(cfg.out_dir, "figures" if cfg.resume else "figures-init")
    paths = save_figures(model.eval(), resize((images.float() / 255.0 - mean) / std, model.config.image_size), folder)
    if not cfg.resume:  # Fig. 3 is about the constructions, not about this model
        paths.append(save_fig3(os.path.join(folder, "fig3.png")))
    print("wrote " + ", ".join(paths))
    return paths


# Fig. 3: which (noise weight, diagonal weight) each construction reaches, measured back from its products

def measure_alpha_beta(M):
    """(alpha, beta) of a d x d product read as alpha Z + beta I with Z ~ N(0, I/d): beta = the mean of the
    diagonal, alpha = the standard deviation of the off-diagonal entries times sqrt(d)."""
    d = M.shape[0]
    return (M[~torch.eye(d, dtype=torch.bool)].std() * math.sqrt(d)).item(), M.diagonal().mean().item()


def fig3_points(d=96, heads=3, steps=11, seed=0):
    """{(construction, rank): [(alpha, beta), ...]} measured from W_Q^h W_K^h^T of head 0, low rank
    (k = d / heads) and full rank (k = d, which is also simple_init_'s W_V W_proj up to sign): the SVD
    construction over a steps x steps grid of (a1, b1) in [0, 1]^2, the simple one with W_Q = W_K scaled
    by s, s^2 from 0 to 2 (the scale is its only free parameter). d = 96 with k = d/3, ViT-Tiny's ratio at
    half its width, keeps it to about a second (our choice)."""
    points = {}
    for rank, h in (("low rank", heads), ("full rank", 1)):
        qkv, proj = torch.zeros(3 * d, d, dtype=torch.float64), torch.zeros(d, d, dtype=torch.float64)
        grid = torch.linspace(0, 1, steps).tolist()
        points["svd", rank] = []
        for a in grid:
            for b in grid:
                mimetic_init_(qkv, proj, h, a, b, generator=torch.Generator().manual_seed(seed), init_vo=False)
                points["svd", rank].append(measure_alpha_beta(qkv[:d // h].T @ qkv[d:d + d // h]))
        simple_init_(qkv, proj, h, generator=torch.Generator().manual_seed(seed))
        qk = qkv[:d // h].T @ qkv[d:d + d // h]
        points["simple", rank] = [measure_alpha_beta(s2 * qk) for s2 in torch.linspace(0, 2, 4 * steps).tolist()]
    return points


def save_fig3(path, points=None, size=240, top=1.2):
    """Fig. 3 as a PNG: left low rank, right full rank; alpha (noise) to the right and beta (diagonal) up,
    both from 0 to `top`, grey lines at 0.5 and 1; the SVD construction in blue, the simple one in red."""
    import torchvision.utils as vutils
    points = points or fig3_points()
    px = lambda v: round(v / top * (size - 1))  # noqa: E731
    panels = []
    for rank in ("low rank", "full rank"):
        img = torch.ones(3, size, size)
        for v in (0.5, 1.0):
            img[:, :, px(v)] = 0.8
            img[:, size - 1 - px(v), :] = 0.8
        img[:, :, 0] = 0.0
        img[:, size - 1, :] = 0.0
        for construction, colour in (("svd", DIVERGING[1]), ("simple", DIVERGING[3])):
            for a, b in points[construction, rank]:
                x, y = px(a), size - 1 - px(b)
                if 0 <= x < size and 0 <= y < size:
                    img[:, max(0, y - 2):y + 3, max(0, x - 2):x + 3] = torch.tensor(colour)[:, None, None]
        panels.append(img)
    vutils.save_image(torch.stack(panels), path, nrow=2, padding=4, pad_value=1.0)
    return path


def train_flops_per_image(c):
    """Matmul FLOPs of forward + backward for one image (3x forward), ignoring norms and softmax."""
    n, d = c.num_tokens, c.width
    per_layer = 2 * n * (4 * d * d + 2 * c.mlp_ratio * d * d) + 2 * 2 * n * n * d
    return 3 * (c.depth * per_layer + 2 * (n - 1) * c.in_channels * c.patch_size ** 2 * d)


def time_steps(step, sync, steps=20, warmup=5):
    """Seconds per call of step() after warmup calls (compilation and allocation happen there)."""
    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t0) / steps


def run_benchmark(cfg, model, dev, amp, prec):
    """--benchmark: training steps on synthetic input (and the augmentation alone), one line of results."""
    c = model.config
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    net = torch.compile(model) if use_compile(cfg.compile, dev) else model
    x = torch.randn(cfg.batch_size, 3, c.image_size, c.image_size, device=dev)
    y = torch.randint(c.num_classes, (cfg.batch_size,), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step():
        with amp:
            loss = F.cross_entropy(net(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    ips = cfg.batch_size / time_steps(step, sync)
    gen, (mean, std) = torch.Generator().manual_seed(0), norm_stats(cfg.dataset, dev)
    side = DATASETS[cfg.dataset][2]
    xb = torch.randint(256, (cfg.batch_size, 3, side, side), dtype=torch.uint8, device=dev)
    aug_ips = cfg.batch_size / time_steps(lambda: resize(augment(xb, gen, cfg, mean, std), c.image_size), sync,
                                          steps=5, warmup=1)
    print(f"augmentation pipeline: {aug_ips:.0f} img/s")
    print(f"benchmark: {ips:.0f} img/s | {ips * train_flops_per_image(c) / 1e12:.2f} TFLOP/s (model matmuls) | "
          f"{hardware(dev)} | {prec} | compile {use_compile(cfg.compile, dev)} | width {c.width} depth {c.depth} "
          f"heads {c.heads} patch {c.patch_size} image {c.image_size} batch {cfg.batch_size}")
    return ips


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:
        raise SystemExit(f"error: {e}")
