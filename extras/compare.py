"""
The paper's side comparisons (Sec. 5.1 "Data efficiency", Sec. 6): mimetic_vit.py's ViT, changed here, and
trained by mimetic_vit.train. The paper's numbers are CIFAR-10, ViT-Tiny, 100 epochs; ours are in README.md.

  --compare=       the model                                                      paper
  zero             ZerO (Zhao et al. 2021) on the attention layers only           Table 5: 87.41
  tfixup           T-Fixup (Huang et al. 2020) on attention and MLPs              Table 5: 85.38
  layerscale       LayerScale (Touvron et al. 2021b, eq 9): x + D SelfAttn(..)     Table 5: 89.90
  layerscale_ours  the paper's version (eq 13): D x + SelfAttn(..)                Table 5: 88.68
                   (both keep the W_Q W_K^T init and replace the W_V W_proj one: --init=qk; mimetic: 91.38)
  conv_in          eq 14: Softmax(X W_Q W_K^T X^T + gamma C)                       87.5 (plain attention 88.1)
  conv_out         eq 15: Softmax(X W_Q W_K^T X^T) + gamma C                       89.9
  conv_softmax     eq 15 with C' = Softmax(gamma C), all positive (whole rows)     75
  conv_softmax_local  the same, the softmax over the kernel's k^2 taps only        75
  subset           Fig. 6: a class-balanced random subset, the steps held fixed   Fig. 6 (a plot)
  impulse          impulse (structured) init, Zheng et al. 2025: W_Q W_K^T from    (after the paper)
                   3 x 3 shifts on the patch grid; mimetic's W_V W_proj (below)

Run from the repository root; the laptop recipe's shape, as README.md's tables (add --seed=1, 2, ...):
    R="--width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128"
    python extras/compare.py --compare=zero $R
    python extras/compare.py --compare=layerscale --ls_init=0.1 $R
    python extras/compare.py --compare=conv_out $R
    python extras/compare.py --compare=subset --subset_size=5000 $R     # 20 epochs of 5,000 = 780 steps
    python extras/compare.py --compare=subset --subset_size=5000 --init=default $R
    python extras/compare.py --compare=impulse $R       # beside mimetic_vit.py --init=mimetic --pos_emb=learned $R

This script's keys: --compare (above); --ls_init, the diagonal's initial value (the paper searched ten values
in [0, 1]; Touvron et al. use 0.1 at this depth); --conv_kernel, the side of C's kernel (the paper gives none;
3, our choice); --subset_size, training images for --compare=subset (a multiple of the classes). Every other
--key=value is mimetic_vit.py's (python mimetic_vit.py --help); --init defaults to the arm's paper setting
(qk for the LayerScales, default for ZerO, T-Fixup and C, mimetic for subset and impulse), and impulse also
defaults to --pos_emb=learned (below). Writes results.json as the program does; out_dir defaults to
out/compare-<compare>[-<value>]-<init>-seed<seed>.

Choices the paper leaves open, ours marked:
  - ZerO: Zhao et al.'s Algorithm 1 on each attention layer: W_Q = 0, W_K = W_V = I (the partial identity for a
    head's d -> k map), and W_proj = 0 as the last layer of a residual branch; so W_Q W_K^T = 0 and
    W_V W_proj = 0 (the paper, Sec. 2: "the product of these weights remains zero"). Biases stay 0.
  - T-Fixup: Xavier uniform for every attention and MLP matrix (q, k, v each as its own d x d matrix), then
    v, proj, fc1 and fc2 times 0.67 N^(-1/4), N = depth (Huang et al., Sec. 3.2, encoder). T-Fixup also
    removes LayerNorm and warmup; the paper says nothing, so we keep both (our choice: only the init changes).
  - LayerScale: D is a learnable vector of width entries, on the attention branch only (eqs 9 and 13; Touvron
    et al. also scale the MLP branch); no weight decay on it (as the program's other vectors).
  - C (eqs 14-15): a circular 2D convolution over the patch grid written as a doubly-block-circulant matrix,
    one learnable kernel per head, N(0, 1/kernel^2) entries, and gamma a learnable scalar starting at 1 (our
    choices); the class token's row and column of C are 0, so it attends as plain attention does (our choice).
    The scores keep the program's 1/sqrt(k). conv_softmax takes C' = Softmax(gamma C) over each whole row of P
    patches (still circulant, 1 per row), so the P - k^2 zeros outside the kernel each get exp(0): at init C' is
    nearly uniform, a global average more than a local all-positive convolution (at the laptop shape, P = 64,
    k = 3, seeds 0-2: 0.147 of each row's mass in the kernel on average, 0.11-0.17 over heads, against k^2 / P =
    0.14). conv_softmax_local is the local reading: the softmax over the k^2 taps of each head's kernel, so each
    row of C' has its k^2 kernel entries positive and summing to 1 and zeros elsewhere (our choice; the paper
    does not say which). Both draw the same kernels as the other C arms. The kernels, a (heads, kernel^2)
    matrix, take the program's weight decay on matrices (0.01) and gamma none, as the program's grouping decides
    (our choice, left as it is).
  - Fig. 6: n / 10 images of each class, drawn with --seed (both arms of a seed see the same images); epochs
    scaled so that the optimizer takes the steps of --epochs over the whole training set (the paper does not say
    whether it held epochs or steps fixed; steps, our choice).
  - impulse (Zheng, Li, Saratchandran, Lucey, "Structured Initialization for Vision Transformers", NeurIPS 2025,
    arXiv 2505.19985), from the meaning of their code: osiriszjq/structured_initialization, file
    pytorch-image-models-1.0.22/timm/models/vision_transformer.py, functions impulse_init and
    VisionTransformer.post_init_weights under mode 'impulse' (commit 7cd02f1, which their README.md names). Every
    constant is theirs:
      shift order   head h gets tap (4, 1, 5, 3, 7, 0, 2, 6, 8)[h % 9] of a 3 x 3 kernel (impulse_init's k,
                    kernel_size=3): offsets (dy, dx) = centre, up, right, left, down, then the diagonals; the query
                    patch (r, c) has its impulse at key (r + dy, c + dx), none where that falls off the grid
      target        per layer and head, a P x P map (P patches): 1000 at the impulse (impulse_init's scale=1000.0),
                    elsewhere 3 x N(0, 0.6^2) truncated to [-2, 2] (its 3.0 * trunc_normal_(std=0.6), timm's
                    bounds, which are absolute), drawn afresh for every layer (post_init_weights calls it per layer)
      normalisation 1  the patches' position embeddings (the class token's row left out: pe[1:]) through LayerNorm
                    without affine (impulse_init: F.layer_norm), L = LN(P), (P, d)
      pseudo-inverse   L's pseudo-inverse kept to rank k = head dimension (impulse_init: (L^T L)^+ L^T with the
                    top att_rank = head_dim singular values, the same as L's own top-k pseudo-inverse L_k^+), and
                    A_h = L_k^+ T_h L_k^+^T (d x d), so that L A_h L^T is T_h projected on L's top-k subspace
      factors       A_h = U S V^T; W_Q = U_k S_k^(1/2), W_K = V_k S_k^(1/2) (impulse_init: u_lr, vt_lr)
      normalisation 2  each factor divided by its Frobenius norm and times 7 (impulse_init's .norm('fro');
                    post_init_weights: norm_q = 7.0), so W_Q^h W_K^h^T = 49 A_h / (sum of A_h's singular values)
      position emb. times 18 (post_init_weights: norm_p = 18.0, the class token's row included)
      W_V W_proj    mimetic's: 0.4 Z2 - 0.4 I (post_init_weights calls get_ortho_like(d, heads, 0.4, 0.4, -1) and
                    stores V, Proj transposed, so the layer applies exactly that product, as ours does)
    Where our model differs from theirs, and what the arm does:
      - Position embeddings. Theirs are learned and start N(0, 0.02^2) (VisionTransformer.__init__: torch.randn *
        .02; their README's runs pass weight_init=skip, so timm's init never redraws them): full rank, which the
        rank-k pseudo-inverse needs, and of RMS 0.36 after x18, beside patch embeddings of RMS about 0.58 (PyTorch's
        default init on normalised pixels, theirs and ours). Ours default to 1-D sinusoids over the token index,
        whose LayerNormed patch rows have numerical rank 23 at the laptop shape (64 patches, k = 32) and 55 for
        ViT-Tiny at patch 2 (256 patches, k = 64), below k: a rank-k pseudo-inverse there inverts float32 rounding.
        So the arm defaults to --pos_emb=learned, the program's trunc_normal(std 0.02) (truncated at +-2, 100
        sigma: their draw), times 18: their embeddings. The other arms keep the sinusoids (mimetic_vit.py
        --init=mimetic --pos_emb=learned is the mimetic arm on the same embeddings, as their comparison ran it).
        Given --pos_emb=sinusoidal, the pseudo-inverse keeps at most the embeddings' numerical rank (float32
        precision; our choice, which binds for theirs only on grids of fewer than k patches), and the x18 multiplies
        sinusoids of RMS 0.71 (12.7 after it). The position-only scores then peak at the impulse for 85% of the
        laptop shape's queries, but their softmax is nearly uniform (0.015 at the target, 1/65 = 0.015); with
        --pos_emb=learned, 100% and 0.997 (ViT-Tiny at patch 2: 97% and 0.69). On images the content blurs it:
        extras/fig_inits.py draws the three inits' maps at init.
      - Class token: theirs too (pe[1:] leaves its row out of L; its queries and keys are whatever A gives it).
      - Fused qkv Linear with rows (q, k, v) x heads x head_dim: theirs is timm's, the same layout.
      - The grid: ours is image_size / patch_size a side (8 x 8 at the laptop shape); their CIFAR runs upsample to
        224 at patch 16 (14 x 14). The rest of their model keeps PyTorch's default init (weight_init=skip: e.g.
        q, k, v biases uniform, not 0); ours is the program's default init, shared by every arm.
      - W_V W_proj: their noise is uniform with variance 1/d (get_ortho_like's dist='uniform'); the arm keeps the
        program's mimetic_init_ (normal, the paper's), run by build_model before the arm replaces the q and k rows,
        so W_V W_proj and every weight but q, k and the position embeddings are the mimetic arm's, bit for bit.
    Draws from the arm's own generator (seed + 1), in float64 on one thread (as the program's SVDs), then float32.
"""

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_vit as mv  # noqa: E402
from keys import split_keys  # noqa: E402

KEYS = {"compare": "", "ls_init": 0.1, "conv_kernel": 3, "subset_size": 5000}  # this script's keys, defaults
INIT = {"zero": "default", "tfixup": "default", "layerscale": "qk", "layerscale_ours": "qk", "conv_in": "default",
        "conv_out": "default", "conv_softmax": "default", "conv_softmax_local": "default",
        "subset": "mimetic", "impulse": "mimetic"}  # each arm's paper setting
ARM_KEYS = {"impulse": ["--pos_emb=learned"]}  # other program keys an arm sets unless given (module docstring)


# -----------------------------------------------------------------------------------------------
# Table 5: other initializations

@torch.no_grad()
def zero_init_(model):
    """ZerO (Zhao et al. 2021) on every attention layer: W_Q = 0, W_K = W_V = I, W_proj = 0, biases 0."""
    for block in model.blocks:
        d = block.attn.proj.weight.shape[0]
        eye = torch.eye(d)
        block.attn.qkv.weight.copy_(torch.cat([torch.zeros(d, d), eye, eye]))  # rows q, k, v
        block.attn.proj.weight.zero_()
        block.attn.qkv.bias.zero_()
        block.attn.proj.bias.zero_()


@torch.no_grad()
def tfixup_init_(model, generator):
    """T-Fixup (Huang et al. 2020, encoder): Xavier uniform for the attention and MLP matrices, then v, proj,
    fc1 and fc2 scaled by 0.67 N^(-1/4) for N blocks. Biases stay 0, LayerNorms stay (module docstring)."""
    scale = 0.67 * len(model.blocks) ** -0.25
    for block in model.blocks:
        attn, mlp = block.attn, block.mlp
        for w in (*attn.qkv.weight.chunk(3), attn.proj.weight, mlp.fc1.weight, mlp.fc2.weight):
            nn.init.xavier_uniform_(w, generator=generator)  # q, k, v each its own d x d (chunk is a view)
        for w in (attn.qkv.weight.chunk(3)[2], attn.proj.weight, mlp.fc1.weight, mlp.fc2.weight):
            w.mul_(scale)


class LayerScaleBlock(nn.Module):
    """A block of mimetic_vit.py with a learnable diagonal D = diag(scale) at the attention's skip connection:
    eq 9, x + D SelfAttn(norm(x)) (Touvron et al. 2021b), or with on_skip the paper's version, eq 13,
    D x + SelfAttn(norm(x)), where mimetic init's W_V W_proj ~ a2 Z2 - b2 I acts like D = (1 - b2) I."""

    def __init__(self, block, init_value, on_skip):
        super().__init__()
        self.block, self.on_skip = block, on_skip
        self.scale = nn.Parameter(torch.full((block.attn.proj.weight.shape[0],), float(init_value)))

    def forward(self, x):
        b = self.block
        if self.on_skip:
            x = self.scale * x + b.attn(b.norm1(x))
        else:
            x = x + self.scale * b.attn(b.norm1(x))
        return x + b.mlp(b.norm2(x))


# -----------------------------------------------------------------------------------------------
# eqs 14-15: a convolutional bias on attention

def circulant_index(grid, kernel):
    """(P, P), P = grid^2 patches in raster order: C[i, j] = w[dy + r, dx + r] (r = kernel // 2) where (dy, dx)
    is patch j's position minus patch i's, wrapped around the grid; index kernel^2 (a zero) where it falls
    outside the kernel. So C @ x.flatten() is F.conv2d of the image x, circularly padded."""
    if kernel > grid or kernel % 2 == 0:
        raise SystemExit(f"error: --conv_kernel={kernel} must be odd and at most the patch grid's side {grid}")
    r = kernel // 2
    y, x = torch.arange(grid).repeat_interleave(grid), torch.arange(grid).repeat(grid)
    dy = (y[None, :] - y[:, None] + grid // 2) % grid - grid // 2  # signed offsets in [-grid/2, grid/2)
    dx = (x[None, :] - x[:, None] + grid // 2) % grid - grid // 2
    inside = (dy.abs() <= r) & (dx.abs() <= r)
    return torch.where(inside, (dy + r) * kernel + (dx + r), kernel * kernel)


class ConvBiasAttention(nn.Module):
    """mimetic_vit.Attention (its qkv and proj, as initialised) with gamma C added (module docstring):
    variant in: Softmax(S + gamma C) (eq 14); out: Softmax(S) + gamma C (eq 15); softmax: Softmax(S) +
    Softmax(gamma C) over whole rows; softmax_local: the same over the kernel's taps; S = X W_Q W_K^T X^T / sqrt(k)
    per head, and the result multiplies X W_V."""

    def __init__(self, attn, grid, kernel, variant, generator):
        super().__init__()
        self.heads, self.qkv, self.proj, self.variant = attn.heads, attn.qkv, attn.proj, variant
        self.kernel = nn.Parameter(torch.randn(attn.heads, kernel * kernel, generator=generator) / kernel)
        self.gamma = nn.Parameter(torch.ones(()))
        self.register_buffer("index", circulant_index(grid, kernel), persistent=False)

    def conv_matrix(self, kernel=None):
        """(heads, P, P): one doubly-block-circulant C per head, from its kernel (or the (heads, k^2) taps given)."""
        kernel = self.kernel if kernel is None else kernel
        return F.pad(kernel, (0, 1))[:, self.index]  # the padded zero fills C outside the kernel

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b n (three h k) -> three b h n k", three=3, h=self.heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, N, N)
        if self.variant == "softmax":  # over each row's P entries, the zeros outside the kernel included
            bias = torch.softmax(self.gamma * self.conv_matrix(), dim=-1)
        elif self.variant == "softmax_local":  # over the kernel's k^2 taps; zero outside the kernel
            bias = self.conv_matrix(torch.softmax(self.gamma * self.kernel, dim=-1))
        else:
            bias = self.gamma * self.conv_matrix()
        bias = F.pad(bias, (1, 0, 1, 0))  # the class token (index 0): a zero row and column
        if self.variant == "in":
            attn = torch.softmax(scores + bias, dim=-1)
        else:
            attn = torch.softmax(scores, dim=-1) + bias
        return self.proj(rearrange(attn @ v, "b h n k -> b n (h k)"))


# -----------------------------------------------------------------------------------------------
# Fig. 6: data efficiency

def balanced_subset(labels, n, generator):
    """Sorted indices of n training images, n / classes of each class, drawn at random."""
    classes = int(labels.max()) + 1
    counts = torch.bincount(labels, minlength=classes)
    if n % classes or n // classes > counts.min():
        raise SystemExit(f"error: --subset_size={n} must be a multiple of the {classes} classes and at most "
                         f"{classes * int(counts.min())}")
    picks = []
    for c in range(classes):
        members = torch.nonzero(labels == c).flatten()
        picks.append(members[torch.randperm(len(members), generator=generator)[:n // classes]])
    return torch.cat(picks).sort().values


# -----------------------------------------------------------------------------------------------
# impulse (structured) initialization, Zheng et al. 2025 (after the paper; the module docstring cites each constant)

IMPULSE_TAPS = (4, 1, 5, 3, 7, 0, 2, 6, 8)  # head h's tap of a 3 x 3 kernel, raster order (impulse_init's k)


def impulse_offsets(heads):
    """(dy, dx) on the patch grid for each head: tap IMPULSE_TAPS[h % 9] of the 3 x 3 kernel, so the centre, up,
    right, left, down, then the four diagonals, and again from the centre for a tenth head."""
    return [(IMPULSE_TAPS[h % 9] // 3 - 1, IMPULSE_TAPS[h % 9] % 3 - 1) for h in range(heads)]


def impulse_targets(grid, heads, generator, peak=1000.0, noise=3.0, noise_std=0.6):
    """(heads, P, P) float64, P = grid^2 patches in raster order: row i is query patch i's wished-for scores,
    `peak` at its neighbour (dy, dx) away (none where that falls off the grid: no wrap), and elsewhere `noise` times
    N(0, noise_std^2) truncated to [-2, 2] (impulse_init: scale=1000.0, 3.0 * trunc_normal_(std=0.6))."""
    y, x = torch.arange(grid).repeat_interleave(grid), torch.arange(grid).repeat(grid)
    impulse = torch.stack([(y[None, :] == y[:, None] + dy) & (x[None, :] == x[:, None] + dx)
                           for dy, dx in impulse_offsets(heads)])  # (heads, P, P): [h, query, key]
    tn = nn.init.trunc_normal_(torch.empty(impulse.shape, dtype=torch.float64), std=noise_std, a=-2.0, b=2.0,
                               generator=generator)
    return torch.where(impulse, peak, noise * tn)


@torch.no_grad()
def impulse_init_(model, generator, pos_factor=18.0, qk_factor=7.0):
    """Impulse init of every attention layer's W_Q, W_K (Zheng et al. 2025; module docstring): the position
    embeddings times pos_factor; L = LayerNorm of the patches' rows (P, d); per layer and head, a fresh target T_h
    (impulse_targets) and A_h = L_k^+ T_h L_k^+^T with L's pseudo-inverse at rank k = head dimension (at most L's
    numerical rank); A_h = U S V^T, W_Q = U_k S_k^(1/2), W_K = V_k S_k^(1/2), each scaled to Frobenius norm
    qk_factor. So W_Q^h W_K^h^T = qk_factor^2 A_h / sum(S), and the position-only scores L W_Q W_K^T L^T are T_h
    projected on L's top-k subspace, rescaled. W_V, W_proj, the biases and everything else stay as they are."""
    c = model.config
    d, heads = c.width, c.heads
    k, grid = d // heads, c.image_size // c.patch_size
    model.pos_embed.mul_(pos_factor)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as mimetic_vit.init_attention_: the same bits whatever the thread count
    try:
        L = F.layer_norm(model.pos_embed[0, 1:].double(), (d,))  # (P, d): patches only, the class token's row out
        U, S, Vh = torch.linalg.svd(L, full_matrices=False)
        tol = S[0] * torch.finfo(model.pos_embed.dtype).eps * max(L.shape)  # the embeddings' numerical rank
        rank = min(k, int((S > tol).sum()))
        L_pinv = Vh[:rank].T / S[:rank] @ U[:, :rank].T  # (d, P): L's pseudo-inverse at that rank
        for block in model.blocks:
            A = L_pinv @ impulse_targets(grid, heads, generator) @ L_pinv.T  # (heads, d, d)
            U, S, Vh = torch.linalg.svd(A)
            W_Q = U[..., :k] * S[:, None, :k].sqrt()         # (heads, d, k)
            W_K = Vh[:, :k].mT * S[:, None, :k].sqrt()       # (heads, d, k); V = Vh^T
            W_Q = qk_factor * W_Q / torch.linalg.matrix_norm(W_Q, keepdim=True)  # Frobenius, per head
            W_K = qk_factor * W_K / torch.linalg.matrix_norm(W_K, keepdim=True)
            block.attn.qkv.weight[:d] = rearrange(W_Q, "h d k -> (h k) d")       # q rows of head h hold W_Q^T
            block.attn.qkv.weight[d:2 * d] = rearrange(W_K, "h d k -> (h k) d")  # k rows of head h hold W_K^T
    finally:
        torch.set_num_threads(threads)


# -----------------------------------------------------------------------------------------------
# every arm

def apply_comparison(model, cfg):
    """Changes the freshly built model (after the default and attention inits) as --compare says. Extra
    draws come from their own generator, so torch's RNG (RandAugment) runs as in the program's own runs."""
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    if cfg.compare == "zero":
        zero_init_(model)
    elif cfg.compare == "tfixup":
        tfixup_init_(model, gen)
    elif cfg.compare.startswith("layerscale"):
        blocks = [LayerScaleBlock(b, cfg.ls_init, on_skip=cfg.compare == "layerscale_ours") for b in model.blocks]
        model.blocks = nn.ModuleList(blocks)
    elif cfg.compare == "impulse":
        impulse_init_(model, gen)
    elif cfg.compare.startswith("conv"):
        grid = model.config.image_size // model.config.patch_size
        for b in model.blocks:
            b.attn = ConvBiasAttention(b.attn, grid, cfg.conv_kernel, cfg.compare.removeprefix("conv_"), gen)
    return model


# -----------------------------------------------------------------------------------------------
# main

def parse(argv):
    """The program's config with this script's KEYS added (recorded in results.json, compared on --resume)."""
    ours, rest = split_keys(argv, KEYS, __doc__, mv.parse_args)  # rest: the program's keys
    if ours["compare"] not in INIT:
        raise SystemExit(f"error: pass --compare=one of {', '.join(INIT)} (got {ours['compare'] or 'none'})")
    arm = [f"--init={INIT[ours['compare']]}", *ARM_KEYS.get(ours["compare"], [])]
    cfg = mv.parse_config([*arm, *rest])  # a later --init (or --pos_emb) overrides the arm's
    vars(cfg).update(ours)
    if not any(a.startswith("--out_dir=") and a != "--out_dir=" for a in rest):
        value = {"layerscale": cfg.ls_init, "layerscale_ours": cfg.ls_init, "subset": cfg.subset_size}
        tag = f"{cfg.compare}-{value[cfg.compare]}" if cfg.compare in value else cfg.compare
        cfg.out_dir = os.path.join("out", f"compare-{tag}-{cfg.init}-seed{cfg.seed}")
    return cfg


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse(argv)
    dev, amp, prec = mv.device_and_precision(cfg)
    data = list(mv.load_dataset(cfg.dataset, cfg.data_dir))
    if cfg.train_subset:
        data[0], data[1] = data[0][:cfg.train_subset], data[1][:cfg.train_subset]
    if cfg.compare == "subset":  # Fig. 6: fewer images, as many steps as --epochs over all of them
        steps = cfg.epochs * (len(data[0]) // cfg.batch_size)
        keep = balanced_subset(data[1], cfg.subset_size, torch.Generator().manual_seed(cfg.seed + 2))
        data[0], data[1] = data[0][keep], data[1][keep]
        cfg.epochs = max(1, round(steps / (len(keep) // cfg.batch_size)))
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = mv.open_run(cfg)

    model = apply_comparison(mv.build_model(cfg, mv.DATASETS[cfg.dataset][3]), cfg).to(dev)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {len(data[0]):,} training "
          f"images, {mv.hardware(dev)}, {prec}")
    data[2], data[3] = data[2].to(dev), data[3].to(dev)  # as main(): mv.TrainLoader moves the training set
    history = mv.train(model, data, mv.MEAN_STD[cfg.dataset], cfg, dev, amp, ckpt)
    if history is None:  # --stop_epoch
        return None
    return mv.write_results(cfg, model, dev, prec, ["python", "extras/compare.py", *argv],
                            final_test_acc=history[-1]["test_acc"], epochs_done=len(history), history=history,
                            wall_time_s=history[-1]["elapsed_s"])


if __name__ == "__main__":
    main()
