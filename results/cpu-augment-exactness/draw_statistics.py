"""The law of mimetic_vit.draw_augmentation's draws (20,000 images) beside torchvision's transforms' own draws
(200,000 images: T.RandomApply([T.RandAugment(num_ops=1)]), T.RandomErasing, T.RandomResizedCrop, T.ColorJitter):
--recipe=timm with --jitter=0.4 (crops, RandomApply's coins, erasing, jitter). From the repository root:
    python results/cpu-augment-exactness/draw_statistics.py > results/cpu-augment-exactness/draws.txt"""
import os
import sys

import torch
import torchvision.transforms.v2 as T

sys.path.insert(0, os.getcwd())
import mimetic_vit as mv  # noqa: E402
import test_mimetic as tm  # noqa: E402

OURS, THEIRS = 20_000, 200_000


def line(name, ours, theirs, digits=4):
    ours, theirs = torch.as_tensor(ours, dtype=torch.float64), torch.as_tensor(theirs, dtype=torch.float64)
    print(f"| {name} | {' '.join(f'{v:.{digits}f}' for v in ours.flatten())} | "
          f"{' '.join(f'{v:.{digits}f}' for v in theirs.flatten())} |")


def main():
    torch.set_num_threads(1)
    cfg = mv.parse_config(["--recipe=timm", "--jitter=0.4"])
    c = tm.columns(mv.draw_augmentation(cfg, OURS, 32, 0), cfg)
    torch.manual_seed(0)
    one = torch.zeros(1, 3, 32, 32, dtype=torch.uint8)
    print(f"{mv.hardware(torch.device('cpu'))}; --recipe=timm --jitter=0.4; ours {OURS:,} images, torchvision's "
          f"{THEIRS:,}\n")
    print("| what | ours | torchvision's |\n|---|---|---|")
    ops, ra = mv.randaugment_ops(cfg.ra_m, 32), T.RandAugment(num_ops=1, magnitude=cfg.ra_m)
    names, signed = [op for op, _, _ in ops], torch.tensor([s for _, _, s in ops])
    picked, apply = [], T.RandomApply([ra], p=cfg.ra_p)
    ra._apply_image_or_video_transform = lambda img, op, m, **kw: picked.append(2 * names.index(op) + (m < 0)) or img
    theirs = []
    for _ in range(THEIRS):
        picked.clear()
        apply(one)
        theirs.append(picked[0] if picked else -1)
    theirs, ours = torch.tensor(theirs), c["ops"].flatten().long()
    ours = torch.where(signed[ours // 2], ours, ours - ours % 2)
    line("RandomApply's no (p = 0.5) or Identity (row 0)", (ours == 0).double().mean(), (theirs <= 0).double().mean())
    for op in range(1, 14):
        for sign in ((0, 1) if signed[op] else (0,)):
            label = f"op {names[op]}{' -' if sign else (' +' if signed[op] else '')}"
            line(label, (ours == 2 * op + sign).double().mean(), (theirs == 2 * op + sign).double().mean())
    erase = T.RandomErasing(p=1.0)
    boxes = [erase.make_params([one[0]]) for _ in range(THEIRS)]
    coin = torch.rand(THEIRS) < cfg.reprob
    tv = torch.tensor([[b["i"], b["j"], b["h"], b["w"]] for b, k in zip(boxes, coin) if b["v"] is not None and k],
                      dtype=torch.float64)
    ours = c["box"][c["box"][:, 2] > 0].double()
    line("erased (p = 0.25, a box that fits)", len(ours) / OURS, len(tv) / THEIRS)
    for k, name in enumerate(("top", "left", "height", "width")):
        line(f"erased box {name}: mean, std, quartiles", [ours[:, k].mean(), ours[:, k].std(), *ours[:, k].quantile(
            torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))], [tv[:, k].mean(), tv[:, k].std(), *tv[:, k].quantile(
                torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))], 2)
    crop = T.RandomResizedCrop(32, scale=(cfg.crop_scale, 1.0), ratio=(1.0, 1.0))
    tv = torch.tensor([[p["height"], p["top"], p["left"]] for p in (crop.make_params([one[0]]) for _ in range(THEIRS))])
    line("crop side 28, 29, 30, 31, 32", [(c["crop"][:, 0] == s).double().mean() for s in range(28, 33)],
         [(tv[:, 0] == s).double().mean() for s in range(28, 33)])
    line("crop top, left: mean", c["crop"][:, 1:].double().mean(0), tv[:, 1:].double().mean(0), 3)
    jitter = T.ColorJitter(0.4, 0.4, 0.4)
    params = [jitter.make_params([one[0]]) for _ in range(THEIRS)]
    for k, key in enumerate(("brightness_factor", "contrast_factor", "saturation_factor")):
        tv = torch.tensor([p[key] for p in params], dtype=torch.float64)
        ours = c["factors"][:, k].double()
        line(f"jitter {key}: mean, std, min, max", [ours.mean(), ours.std(), ours.min(), ours.max()],
             [tv.mean(), tv.std(), tv.min(), tv.max()])
    orders = [tuple(fn for fn in p["fn_idx"].tolist() if fn < 3) for p in params]
    ours = [tuple(o) for o in c["order"].long().tolist()]
    perms = sorted(set(orders))
    line(f"jitter order {' '.join(''.join(map(str, p)) for p in perms)}", [ours.count(p) / OURS for p in perms],
         [orders.count(p) / THEIRS for p in perms])
    line("flip (p = 0.5)", c["flip"].double().mean(), 0.5)


if __name__ == "__main__":
    main()
