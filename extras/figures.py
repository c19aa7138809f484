"""
Figs. 1-2 of the paper (Fig. 7 shows the same products for GPT-2): the attention layers of mimetic_vit.py or
mimetic_lm.py, at init or from a checkpoint, as three PNGs drawn by torchvision (no matplotlib):

    qk.png         W_Q^h W_K^h^T (Fig. 1): columns are layers, rows are heads
    vo.png         W_V W_proj, a panel a layer
    attention.png  each layer's attention map (Fig. 2), averaged over heads and inputs, six layers a row: 64 test
                   images for the ViT ("one CIFAR-10 batch"), 8 windows of seq_len validation tokens for the LM
                   (our choice), whose maps are causal (token i sees tokens <= i)

Weight panels: the top-left 64 x 64 corner of each product as the layer applies it (rows of x are tokens: q = x W_Q),
red > 0 > blue, white at 0, each panel scaled by its own largest |value| (a symmetric scale), 2x zoom. Attention:
darker = more, white = 0 (so the LM's masked upper triangle is white), each layer scaled by its own maximum.

Run from the repository root (each about 8 s of CPU time on one core, measured on a 2-core Xeon):
    python extras/figures.py --program=vit                    # ViT-Tiny, mimetic init -> out/figures-vit-mimetic-seed0/
    python extras/figures.py --program=vit --init=default     # -> out/figures-vit-default-seed0/
    python extras/figures.py --program=lm --dataset=ptb_char  # Sec. 7's PTB shape -> out/figures-lm-mimetic-seed0/
    python extras/figures.py --program=lm --checkpoint=out/lm-ptb_char-mimetic-seed0/best.pt  # -> <run>/figures-best/
README.md's figures are the first three, copied to figures/<program>-<init>-init-<name>.png.

This script's keys: --program=vit|lm (required), --checkpoint=<a run's ckpt.pt or best.pt>, --out=<folder> (default
out/figures-<program>-<init>-seed<seed>, or the checkpoint's folder + /figures-best or -ckpt; a folder that holds
another config's figures (its config.json) is refused). Every other --key=value is the
program's (python mimetic_vit.py --help). Without --checkpoint the model is the program's fresh one, built as its
main() builds it (build_model); with one, the checkpoint's saved config decides the model and its weights are
loaded, so the only program key accepted beside it is --data_dir (where the inputs are read); others are refused.
"""

import json
import math
import os
import sys
from types import SimpleNamespace

import torch
import torchvision.utils as vutils
from einops import rearrange

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_lm as lm  # noqa: E402
import mimetic_vit as mv  # noqa: E402
from keys import load_weights, split_keys  # noqa: E402

PROGRAMS = {"vit": mv, "lm": lm}
KEYS = {"program": "", "checkpoint": "", "out": ""}  # this script's keys, defaults (the module docstring)


def weight_products(model):
    """(qk, vo): W_Q^h W_K^h^T of every layer and head (depth, heads, d, d), W_V W_proj of every layer (depth, d, d),
    as the layer applies them: q = x W_Q with W_Q = (q rows)^T, the output y W_proj with W_proj = proj.weight^T."""
    qk, vo = [], []
    for block in model.blocks:
        W, P = block.attn.qkv.weight.detach().float().cpu(), block.attn.proj.weight.detach().float().cpu()
        d = P.shape[0]
        q, k = (rearrange(W[i * d:(i + 1) * d], "(h k) d -> h k d", h=block.attn.heads) for i in (0, 1))
        qk.append(q.transpose(1, 2) @ k)  # (heads, d, d): (q rows)^T (k rows), per head
        vo.append(W[2 * d:].T @ P.T)      # (d, d): (v rows)^T proj.weight^T
    return torch.stack(qk), torch.stack(vo)


@torch.no_grad()
def attention_scores(model, x, causal):
    """Each layer's attention logits q.k / sqrt(k), (B, h, N, N), one layer at a time. Computed explicitly from the
    layer's qkv (scaled_dot_product_attention does not return them); causal as the LM's layer (is_causal=True):
    -inf above the diagonal. Give a model in eval mode, so that dropout is off."""
    x = model.embed(x)
    for block in model.blocks:
        q, k, _ = rearrange(block.attn.qkv(block.norm1(x)), "b n (three h k) -> three b h n k", three=3,
                            h=block.attn.heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, N, N)
        if causal:
            future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        yield scores
        x = block(x)


@torch.no_grad()
def attention_maps(model, x, causal):
    """Every layer's attention probabilities, averaged over heads and the batch: (depth, N, N)."""
    return torch.stack([torch.softmax(s, dim=-1).mean(dim=(0, 1)) for s in attention_scores(model, x, causal)])


def diverging(m):
    """(n, H, W) -> RGB (n, 3, H, W), each panel over its own largest |value|: red > 0 > blue, white at 0."""
    m = m / m.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)
    return torch.stack([1 + m.clamp(max=0), 1 - m.abs(), 1 - m.clamp(min=0)], dim=1)


def save_figures(model, x, causal, folder, clip=64, zoom=2):
    """qk.png, vo.png and attention.png (see the top of this file) of model on inputs x, into folder; their paths."""
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f) for f in ("qk.png", "vo.png", "attention.png")]
    qk, vo = weight_products(model)
    for path, m in zip(paths, (rearrange(qk, "l h i j -> (h l) i j"), vo)):  # qk: one row of layers per head
        rgb = diverging(m[:, :clip, :clip]).repeat_interleave(zoom, -2).repeat_interleave(zoom, -1)
        vutils.save_image(rgb, path, nrow=len(vo), padding=2, pad_value=1)
    maps = attention_maps(model, x, causal).float().cpu()
    maps = 1 - maps / maps.amax(dim=(1, 2), keepdim=True)  # darker = more, each layer on its own scale
    vutils.save_image(maps[:, None], paths[2], nrow=min(6, len(maps)), padding=2, pad_value=1)
    return paths


def parse(argv):
    """The config of the program --program names, with this script's KEYS added; with --checkpoint, the checkpoint's
    config and data_dir as given. Returns (config, the checkpoint or None)."""
    ours, rest = split_keys(argv, KEYS, __doc__, mv.parse_args)  # rest: the program's keys
    if ours["program"] not in PROGRAMS:
        raise SystemExit(f"error: --program={ours['program']}: use --program=vit or --program=lm")
    program = PROGRAMS[ours["program"]]
    refused = [a for a in rest if not a.startswith("--data_dir=")]
    if ours["checkpoint"] and refused:
        raise SystemExit(f"error: {' '.join(refused)}: with --checkpoint the checkpoint's config decides the model; "
                         f"only --data_dir may be given")
    cfg, ckpt = program.parse_config(rest), None  # a wrong key or value: the program's own error line
    if ours["checkpoint"]:
        if not os.path.isfile(ours["checkpoint"]):
            raise SystemExit(f"error: --checkpoint={ours['checkpoint']}: no such file (name a run's ckpt.pt or "
                             f"best.pt)")
        ckpt = program.load_checkpoint(ours["checkpoint"])
        cfg = SimpleNamespace(**{**vars(cfg), **ckpt["config"], "data_dir": cfg.data_dir})  # defaults: older runs
        if cfg.dataset not in program.DATASETS:  # a run of the other program, or of extras/table4.py
            raise SystemExit(f"error: --checkpoint={ours['checkpoint']}: a {cfg.dataset} run, not one of "
                             f"mimetic_{ours['program']}.py's datasets ({', '.join(program.DATASETS)})")
    vars(cfg).update(ours)
    if not cfg.out and ckpt is not None:  # beside the checkpoint, named after it: best.pt -> figures-best
        run, name = os.path.split(cfg.checkpoint)
        cfg.out = os.path.join(run, "figures-" + os.path.splitext(name)[0])
    elif not cfg.out:
        cfg.out = os.path.join("out", f"figures-{cfg.program}-{cfg.init}-seed{cfg.seed}")
    made = os.path.join(cfg.out, "config.json")  # what drew the figures there: another config's are kept
    drawn = json.load(open(made)) if os.path.exists(made) else {}
    diff = {k: v for k, v in drawn.items() if vars(cfg).get(k) != v and k not in program.RESUME_FREE}
    if diff:
        raise SystemExit(f"error: {cfg.out} holds the figures of another config "
                         f"({', '.join(f'{k}={v!r} there' for k, v in diff.items())}): pass --out=<another folder>")
    return cfg, ckpt


def main(argv=None):
    cfg, ckpt = parse(sys.argv[1:] if argv is None else argv)
    name = cfg.program
    if name == "vit":
        test_x = mv.load_dataset(cfg.dataset, cfg.data_dir)[2]
        model = mv.build_model(cfg, mv.DATASETS[cfg.dataset][3])
        mean, std = mv.norm_stats(mv.MEAN_STD[cfg.dataset], "cpu")
        x = mv.to_input(test_x[:64], mean, std, model.config.image_size)  # (64, 3, size, size)
    else:
        vocab, ids = lm.load_dataset(cfg.dataset, cfg.data_dir)
        model = lm.build_model(cfg, len(vocab))
        valid = ids["valid"].long()
        T = min(cfg.seq_len, len(valid))
        x = valid[:min(8, len(valid) // T) * T].view(-1, T)  # (8, seq_len): the first windows of validation text
    if ckpt is not None:
        load_weights(model, ckpt["model"], f"--checkpoint={cfg.checkpoint}", f"mimetic_{name}.py")
    paths = save_figures(model.eval(), x, causal=name == "lm", folder=cfg.out)
    mv.save_atomic(vars(cfg), os.path.join(cfg.out, "config.json"))
    print("wrote " + ", ".join(paths))
    return paths


if __name__ == "__main__":
    main()
