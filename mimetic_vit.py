"""
Mimetic initialization of self-attention layers (Trockman & Kolter, ICML 2023, arXiv 2305.09828;
the authors released no code), on a Vision Transformer trained on CIFAR-10. Read it top to bottom
beside the paper: config -> ViT -> mimetic_init_ (Sec. 4, one equation a line, its typos named) ->
data -> evaluation -> schedule -> train() -> main(), then a short tail of machinery.

    python mimetic_vit.py                  # GPU: ViT-Tiny, 100 epochs, CIFAR-10 downloaded to ./data
    python mimetic_vit.py --init=default   # the same model and pipeline without the mimetic init
The CPU's quick run, the laptop recipe (all 50,000 training images, 2 epochs):
    python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128
--help lists every key, its default and why; README.md, the results; extras/, the side modes.
"""

import json
import math
import os
import pickle
import platform
import shlex
import socket
import sys
import time
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from urllib.parse import urlparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms.v2 as T
from einops import rearrange

# -----------------------------------------------------------------------------
# config: plain globals, each overridable as --key=value (parsed in main(), never at import)
# model (Sec. 5.1: ViT-Tiny = width 192, depth 12, 3 heads, patch 2 on 32x32 inputs)
width = 192               # embedding dimension d
depth = 12                # number of Transformer blocks
heads = 3                 # attention heads; head dimension k = width / heads
patch_size = 2            # patch side in pixels: 256 patches of a 32x32 image, and a class token
mlp_ratio = 4             # MLP hidden width = mlp_ratio * width (the standard ViT value)
pos_emb = "sinusoidal"    # sinusoidal (Sec. 5.1) | learned (Table 2's "random") | sincos2d
pos_scale = 1.0           # g, scales the position embeddings (Fig. 4); 1 = standard (our choice)
pos_trainable = True      # train the position embeddings (our choice, as timm); False: fixed
# init (Sec. 4; Sec. 5.1 uses a1 = b1 = 0.7, a2 = b2 = 0.4 for all vision experiments)
init = "mimetic"          # mimetic | default | qk, vo (Table 2: only W_Q, W_K / W_V, W_proj) | simple
alpha1 = 0.7              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1)
beta1 = 0.7               # b1: identity weight in eq 1
alpha2 = 0.4              # a2: noise weight in W_V W_proj^T ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.4               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1: Table 2's "W_V W_proj ~ +cI" ablation
# data
dataset = "cifar10"       # cifar10 | cifar100 (Table 4; SVHN and Tiny ImageNet: extras/table4.py)
data_dir = "data"         # holds cifar-10-batches-py/ (official python layout) or gets the download
image_size = 0            # resize to this side before patching (Table 7: 32-256); 0 = keep 32
train_subset = 0          # use only the first N training images (0 = all)
# augmentation, drawn per image. The paper: "RandAugment and Cutout", no settings. Ours: the
# authors' 100-epoch setting (locuslab/convmixer-cifar10 README.md line 50) with its train.py's
# transforms (lines below), in the order flip (train.py's: after the crop), crop, RandAugment,
# jitter, normalise, erase, Cutout
hflip = True              # random horizontal flip, p = 0.5 (train.py line 71)
crop_scale = 1.0          # RandomResizedCrop(scale=(crop_scale, 1), ratio=(1, 1)) (lines 16, 70)
ra_n = 2                  # RandAugment: ops per image (lines 19, 72); 0 = off
ra_m = 12                 # RandAugment: magnitude, 0-30 of 31 bins (line 18)
ra_p = 1.0                # each RandAugment op applied with this probability (timm's way: 0.5)
jitter = 0.2              # ColorJitter(jitter, jitter, jitter), no hue (lines 20, 73)
reprob = 0.2              # RandomErasing(p=reprob) after normalising (lines 17, 76)
erase_fill = "zero"       # zero (train.py) | noise: N(0, 1) per pixel (timm's --remode pixel)
cutout = 0                # Cutout square side in pixels (DeVries & Taylor 2017)
# optimisation (Sec. 5.1: batch 512, AdamW, lr 3e-3, weight decay 0.01, 100 epochs)
epochs = 100              # passes over the training set
batch_size = 512          # images per step
lr = 3e-3                 # peak learning rate
weight_decay = 0.01       # on weight matrices only, timm's rule (make_optimizer), unless decay_all
decay_all = False         # True: on every parameter, as train.py line 102 (on the proxy: no better)
adam_eps = 1e-8           # AdamW's eps: torch's default, as train.py line 102 (timm flags: 1e-3)
warmup_frac = 0.4         # one-cycle: 0 -> lr at this fraction of the steps (train.py: 2E/5) -> lr/20 at 80% -> 0
label_smoothing = 0.0     # of the training loss only (our choice: off, as train.py line 103)
grad_clip = 0.0           # clip the global gradient norm to this; 0 = off (lines 28, 123)
recipe = "authors100"     # authors100 (the lines above) | authors | timm: keys each sets
RECIPES = {"authors100": {},
           # train.py's argparse defaults (lines 16-20), for its 25 epochs
           "authors": dict(crop_scale=0.75, ra_n=1, ra_m=8, jitter=0.1, reprob=0.25),
           # the first author's timm flags (locuslab/convmixer README.md lines 46-74; line 74: --scale 0.75 1.0):
           # rand-m9-mstd0.5-inc1 (timm's 9 of 10 = torchvision's 27 of 30, no magnitude noise), --reprob 0.25
           # --remode pixel, --opt-eps 1e-3, --clip-grad 1.0, smoothing 0.1; crop ratio 1 (train.py's), no mixup or
           # cutmix (the paper names neither). 100 epochs: both inits under authors100 (results/gpu-h*-e[12]-*)
           "timm": dict(ra_n=2, ra_m=27, ra_p=0.5, crop_scale=0.75, jitter=0.0, reprob=0.25, erase_fill="noise",
                        label_smoothing=0.1, adam_eps=1e-3, grad_clip=1.0)}
# system
seed = 0                  # the default init, the mimetic noise, the data order and augmentation
device = ""               # "" = cuda if available, else mps if available, else cpu
precision = "auto"        # auto (bf16 autocast on CUDA, else fp32: most CPUs emulate bf16) | bf16 | fp32
compile = "auto"          # torch.compile: auto (on CUDA only: a CPU gains nothing) | true | false | graphs
eval_batch_size = 1024    # test images per forward pass
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/vit-<dataset>-<init>-seed<seed>; never another run's folder
resume = False            # continue from <out_dir>/ckpt.pt (the same settings, up to RESUME_FREE's)
stop_epoch = 0            # end this invocation after this epoch (0 = never); resume it later
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (bool, int, float, str))]

# -----------------------------------------------------------------------------
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
    pos_emb: str = "sinusoidal"   # sinusoidal | learned | sincos2d
    pos_scale: float = 1.0
    pos_trainable: bool = True

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


def sincos2d_embeddings(grid, d):
    """Patch (r, c) of a grid x grid image: row r's sinusoids in the first d/2 dimensions, column c's in the rest
    (our layout; the paper says only "sinusoidal"); the class token gets zeros. (grid * grid + 1, d)"""
    rows, cols = sinusoidal_embeddings(grid, d // 2), sinusoidal_embeddings(grid, d - d // 2)
    P = torch.cat([rows[:, None].expand(-1, grid, -1), cols[None].expand(grid, -1, -1)], dim=-1)  # (r, c, d)
    return torch.cat([torch.zeros(1, d), P.reshape(grid * grid, d)])


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        # one fused Linear; rows: q (head 0, 1, ...), then k, then v (timm's qkv, nanoGPT's c_attn)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b n (three h k) -> three b h n k", three=3, h=self.heads)
        y = F.scaled_dot_product_attention(q, k, v)  # (B, h, N, k); softmax(q k^T / sqrt(k)) v
        return self.proj(rearrange(y, "b h n k -> b n (h k)"))


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict(  # state_dict keys mlp.fc1.*, mlp.fc2.*
            fc1=nn.Linear(width, mlp_ratio * width), gelu=nn.GELU(), fc2=nn.Linear(mlp_ratio * width, width)))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))  # pre-norm: attention sees X after LayerNorm (eq 8)
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.patch_embed = nn.Linear(c.in_channels * c.patch_size ** 2, c.width)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.width))
        # position embeddings P (N, d): class token, then patches in raster order (our choice)
        self.pos_embed = nn.Parameter(torch.zeros(1, c.num_tokens, c.width), requires_grad=c.pos_trainable)
        self.blocks = nn.ModuleList([Block(c.width, c.heads, c.mlp_ratio) for _ in range(c.depth)])
        self.norm = nn.LayerNorm(c.width)
        self.head = nn.Linear(c.width, c.num_classes)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """The default init, timm's ViT's (our reading of the paper's "default normal
        initialization"): Linear weights truncated normal with std 0.02 and biases 0, except
        patch_embed, which keeps PyTorch's U(+-1/sqrt(fan_in)) as timm's Conv2d does; cls_token
        normal, std 1e-6; LayerNorm 1 and 0; pos_embed pos_scale times the sinusoids (Sec. 5.1,
        Fig. 4), the row and column sinusoids (sincos2d), or a truncated normal, std 0.02 (learned)."""
        c = self.config
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear) and name != "patch_embed":
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.cls_token, std=1e-6)
        if c.pos_emb == "sinusoidal":
            P = sinusoidal_embeddings(c.num_tokens, c.width)
        elif c.pos_emb == "sincos2d":
            P = sincos2d_embeddings(c.image_size // c.patch_size, c.width)
        else:
            P = nn.init.trunc_normal_(torch.empty(c.num_tokens, c.width), std=0.02)
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


def model_config(cfg, num_classes):
    return ViTConfig(image_size=cfg.image_size or 32, patch_size=cfg.patch_size, num_classes=num_classes,
                     width=cfg.width, depth=cfg.depth, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio,
                     pos_emb=cfg.pos_emb, pos_scale=cfg.pos_scale, pos_trainable=cfg.pos_trainable)


# -----------------------------------------------------------------------------
# mimetic initialization (Sec. 4). Depends on torch alone: copy this function into your own model.

@torch.no_grad()
def mimetic_init_(qkv_weight, proj_weight, num_heads, alpha1=0.7, beta1=0.7, alpha2=0.4, beta2=0.4,
                  generator=None, vo_sign=-1, init_qk=True, init_vo=True):
    """Mimetic init (Trockman & Kolter 2023, Sec. 4) of one self-attention layer, in place.

    | product, as the layer applies it    | target                                       | eqs        |
    |-------------------------------------|----------------------------------------------|------------|
    | W_V W_proj^T (d x d, one per layer) | a2 Z2 - b2 I, exactly (up to float rounding) | 2, 3, 4    |
    | W_Q^h W_K^h^T (d x d, per head h)   | best rank-k approximation of a1 Z1^h + b1 I  | 1, 5, 6, 7 |

    W_proj is eq 4's matrix and the layer applies W_V W_proj^T, the product eq 2 prints (Sec. 3 and eq 11 write
    W_V W_proj for the same product). Z1^h (afresh for every head) and Z2 have i.i.d. N(0, 1/d) entries. The
    rank-k truncation (Eckart-Young) weakens the diagonal: mean about 0.39, not 0.7, for a1 = b1 = 0.7, k = d/3.

    qkv_weight: (3d, d), a fused nn.Linear(d, 3d)'s weight: rows q, k, v, each head a block of k = d / num_heads
        rows (timm `qkv`, nanoGPT `c_attn`, nn.MultiheadAttention `in_proj_weight`; other layouts: "Use it in
        your own model" in mimetic's README). nn.Linear computes x @ weight.T, so in the paper's row-vector
        notation (q = x W_Q) the q rows of head h hold (W_Q^h)^T and the v rows W_V^T.
    proj_weight: (d, d), the output nn.Linear's weight: eq 4's W_proj.
    vo_sign=+1 targets a2 Z2 + b2 I (Table 2, "+cI"); init_qk / init_vo = False leaves those weights as they are
    (Table 2's "init only" rows). Biases are untouched. The draws are Z1 of head 0, 1, ..., then Z2, whatever is
    initialised; noise and SVDs are float64 on the generator's device, then cast to the weights' dtype."""
    d = proj_weight.shape[0]
    if proj_weight.shape != (d, d) or qkv_weight.shape != (3 * d, d):
        raise ValueError(f"expected qkv_weight (3d, d) and proj_weight (d, d), rows q, k, v; got "
                         f"{tuple(qkv_weight.shape)} and {tuple(proj_weight.shape)}: other layouts, 'Use it in your "
                         f"own model' in mimetic's README")
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
        proj_weight.copy_(W_proj)                              # the layer applies x W_V W_proj^T
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


@torch.no_grad()
def init_attention_(model, init, alpha1, beta1, alpha2, beta2, vo_sign=-1, generator=None):
    """Every block's attention, after the default init and before torch.compile, as the --init arm says (INITS;
    Table 2's arms draw the same noise). The SVDs run on one thread: the same bits whatever the thread count."""
    if init == "default":
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for attn in (block.attn for block in model.blocks):
            if init == "simple":
                simple_init_(attn.qkv.weight, attn.proj.weight, attn.heads, generator)
            else:
                mimetic_init_(attn.qkv.weight, attn.proj.weight, attn.heads, alpha1, beta1, alpha2, beta2,
                              generator, vo_sign, init_qk=init != "vo", init_vo=init != "qk")
    finally:
        torch.set_num_threads(threads)


INITS = ("mimetic", "default", "qk", "vo", "simple")  # --init: the arms of init_attention_


def build_model(cfg, num_classes):
    """The model that main() trains, on the CPU: the default init from torch's RNG seeded with cfg.seed, then
    the attention init from its own generator, so that every arm of a seed shares the default weights."""
    torch.manual_seed(cfg.seed)
    model = ViT(model_config(cfg, num_classes))
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    return model


# -----------------------------------------------------------------------------
# data: a dataset lives on the training device as uint8 (N, 3, 32, 32). TrainLoader augments training
# batches at the images' own size (the transforms keep their CIFAR meaning); resize() then scales them (Table 7).
DATASETS = {  # name: (folder in the official python layout, file names, label key, classes)
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"], "labels", 10),
    "cifar100": ("cifar-100-python", ["train", "test"], "fine_labels", 100)}
MEAN_STD = {"cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
            "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))}


def load_dataset(name, root):
    """(train_x, train_y, test_x, test_y) on the CPU: uint8 (N, 3, 32, 32), int64 (N,); downloaded when missing."""
    folder, files, key, classes = DATASETS[name]
    base = os.path.join(root, folder)
    missing = [f for f in files if not os.path.exists(os.path.join(base, f))]
    if missing:
        download(name, root, base, missing)
    xs, ys = [], []
    for f in files:  # pickled dicts of (N, 3072) uint8 rows and labels (no md5: copies work)
        path = os.path.join(base, f)
        try:
            with open(path, "rb") as fh:
                d = pickle.load(fh, encoding="latin1")
            xs.append(torch.as_tensor(d["data"], dtype=torch.uint8).reshape(-1, 3, 32, 32))
            ys.append(torch.as_tensor(d[key], dtype=torch.long))
        except Exception as e:  # truncated, corrupt or another file: pickle raises many kinds
            raise SystemExit(f"error: {path} is not a readable {name} batch ({e!r}): copy it again, or delete it "
                             f"to download it afresh") from e
        if len(ys[-1]) == 0 or len(ys[-1]) != len(xs[-1]):
            raise SystemExit(f"error: {path} holds {len(xs[-1])} images and {len(ys[-1])} labels: copy it again, "
                             f"or delete it to download it afresh")
    print(f"data: {name} ({classes} classes) | train {sum(map(len, ys[:-1])):,} images | test {len(ys[-1]):,} images")
    return torch.cat(xs[:-1]), torch.cat(ys[:-1]), xs[-1], ys[-1]  # the last file is the test set


def download(name, root, base, missing):
    """torchvision's download into <root>/<folder>/; offline (a 5 s connect), one error line."""
    tv = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
    host = urlparse(tv.url).hostname
    try:
        socket.create_connection((host, 443), timeout=5).close()
    except OSError:
        raise SystemExit(f"error: {name} not found: {base}/ lacks {', '.join(missing)}, and the download failed "
                         f"({host} cannot be reached): put them there (the official python version, {tv.filename} "
                         f"unpacked), or pass --data_dir=<a folder that holds {os.path.basename(base)}/>") from None
    tv(root, train=True, download=True)


def norm_stats(mean_std, dev):
    """MEAN_STD's (mean, std) -> two (1, 3, 1, 1) tensors on the device."""
    return tuple(torch.tensor(v, device=dev).view(1, 3, 1, 1) for v in mean_std)


def randaugment_ops(m, size):
    """[(op, magnitude at bin m of 31, signed)]: T.RandAugment's 14 ops in its order, as its table gives them
    (torchvision/transforms/v2/_auto_augment.py lines 384-407 of v0.29; a test compares the two)."""
    def at(low, high):
        return float(torch.linspace(low, high, 31)[m])

    shift, color = at(0.0, 150.0 / 331.0 * size), at(0.0, 0.9)
    bits = float((8 - (torch.arange(31) / ((31 - 1) / 4))).round().int()[m])
    return [("Identity", 0.0, False), ("ShearX", at(0.0, 0.3), True), ("ShearY", at(0.0, 0.3), True),
            ("TranslateX", shift, True), ("TranslateY", shift, True), ("Rotate", at(0.0, 30.0), True),
            ("Brightness", color, True), ("Color", color, True), ("Contrast", color, True), ("Sharpness", color, True),
            ("Posterize", bits, False), ("Solarize", at(1.0, 0.0), False), ("AutoContrast", 0.0, False),
            ("Equalize", 0.0, False)]


def moved(image, op, m):
    """A geometric op on image, as T.RandAugment calls it (_auto_augment.py lines 102-153): nearest, filled with 0."""
    if op == "Rotate":
        return T.functional.rotate(image, angle=m)
    degrees = math.degrees(math.atan(m))
    translate, shear, center = {"ShearX": ([0, 0], [degrees, 0.0], [0, 0]), "ShearY": ([0, 0], [0.0, degrees], [0, 0]),
                                "TranslateX": ([int(m), 0], [0.0, 0.0], None),
                                "TranslateY": ([0, int(m)], [0.0, 0.0], None)}[op]
    return T.functional.affine(image, angle=0.0, translate=translate, scale=1.0, shear=shear, center=center)


def augmentation_tables(cfg, size, mean_std, dev):
    """What augment() looks up, made once on the CPU (so every device sees the same), then moved to dev. Per
    RandAugment draw (op, sign: 28 rows, row 0 the identity): where each pixel comes from (its number 1..size^2 after
    the geometric op, on an image of the numbers; 0: outside, filled with 0) as an index and a mask, the setting of each
    batched op (neutral where the draw is another op). Per crop side, the resize's weights; mean and std."""
    numbers = torch.arange(1, size * size + 1, dtype=torch.float32).view(1, 1, size, size)
    sources, settings = [], []
    for op, m, signed in randaugment_ops(cfg.ra_m, size):
        for magnitude in (m, -m if signed else m):
            geometric = op in ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
            sources.append(moved(numbers, op, magnitude) if geometric else numbers)
            fn = {"Brightness": 0, "Contrast": 1, "Color": 2}.get(op)  # fn of blend(), as ColorJitter numbers them
            r = 1.0 + magnitude if fn is not None else 1.0  # the factor 1 + magnitude (lines 154-161)
            bits = int(magnitude) if op == "Posterize" else 8  # the settings, as randaugment_layer unbinds them:
            settings.append([fn or 0, r, 1.0 - r, 1.0 - (1.0 + magnitude) if op == "Sharpness" else 0.0,
                             ((1 << bits) - 1) << (8 - bits), 255.0 * magnitude if op == "Solarize" else 256.0,
                             op == "AutoContrast", op == "Equalize"])
    # crop side s -> the bilinear, antialiased resize to size as a (size, s) matrix, read off F.interpolate (the
    # call torchvision's resize makes) on the identity; at columns size..size+s, so that gather() can shift it
    weights = torch.zeros(size + 1, size, 2 * size)
    for s in range(1, size + 1):  # (s, 1, 1, s): s images of one row, the identity's
        resized = F.interpolate(torch.eye(s)[:, None, None], size=(1, size), mode="bilinear", antialias=True)
        weights[s, :, size:size + s] = resized[:, 0, 0].T
    mean, std = norm_stats(mean_std, dev)
    sources = torch.cat(sources).view(-1, size * size).long()
    return {"index": (sources - 1).clamp(min=0).to(dev), "inside": (sources > 0).to(dev, torch.uint8),
            "settings": torch.tensor(settings, dtype=torch.float32).to(dev), "crop": weights.to(dev),
            "mean": mean, "std": std}


def draw_augmentation(cfg, B, size, seed):
    """A batch's draws, a row an image (B, 16 + ra_n [+ 3 size^2]) float32, from a CPU generator seeded with the batch's
    seed (every device sees the same): what train.py's transforms (lines 69-77) draw per image, for all B at once,
    as augment() reads them: flip, Cutout's centre, crop (side, top, left), a RandAugment draw a layer (a row of the
    tables: 2 op + sign; 0 where RandomApply's coin, ra_p, says no), ColorJitter's three factors and order, the
    erased box (top, left, height, width; 0 by 0: none), its noise."""
    g, area = torch.Generator().manual_seed(seed), size * size

    def uniform(low, high, k):  # as T's torch.empty(1).uniform_(low, high), k of them a draw
        return torch.empty(B, k).uniform_(low, high, generator=g)

    flip = (torch.rand(B, 1, generator=g) < 0.5) & cfg.hflip
    centre = torch.randint(size, (B, 2), generator=g)
    side = (area * uniform(cfg.crop_scale, 1.0, 1).double()).sqrt().round()  # RandomResizedCrop, ratio 1
    corner = ((size + 1 - side) * torch.rand(B, 2, generator=g)).floor()
    op = torch.randint(14, (B, cfg.ra_n), generator=g)
    sign = torch.rand(B, cfg.ra_n, generator=g) <= 0.5
    draw = torch.where(torch.rand(B, cfg.ra_n, generator=g) < cfg.ra_p, 2 * op + sign, 0)
    factors = uniform(max(0.0, 1.0 - cfg.jitter), 1.0 + cfg.jitter, 3)  # brightness, contrast, saturation
    order = torch.rand(B, 3, generator=g).argsort(dim=1)  # fn_idx without hue (off)
    # RandomErasing's scale (0.02, 0.33) and ratio (0.3, 3.3): its ten tries at once, the first that fits
    target, aspect = area * uniform(0.02, 0.33, 10).double(), uniform(math.log(0.3), math.log(3.3), 10).exp().double()
    h, w = (target * aspect).sqrt().round(), (target / aspect).sqrt().round()
    fits = (h < size) & (w < size)
    first = fits.int().argmax(dim=1, keepdim=True)
    sides = torch.cat([h.gather(1, first), w.gather(1, first)], dim=1)
    erased = (torch.rand(B, 1, generator=g) < cfg.reprob) & fits.any(dim=1, keepdim=True)
    box = torch.cat([((size + 1 - sides) * torch.rand(B, 2, generator=g)).floor(), sides * erased], dim=1)
    noise = torch.randn(B, 3 * area if cfg.reprob > 0 and cfg.erase_fill == "noise" else 0, generator=g)
    return torch.cat([flip, centre, side, corner, draw, factors, order, box, noise], dim=1).float()


def augment(x, draws, tables, cfg):
    """uint8 images (B, 3, H, W) on the device and their draws there -> normalised float: train.py's transforms, flip
    first and Cutout last, each for the whole batch in a fixed number of torch calls, whatever was drawn."""
    B, _, H, W = x.shape
    sizes = [1, 2, 3, cfg.ra_n, 3, 3, 4]  # draw_augmentation's columns, then the noise's
    flip, centre, crop, ops, factors, order, box, noise = draws.split(sizes + [draws.shape[1] - sum(sizes)], dim=1)
    x = torch.where(flip.view(B, 1, 1, 1) > 0, x.flip(-1), x)
    if cfg.crop_scale < 1:
        x = crop_resize(x, crop.long(), tables["crop"])
    for layer in range(cfg.ra_n):
        x = randaugment_layer(x, ops[:, layer].long(), tables)
    for k in range(3 if cfg.jitter > 0 else 0):  # ColorJitter: the k-th of its blends, in each image's order
        fn = order[:, k:k + 1].long()
        r = factors.gather(1, fn).view(B, 1, 1, 1)
        x = blend(x, fn.view(B, 1, 1, 1), r, (1 - r.double()).float())
    x = (x.float() / 255.0 - tables["mean"]) / tables["std"]
    if cfg.reprob > 0:
        fill = 0.0 if cfg.erase_fill == "zero" else noise.view(B, 3, H, W)
        x = torch.where(box_mask(*box.split(1, dim=1), H), fill, x)
    if cfg.cutout > 0:  # a square centred anywhere, clipped at the border, 0: the mean
        corner = centre - cfg.cutout // 2
        x = x.masked_fill(box_mask(corner[:, :1], corner[:, 1:], cfg.cutout, cfg.cutout, H), 0.0)
    return x


def box_mask(top, left, height, width, size):
    """(B, 1, size, size) masks of boxes, each of its arguments (B, 1) or a number; a box of height 0 is none."""
    at = torch.arange(size, device=top.device)
    rows, cols = (at >= top) & (at < top + height), (at >= left) & (at < left + width)  # (B, size) each
    return (rows[:, :, None] & cols[:, None, :])[:, None]


def crop_resize(x, crop, weights):
    """RandomResizedCrop: each image's square of side crop[:, 0] at (crop[:, 1], crop[:, 2]) resized to the image's
    size as torchvision resizes a float image (bilinear, antialias; then rounded to uint8), as two batched matmuls."""
    side, top, left = crop.unbind(1)
    size, at = x.shape[-1], torch.arange(x.shape[-1], device=x.device)
    rows = weights[side].gather(2, (size + at - top[:, None])[:, None].expand(-1, size, -1))  # (B, out, in)
    cols = weights[side].gather(2, (size + at - left[:, None])[:, None].expand(-1, size, -1))
    return (rows[:, None] @ x.float() @ cols[:, None].transpose(2, 3)).round_().to(torch.uint8)


def randaugment_layer(x, draw, tables):
    """One RandAugment op an image (T.RandAugment(num_ops=1) at the recipe's magnitude): draw, each image's row of
    the tables. The geometric ops as one gather; every other op on the whole batch, neutral where not drawn."""
    index = tables["index"][draw][:, None].expand(-1, x.shape[1], -1)  # (B, C, H * W): where each pixel comes from
    x = x.flatten(2).gather(2, index).mul_(tables["inside"][draw][:, None]).view_as(x)  # 0 from outside the image
    fn, r, rest, alpha, bits, threshold, auto, equal = tables["settings"][draw].view(len(x), -1, 1, 1, 1).unbind(1)
    x = blend(x, fn.long(), r, rest)                                              # Brightness, Contrast, Color
    x = sharpen(x, alpha)                                                         # Sharpness
    x = x & bits.to(torch.uint8)                                                  # Posterize
    x = torch.where(x >= threshold, 255 - x, x)                                   # Solarize
    x = torch.where(auto > 0, T.functional.autocontrast(x), x)                    # AutoContrast
    return torch.where(equal > 0, T.functional.equalize(x), x)                    # Equalize


def blend(x, fn, r, rest):
    """torchvision's _blend per image, uint8 (B, 3, H, W): x r + other rest, rest = 1 - r in float64 as _blend has
    it, rounded down; other: black (fn 0: brightness), the mean of x's grey (1: contrast) or its grey (2:
    saturation). r = 1, rest = 0: x as it was."""
    grey = x[:, 0].mul(0.2989).add_(x[:, 1], alpha=0.587).add_(x[:, 2], alpha=0.114)[:, None].floor_()  # ITU-R 601-2
    mean = grey.mean(dim=(1, 2, 3), keepdim=True)
    other = grey.mul_(fn == 2).add_(mean.mul_(fn == 1))  # each image's grey, its mean or black
    return x.mul(r).addcmul_(other, rest).clamp_(0, 255).to(torch.uint8)


def sharpen(x, alpha):
    """adjust_sharpness per image: each inner pixel plus alpha (1 - factor) times (its rounded blur - itself), the blur
    [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 as an exact sum of integers over 13, never halfway between two: the uint8
    of torchvision's conv2d and fused add_ (results/cpu-sharpen-speed; a CPU's oneDNN conv2d was the slower)."""
    y = x.float()
    inner = y[..., 1:-1, 1:-1]
    box = y.unfold(2, 3, 1).sum(-1).unfold(3, 3, 1).sum(-1)  # each inner pixel's 3x3 sum: 3 rows, then 3 columns
    blur = box.add_(inner, alpha=4).div_(13).round_()
    inner.addcmul_(blur.sub_(inner), alpha)
    return y.clamp_(0, 255).to(torch.uint8)


class TrainLoader:
    """Training batches, as airbench's CifarLoader: the uint8 images on the device; gen draws each epoch's order and
    its batches' seeds, draw_augmentation a batch's draws on the CPU (one copy a batch to the device: on CUDA from
    pinned memory, not waited for), augment() applies them there."""

    def __init__(self, x, y, cfg, mean_std, dev, gen):
        self.x, self.y, self.cfg, self.dev, self.gen = x.to(dev), y.to(dev), cfg, dev, gen
        self.steps = len(x) // cfg.batch_size  # the last partial batch is dropped (fixed shapes)
        self.tables = augmentation_tables(cfg, x.shape[-1], mean_std, dev)

    def __iter__(self):  # one epoch of (normalised float images, labels) on the device
        B = self.cfg.batch_size
        perm = torch.randperm(len(self.x), generator=self.gen).to(self.dev)  # one copy an epoch
        seeds = torch.randint(2 ** 62, (self.steps,), generator=self.gen).tolist()
        for i, seed in enumerate(seeds):
            draws = draw_augmentation(self.cfg, B, self.x.shape[-1], seed)
            draws = draws.pin_memory() if self.dev.type == "cuda" else draws
            idx = perm[i * B:(i + 1) * B]
            yield augment(self.x[idx], draws.to(self.dev, non_blocking=True), self.tables, self.cfg), self.y[idx]


def resize(x, size):
    """Normalised (B, 3, H, W) -> (B, 3, size, size), bilinear (our choice: Table 7 does not say how)."""
    if x.shape[-2:] == (size, size):
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", antialias=x.shape[-1] > size)


def to_input(x, mean, std, size):
    """uint8 images (B, 3, H, W), not augmented (test images, figures) -> normalised float at the model's size."""
    return resize((x.float() / 255.0 - mean) / std, size)


# -----------------------------------------------------------------------------
# evaluation

@torch.no_grad()
def evaluate(model, x, y, mean, std, batch, amp):
    """(mean loss, accuracy in %) over (x, y), not augmented; uncompiled: the last, smaller batch would recompile."""
    model.eval()
    loss, correct = torch.zeros((), device=x.device), torch.zeros((), device=x.device)
    for i in range(0, len(x), batch):
        xb, yb = to_input(x[i:i + batch], mean, std, model.config.image_size), y[i:i + batch]
        with amp:
            logits = model(xb)
        loss += F.cross_entropy(logits.float(), yb, reduction="sum")
        correct += (logits.argmax(-1) == yb).sum()
    model.train()
    return loss.item() / len(x), 100.0 * correct.item() / len(x)


# -----------------------------------------------------------------------------
# optimizer and schedule (the paper: AdamW; the schedule follows the authors' script)

def make_optimizer(model, lr, weight_decay, dev, decay_all=False, eps=1e-8):
    """AdamW (Sec. 5.1) with torch's default betas, as train.py line 102, which decays every parameter (decay_all).
    Else only weight matrices, not biases, norms, class token, position embeddings: timm's rule, the first author's
    timm flags' (timm/optim/optim_factory.py line 52 at 0173a13, with VisionTransformer.no_weight_decay())."""
    no_decay = ("pos_embed", "cls_token")
    decay = {n for n, p in model.named_parameters() if decay_all or (p.dim() >= 2 and n not in no_decay)}
    groups = [{"params": [p for n, p in model.named_parameters() if n in decay], "weight_decay": weight_decay},
              {"params": [p for n, p in model.named_parameters() if n not in decay], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=eps, fused=dev.type == "cuda")


def get_lr(step, total_steps, cfg):
    """The learning rate set before step `step` (0-based) of total_steps, train.py's one-cycle (lines 99-100):
    np.interp(t, [0, 2E/5, 4E/5, E], [0, lr, lr/20, 0]), t = epochs done after this step, 2E/5 = warmup_frac * E."""
    t = (step + 1) / total_steps  # in epochs / E
    knots = [(0.0, 0.0), (cfg.warmup_frac, cfg.lr), (0.8, cfg.lr / 20), (1.0, 0.0)]
    for (t0, lr0), (t1, lr1) in zip(knots, knots[1:]):
        if t <= t1:
            return lr0 + (lr1 - lr0) * (t - t0) / (t1 - t0)
    return 0.0


# -----------------------------------------------------------------------------
# training

def compile_model(model, cfg, dev):
    """torch.compile'd as --compile says (auto: on CUDA only), in its default mode, as every recorded GPU run;
    graphs: as CUDA graphs (mode reduce-overhead: the model step a few launches), untried in a whole run."""
    if cfg.compile in ("true", "graphs") or (cfg.compile == "auto" and dev.type == "cuda"):
        return torch.compile(model, mode="reduce-overhead" if cfg.compile == "graphs" else "default")
    return model


def forward_backward(net, x, y, amp, label_smoothing=0.0):
    """One batch's loss (fp32 whatever the precision) and gradients: (loss, logits)."""
    with amp:
        logits = net(x)
    loss = F.cross_entropy(logits.float(), y, label_smoothing=label_smoothing)
    loss.backward()
    return loss, logits


def train(model, data, mean_std, cfg, dev, amp, ckpt=None):
    """AdamW on data = (train_x, train_y, test_x, test_y), uint8 (the test set on the device), normalised by mean_std;
    evaluates every epoch, checkpoints as CHECKPOINT_S says. Returns the history, or None after --stop_epoch."""
    train_x, train_y, test_x, test_y = data
    train_x, train_y = train_x[:cfg.train_subset or None], train_y[:cfg.train_subset or None]
    if len(train_x) < cfg.batch_size:
        raise SystemExit(f"error: {len(train_x):,} training images but batch_size {cfg.batch_size}: lower --batch_size")
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay, dev, cfg.decay_all, cfg.adam_eps)
    gen = torch.Generator().manual_seed(cfg.seed)  # the data order and the batches' seeds
    state = restore(ckpt, opt, gen, dev) if ckpt is not None else {"history": []}
    history = state["history"]
    net = compile_model(model, cfg, dev)
    loader = TrainLoader(train_x, train_y, cfg, mean_std, dev, gen)
    test_stats, steps = norm_stats(mean_std, dev), loader.steps
    step = first_step = len(history) * steps
    progress = Progress(cfg.epochs * steps, cfg.batch_size, "img", step)
    saved = time.perf_counter()  # the last checkpoint
    for epoch in range(len(history) + 1, cfg.epochs + 1):
        t0 = time.perf_counter()
        running = torch.zeros(2, 3, device=dev)  # (this epoch, this log interval) x (loss * n, correct, n)
        for i, (xb, yb) in enumerate(loader):
            xb = resize(xb, model.config.image_size)
            if step == first_step:  # the run's cost, timed on its first batch
                progress.estimate(lambda n: forward_backward(model, xb[:n], yb[:n], amp)[0], model, len(xb), steps)
            lr = get_lr(step, cfg.epochs * steps, cfg)
            for group in opt.param_groups:
                group["lr"] = lr
            loss, logits = forward_backward(net, xb, yb, amp, cfg.label_smoothing)
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            n = torch.full((), len(yb), device=dev)  # a fill on the device: no copy, no wait
            running += torch.stack([loss.detach() * len(yb), (logits.argmax(-1) == yb).sum(), n])
            progress.update(step, loss)
            if step % cfg.log_interval == 0 or i == steps - 1:
                loss_sum, hits, n = running[1].tolist()  # the only wait for the device between log lines
                progress.print(f"step {step}/{cfg.epochs * steps} | epoch {epoch} | loss {loss_sum / n:.4f} | "
                               f"acc {100 * hits / n:.1f} | lr {lr:.1e}", step)
                running[1] = 0
        loss_sum, hits, n = running[0].tolist()
        test_loss, test_acc = evaluate(model, test_x, test_y, *test_stats, cfg.eval_batch_size, amp)
        if not math.isfinite(test_loss):  # never checkpoint weights that evaluate to NaN
            raise SystemExit(f"error: the test loss is not finite after epoch {epoch}; the last good checkpoint, if "
                             f"any, is kept in {cfg.out_dir}. Try a lower --lr in a new --out_dir")
        elapsed = round((history[-1]["elapsed_s"] if history else 0.0) + time.perf_counter() - t0, 3)
        history.append({"epoch": epoch, "train_loss": loss_sum / n, "train_acc": 100 * hits / n, "test_loss": test_loss,
                        "test_acc": test_acc, "elapsed_s": elapsed})
        progress.print(f"epoch {epoch}/{cfg.epochs} | train loss {loss_sum / n:.4f} | test loss {test_loss:.4f} | "
                       f"test acc {test_acc:.2f} | {elapsed / 60:.1f} min")
        if epoch in (1, cfg.epochs, cfg.stop_epoch) or time.perf_counter() - saved > CHECKPOINT_S:
            save_checkpoint(cfg, model, opt, gen.get_state(), state, dev)
            saved = time.perf_counter()
        if epoch == cfg.stop_epoch and epoch < cfg.epochs:
            print(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None
    return history


# -----------------------------------------------------------------------------
# main

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_config(argv)                     # a user's mistake ends here, with one error line
    dev, amp, prec = device_and_precision(cfg)   # bf16 autocast on CUDA, else fp32 (the loss: fp32)
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = open_run(cfg)                         # None for a new run; --resume: the checkpoint, of this config
    train_x, train_y, test_x, test_y = load_dataset(cfg.dataset, cfg.data_dir)

    model = build_model(cfg, DATASETS[cfg.dataset][3]).to(dev)  # the default init, then the attention init
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{model.config.num_tokens} tokens, {hardware(dev)}, {prec}")

    data = (train_x, train_y, test_x.to(dev), test_y.to(dev))  # TrainLoader moves the training set
    history = train(model, data, MEAN_STD[cfg.dataset], cfg, dev, amp, ckpt)
    if history is None:  # stopped by --stop_epoch
        return None
    print(f"final test accuracy {history[-1]['test_acc']:.2f}")
    return write_results(cfg, model, dev, prec, ["python", "mimetic_vit.py", *argv],
                         final_test_acc=history[-1]["test_acc"], epochs_done=len(history), history=history,
                         wall_time_s=history[-1]["elapsed_s"])


# =============================================================================
# tail: machinery the paper does not define (arguments, run folder, checkpoints, results, device, progress)
CHOICES = {"init": INITS, "dataset": tuple(DATASETS), "pos_emb": ("sinusoidal", "learned", "sincos2d"),
           "recipe": tuple(RECIPES), "compile": ("auto", "true", "false", "graphs"), "vo_sign": (-1, 1),
           "precision": ("auto", "bf16", "fp32"), "erase_fill": ("zero", "noise")}
RANGES = {**dict.fromkeys(("width", "depth", "heads", "patch_size", "mlp_ratio", "epochs", "batch_size",
                           "eval_batch_size", "log_interval"), (1, math.inf)), "ra_m": (0, 30), "ra_p": (0, 1),
          **dict.fromkeys(("alpha1", "beta1", "alpha2", "beta2", "crop_scale", "reprob", "label_smoothing"), (0, 1))}
BOOLS = {"true": True, "1": True, "false": False, "0": False}
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir", "out_dir",
               "workers"}  # workers: retired worker processes (the batches never depended on them)
RETIRED = {"ra_chunk": 1, "schedule": "onecycle"}  # keys gone since (git log -S), at the value today's code runs
CHECKPOINT_S = 60  # at most this often, and after epoch 1, --stop_epoch, the last (our choice); resume replays since


def parse_config(argv):
    """The config globals, overridden by --key=value; a user's mistake is one `error:` line."""
    if "-h" in argv or "--help" in argv:  # the config block above: every key, its default and why
        with open(__file__, encoding="utf-8") as f:
            keys = f.read().split("\n# config:")[1].split("\nconfig_keys =")[0]
        try:
            print(f"usage: python {os.path.basename(__file__)} [--key=value ...]\n\n# config:{keys}", flush=True)
        except BrokenPipeError:  # `--help | head` stopped reading: end quietly (Python's docs, "Note on SIGPIPE")
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0)
    defaults = {k: globals()[k] for k in config_keys}
    given = parse_args(argv, defaults)
    recipe = RECIPES.get(given.get("recipe", defaults["recipe"]), {})  # unknown: CHOICES says so below
    cfg = SimpleNamespace(**{**defaults, **recipe, **given})  # given, over the recipe, over the default
    for key, value in vars(cfg).items():  # one of its CHOICES, else a number within its RANGES (else 0 or more)
        low, high = RANGES.get(key, (0, math.inf))
        if key in CHOICES and value not in CHOICES[key]:
            raise SystemExit(f"error: --{key}={value}: use one of {', '.join(map(str, CHOICES[key]))}")
        if key not in CHOICES and type(value) in (int, float) and not low <= value <= high:
            raise SystemExit(f"error: --{key}={value}: use a value in [{low}, {high}]")
    if not 0 < cfg.warmup_frac < 0.8:
        raise SystemExit(f"error: --warmup_frac={cfg.warmup_frac}: the one-cycle schedule rises to its peak before it "
                         f"falls at 0.8 of the run: use a value between 0 and 0.8")
    if cfg.width % cfg.heads:
        raise SystemExit(f"error: width {cfg.width} is not divisible by heads {cfg.heads}: change one of them")
    if (cfg.image_size or 32) % cfg.patch_size:
        raise SystemExit(f"error: image_size {cfg.image_size or 32} is not divisible by patch_size {cfg.patch_size}: "
                         f"choose a patch size that divides it (e.g. 2, 4 or 8 for 32x32 images)")
    cfg.out_dir = cfg.out_dir or os.path.join("out", f"vit-{cfg.dataset}-{cfg.init}-seed{cfg.seed}")
    return cfg


def parse_args(argv, defaults):
    """{key: value} of --key=value arguments in their defaults' types (extras/ uses it); a mistake: an `error:` line."""
    given = {}
    for arg in argv:
        key, eq, text = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or not eq:
            raise SystemExit(f"error: bad argument {arg!r}: use --key=value, e.g. --epochs=10 (--help lists the keys)")
        if key not in defaults:
            raise SystemExit(f"error: unknown config key {key!r}; known keys: {', '.join(defaults)}")
        kind = type(defaults[key])
        try:
            given[key] = BOOLS[text.lower()] if kind is bool else kind(text.lower() if key in CHOICES else text)
        except (KeyError, ValueError):
            raise SystemExit(f"error: {arg}: expected {kind.__name__}, like the default {defaults[key]!r}") from None
    return given


def open_run(cfg):
    """Before any work: a new run never writes into another run's folder; --resume needs a readable checkpoint of the
    same config (up to RESUME_FREE). Returns it, or None for a new run."""
    found = [f for f in ("ckpt.pt", "results.json") if os.path.exists(os.path.join(cfg.out_dir, f))]
    if not cfg.resume:
        if found:
            raise SystemExit(f"error: {cfg.out_dir} already holds {', '.join(found)} of another run: continue it "
                             f"with --resume=True, or pass another --out_dir")
        return None  # the first checkpoint makes the folder: a run failing before it leaves nothing
    if "ckpt.pt" not in found:
        raise SystemExit(f"error: --resume=True but there is no checkpoint at {cfg.out_dir}/ckpt.pt: check --out_dir")
    ckpt = load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt"))
    diff = [f"{k}={v!r} there, {getattr(cfg, k, RETIRED.get(k))!r} here" for k, v in ckpt["config"].items()
            if k not in RESUME_FREE and v != getattr(cfg, k, RETIRED.get(k))]
    if diff:
        raise SystemExit(f"error: checkpoint {cfg.out_dir}/ckpt.pt is from another config ({'; '.join(diff)}): pass "
                         f"the same settings to resume, or another --out_dir to start afresh")
    return ckpt


def load_checkpoint(path):
    """A checkpoint, on the CPU; one that cannot be read stops the run, naming the file. weights_only=True reads
    tensors, numbers, strings and containers only (all that a checkpoint holds): a file from elsewhere runs no code."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many kinds; weights_only's UnpicklingError has a long message
        why = "damaged, or holding objects other than tensors, numbers, strings and containers" \
            if isinstance(e, pickle.UnpicklingError) else repr(e)  # repr: one line
        raise SystemExit(f"error: {path} is not a readable checkpoint ({why}): put back a good copy, or start afresh "
                         f"with another --out_dir") from e


def save_checkpoint(cfg, model, opt, data_rng, state, dev):
    """<out_dir>/ckpt.pt: uncompiled model, optimizer, random streams (data_rng: the data order's), state, config."""
    rng = [(torch.get_rng_state(), torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None)]  # one process
    save_atomic({"model": model.state_dict(), "epoch": len(state["history"]), "optimizer": opt.state_dict(),
                 "data_rng": data_rng, "rng": rng, **state, "config": vars(cfg)},
                os.path.join(cfg.out_dir, "ckpt.pt"))


def restore(ckpt, opt, gen, dev):
    """The optimizer and the random streams from a checkpoint, so that the run goes on bit for bit; the state."""
    opt.load_state_dict(ckpt["optimizer"])
    gen.set_state(ckpt["data_rng"])
    cpu_rng, cuda_rng = ckpt["rng"][0]
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None and dev.type == "cuda":
        torch.cuda.set_rng_state(cuda_rng, dev)
    return {"history": ckpt["history"]}


def write_results(cfg, model, dev, prec, command, **metrics):
    results = {"config": vars(cfg), "model_config": asdict(model.config), **metrics, "hardware": hardware(dev),
               "precision": prec, "command": shlex.join(command)}
    save_atomic(results, os.path.join(cfg.out_dir, "results.json"))
    print(f"wrote {os.path.join(cfg.out_dir, 'results.json')}")
    return results


def save_atomic(obj, path):
    """A temp file, then a rename: a crash or Ctrl-C leaves the old file or the new one, never part of one."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if path.endswith(".json"):
        with open(path + ".tmp", "w") as f:
            json.dump(obj, f, indent=1)
    else:
        torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def device_and_precision(cfg):
    """(device, autocast context, precision name): "" picks cuda, then mps, then cpu; auto is bf16 on CUDA."""
    mps = torch.backends.mps.is_available()
    try:
        dev = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "mps" if mps else "cpu"))
    except RuntimeError:  # not a device's name
        raise SystemExit(f"error: --device={cfg.device}: use cpu, cuda, cuda:<index> or mps") from None
    if (dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count()) or (dev.type == "mps" and not mps):
        raise SystemExit(f"error: --device={cfg.device}: no such device here: leave it unset for the GPU, else the CPU")
    if cfg.precision == "fp32" or (cfg.precision == "auto" and dev.type != "cuda"):
        return dev, nullcontext(), "fp32"
    # no TF32: CUDA autocast leaves no model matmul fp32; it moved augmented pixels (results/cpu-tf32-*)
    return dev, torch.autocast(dev.type, dtype=torch.bfloat16), "bf16 autocast"


def hardware(dev):
    """The GPU's name, or the CPU's (from /proc/cpuinfo where there is one), its cores and threads."""
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}"
    name = platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    return f"{dev.type.upper()} {name} x{os.cpu_count()} threads {torch.get_num_threads()}, torch {torch.__version__}"


QUICK_RUN = "python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128"


class Progress:
    """What a run costs: an estimate before step 1, then speed and time left per log line (and between, on a tty)."""

    def __init__(self, total_steps, per_step, unit, step):  # per_step `unit`s a step; from step `step` on
        self.total, self.per_step, self.unit, self.start = total_steps, per_step, unit, (step, time.perf_counter())
        self.tty, self.shown = sys.stdout.isatty(), 0.0

    def estimate(self, loss_of_first, model, batch, steps):  # loss_of_first(n): the first n items' step; steps/epoch
        dev = next(model.parameters()).device
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):  # dropout draws as without it
            for n in [batch >> i for i in range(6, -1, -1) if batch >> i]:  # 1/64 of the batch, 1/32, ..., all
                loss_of_first(n).item()  # untimed: a size's first call pays one-time costs
                t = time.perf_counter()
                loss_of_first(n).item()  # .item() waits for the device
                if (seconds := time.perf_counter() - t) >= 1.0:  # long enough to time well
                    break
        model.zero_grad(set_to_none=True)  # training starts without the timing's gradients
        step_s = seconds * batch / n
        self.start = (self.start[0], time.perf_counter())  # the speed counts from here
        left = step_s * (self.total - self.start[0])
        print(f"estimate (forward and backward timed on {n} of the first batch's {batch}): {self.per_step / step_s:.0f}"
              f" {self.unit}/s, {duration(step_s * steps)} per epoch, {duration(left)} for the run (training only)")
        if dev.type == "cpu" and left > 3600:
            print(f"note: over an hour on this CPU (the defaults are the paper's GPU run). A quick run: {QUICK_RUN}")

    def print(self, text, step=None, end="\n"):  # a log line, over the terminal's line; with a step, its speed
        if step is not None:  # the speed since the estimate (or the resume), the time left
            step_s = (time.perf_counter() - self.start[1]) / max(step - self.start[0], 1)
            text += f" | {self.per_step / step_s:.0f} {self.unit}/s | {duration(step_s * (self.total - step))} left"
        print(("\r\033[K" if self.tty else "") + text, end=end, flush=True)

    def update(self, step, loss):  # the terminal's line, at most every 0.5 s: loss.item() waits for the device
        if self.tty and time.perf_counter() - self.shown > 0.5:
            self.shown = time.perf_counter()
            self.print(f"step {step}/{self.total} | loss {loss.item():.4f}", step, end="")


def duration(s):
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


if __name__ == "__main__":
    main()
