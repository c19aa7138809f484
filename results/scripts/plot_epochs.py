"""Test accuracy after each epoch, both arms: the mean over seeds as a line, the range over seeds as a band.
Reads results/<prefix>-<arm>-seed<k>/results.json, or the epoch lines of a log (a run cut off before its
results.json); writes a PNG under figures/ (PIL, which torchvision brings; no matplotlib). Four figures:

    python results/scripts/plot_epochs.py           # the laptop recipe trained for 16 epochs (recipe v1)
    python results/scripts/plot_epochs.py recipes   # depth 12, 4 epochs: recipe v1 against the authors' pipeline
    python results/scripts/plot_epochs.py gpu       # Table 1's pair on a GPU, three recipes, beside the paper's ends
    python results/scripts/plot_epochs.py proxy     # the overfitting proxy: accuracy on training batches and test
"""
import glob
import json
import os
import sys

from PIL import Image, ImageDraw

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D12 = "results/cpu-cifar10jpeg-w96d12h3p4-50k-e4"
GPU_V1, GPU_AUTHORS = "results/gpu-h200-table1-partial", "results/gpu-h100-table1-authors-partial"
E16 = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e16"
PROXY = "results/cpu-pair5kjpeg-w96d4h3p4-1k-e150-b64-authors100"  # the overfitting proxy
FIGURES = {  # name: (file under figures/, [(label, folder prefix, colour)])
    "e16": ("vit-laptop-e16-test-acc.png", [
        ("default init", f"{E16}-default", (60, 90, 200)),
        ("mimetic init", f"{E16}-mimetic", (200, 40, 40))]),
    "recipes": ("vit-d12-recipes-test-acc.png", [
        ("default init, recipe v1", f"{D12}-default", (150, 170, 230)),
        ("mimetic init, recipe v1", f"{D12}-mimetic", (240, 150, 110)),
        ("default init, authors' recipe", f"{D12}-authors-default", (30, 50, 170)),
        ("mimetic init, authors' recipe", f"{D12}-authors-mimetic", (180, 20, 20))]),
    "gpu": ("vit-table1-gpu-test-acc.png", [
        ("default init, recipe v1 (H200)", f"{GPU_V1}/log-default.txt", (150, 170, 230)),
        ("mimetic init, recipe v1 (H200)", f"{GPU_V1}/log-mimetic.txt", (240, 150, 110)),
        ("default init, authors' recipe (H100)", f"{GPU_AUTHORS}/log-default.txt", (30, 50, 170)),
        ("mimetic init, authors' recipe (H100)", f"{GPU_AUTHORS}/log-mimetic.txt", (180, 20, 20)),
        ("default, authors100 (H200)", "results/gpu-h200-table1-authors100-partial/log-default.txt", (20, 150, 60)),
        ("mimetic, authors100 (H200)", "results/gpu-h200-table1-authors100-partial/log-mimetic.txt", (200, 120, 0)),
        ("default, timm (H100)", "results/gpu-h100-e1-timm-default/log.txt", (120, 120, 120)),
        ("mimetic, timm (H200)", "results/gpu-h200-e2-timm-mimetic/log.txt", (200, 60, 200))]),
    "proxy": ("vit-proxy-fit.png", [  # the overfitting proxy on today's default: train accuracy (augmented) and test
        ("default init, training batches", f"{PROXY}-default", (150, 170, 230), "train_acc"),
        ("mimetic init, training batches", f"{PROXY}-mimetic", (240, 150, 110), "train_acc"),
        ("default init, test", f"{PROXY}-default", (30, 50, 170)),
        ("mimetic init, test", f"{PROXY}-mimetic", (180, 20, 20))]),
}
PLANNED = {"gpu": 100}  # the x axis runs to the planned last epoch where the runs were cut off before it
PAPER = {"gpu": [("paper, default init", 86.07, (30, 50, 170)), ("paper, mimetic init", 90.78, (180, 20, 20))]}
W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 420, 60, 20, 30, 40


def curves(prefix, key="test_acc"):
    """[[key (test accuracy) after epoch 1, 2, ...] for each seed] of the runs <prefix>-seed<k>, or [[...]] of a log."""
    if prefix.endswith(".txt"):  # "epoch 3/100 | train loss 1.7452 | test loss 1.5189 | test acc 44.75 | 1.2 min"
        lines = [line for line in open(os.path.join(ROOT, prefix)) if line.startswith("epoch ")]
        return [[float(line.split(" | ")[3].split()[-1]) for line in lines]]
    paths = sorted(glob.glob(os.path.join(ROOT, f"{prefix}-seed[0-9]", "results.json")))
    return [[h[key] for h in json.load(open(p))["history"]] for p in paths]


def main(name="e16"):
    file, series = FIGURES[name]
    out = os.path.join(ROOT, "figures", file)
    ARMS = {label: colour for label, _, colour, *_ in series}
    data = {label: curves(prefix, *key) for label, prefix, _, *key in series}
    epochs = PLANNED.get(name, max(len(c) for runs in data.values() for c in runs))
    marks = PAPER.get(name, [])
    values = [v for runs in data.values() for c in runs for v in c] + [v for _, v, _ in marks]
    lo, hi = 5 * (min(values) // 5), 5 * (max(values) // 5 + 1)
    x = lambda e: LEFT + (e - 1) * (W - LEFT - RIGHT) / (epochs - 1)  # noqa: E731
    y = lambda v: TOP + (hi - v) * (H - TOP - BOTTOM) / (hi - lo)  # noqa: E731
    img = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(img)
    for v in range(int(lo), int(hi) + 1, 5):  # grid and labels
        draw.line([(LEFT, y(v)), (W - RIGHT, y(v))], fill=(225, 225, 225))
        draw.text((LEFT - 30, y(v) - 6), f"{v}%", fill="black")
    for _, v, colour in marks:  # the paper's final accuracies, dashed
        for x0 in range(LEFT, W - RIGHT, 12):
            draw.line([(x0, y(v)), (min(x0 + 6, W - RIGHT), y(v))], fill=colour, width=2)
    for e in range(1, epochs + 1) if epochs <= 20 else [1, *range(10, epochs + 1, 10)]:
        draw.text((x(e) - 4, H - BOTTOM + 8), str(e), fill="black")
    draw.text((W // 2 - 20, H - 16), "epoch", fill="black")
    shown = {arm: [c for c in data[arm] if len(c) == max(map(len, data[arm]))] for arm in ARMS}
    for arm, runs in shown.items():  # every band first, translucent, so that bands show through each other
        high = [(x(i + 1), y(max(c[i] for c in runs))) for i in range(len(runs[0]))]
        low = [(x(i + 1), y(min(c[i] for c in runs))) for i in range(len(runs[0]))]
        band = Image.new("RGBA", img.size, (0, 0, 0, 0))
        ImageDraw.Draw(band).polygon(high + low[::-1], fill=ARMS[arm] + (56,))
        img = Image.alpha_composite(img.convert("RGBA"), band)
    img = img.convert("RGB")
    draw = ImageDraw.Draw(img)
    for k, (arm, runs) in enumerate(shown.items()):
        mean = [sum(c[i] for c in runs) / len(runs) for i in range(len(runs[0]))]
        draw.line([(x(i + 1), y(v)) for i, v in enumerate(mean)], fill=ARMS[arm], width=3)
        row = H - BOTTOM - 12 - 18 * (len(shown) - k)  # the legend, bottom right, below the rising curves
        draw.line([(W - RIGHT - 340, row + 6), (W - RIGHT - 316, row + 6)], fill=ARMS[arm], width=3)
        seeds = f"mean and range over {len(runs)} seeds" if len(runs) > 1 else f"one run, {len(runs[0])} epochs"
        draw.text((W - RIGHT - 308, row), f"{arm}, {seeds}", fill=ARMS[arm])
    for k, (label, v, colour) in enumerate(marks):
        draw.text((LEFT + 8 + 200 * k, y(v) - 14), f"{label} {v}", fill=colour)
    img.save(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
