"""
The three attention inits at init, side by side (no training): one row each for the default init, mimetic init
(mimetic_vit.mimetic_init_) and the impulse arm of extras/compare.py (Zheng et al. 2025), the same ViT and seed;
one column each for a few query patches. A panel is that query's attention over the patch grid in one layer and
head, averaged over 64 CIFAR-10 test images (as extras/figures.py's Fig. 2), the class token's share left out:
darker = more, one scale for every panel, the query patch boxed in red. The default init attends almost uniformly
(1/N), mimetic mostly to the query patch itself, impulse to the head's neighbour (head 1: the patch above).

Run from the repository root (a few seconds on one core; PIL, which torchvision brings, draws the PNG):
    python extras/fig_inits.py                # the laptop shape -> figures/vit-inits-attention.png
    python extras/fig_inits.py --width=192 --depth=12 --patch_size=2 --out=/tmp/vit-tiny-inits.png  # ViT-Tiny

This script's keys: --out=<png path>; --layer, the block drawn (0: the first); --head, the head drawn in every row
(1: impulse's 'up' head; its head 0 attends to the query itself, as mimetic's heads do). Of mimetic_vit.py's keys
it reads the model's shape (the laptop's unless given: width 96, depth 4, heads 3, patch 4), --seed, --dataset and
--data_dir; each row sets its own --init (and the impulse row compare.py's arm keys), so --init is refused.
"""

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import compare  # noqa: E402
import figures  # noqa: E402
import mimetic_vit as mv  # noqa: E402
from keys import split_keys  # noqa: E402

KEYS = {"out": os.path.join("figures", "vit-inits-attention.png"), "layer": 0, "head": 1}  # this script's keys
LAPTOP = ["--width=96", "--depth=4", "--heads=3", "--patch_size=4"]  # the laptop shape (README.md), our choice
ROWS = ("default", "mimetic", "impulse")


def build(init, argv, num_classes):
    """One row's model at init: mimetic_vit.build_model for default and mimetic, compare.py's arm for impulse."""
    if init == "impulse":
        cfg = compare.parse(["--compare=impulse", *argv])
        return compare.apply_comparison(mv.build_model(cfg, num_classes), cfg)
    return mv.build_model(mv.parse_config([f"--init={init}", *argv]), num_classes)


def queries(grid):
    """Four query patches (row, column), a quarter of the grid in from each side: (2, 2) ... (5, 5) on 8 x 8."""
    a, b = grid // 4, grid - 1 - grid // 4
    return [(a, a), (a, b), (b, a), (b, b)]


@torch.no_grad()
def query_maps(model, x, layer, head, points):
    """(len(points), g, g): each query patch's attention over the g x g patches in one layer and head, the mean
    over the images x; the class token's share (the rest of each row) is left out."""
    for i, scores in enumerate(figures.attention_scores(model.eval(), x, causal=False)):
        if i == layer:
            att = torch.softmax(scores, dim=-1).mean(0)[head]  # (N, N), token 0 the class token
            break
    g = model.config.image_size // model.config.patch_size
    return torch.stack([att[1 + r * g + c, 1:].view(g, g) for r, c in points])


def save_figure(path, maps, points, labels, footer, cell=16):
    """maps (rows, columns, g, g) as a PNG: row labels on the left, the query above each column, a red box on the
    query patch, white 0 to black at the largest value of all panels."""
    from PIL import Image, ImageDraw

    rows, cols, g, _ = maps.shape
    side, gap, left, top, bottom = g * cell, 8, 150, 22, 30
    img = Image.new("RGB", (left + cols * (side + gap), top + rows * (side + gap) + bottom), "white")
    draw = ImageDraw.Draw(img)
    shade = (255 * (1 - maps / maps.max())).round().to(torch.uint8)
    for i in range(rows):
        y0 = top + i * (side + gap)
        draw.text((6, y0 + side // 2 - 6), labels[i], fill="black")
        for j, (r, c) in enumerate(points):
            x0 = left + j * (side + gap)
            panel = shade[i, j].repeat_interleave(cell, 0).repeat_interleave(cell, 1)  # (side, side)
            img.paste(Image.fromarray(panel.numpy()).convert("RGB"), (x0, y0))
            draw.rectangle([x0 + c * cell, y0 + r * cell, x0 + (c + 1) * cell - 1, y0 + (r + 1) * cell - 1],
                           outline=(220, 30, 30), width=2)
            if i == 0:
                draw.text((x0, 6), f"query ({r}, {c})", fill="black")
    draw.text((6, img.height - bottom + 10), f"{footer}; darker = more: white 0, black {maps.max():.2f}", fill="black")
    img.save(path)
    return path


def parse(argv):
    """(mimetic_vit.py's config with this script's KEYS added, the program keys given, after the laptop shape)."""
    ours, given = split_keys(argv, KEYS, __doc__, mv.parse_args)  # given: the program's keys
    rest = [*LAPTOP, *given]
    cfg = mv.parse_config(rest)
    vars(cfg).update(ours)
    if any(a.startswith(("--init=", "--compare=")) for a in rest):
        raise SystemExit("error: --init: each row sets its own (default, mimetic, impulse); leave it out")
    if not cfg.out.lower().endswith(".png"):
        raise SystemExit(f"error: --out={cfg.out} must name a .png file")
    if not (0 <= cfg.layer < cfg.depth and 0 <= cfg.head < cfg.heads):
        raise SystemExit(f"error: --layer={cfg.layer} --head={cfg.head}: the model has layers 0-{cfg.depth - 1} and "
                         f"heads 0-{cfg.heads - 1}")
    return cfg, rest


def main(argv=None):
    cfg, rest = parse(sys.argv[1:] if argv is None else argv)
    test_x = mv.load_dataset(cfg.dataset, cfg.data_dir)[2]
    mean, std = mv.norm_stats(mv.MEAN_STD[cfg.dataset], "cpu")
    x = mv.to_input(test_x[:64], mean, std, cfg.image_size or 32)  # (64, 3, size, size), as extras/figures.py
    grid = (cfg.image_size or 32) // cfg.patch_size
    points = queries(grid)
    maps = torch.stack([query_maps(build(init, rest, mv.DATASETS[cfg.dataset][3]), x, cfg.layer, cfg.head, points)
                        for init in ROWS])  # (3, 4, g, g)
    dy, dx = compare.impulse_offsets(cfg.heads)[cfg.head]
    for init, m in zip(ROWS, maps):
        on_query = sum(m[i, r, c].item() for i, (r, c) in enumerate(points)) / len(points)
        shifted = [m[i, r + dy, c + dx].item() for i, (r, c) in enumerate(points)
                   if 0 <= r + dy < grid and 0 <= c + dx < grid]  # no wrap: off the grid, no neighbour
        on_shift = (f"{sum(shifted) / len(shifted):.3f} on its neighbour ({dy:+d}, {dx:+d})"
                    + (f" (the {len(shifted)} queries that have one)" if len(shifted) < len(points) else "")
                    if shifted else f"no neighbour ({dy:+d}, {dx:+d}) on the grid")
        print(f"{init}: layer {cfg.layer} head {cfg.head}, mean over the {len(points)} queries: {on_query:.3f} on the "
              f"query patch, {on_shift} (uniform: {1 / (grid * grid + 1):.3f})")
    os.makedirs(os.path.dirname(cfg.out) or ".", exist_ok=True)
    labels = ["default init", "mimetic init", f"impulse init, shift ({dy:+d}, {dx:+d})"]
    footer = (f"layer {cfg.layer} (from 0) of {cfg.depth}, head {cfg.head}, seed {cfg.seed}, mean over {len(x)} "
              f"test images")
    print(f"wrote {save_figure(cfg.out, maps, points, labels, footer)}")
    return cfg.out


if __name__ == "__main__":
    main()
