"""Pictures of mimetic_lm.py's attention layers (Fig. 7 shows the same products for GPT-2), no matplotlib:

    qk.png         W_Q^h W_K^h^T of every head (columns: layers, rows: heads), top-left 64 x 64 corner
    vo.png         W_V W_proj of every layer, as the layer applies it
    attention.png  each layer's causal attention map, averaged over heads and 8 windows of validation text

Weight panels use a symmetric diverging scale (blue < 0 < red), each scaled by its own largest |value|.
Takes mimetic_lm.py's --key=value keys; the model is built as mimetic_lm.main() builds it, or, with
--resume=True, read from <out_dir>/ckpt.pt (whose settings are used). Figures go to <out_dir>/figures-init/
(fresh model) or <out_dir>/figures/ (checkpoint).

    python extras/figures_lm.py --dataset=ptb_char --width=128 --depth=4 --heads=4 --seq_len=128
    python extras/figures_lm.py --out_dir=out/lm-ptb_char-mimetic-seed0 --resume=True
"""
import math
import os
import sys
from types import SimpleNamespace

import torch
import torchvision.utils as vutils
from einops import rearrange

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mimetic_lm  # noqa: E402

DIVERGING = [(0.02, 0.19, 0.38), (0.26, 0.58, 0.76), (0.97, 0.97, 0.97), (0.84, 0.38, 0.30), (0.40, 0.0, 0.12)]
SEQUENTIAL = [(0.27, 0.00, 0.33), (0.23, 0.32, 0.55), (0.13, 0.57, 0.55), (0.37, 0.79, 0.38), (0.99, 0.91, 0.14)]


def colorize(v, anchors):
    """Values in [0, 1], shape (..., H, W) -> RGB (..., 3, H, W), interpolating linearly between anchor colours."""
    a = torch.tensor(anchors, dtype=torch.float32)  # (K, 3)
    t = v.clamp(0, 1) * (len(a) - 1)
    i = t.floor().long().clamp(max=len(a) - 2)
    w = (t - i)[..., None]
    return ((1 - w) * a[i] + w * a[i + 1]).movedim(-1, -3)


def weight_products(model):
    """Per layer: W_Q^h W_K^h^T of every head (h, d, d) and W_V W_proj (d, d), as the layer applies them."""
    qk, vo = [], []
    for block in model.blocks:
        W, P = block.attn.qkv.weight.detach().float().cpu(), block.attn.proj.weight.detach().float().cpu()
        d, h = P.shape[0], block.attn.heads
        Wq, Wk = rearrange(W[:d], "(h k) d -> h k d", h=h), rearrange(W[d:2 * d], "(h k) d -> h k d", h=h)
        qk.append(Wq.transpose(1, 2) @ Wk)  # W_Q^h W_K^h^T = (q rows)^T (k rows)
        vo.append(W[2 * d:].T @ P.T)        # W_V W_proj = (v rows)^T proj.weight^T
    return qk, vo


@torch.no_grad()
def attention_maps(model, idx):
    """Every layer's attention probabilities, averaged over heads and the batch: (depth, T, T). Computed
    explicitly (scaled_dot_product_attention does not return them), with the causal mask the model uses."""
    x, maps = model.embed(idx), []
    for block in model.blocks:
        q, k, _ = rearrange(block.attn.qkv(block.norm1(x)), "b n (three h k) -> three b h n k", three=3,
                            h=block.attn.heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T, T)
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
        maps.append(torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1).mean(dim=(0, 1)))
        x = block(x)
    return torch.stack(maps)


def save_figures(model, idx, folder, clip=64, zoom=2):
    """Write qk.png, vo.png and attention.png into folder; returns their paths."""
    os.makedirs(folder, exist_ok=True)

    def panels(mats):  # (n, d, d) -> (n, 3, zoom * clip, zoom * clip)
        m = mats[:, :clip, :clip]
        m = m / m.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)
        return colorize((m + 1) / 2, DIVERGING).repeat_interleave(zoom, -1).repeat_interleave(zoom, -2)

    qk, vo = weight_products(model)
    paths = [os.path.join(folder, f) for f in ("qk.png", "vo.png", "attention.png")]
    by_head = rearrange(torch.stack(qk), "layer head i j -> (head layer) i j")
    vutils.save_image(panels(by_head), paths[0], nrow=len(qk), padding=2, pad_value=1.0)
    vutils.save_image(panels(torch.stack(vo)), paths[1], nrow=len(vo), padding=2, pad_value=1.0)
    maps = attention_maps(model, idx).float().cpu()  # (depth, T, T), 0 above the diagonal
    maps = maps / maps.amax(dim=(1, 2), keepdim=True)
    vutils.save_image(colorize(maps, SEQUENTIAL), paths[2], nrow=min(6, len(maps)), padding=2, pad_value=1.0)
    return paths


def main(argv=None):
    cfg = mimetic_lm.parse_config(sys.argv[1:] if argv is None else argv)
    ckpt = None
    if cfg.resume:
        path = os.path.join(cfg.out_dir, "ckpt.pt")
        if not os.path.exists(path):
            raise SystemExit(f"error: --resume=True but there is no checkpoint at {path}: check --out_dir")
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        cfg = SimpleNamespace(**{**ckpt["config"], "out_dir": cfg.out_dir, "data_dir": cfg.data_dir})
    vocab, ids = mimetic_lm.load_dataset(cfg.dataset, cfg.data_dir)
    torch.manual_seed(cfg.seed)  # the model as mimetic_lm.main() builds it
    model = mimetic_lm.TransformerLM(mimetic_lm.model_config(cfg, len(vocab)))
    mimetic_lm.init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,
                               generator=torch.Generator().manual_seed(cfg.seed))
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    n = min(cfg.seq_len, 128, len(ids["valid"]) // 8)  # 8 windows of validation text
    paths = save_figures(model.eval(), ids["valid"][:8 * n].long().view(8, n),
                         os.path.join(cfg.out_dir, "figures" if ckpt is not None else "figures-init"))
    print("wrote " + ", ".join(paths))
    return paths


if __name__ == "__main__":
    main()
