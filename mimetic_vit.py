"""
Mimetic initialization of self-attention layers, on a Vision Transformer trained on CIFAR-10.

Paper: Trockman & Kolter, "Mimetic Initialization of Self-Attention Layers", ICML 2023,
arXiv 2305.09828. The authors released no code; `mimetic_init_` below is meant to be read beside
Sec. 4 of the paper, one equation per line, with the paper's printed typos in eqs 3-7 named.

This one file holds the whole program, top to bottom: config -> ViT -> mimetic_init_ -> data and
augmentation on the training device -> evaluation -> figures -> main().

Run (GPU, downloads CIFAR-10 into ./data, the paper's ViT-Tiny for 100 epochs, mimetic init):
    python mimetic_vit.py
    python mimetic_vit.py --init=default             # the same model and pipeline without it
CPU smoke run (a few minutes on 2 cores):
    python mimetic_vit.py --width=64 --depth=2 --heads=2 --patch_size=4 --train_subset=2048 \
        --epochs=1 --batch_size=128
Other modes:
    python mimetic_vit.py --benchmark=True           # img/s of forward+backward+step, synthetic input
    python mimetic_vit.py --plot=True                # PNG figures of W_Q W_K^T, W_V W_proj, attention
Expected results (README.md links every number to its results file and log):
  - paper, Table 1, ViT-Tiny, 100 epochs on CIFAR-10: 86.07% (default init) -> 90.78% (mimetic);
    ours on a GPU: not yet measured.
  - ours on a CPU (AMD EPYC, 1 thread per arm, about 20 min each; CIFAR-10 JPEG copy): width 128,
    depth 6, 4 heads, patch 4, first 10,000 training images, batch 128, 10 epochs, seeds 0-2:
    40.37% -> 45.89% (mean of 3 seeds; mimetic ahead on each, by 1.0 to 10.0 points).
"""

import json
import math
import os
import pickle
import platform
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
depth = 12                # number of Transformer blocks
heads = 3                 # attention heads; head dimension k = width / heads
patch_size = 2            # Sec. 5.1: patch 2 on 32x32 inputs -> 256 patches + 1 class token
mlp_ratio = 4             # MLP hidden width = mlp_ratio * width (the standard ViT value)
pos_emb = "sinusoidal"    # sinusoidal (Sec. 5.1) | learned (Table 2 "random pos. embeddings")
pos_scale = 1.0           # g, multiplies the position embeddings (Fig. 4); 1 = standard (our choice)
pos_trainable = True      # position embeddings are a parameter initialised as above (our choice, as timm)
# init (Sec. 4; Sec. 5.1 uses a1 = b1 = 0.7, a2 = b2 = 0.4 for all vision experiments)
init = "mimetic"          # mimetic | default | qk | vo  (Table 2: "init only W_Q, W_K" / "only W_V, W_proj")
alpha1 = 0.7              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1)
beta1 = 0.7               # b1: identity weight in eq 1
alpha2 = 0.4              # a2: noise weight in W_V W_proj ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.4               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1 is Table 2's "W_V W_proj ~ +cI" ablation
# data
dataset = "cifar10"       # cifar10 | cifar100 | svhn (Table 4)
data_dir = "data"         # holds cifar-10-batches-py/ (official python layout) or receives the download
train_subset = 0          # use only the first N training images (0 = all)
ra_n = 2                  # RandAugment: ops per image (torchvision's default; the paper gives none)
ra_m = 9                  # RandAugment: magnitude of 31 bins (torchvision's default; our choice)
cutout = 16               # Cutout square side in pixels (DeVries & Taylor 2017 for CIFAR-10; our choice)
hflip = True              # random horizontal flip (standard for CIFAR; our choice, not in the paper)
# optimisation (Sec. 5.1: batch 512, AdamW, lr 3e-3, weight decay 0.01, 100 epochs)
epochs = 100
batch_size = 512
lr = 3e-3                 # peak learning rate
weight_decay = 0.01       # applied to matrices only, not to biases, norms, tokens (our choice, as nanoGPT)
warmup_frac = 0.05        # linear warmup over this fraction of steps, then cosine to 0 (our choice: the paper
                          # gives no schedule; 0.05 = 5 of 100 epochs)
grad_clip = 1.0           # clip the global gradient norm (our choice; 0 = off)
# system
seed = 0
device = ""               # "" = cuda if available, else cpu
compile = True            # torch.compile the model (CUDA only; skipped on CPU, where it rarely pays off)
eval_batch_size = 1024
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/vit-<dataset>-<init>-seed<seed>
resume = False            # continue from <out_dir>/ckpt.pt (or plot it, with --plot)
stop_epoch = 0            # end this invocation after this epoch (0 = run to the end); resume later
benchmark = False         # time forward+backward+step on synthetic input, print img/s, exit
plot = False              # write PNG figures of the init (or, with --resume, of the checkpoint), exit
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (bool, int, float, str))]
# -----------------------------------------------------------------------------------------------


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
            raise ValueError(f"image size {self.image_size} is not divisible by patch_size {self.patch_size}: "
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

    def attention_probs(self, x):
        """The attention maps, computed explicitly (SDPA does not return them): (B, h, N, N)."""
        q, k, _ = rearrange(self.qkv(x), "b n (three h k) -> three b h n k", three=3, h=self.heads)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)


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

    @torch.no_grad()
    def attention_maps(self, x):
        """Attention probabilities of every layer, averaged over heads and the batch: (depth, N, N)."""
        x, maps = self.embed(x), []
        for block in self.blocks:
            maps.append(block.attn.attention_probs(block.norm1(x)).mean(dim=(0, 1)))
            x = block(x)
        return torch.stack(maps)


# -----------------------------------------------------------------------------------------------
# mimetic initialization (Sec. 4). Depends on torch alone: copy this function into your own model.

@torch.no_grad()
def mimetic_init_(qkv_weight, proj_weight, num_heads, alpha1=0.7, beta1=0.7, alpha2=0.4, beta2=0.4,
                  generator=None):
    """Mimetic init (Trockman & Kolter 2023, Sec. 4), in place, of one self-attention layer.

    qkv_weight: (3d, d), the weight of a fused nn.Linear(d, 3d): rows q, then k, then v, each head a
        contiguous block of k = d / num_heads rows (timm `qkv`, nanoGPT `c_attn`,
        nn.MultiheadAttention `in_proj_weight`).
    proj_weight: (d, d), the weight of the output projection nn.Linear(d, d).

    nn.Linear computes x @ weight.T, so in the paper's row-vector notation (q = x W_Q) the q rows of head
    h hold (W_Q^h)^T, the v rows hold W_V^T and proj_weight holds W_proj^T. Afterwards, as the layer
    applies them:
      - per head h, W_Q^h W_K^h^T is the best rank-k approximation (Eckart-Young) of a1 Z1^h + b1 I,
        with Z1^h drawn afresh for every head (eq 1); its diagonal is weaker than b1 because of the
        truncation (mean about 0.39 for a1 = b1 = 0.7 and k = d/3);
      - W_V W_proj = a2 Z2 - b2 I exactly, up to float rounding (eq 2), one d x d product per layer;
    where Z has i.i.d. N(0, 1/d) entries, as the paper says for both Z1 and Z2. Biases are not touched:
    they keep whatever the caller gave them (the paper speaks only of weights). Draw order with a
    generator: Z1 of head 0, 1, ..., then Z2; the noise is drawn in float64 on the generator's device
    and the SVDs are taken in float64, then cast to the weights' dtype.
    """
    d = proj_weight.shape[0]
    if proj_weight.shape != (d, d) or qkv_weight.shape != (3 * d, d):
        raise ValueError(f"expected qkv_weight (3d, d) and proj_weight (d, d), got "
                         f"{tuple(qkv_weight.shape)} and {tuple(proj_weight.shape)}")
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

    # query/key: printed as eqs 5-7 (with index 2; the indices of eqs 3-4 and 5-7 are swapped in print)
    for h in range(num_heads):
        U, S, Vh = torch.linalg.svd(alpha1 * Z() + beta1 * eye)  # eq 5: a1 Z1 + b1 I = U S V^T, Z1 fresh per head
        W_Q = U[:, :k] * S[:k].sqrt()                            # eq 6: W_Q = U[:, :k] S[:k, :k]^(1/2)   (d, k)
        W_K = Vh[:k].T * S[:k].sqrt()                            # eq 7: W_K = V[:, :k] S[:k, :k]^(1/2); V = Vh^T
        qkv_weight[h * k:(h + 1) * k] = W_Q.T                    # q rows of head h hold W_Q^T
        qkv_weight[d + h * k:d + (h + 1) * k] = W_K.T            # k rows of head h hold W_K^T
    # value/projection: printed as eqs 3-4 (with index 1 and "+ b I")
    U, S, Vh = torch.linalg.svd(alpha2 * Z() - beta2 * eye)      # eq 3: a2 Z2 - b2 I = U S V^T (print: + b1 I)
    W_V = U * S.sqrt()                                           # eq 4: W_V = U S^(1/2) (print: U S, a typo)
    W_proj_T = Vh.T * S.sqrt()                                   # eq 4: W_proj^T = V S^(1/2), so W_V W_proj = U S V^T
    qkv_weight[2 * d:] = W_V.T                                   # v rows hold W_V^T
    proj_weight.copy_(W_proj_T)                                  # proj.weight holds W_proj^T


@torch.no_grad()
def init_attention_(model, init, alpha1, beta1, alpha2, beta2, vo_sign=-1, generator=None):
    """Apply mimetic_init_ to every block of a ViT (after its default init, before torch.compile).

    init: mimetic (all four weights) | qk (only W_Q, W_K) | vo (only W_V, W_proj) | default (none),
    the ablations of Table 2. vo_sign=+1 is Table 2's "W_V W_proj ~ +cI" ablation: negating proj
    turns a2 Z2 - b2 I into a2 (-Z2) + b2 I, and -Z2 has the same law as Z2.
    """
    if init not in ("mimetic", "default", "qk", "vo"):
        raise ValueError(f"unknown init {init!r}: use mimetic, default, qk or vo")
    if vo_sign not in (-1, 1):
        raise ValueError(f"vo_sign must be -1 (the paper) or +1 (Table 2 ablation), got {vo_sign}")
    if init == "default":
        return
    for block in model.blocks:
        qkv, proj = block.attn.qkv.weight, block.attn.proj.weight
        d = proj.shape[0]
        kept_qk, kept_v, kept_proj = qkv[:2 * d].clone(), qkv[2 * d:].clone(), proj.clone()
        mimetic_init_(qkv, proj, block.attn.heads, alpha1, beta1, alpha2, beta2, generator=generator)
        if init == "vo":
            qkv[:2 * d] = kept_qk
        if init == "qk":
            qkv[2 * d:] = kept_v
            proj.copy_(kept_proj)
        elif vo_sign == 1:
            proj.neg_()


# -----------------------------------------------------------------------------------------------
# data: whole dataset as uint8 tensors on the training device; augmentation per sample, per batch

DATASETS = {  # name: (folder of the python-layout files, classes)
    "cifar10": ("cifar-10-batches-py", 10),
    "cifar100": ("cifar-100-python", 100),
    "svhn": ("", 10),
}
MEAN_STD = {"cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
            "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
            "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))}


def _online(url, timeout=5.0):
    """Whether the download host answers at all, so that a machine without network fails at once."""
    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _unpickle(path):
    with open(path, "rb") as f:
        return pickle.load(f, encoding="latin1")  # works for the official files and hand-made copies


def load_dataset(name, root):
    """Returns (train_x, train_y, test_x, test_y): uint8 (N, 3, 32, 32) and int64 (N,) CPU tensors."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: use one of {', '.join(DATASETS)}")
    import torchvision  # only here: the model and the init need torch alone

    if name == "svhn":
        try:
            splits = [torchvision.datasets.SVHN(root, split=s, download=False) for s in ("train", "test")]
        except ImportError as e:
            raise SystemExit(f"error: torchvision reads SVHN's .mat files with scipy: pip install scipy ({e})")
        except RuntimeError:
            url = torchvision.datasets.SVHN.split_list["train"][0]
            if not _online(url):
                raise SystemExit(f"error: SVHN not found in {root}/ and its download host cannot be reached. "
                                 f"Put train_32x32.mat and test_32x32.mat (from {url.rsplit('/', 1)[0]}/) "
                                 f"into {root}/, or pass --data_dir=<folder that holds them>.")
            splits = [torchvision.datasets.SVHN(root, split=s, download=True) for s in ("train", "test")]
        return tuple(t for s in splits for t in (torch.from_numpy(s.data), torch.from_numpy(s.labels).long()))

    folder, _ = DATASETS[name]
    base = os.path.join(root, folder)
    if name == "cifar10":
        train_files, test_files, key = [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "labels"
        tv = torchvision.datasets.CIFAR10
    else:
        train_files, test_files, key = ["train"], ["test"], "fine_labels"
        tv = torchvision.datasets.CIFAR100
    missing = [f for f in train_files + test_files if not os.path.exists(os.path.join(base, f))]
    if missing:
        if not _online(tv.url):
            raise SystemExit(
                f"error: {name} not found: {base}/ lacks {', '.join(missing)}, and the download host cannot "
                f"be reached (no network?). Put the official python-version files ({tv.filename}, unpacked) "
                f"in {base}/, or pass --data_dir=<folder that holds {folder}/>. Without internet, "
                f"README.md shows how to make a local copy.")
        tv(root, train=True, download=True)  # downloads and unpacks into <root>/<folder>/

    def read(files):
        parts = [_unpickle(os.path.join(base, f)) for f in files]
        x = torch.cat([torch.as_tensor(p["data"], dtype=torch.uint8).reshape(-1, 3, 32, 32) for p in parts])
        y = torch.cat([torch.as_tensor(p[key], dtype=torch.long) for p in parts])
        return x, y

    return (*read(train_files), *read(test_files))


# RandAugment (Cubuk et al. 2020) with torchvision's operations and magnitudes
# (torchvision.transforms.v2.RandAugment._AUGMENTATION_SPACE, 31 bins), applied per sample on the
# training device: each sample draws its own op and sign, and each (op, sign) group of the batch is
# transformed at once. The law of each image's transform is that of torchvision's RandAugment.
RA_OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
          "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]
RA_SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
             "Sharpness"}


def _ra_apply(x, op, m, bins=31):
    """One RandAugment op on a uint8 batch (B, C, H, W) at magnitude bin m, signed magnitude if m < 0."""
    from torchvision.transforms.v2 import functional as TF
    sign, m = (-1.0 if m < 0 else 1.0), abs(m)
    H, W = x.shape[-2:]
    frac = m / (bins - 1)  # torchvision's linspace(0, top, bins)[m]
    if op == "Identity":
        return x
    if op in ("ShearX", "ShearY"):
        s = math.degrees(math.atan(sign * 0.3 * frac))
        return TF.affine(x, angle=0.0, translate=[0, 0], scale=1.0, center=[0, 0],
                         shear=[s, 0.0] if op == "ShearX" else [0.0, s])
    if op in ("TranslateX", "TranslateY"):
        t = int(sign * 150.0 / 331.0 * (W if op == "TranslateX" else H) * frac)
        return TF.affine(x, angle=0.0, translate=[t, 0] if op == "TranslateX" else [0, t], scale=1.0,
                         shear=[0.0, 0.0])
    if op == "Rotate":
        return TF.rotate(x, angle=sign * 30.0 * frac)
    factor = 1.0 + sign * 0.9 * frac
    if op == "Brightness":
        return TF.adjust_brightness(x, factor)
    if op == "Color":
        return TF.adjust_saturation(x, factor)
    if op == "Contrast":
        return TF.adjust_contrast(x, factor)
    if op == "Sharpness":
        return TF.adjust_sharpness(x, factor)
    if op == "Posterize":
        return TF.posterize(x, bits=int(round(8 - m / ((bins - 1) / 4))))
    if op == "Solarize":
        return TF.solarize(x, threshold=255.0 * (1.0 - frac))
    if op == "AutoContrast":
        return TF.autocontrast(x)
    return TF.equalize(x)


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


# -----------------------------------------------------------------------------------------------
# evaluation

@torch.no_grad()
def evaluate(model, x, y, mean, std, batch, amp):
    """Full pass over (x, y) without augmentation: (mean loss, accuracy in %)."""
    model.eval()
    loss, correct = torch.zeros((), device=x.device), torch.zeros((), device=x.device)
    for i in range(0, len(x), batch):
        xb, yb = (x[i:i + batch].float() / 255.0 - mean) / std, y[i:i + batch]
        with amp:
            logits = model(xb)
        loss += F.cross_entropy(logits.float(), yb, reduction="sum")
        correct += (logits.argmax(-1) == yb).sum()
    model.train()
    return loss.item() / len(x), 100.0 * correct.item() / len(x)


# -----------------------------------------------------------------------------------------------
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


def save_figures(model, images, folder, clip=64, zoom=2):
    """Write qk.png (Fig. 1 layout: columns are layers, rows are heads), vo.png (one panel a layer) and
    attention.png (Fig. 2: each layer's attention averaged over heads and `images`, one panel a layer).
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
    maps = model.attention_maps(images).float().cpu()  # (depth, N, N)
    maps = maps / maps.amax(dim=(1, 2), keepdim=True)
    vutils.save_image(colorize(maps, SEQUENTIAL), paths[2], nrow=min(6, len(maps)), padding=2, pad_value=1.0)
    return paths


# -----------------------------------------------------------------------------------------------
# config parsing, checkpoints, main

def parse_config(argv):
    """--key=value over the globals above; values take the default's type; unknown keys are errors."""
    defaults = {k: globals()[k] for k in config_keys}
    cfg = dict(defaults)
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            raise ValueError(f"bad argument {arg!r}: use --key=value, e.g. --epochs=10")
        key, val = arg[2:].split("=", 1)
        if key not in defaults:
            raise ValueError(f"unknown config key {key!r}; known keys: {', '.join(config_keys)}")
        kind = type(defaults[key])
        try:
            if kind is bool:
                if val.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                cfg[key] = val.lower() in ("true", "1")
            else:
                cfg[key] = kind(val)
        except ValueError:
            raise ValueError(f"--{key}={val}: expected a {kind.__name__} like the default {defaults[key]!r}")
    cfg = SimpleNamespace(**cfg)
    if not cfg.out_dir:
        cfg.out_dir = os.path.join("out", f"vit-{cfg.dataset}-{cfg.init}-seed{cfg.seed}")
    return cfg


# keys that may differ between a run and the checkpoint it resumes (all others must match)
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir",
               "benchmark", "plot"}


def check_resumable(saved, cfg, path):
    diff = [f"{k}={saved.get(k)!r} there, {getattr(cfg, k)!r} here" for k in config_keys
            if k not in RESUME_FREE and saved.get(k) != getattr(cfg, k)]
    if diff:
        raise ValueError(f"checkpoint {path} is from another config ({'; '.join(diff)}): pass the same "
                         f"settings to resume, or a new --out_dir to start afresh")


def save_checkpoint(path, state):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a crash leaves either the old checkpoint or the new one


def model_config(cfg):
    return ViTConfig(patch_size=cfg.patch_size, num_classes=DATASETS.get(cfg.dataset, ("", 10))[1],
                     width=cfg.width, depth=cfg.depth, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio,
                     pos_emb=cfg.pos_emb, pos_scale=cfg.pos_scale, pos_trainable=cfg.pos_trainable)


def build_model(cfg, dev):
    """The ViT with its default init, then the mimetic init (seeded from cfg.seed), on dev."""
    torch.manual_seed(cfg.seed)
    model = ViT(model_config(cfg))
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    return model.to(dev)


def hardware(dev):
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}"
    name = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    return f"CPU {name} x{os.cpu_count()} threads {torch.get_num_threads()}, torch {torch.__version__}"


def train_flops_per_image(c):
    """Matmul FLOPs of forward + backward for one image (3x forward), ignoring norms and softmax."""
    n, d = c.num_tokens, c.width
    per_layer = 2 * n * (4 * d * d + 2 * c.mlp_ratio * d * d) + 2 * 2 * n * n * d
    return 3 * (c.depth * per_layer + 2 * (n - 1) * c.in_channels * c.patch_size ** 2 * d)


def run_benchmark(cfg, model, dev, amp, steps=20, warmup=5):
    c = model.config
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    net = torch.compile(model) if cfg.compile and dev.type == "cuda" else model
    x = torch.randn(cfg.batch_size, 3, c.image_size, c.image_size, device=dev)
    y = torch.randint(c.num_classes, (cfg.batch_size,), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for i in range(warmup + steps):
        if i == warmup:
            sync()
            t0 = time.perf_counter()
        with amp:
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sync()
    ips = steps * cfg.batch_size / (time.perf_counter() - t0)
    # the augmentation pipeline alone, on the same device
    gen, mean, std = torch.Generator().manual_seed(0), *norm_stats(cfg.dataset, dev)
    xb = torch.randint(256, (cfg.batch_size, 3, c.image_size, c.image_size), dtype=torch.uint8, device=dev)
    augment(xb, gen, cfg, mean, std)
    sync()
    t0 = time.perf_counter()
    for _ in range(5):
        augment(xb, gen, cfg, mean, std)
    sync()
    aug_ips = 5 * cfg.batch_size / (time.perf_counter() - t0)
    tflops = ips * train_flops_per_image(c) / 1e12
    prec = "bf16 autocast" if dev.type == "cuda" else "fp32"
    print(f"augmentation pipeline: {aug_ips:.0f} img/s")
    print(f"benchmark: {ips:.0f} img/s | {tflops:.2f} TFLOP/s (model matmuls) | {hardware(dev)} | {prec} | "
          f"compile {cfg.compile and dev.type == 'cuda'} | width {c.width} depth {c.depth} heads {c.heads} "
          f"patch {c.patch_size} batch {cfg.batch_size}")
    return ips


def norm_stats(name, dev):
    mean, std = MEAN_STD.get(name, MEAN_STD["cifar10"])
    return (torch.tensor(mean, device=dev).view(1, 3, 1, 1), torch.tensor(std, device=dev).view(1, 3, 1, 1))


def main(argv=None):
    cfg = parse_config(sys.argv[1:] if argv is None else argv)
    dev = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for any fp32 matmul left outside autocast
        torch.backends.cudnn.allow_tf32 = True
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else nullcontext()
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    model = build_model(cfg, dev)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{model.config.num_tokens} tokens, {hardware(dev)}")
    ckpt_path = os.path.join(cfg.out_dir, "ckpt.pt")
    ckpt = None
    if cfg.resume:
        if not os.path.exists(ckpt_path):
            raise ValueError(f"--resume=True but there is no checkpoint at {ckpt_path}: check --out_dir")
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        check_resumable(ckpt["config"], cfg, ckpt_path)
        model.load_state_dict(ckpt["model"])
    if cfg.benchmark:
        return run_benchmark(cfg, model, dev, amp)

    train_x, train_y, test_x, test_y = load_dataset(cfg.dataset, cfg.data_dir)
    if cfg.train_subset:
        train_x, train_y = train_x[:cfg.train_subset], train_y[:cfg.train_subset]
    if len(train_x) < cfg.batch_size:
        raise ValueError(f"{len(train_x)} training images but batch_size {cfg.batch_size}: lower --batch_size")
    train_x, train_y, test_x, test_y = (t.to(dev) for t in (train_x, train_y, test_x, test_y))
    mean, std = norm_stats(cfg.dataset, dev)
    if cfg.plot:
        paths = save_figures(model.eval(), (test_x[:64].float() / 255.0 - mean) / std,
                             os.path.join(cfg.out_dir, "figures" if cfg.resume else "figures-init"))
        print("wrote " + ", ".join(paths))
        return paths

    decay, no_decay = [], []  # decay matrices only, not biases, norms or tokens (our choice, as nanoGPT)
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and n not in ("pos_embed", "cls_token") else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.999),
                            fused=dev.type == "cuda")
    steps_per_epoch = len(train_x) // cfg.batch_size  # the last partial batch is dropped (fixed shapes)
    total_steps = cfg.epochs * steps_per_epoch
    warmup_steps = max(1, round(cfg.warmup_frac * total_steps))

    def lr_at(step):  # linear warmup, then cosine decay to 0 (our choice)
        if step < warmup_steps:
            return cfg.lr * (step + 1) / warmup_steps
        return cfg.lr * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total_steps - warmup_steps)))

    gen = torch.Generator().manual_seed(cfg.seed)  # all data randomness: order, flips, RandAugment, Cutout
    history, start_epoch, elapsed = [], 0, 0.0
    if ckpt is not None:
        opt.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["data_rng"])
        torch.set_rng_state(ckpt["cpu_rng"])
        if dev.type == "cuda" and ckpt.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(ckpt["cuda_rng"], dev)
        history, start_epoch, elapsed = ckpt["history"], ckpt["epoch"], ckpt["elapsed"]
        print(f"resumed from {ckpt_path} after epoch {start_epoch}")
    net = model
    if cfg.compile and dev.type == "cuda":
        net = torch.compile(model)  # the checkpoint is always saved from `model`, never from `net`
    os.makedirs(cfg.out_dir, exist_ok=True)

    step = start_epoch * steps_per_epoch
    t_start, t_log, seen = time.perf_counter(), time.perf_counter(), 0
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        perm = torch.randperm(len(train_x), generator=gen).to(dev)
        epoch_stats, log_stats = torch.zeros(2, device=dev), torch.zeros(2, device=dev)  # (loss sum, correct)
        count, log_count = 0, 0
        for i in range(steps_per_epoch):
            idx = perm[i * cfg.batch_size:(i + 1) * cfg.batch_size]
            xb, yb = augment(train_x[idx], gen, cfg, mean, std), train_y[idx]
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            with amp:
                logits = net(xb)
            loss = F.cross_entropy(logits.float(), yb)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            batch_stats = torch.stack([loss.detach() * len(yb), (logits.argmax(-1) == yb).sum()])
            epoch_stats += batch_stats
            log_stats += batch_stats
            count += len(yb)
            log_count += len(yb)
            seen += len(yb)
            if step % cfg.log_interval == 0 or i == steps_per_epoch - 1:
                l, hits = log_stats.tolist()  # syncs once per interval
                l /= log_count
                if not math.isfinite(l):
                    stop_on_nan(step, epoch, ckpt_path)
                now = time.perf_counter()
                print(f"step {step}/{total_steps} | epoch {epoch} | loss {l:.4f} | "
                      f"acc {100 * hits / log_count:.1f} | lr {lr_at(step - 1):.1e} | "
                      f"{seen / (now - t_log):.0f} img/s")
                t_log, seen = now, 0
                log_stats.zero_()
                log_count = 0
        train_loss, train_correct = (v / count for v in epoch_stats.tolist())
        if not math.isfinite(train_loss):
            stop_on_nan(step, epoch, ckpt_path)
        test_loss, test_acc = evaluate(net, test_x, test_y, mean, std, cfg.eval_batch_size, amp)
        t_log = time.perf_counter()  # evaluation is not counted in training img/s
        elapsed_now = elapsed + time.perf_counter() - t_start
        history.append({"epoch": epoch, "train_loss": train_loss, "train_acc": 100 * train_correct,
                        "test_loss": test_loss, "test_acc": test_acc, "elapsed_s": round(elapsed_now, 1)})
        print(f"epoch {epoch}/{cfg.epochs} | train loss {train_loss:.4f} | test loss {test_loss:.4f} | "
              f"test acc {test_acc:.2f} | {elapsed_now / 60:.1f} min")
        save_checkpoint(ckpt_path, {
            "model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "step": step,
            "data_rng": gen.get_state(), "cpu_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None,
            "config": vars(cfg), "history": history, "elapsed": elapsed_now})
        if cfg.stop_epoch and epoch == cfg.stop_epoch and epoch < cfg.epochs:
            print(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None

    results = {"config": vars(cfg), "model_config": asdict(model.config),
               "final_test_acc": history[-1]["test_acc"] if history else None,
               "epochs_done": len(history), "history": history,
               "wall_time_s": round(history[-1]["elapsed_s"] if history else 0.0, 1),
               "hardware": hardware(dev), "command": "python mimetic_vit.py " + " ".join(
                   sys.argv[1:] if argv is None else argv)}
    with open(os.path.join(cfg.out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"final test accuracy {results['final_test_acc']:.2f} | wrote {os.path.join(cfg.out_dir, 'results.json')}")
    return results


def stop_on_nan(step, epoch, ckpt_path):
    kept = f"the last good checkpoint ({ckpt_path}) is kept" if os.path.exists(ckpt_path) else "no checkpoint yet"
    raise SystemExit(f"error: the training loss is not finite at step {step} (epoch {epoch}); stopping. "
                     f"{kept}. Try a lower --lr (with --grad_clip > 0) in a new --out_dir.")


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:
        raise SystemExit(f"error: {e}")
