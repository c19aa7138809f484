"""
Fig. 3 of the paper (Sec. 4): which (alpha, beta) each construction of W_Q W_K^T reaches, reading the product
back as alpha Z + beta I (measure_alpha_beta). Left panel: low rank (head dimension k = d / heads); right:
full rank (one head, k = d, which is also the value/projection product up to sign). Blue: the SVD
construction (mimetic_vit.mimetic_init_) over an 11 x 11 grid of (a1, b1) in [0, 1]^2; red: Sec. 4's simple
construction (mimetic_vit.simple_init_, W_Q = W_K) scaled by s, s^2 from 0 to 2, its only free parameter.
Axes: alpha to the right, beta up, both 0 to 1.2; grey lines at 0.5 and 1. The paper's point: the simple
construction is one line through the origin (beta / alpha = sqrt(k / d) whatever the scale), the SVD
construction covers a region.

Run from the repository root (about a second on one core; no matplotlib, torchvision draws the PNG):
    python extras/fig3.py                                 # -> figures/vit-fig3-alpha-beta.png, README.md's figure
    python extras/fig3.py --out=/tmp/fig3.png --width=192 # another path; ViT-Tiny's full width

This script's key: --out=<png path>. Of mimetic_vit.py's config keys it reads --width (96 here unless given: ViT-Tiny's
k = d/3 at half its width, which keeps it to about a second; our choice), --heads and --seed.
"""

import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_vit as mv  # noqa: E402
from keys import split_keys  # noqa: E402

KEYS = {"out": os.path.join("figures", "vit-fig3-alpha-beta.png")}  # this script's keys, defaults: README.md's figure
BLUE, RED = (0.26, 0.58, 0.76), (0.84, 0.38, 0.30)  # the SVD construction, the simple one


def measure_alpha_beta(M):
    """(alpha, beta) of a d x d product read as alpha Z + beta I with Z ~ N(0, I/d): beta = the mean of the
    diagonal, alpha = the standard deviation of the off-diagonal entries times sqrt(d)."""
    d = M.shape[0]
    return (M[~torch.eye(d, dtype=torch.bool)].std() * math.sqrt(d)).item(), M.diagonal().mean().item()


def fig3_points(d=96, heads=3, steps=11, seed=0):
    """{(construction, rank): [(alpha, beta), ...]} measured from W_Q^h W_K^h^T of head 0, low rank (k = d / heads)
    and full rank (k = d): "svd" over a steps x steps grid of (a1, b1), "simple" at 4 * steps scales."""
    points = {}
    for rank, h in (("low rank", heads), ("full rank", 1)):
        k = d // h
        qkv, proj = torch.zeros(3 * d, d, dtype=torch.float64), torch.zeros(d, d, dtype=torch.float64)
        points["svd", rank] = []
        for a in torch.linspace(0, 1, steps).tolist():
            for b in torch.linspace(0, 1, steps).tolist():
                mv.mimetic_init_(qkv, proj, h, a, b, generator=torch.Generator().manual_seed(seed), init_vo=False)
                points["svd", rank].append(measure_alpha_beta(qkv[:k].T @ qkv[d:d + k]))  # q rows^T k rows
        mv.simple_init_(qkv, proj, h, generator=torch.Generator().manual_seed(seed))
        qk = qkv[:k].T @ qkv[d:d + k]
        points["simple", rank] = [measure_alpha_beta(s2 * qk) for s2 in torch.linspace(0, 2, 4 * steps).tolist()]
    return points


def save_fig3(path, points, size=240, top=1.2):
    """The two panels side by side as a PNG, each size x size pixels, every point a 5 x 5 dot."""
    import torchvision.utils as vutils

    def px(v):
        return round(v / top * (size - 1))

    panels = []
    for rank in ("low rank", "full rank"):
        img = torch.ones(3, size, size)
        for v in (0.5, 1.0):  # grey grid lines
            img[:, :, px(v)] = 0.8
            img[:, size - 1 - px(v), :] = 0.8
        img[:, :, 0] = 0.0  # the beta axis
        img[:, size - 1, :] = 0.0  # the alpha axis
        for construction, colour in (("svd", BLUE), ("simple", RED)):
            for a, b in points[construction, rank]:
                x, y = px(a), size - 1 - px(b)
                if 0 <= x < size and 0 <= y < size:
                    img[:, max(0, y - 2):y + 3, max(0, x - 2):x + 3] = torch.tensor(colour)[:, None, None]
        panels.append(img)
    vutils.save_image(torch.stack(panels), path, nrow=2, padding=4, pad_value=1.0)
    return path


def parse(argv):
    """mimetic_vit.py's config (width 96 unless given) with this script's KEYS added."""
    ours, rest = split_keys(argv, KEYS, __doc__, mv.parse_args)  # rest: the program's keys
    if not ours["out"].lower().endswith(".png"):
        raise SystemExit(f"error: --out={ours['out']} must name a .png file")
    cfg = mv.parse_config(["--width=96", *rest])
    vars(cfg).update(ours)
    return cfg


def main(argv=None):
    cfg = parse(sys.argv[1:] if argv is None else argv)
    os.makedirs(os.path.dirname(cfg.out) or ".", exist_ok=True)
    points = fig3_points(cfg.width, cfg.heads, seed=cfg.seed)
    for rank, k in (("low rank", cfg.width // cfg.heads), ("full rank", cfg.width)):
        ratios = [b / a for a, b in points["simple", rank][1:]]  # the first scale is 0
        print(f"{rank}, k = {k}: the simple construction's beta / alpha is {sum(ratios) / len(ratios):.3f} at "
              f"every scale, sqrt(k / d) = {math.sqrt(k / cfg.width):.3f}")
    print(f"wrote {save_fig3(cfg.out, points)}")
    return cfg.out


if __name__ == "__main__":
    main()
