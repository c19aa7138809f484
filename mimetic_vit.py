"""
Mimetic initialization of self-attention layers, on a Vision Transformer trained on CIFAR-10.

Paper: Trockman & Kolter, "Mimetic Initialization of Self-Attention Layers", ICML 2023, arXiv 2305.09828.
The authors released no code. Read this file top to bottom beside the paper: config -> ViT -> mimetic_init_
(Sec. 4, in the paper's order, one equation per line, the printed typos named) -> data -> evaluation ->
schedule -> train() -> main(), then a short tail of helpers. Side modes live in extras/ and import this file.

Run (GPU, downloads CIFAR-10 into ./data, the paper's ViT-Tiny for 100 epochs, mimetic init):
    python mimetic_vit.py
    python mimetic_vit.py --init=default             # the same model and pipeline without it
CPU quick run, the laptop recipe (all 50,000 training images, 2 epochs; about 10 minutes per arm on one core):
    python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128
--help lists every key with its default and why; --plot=True writes Figs. 1-2; extras/ has the side modes.
Expected results (README.md links every number to its results file and log):
  - paper, Table 1, ViT-Tiny, 100 epochs: 86.07% (default init) -> 90.78% (mimetic); ours on a GPU: not yet run.
  - the laptop recipe (AMD EPYC, 1 thread per arm, fp32, CIFAR-10 JPEG copy), seeds 0-4: 44.93 +- 1.20% (default
    init) -> 48.92 +- 1.90% (mimetic), mean +- std; gap 3.99, standard error 1.04.
"""

import json
import math
import os
import pickle
import platform
import shlex
import sys
import time
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from urllib.error import URLError

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
init = "mimetic"          # mimetic | default | qk, vo (Table 2: only W_Q, W_K / only W_V, W_proj) | simple (Sec. 4)
alpha1 = 0.7              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1)
beta1 = 0.7               # b1: identity weight in eq 1
alpha2 = 0.4              # a2: noise weight in W_V W_proj ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.4               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1 is Table 2's "W_V W_proj ~ +cI" ablation
# data
dataset = "cifar10"       # cifar10 | cifar100 (Table 4; SVHN and Tiny ImageNet: extras/table4.py)
data_dir = "data"         # holds cifar-10-batches-py/ (official python layout) or receives the download
image_size = 0            # resize to this side before patching (Table 7: 32 to 256); 0 = the dataset's own, 32
train_subset = 0          # use only the first N training images (0 = all)
ra_n = 2                  # RandAugment: ops per image (torchvision's default; the paper gives none)
ra_m = 9                  # RandAugment: magnitude, 0-30 of 31 bins (torchvision's default; our choice)
ra_chunk = 8              # images sharing one RandAugment draw of ops (torchvision draws once a call; our choice)
cutout = 16               # Cutout square side in pixels (DeVries & Taylor 2017 for CIFAR-10; our choice)
hflip = True              # random horizontal flip (standard for CIFAR; our choice, not in the paper)
# optimisation (Sec. 5.1: batch 512, AdamW, lr 3e-3, weight decay 0.01, 100 epochs)
epochs = 100              # passes over the training set
batch_size = 512          # images per step (Sec. 5.1)
lr = 3e-3                 # peak learning rate
weight_decay = 0.01       # applied to matrices only, not to biases, norms, tokens (our choice, as nanoGPT)
warmup_frac = 0.05        # linear warmup over this fraction of steps, then cosine to 0 (our choice: none given)
grad_clip = 1.0           # clip the global gradient norm (our choice; 0 = off)
# system
seed = 0                  # the default init, the mimetic noise, the data order and augmentation
device = ""               # "" = cuda if available, else mps if available, else cpu
precision = "auto"        # auto (bf16 autocast on CUDA, else fp32: most CPUs emulate bf16, slowly) | bf16 | fp32
compile = "auto"          # torch.compile the model: auto (CUDA only; on CPU it does not pay) | true | false
eval_batch_size = 1024    # test images per forward pass
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/vit-<dataset>-<init>-seed<seed>
resume = False            # continue from <out_dir>/ckpt.pt (or plot it, with --plot)
stop_epoch = 0            # end this invocation after this epoch (0 = run to the end); resume later
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


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict(  # named, so that the state_dict keys are mlp.fc1.*, mlp.fc2.*
            fc1=nn.Linear(width, mlp_ratio * width), gelu=nn.GELU(), fc2=nn.Linear(mlp_ratio * width, width)))

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

    Z1^h (afresh for every head) and Z2 have i.i.d. N(0, 1/d) entries, as the paper says for both. The rank-k
    truncation (Eckart-Young) weakens the diagonal: mean about 0.39, not 0.7, for a1 = b1 = 0.7 and k = d/3.

    qkv_weight: (3d, d), the weight of a fused nn.Linear(d, 3d): rows q, then k, then v, each head a contiguous
        block of k = d / num_heads rows (timm `qkv`, nanoGPT `c_attn`, nn.MultiheadAttention `in_proj_weight`;
        other layouts: README, "Use it in your own model"). proj_weight: (d, d), of the output nn.Linear(d, d).
    nn.Linear computes x @ weight.T, so in the paper's row-vector notation (q = x W_Q) the q rows of head h
    hold (W_Q^h)^T, the v rows hold W_V^T, and proj_weight holds eq 4's W_proj.
    vo_sign=+1 targets a2 Z2 + b2 I (Table 2, "W_V W_proj ~ +cI"); init_qk / init_vo = False leaves those
    weights as they are (Table 2, "init only W_V, W_proj" / "only W_Q, W_K"). Biases are not touched (the
    paper speaks only of weights). The draws are Z1 of head 0, 1, ..., then Z2, whatever is initialised;
    noise and SVDs are float64 on the generator's device, then cast to the weights' dtype."""
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
def init_attention_(model, init, alpha1, beta1, alpha2, beta2, vo_sign=-1, generator=None):
    """Every block's attention, after the default init and before torch.compile. init: mimetic (both products)
    | qk (only W_Q, W_K) | vo (only W_V, W_proj) | default (none), Table 2's arms, which all draw the same noise;
    simple: Sec. 4's simplest technique (simple_init_, in the tail). The SVDs run on one thread: the same bits
    whatever the thread count (two threads change the last bits at width 384), and faster on a 2-core CPU."""
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


# -----------------------------------------------------------------------------------------------
# data: a dataset lives whole on the training device as uint8 (N, 3, 32, 32) and is augmented there,
# batch by batch, at its own size (so RandAugment and Cutout keep their CIFAR meaning), then resized to
# image_size (Table 7)
DATASETS = {  # name: (folder in the official python layout, file names, label key, classes)
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"], "labels", 10),
    "cifar100": ("cifar-100-python", ["train", "test"], "fine_labels", 100),
}
MEAN_STD = {"cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
            "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))}


def load_dataset(name, root):
    """(train_x, train_y, test_x, test_y): uint8 (N, 3, 32, 32) and int64 (N,) CPU tensors, read from the
    official python layout in <root>/<folder>/, downloaded with torchvision when missing."""
    folder, files, key, _ = DATASETS[name]
    base = os.path.join(root, folder)
    missing = [f for f in files if not os.path.exists(os.path.join(base, f))]
    if missing:
        download(name, root, base, missing)
    xs, ys = [], []
    for f in files:  # pickled dicts of (N, 3072) uint8 rows and labels, read here so that copies work (no md5)
        path = os.path.join(base, f)
        try:
            with open(path, "rb") as fh:
                d = pickle.load(fh, encoding="latin1")
            xs.append(torch.as_tensor(d["data"], dtype=torch.uint8).reshape(-1, 3, 32, 32))
            ys.append(torch.as_tensor(d[key], dtype=torch.long))
        except Exception as e:  # truncated, corrupt or another file: pickle raises many kinds
            raise SystemExit(f"error: {path} is not a readable {name} batch ({type(e).__name__}: {e}): copy it "
                             f"again, or delete {base}/ to download the dataset afresh") from e
        if len(ys[-1]) == 0 or len(ys[-1]) != len(xs[-1]):
            raise SystemExit(f"error: {path} holds {len(xs[-1])} images and {len(ys[-1])} labels: copy it "
                             f"again, or delete {base}/ to download the dataset afresh")
    return torch.cat(xs[:-1]), torch.cat(ys[:-1]), xs[-1], ys[-1]  # the last file is the test set


def augment(x, gen, cfg, mean, std):
    """uint8 (B, 3, H, W) -> normalised float (B, 3, H, W): flip, RandAugment, Cutout. Flips and Cutout
    draw from `gen` per image; RandAugment (torchvision's transform, which draws from torch's global RNG)
    draws its ops once per chunk of cfg.ra_chunk images. Both states are checkpointed."""
    import torchvision.transforms.v2 as T
    B, _, H, W = x.shape
    if cfg.hflip:
        flip = (torch.rand(B, generator=gen) < 0.5).to(x.device)
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    if cfg.ra_n > 0:
        randaugment = T.RandAugment(num_ops=cfg.ra_n, magnitude=cfg.ra_m)
        x = torch.cat([randaugment(chunk) for chunk in x.split(cfg.ra_chunk)])
    x = (x.float() / 255.0 - mean) / std
    if cfg.cutout > 0:  # DeVries & Taylor 2017: zero (the mean) a square clipped at the border, centred anywhere
        cy, cx = (torch.randint(n, (B, 1), generator=gen).to(x.device) for n in (H, W))
        ys, xs = torch.arange(H, device=x.device), torch.arange(W, device=x.device)
        inside_y = (ys >= cy - cfg.cutout // 2) & (ys < cy - cfg.cutout // 2 + cfg.cutout)  # (B, H)
        inside_x = (xs >= cx - cfg.cutout // 2) & (xs < cx - cfg.cutout // 2 + cfg.cutout)  # (B, W)
        x = x.masked_fill((inside_y[:, :, None] & inside_x[:, None, :])[:, None], 0.0)
    return x


def resize(x, size):
    """Normalised float (B, 3, H, W) -> (B, 3, size, size), bilinear (our choice: the paper does not say
    how Table 7's 64-256 pixel inputs were made from CIFAR); the batch itself when already that size."""
    if x.shape[-2:] == (size, size):
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", antialias=x.shape[-1] > size)


def to_input(x, mean, std, size):
    """uint8 images (B, 3, H, W), not augmented (test images, figures) -> normalised float at the model's size."""
    return resize((x.float() / 255.0 - mean) / std, size)


# -----------------------------------------------------------------------------------------------
# evaluation

@torch.no_grad()
def evaluate(model, x, y, mean, std, batch, amp):
    """Full pass over (x, y) without augmentation: (mean loss, accuracy in %)."""
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


# -----------------------------------------------------------------------------------------------
# schedule (our choice: the paper gives none)

def get_lr(step, total_steps, warmup_steps, peak):
    """Linear warmup to `peak` over warmup_steps, then cosine decay to 0 at total_steps."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total_steps - warmup_steps)))


def make_optimizer(model, lr, weight_decay, dev):
    """AdamW (Sec. 5.1); weight decay on matrices only, not on biases, norms, class token or position
    embeddings (our choice, as nanoGPT: decaying the position embeddings would erode the sinusoids)."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and n not in ("pos_embed", "cls_token") else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999),
                             fused=dev.type == "cuda")


# -----------------------------------------------------------------------------------------------
# training

def forward_backward(net, xb, yb, amp):
    """One batch's loss (in fp32, whatever the precision) and its gradients."""
    with amp:
        logits = net(xb)
    loss = F.cross_entropy(logits.float(), yb)
    loss.backward()
    return loss, logits


def train(model, data, norm, cfg, dev, amp, ckpt=None):
    """AdamW on data = (train_x, train_y, test_x, test_y), uint8 images normalised with norm = (mean, std);
    evaluates and checkpoints after every epoch. Returns the history, or None when stopped by --stop_epoch."""
    train_x, train_y, test_x, test_y = data
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay, dev)
    steps_per_epoch = len(train_x) // cfg.batch_size  # the last partial batch is dropped (fixed shapes)
    total_steps = cfg.epochs * steps_per_epoch
    warmup_steps = max(1, round(cfg.warmup_frac * total_steps))
    gen = torch.Generator().manual_seed(cfg.seed)  # data order, flips, Cutout (RandAugment: torch's own RNG)
    history = restore(ckpt, opt, gen) if ckpt else []  # a resumed run continues bit for bit
    compile_it = cfg.compile == "true" or (cfg.compile == "auto" and dev.type == "cuda")  # a CPU gains nothing
    net = torch.compile(model) if compile_it else model  # checkpoints save `model`, without _orig_mod.
    step = len(history) * steps_per_epoch
    t_start = time.perf_counter() - (history[-1]["elapsed_s"] if history else 0.0)  # wall time across resumes
    progress = Progress(total_steps, steps_per_epoch, cfg.batch_size, step, dev)
    for epoch in range(len(history) + 1, cfg.epochs + 1):
        perm = torch.randperm(len(train_x), generator=gen).to(dev)
        sums = torch.zeros(2, 3, device=dev)  # (this epoch, this log interval) x (loss * n, correct, n)
        for i in range(steps_per_epoch):
            idx = perm[i * cfg.batch_size:(i + 1) * cfg.batch_size]
            xb = resize(augment(train_x[idx], gen, cfg, *norm), model.config.image_size)
            yb = train_y[idx]
            if progress.first:  # time a slice of this batch, so that the first estimate comes within seconds
                progress.probe(lambda n: forward_backward(model, xb[:n], yb[:n], amp)[0], model)
            lr = get_lr(step, total_steps, warmup_steps, cfg.lr)
            for group in opt.param_groups:
                group["lr"] = lr
            loss, logits = forward_backward(net, xb, yb, amp)
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            sums += torch.stack([loss.detach() * len(yb), (logits.argmax(-1) == yb).sum(), torch.tensor(len(yb), device=dev)])
            progress.update(step, loss)  # on a terminal only: one line, rewritten in place
            if step % cfg.log_interval == 0 or i == steps_per_epoch - 1:
                loss_sum, hits, n = sums[1].tolist()  # the only wait for the device between log lines
                progress.print(f"step {step}/{total_steps} | epoch {epoch} | loss {loss_sum / n:.4f} | "
                               f"acc {100 * hits / n:.1f} | lr {lr:.1e}", step)
                sums[1] = 0
        loss_sum, hits, n = sums[0].tolist()
        test_loss, test_acc = evaluate(net, test_x, test_y, *norm, cfg.eval_batch_size, amp)
        if not math.isfinite(test_loss):  # never checkpoint weights that evaluate to NaN
            raise SystemExit(f"error: the test loss is not finite after epoch {epoch}; the last checkpoint is kept")
        history.append({"epoch": epoch, "train_loss": loss_sum / n, "train_acc": 100 * hits / n, "test_loss": test_loss,
                        "test_acc": test_acc, "elapsed_s": round(time.perf_counter() - t_start, 1)})
        progress.print(f"epoch {epoch}/{cfg.epochs} | train loss {loss_sum / n:.4f} | test loss {test_loss:.4f} | "
                       f"test acc {test_acc:.2f} | {history[-1]['elapsed_s'] / 60:.1f} min")
        save_checkpoint(model, opt, gen, history, cfg)
        if epoch == cfg.stop_epoch and epoch < cfg.epochs:
            print(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None
    return history


# -----------------------------------------------------------------------------------------------
# main

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_config(argv)
    dev, amp, prec = device_and_precision(cfg)  # bf16 autocast on CUDA, fp32 elsewhere; the loss is fp32
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = prepare_out_dir(cfg)  # the checkpoint to resume, or None; never another run's folder

    torch.manual_seed(cfg.seed)  # the default init (timm's), then the attention init from its own generator
    model = ViT(model_config(cfg))
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    model.to(dev)  # the init ran on the CPU: the same weights on every device
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{model.config.num_tokens} tokens, {hardware(dev)}, {prec}")

    data = [t.to(dev) for t in load_dataset(cfg.dataset, cfg.data_dir)]
    if cfg.train_subset:
        data[0], data[1] = data[0][:cfg.train_subset], data[1][:cfg.train_subset]
    if len(data[0]) < cfg.batch_size:
        raise SystemExit(f"error: {len(data[0])} training images but batch_size {cfg.batch_size}: lower --batch_size")
    mean, std = norm_stats(MEAN_STD[cfg.dataset], dev)
    if cfg.plot:  # Figs. 1-2 for 64 test images, of the fresh model or (with --resume) of the checkpoint
        images = to_input(data[2][:64], mean, std, model.config.image_size)
        return save_figures(model.eval(), images, os.path.join(cfg.out_dir, "figures" if ckpt else "figures-init"))

    history = train(model, data, (mean, std), cfg, dev, amp, ckpt)
    if history is None:  # stopped by --stop_epoch
        return None
    return write_results(cfg, model, history, dev, prec, ["python", "mimetic_vit.py", *argv])


# ===============================================================================================
# tail: helpers the paper does not need (arguments, checkpoints, device, download, figures, progress)

# Sec. 4's "simplest technique" (--init=simple; Fig. 3, extras/fig3.py): the construction the paper
# sets aside for mimetic_init_, kept as an ablation
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
CHOICES = {"init": INITS, "dataset": tuple(DATASETS), "pos_emb": ("sinusoidal", "learned"), "vo_sign": (-1, 1),
           "precision": ("auto", "bf16", "fp32"), "compile": ("auto", "true", "false")}
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir",
               "out_dir", "plot"}  # keys that may differ between a run and the checkpoint it resumes


def parse_config(argv):
    """The config globals above, overridden by --key=value (converted to the default's type). The mistakes
    users make are one `error:` line, before any work."""
    if "-h" in argv or "--help" in argv:  # the config block above: every key with its default and why
        src = open(os.path.abspath(__file__), encoding="utf-8").read()
        print(src[src.index("# config:"):src.index("config_keys =")])
        raise SystemExit(0)
    cfg = {k: globals()[k] for k in config_keys}
    for arg in argv:
        key, eq, val = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or not eq:
            raise SystemExit(f"error: bad argument {arg!r}: use --key=value, e.g. --epochs=10 (--help lists the keys)")
        if key not in cfg:
            raise SystemExit(f"error: unknown config key {key!r}; known keys: {', '.join(config_keys)}")
        try:
            bools = {"true": True, "1": True, "false": False, "0": False}
            cfg[key] = bools[val.lower()] if isinstance(cfg[key], bool) else type(cfg[key])(val)
        except (KeyError, ValueError):
            raise SystemExit(f"error: --{key}={val}: expected a {type(cfg[key]).__name__} like the default "
                             f"{cfg[key]!r}") from None
    c = SimpleNamespace(**cfg)
    for key, allowed in CHOICES.items():
        if getattr(c, key) not in allowed:
            raise SystemExit(f"error: --{key}={getattr(c, key)} must be one of {', '.join(map(str, allowed))}")
    if c.width % c.heads:
        raise SystemExit(f"error: width {c.width} is not divisible by heads {c.heads}: choose heads that divide it")
    if (c.image_size or 32) % c.patch_size:
        raise SystemExit(f"error: image_size {c.image_size or 32} is not divisible by patch_size {c.patch_size}: "
                         f"choose a patch size that divides it (e.g. 2, 4 or 8 for 32x32 images)")
    c.out_dir = c.out_dir or os.path.join("out", f"vit-{c.dataset}-{c.init}-seed{c.seed}")
    return c


def build_model(cfg, model_cfg):
    """The model as main() builds it, for the scripts in extras/: the default init (timm's, from torch's RNG
    seeded with cfg.seed), then the attention init (from its own generator), on the CPU."""
    torch.manual_seed(cfg.seed)
    model = ViT(model_cfg)
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    return model


def norm_stats(mean_std, dev):
    """Per-channel (mean, std), as in MEAN_STD, -> two (1, 3, 1, 1) tensors on the device."""
    return tuple(torch.tensor(v, device=dev).view(1, 3, 1, 1) for v in mean_std)


def model_config(cfg):
    return ViTConfig(image_size=cfg.image_size or 32, patch_size=cfg.patch_size, num_classes=DATASETS[cfg.dataset][3],
                     width=cfg.width, depth=cfg.depth, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio,
                     pos_emb=cfg.pos_emb, pos_scale=cfg.pos_scale, pos_trainable=cfg.pos_trainable)


def prepare_out_dir(cfg):
    """The checkpoint to resume (None for a new run). A new run never writes into a folder that holds another
    run's files; --resume needs a checkpoint made with the same config."""
    path = os.path.join(cfg.out_dir, "ckpt.pt")
    found = [f for f in ("ckpt.pt", "results.json") if os.path.exists(os.path.join(cfg.out_dir, f))]
    if found and not cfg.resume and not cfg.plot:
        raise SystemExit(f"error: {cfg.out_dir} already holds {', '.join(found)} of another run: continue it with "
                         f"--resume=True, or pass another --out_dir (or delete the folder to start afresh)")
    if not cfg.resume:
        return None  # the folder is made by the first checkpoint: a run that fails before it leaves nothing
    if not os.path.exists(path):
        raise SystemExit(f"error: --resume=True but there is no checkpoint at {path}: check --out_dir")
    ckpt = load_checkpoint(path)
    diff = [f"{k}={v!r} there, {getattr(cfg, k, None)!r} here" for k, v in ckpt["config"].items()
            if k not in RESUME_FREE and v != getattr(cfg, k, None)]
    if diff:
        raise SystemExit(f"error: checkpoint {path} is from another config ({'; '.join(diff)}): pass the same "
                         f"settings to resume, or a new --out_dir to start afresh")
    return ckpt


def save_checkpoint(model, opt, gen, history, cfg):
    """<out_dir>/ckpt.pt: the uncompiled model, optimizer, history, both random streams and the config. Atomic:
    a temp file, then a rename, so a crash or Ctrl-C leaves the old file or the new one."""
    path = os.path.join(cfg.out_dir, "ckpt.pt")
    os.makedirs(cfg.out_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "history": history,
                "data_rng": gen.get_state(), "cpu_rng": torch.get_rng_state(), "config": vars(cfg)}, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(path):
    """A checkpoint file, on the CPU; one that cannot be read stops the run, naming the file."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # truncated or overwritten: torch and pickle raise many kinds
        raise SystemExit(f"error: {path} is not a readable checkpoint ({type(e).__name__}: {e}): put back a good "
                         f"copy, or start afresh with another --out_dir") from e


def restore(ckpt, opt, gen):
    """The optimizer and both random streams from a checkpoint, so that the run continues bit for bit; returns
    the history so far."""
    opt.load_state_dict(ckpt["optimizer"])
    gen.set_state(ckpt["data_rng"])
    torch.set_rng_state(ckpt["cpu_rng"])
    return ckpt["history"]


def write_results(cfg, model, history, dev, prec, command):
    """<out_dir>/results.json: config, metrics, wall time, hardware, precision and the command, quoted."""
    results = {"config": vars(cfg), "model_config": asdict(model.config),
               "final_test_acc": history[-1]["test_acc"], "epochs_done": len(history), "history": history,
               "wall_time_s": history[-1]["elapsed_s"], "hardware": hardware(dev), "precision": prec,
               "command": shlex.join(command)}
    with open(os.path.join(cfg.out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"final test accuracy {results['final_test_acc']:.2f} | wrote {os.path.join(cfg.out_dir, 'results.json')}")
    return results


def device_and_precision(cfg):
    """(device, autocast context, precision name). device "" picks cuda, then mps, then cpu; precision auto
    is bf16 autocast on CUDA and fp32 elsewhere."""
    mps = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    dev = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "mps" if mps else "cpu"))
    if cfg.precision == "fp32" or (cfg.precision == "auto" and dev.type != "cuda"):
        return dev, nullcontext(), "fp32"
    torch.set_float32_matmul_precision("high")  # TF32 for any fp32 matmul left outside autocast
    return dev, torch.autocast(dev.type, dtype=torch.bfloat16), "bf16 autocast"


def hardware(dev):
    """The GPU's name, or the CPU's model name (from /proc/cpuinfo where there is one), its cores and threads."""
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}"
    name = platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    return f"{dev.type.upper()} {name} x{os.cpu_count()} threads {torch.get_num_threads()}, torch {torch.__version__}"


def download(name, root, base, missing):
    """torchvision's download of the official python version, unpacked into <root>/<folder>/; offline, one
    error line that names the folder and the fix (a machine without network fails within seconds)."""
    import torchvision
    tv = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
    try:
        tv(root, train=True, download=True)
    except URLError as e:  # no network, or the host does not answer
        raise SystemExit(f"error: {name} not found: {base}/ lacks {', '.join(missing)}, and the download failed "
                         f"({e.reason}). Put the official python-version files ({tv.filename}, unpacked) in "
                         f"{base}/, or pass --data_dir=<folder that holds {os.path.basename(base)}/>") from None


# figures (Fig. 1: the weight products; Fig. 2: attention maps), drawn with torchvision.utils

@torch.no_grad()
def attention_maps(model, x):
    """Attention probabilities of every layer, averaged over heads and the batch: (depth, N, N). Computed
    explicitly: scaled_dot_product_attention does not return them."""
    x, maps = model.embed(x), []
    for block in model.blocks:
        q, k, _ = rearrange(block.attn.qkv(block.norm1(x)), "b n (three h k) -> three b h n k", three=3,
                            h=block.attn.heads)
        maps.append(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1).mean(dim=(0, 1)))
        x = block(x)
    return torch.stack(maps)


def save_figures(model, inputs, folder, clip=64):
    """qk.png (Fig. 1: W_Q^h W_K^h^T, columns are layers, rows are heads), vo.png (W_V W_proj, a panel a
    layer): the top-left clip x clip corner as the layer applies it, each panel scaled by its max |value|,
    red > 0 > blue. attention.png (Fig. 2): each layer's map averaged over heads and inputs, darker = more,
    each layer scaled by its own maximum."""
    import torchvision.utils as vutils
    os.makedirs(folder, exist_ok=True)
    qk, vo = [], []
    for block in model.blocks:
        W, d = block.attn.qkv.weight.detach().float().cpu()[:, :clip], block.attn.proj.weight.shape[0]
        q, k = (rearrange(W[i * d:(i + 1) * d], "(h k) d -> h k d", h=block.attn.heads) for i in (0, 1))
        qk.append(q.transpose(1, 2) @ k)  # W_Q^h W_K^h^T = (q rows)^T (k rows), per head
        vo.append(W[2 * d:].T @ block.attn.proj.weight.detach().float().cpu()[:clip].T)  # (v rows)^T proj.weight^T
    paths = [os.path.join(folder, f) for f in ("qk.png", "vo.png", "attention.png")]
    for path, m in zip(paths, (rearrange(torch.stack(qk), "l h i j -> (h l) i j"), torch.stack(vo))):
        m = m / m.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)
        rgb = torch.stack([1 + m.clamp(max=0), 1 - m.abs(), 1 - m.clamp(min=0)], dim=1)
        vutils.save_image(F.interpolate(rgb, scale_factor=2), path, nrow=len(qk), padding=2, pad_value=1)  # 2x zoom
    maps = attention_maps(model, inputs).float().cpu()
    maps = 1 - maps / maps.amax(dim=(1, 2), keepdim=True)  # each layer on its own scale
    vutils.save_image(maps[:, None], paths[2], nrow=min(6, len(maps)), padding=2, pad_value=1)
    print("wrote " + ", ".join(paths))
    return paths


# progress: what a run costs, said within seconds and kept current (a default run on a CPU is days long)

QUICK_RUN = "python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128"


class Progress:
    """Speed and time left: first from forward and backward on slices of the first batch (one step at the
    default shape takes over half a minute on a CPU), then from the steps taken since, evaluation included.
    On a terminal, one line rewritten in place between the log lines; into a file, the log lines only."""

    def __init__(self, total_steps, steps_per_epoch, batch_size, step, dev):
        self.total, self.per_epoch, self.batch, self.dev = total_steps, steps_per_epoch, batch_size, dev
        self.first, self.tty, self.shown = True, sys.stdout.isatty(), 0.0
        self.start = (step, time.perf_counter())

    def probe(self, forward_backward, model):
        """forward_backward(n): the loss of the batch's first n images, and its gradients, which are dropped;
        the ViT draws no random numbers, so training is as without the probe."""
        step_s, n = time_per_batch(forward_backward, self.batch)
        model.zero_grad(set_to_none=True)
        self.first, self.start = False, (self.start[0], time.perf_counter())
        left = step_s * (self.total - self.start[0])
        print(f"estimate (forward and backward timed on up to {n} of the first batch's {self.batch} images): "
              f"{self.batch / step_s:.0f} img/s, {duration(step_s * self.per_epoch)} per epoch, {duration(left)} "
              f"for the run (training only)")
        if self.dev.type == "cpu" and left > 3600:
            print(f"note: over an hour on this CPU (the defaults are the paper's GPU run); it goes on as asked. "
                  f"The laptop recipe takes about 10 minutes: {QUICK_RUN}")

    def rate_and_left(self, step):
        """(images per second, seconds left) from the steps taken since the probe."""
        step_s = (time.perf_counter() - self.start[1]) / max(step - self.start[0], 1)
        return self.batch / step_s, step_s * (self.total - step)

    def print(self, text, step=None):
        if step is not None:
            rate, left = self.rate_and_left(step)
            text += f" | {rate:.0f} img/s | {duration(left)} left"
        print(("\r\033[K" if self.tty else "") + text, flush=True)  # over the in-place line, if any

    def update(self, step, loss):
        if self.tty and time.perf_counter() - self.shown > 0.5:  # loss.item() waits for the device: not too often
            self.shown = time.perf_counter()
            rate, left = self.rate_and_left(step)
            print(f"\rstep {step}/{self.total} | loss {loss.item():.4f} | {rate:.0f} img/s | {duration(left)} left"
                  f"\033[K", end="", flush=True)


def time_per_batch(forward_backward, batch):
    """(seconds for forward and backward of the whole batch, the largest slice timed). Slices double from
    batch / 32 until a call takes a second; the line through the last two timings (a fixed cost plus a cost
    per image) is extended to the batch, where scaling one timing in proportion would count the fixed cost
    once per slice."""
    def seconds(n):
        t = time.perf_counter()
        forward_backward(n).item()  # .item() waits for the device
        return time.perf_counter() - t

    n = max(2, batch // 32)
    forward_backward(n)  # once untimed: the first call pays one-time costs
    points = [(n // 2, seconds(n // 2)), (n, seconds(n))]
    while points[-1][1] < 1.0 and n < batch:
        n = min(2 * n, batch)
        points.append((n, seconds(n)))
    (n0, t0), (n1, t1) = points[-2:]
    return t1 + max(t1 - t0, 0.0) / (n1 - n0) * (batch - n1), n1


def duration(s):
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


if __name__ == "__main__":
    main()
