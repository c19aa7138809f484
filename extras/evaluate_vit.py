"""
A trained mimetic_vit.py run, tested on the test sets of other data folders: what the JPEG copy of CIFAR-10 costs
at test time (no table or figure of the paper; README.md, "The JPEG copy", quotes it with its results file).

Loads <out_dir>/ckpt.pt (the weights after the run's last finished epoch) and scores them, without augmentation
as mimetic_vit.evaluate() does, on the test set of every folder in --data_dirs (the official python layout).
Where two folders hold the same images in the same order (make_pair.py's lossless/ and jpeg/), it also gives the
paired difference of each folder from the first, with its standard error over images. Writes a row a folder into
<out_dir>/evaluate.json (rows of other folders, for the same weights, stay) and prints one line a folder:

    evaluate: <data_dir> | test acc A | loss L | N images [| minus <first>: D +- SE (paired, N images)]

Run from the repository root (a pair: make_pair.py of this project's offline data, or, from the real CIFAR-10,
python results/scripts/reencode_jpeg.py data 75, its images and their JPEG round trips):
    python extras/evaluate_vit.py --out_dir=out/vit-cifar10-mimetic-seed0 \
        --data_dirs=data/pair5k/lossless,data/pair5k/jpeg
"""

import json
import os
import sys
from types import SimpleNamespace

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_vit as mv  # noqa: E402
from keys import load_weights  # noqa: E402


@torch.no_grad()
def correct_and_loss(model, x, y, mean, std, batch, amp):
    """Per-image (correct as 0/1 floats, cross-entropy) of the model on uint8 images (x, y), without augmentation."""
    model.eval()
    hits, losses = [], []
    for i in range(0, len(x), batch):
        xb, yb = mv.to_input(x[i:i + batch], mean, std, model.config.image_size), y[i:i + batch]
        with amp:
            logits = model(xb)
        losses.append(F.cross_entropy(logits.float(), yb, reduction="none"))
        hits.append((logits.argmax(-1) == yb).float())
    return torch.cat(hits).cpu(), torch.cat(losses).cpu()


KEYS = {"out_dir": "",    # the run's folder, holding ckpt.pt (required)
        "data_dirs": "",  # folders in the official python layout, comma-separated (required)
        "device": ""}     # "" = cuda if available, else mps if available, else cpu


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        print(__doc__ + "\nThis script's keys and defaults: " + " ".join(f"--{k}={v}" for k, v in KEYS.items()))
        raise SystemExit(0)
    keys = {**KEYS, **mv.parse_args(argv, KEYS)}
    if not keys["out_dir"] or not keys["data_dirs"]:
        raise SystemExit("error: pass --out_dir=<a run's folder> and --data_dirs=<folder>[,<folder>...]")
    path = os.path.join(keys["out_dir"], "ckpt.pt")
    ckpt = mv.load_checkpoint(path)
    cfg = SimpleNamespace(**{**ckpt["config"], "device": keys["device"]})
    if cfg.dataset not in mv.DATASETS:  # a run of mimetic_lm.py or of extras/table4.py
        raise SystemExit(f"error: {path} is a {cfg.dataset} run: this script tests runs of mimetic_vit.py (CIFAR)")
    dev, amp, prec = mv.device_and_precision(cfg)
    model = mv.build_model(cfg, mv.DATASETS[cfg.dataset][3])
    load_weights(model, ckpt["model"], path, "mimetic_vit.py")
    model.to(dev)
    mean, std = mv.norm_stats(mv.MEAN_STD[cfg.dataset], dev)
    rows, first = [], None
    for data_dir in keys["data_dirs"].split(","):
        _, _, test_x, test_y = mv.load_dataset(cfg.dataset, data_dir)
        hits, losses = correct_and_loss(model, test_x.to(dev), test_y.to(dev), mean, std, cfg.eval_batch_size, amp)
        row = {"data_dir": data_dir, "test_acc": 100 * hits.mean().item(), "test_loss": losses.mean().item(),
               "images": len(hits)}
        line = (f"evaluate: {data_dir} | test acc {row['test_acc']:.2f} | loss {row['test_loss']:.4f} | "
                f"{len(hits)} images")
        if first is None:
            first = (data_dir, hits, test_y)
        elif len(hits) == len(first[1]) and torch.equal(test_y, first[2]):  # the same images, labels in the same order
            d = 100 * (hits - first[1])
            row["minus_first"], row["minus_first_se"] = d.mean().item(), d.std().item() / len(d) ** 0.5
            line += f" | minus {first[0]}: {row['minus_first']:+.2f} +- {row['minus_first_se']:.2f} (paired)"
        rows.append(row)
        print(line)
    command = " ".join(["python", "extras/evaluate_vit.py", *argv])
    for row in rows:
        row["command"] = command
    out = os.path.join(keys["out_dir"], "evaluate.json")
    old = json.load(open(out)) if os.path.exists(out) else {"epoch": None, "rows": []}
    if old["epoch"] == ckpt["epoch"]:  # the same weights: other folders' rows stay in order; these replace their own
        new = {row["data_dir"]: row for row in rows}
        rows = [new.pop(row["data_dir"], row) for row in old["rows"]] + list(new.values())
    results = {"out_dir": keys["out_dir"], "epoch": ckpt["epoch"], "rows": rows, "hardware": mv.hardware(dev),
               "precision": prec, "command": command}
    mv.save_atomic(results, out)
    return results


if __name__ == "__main__":
    main()
