"""What TF32 in the affine grids of torchvision's geometric kernels does to TrainLoader's batches, emulated on the CPU.
mimetic_vit.py at 25ec40d set torch.set_float32_matmul_precision("high") for bf16 runs, so on CUDA the one fp32
matmul of ShearX/Y, TranslateX/Y and Rotate (torchvision's _affine_grid: the output grid = base grid @ theta) ran in
TF32: inputs rounded to a 10-bit mantissa. Here the same draws go through TrainLoader on the CPU twice, with
_affine_grid as torchvision has it and with its matmul's inputs rounded as TF32 rounds them; RandAugment samples
nearest-neighbour, so a coordinate moved across a pixel's edge takes a neighbour's value. 8 batches of 512 random
images, as extras/bench_vit.py compares the device with the CPU. From the repository root:
    python results/cpu-tf32-affine-grids/tf32.py > results/cpu-tf32-affine-grids/log.txt"""
import sys

import torch
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional._geometry as geometry

sys.path.insert(0, ".")
import mimetic_vit as mv  # noqa: E402

fp32_grid = geometry._affine_grid


def tf32(t):
    """float32 rounded to nearest at TF32's 10 mantissa bits."""
    return ((t.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


def grid(theta, w, h, ow, oh, rounded=True):
    """torchvision's _affine_grid (0.29.1), its matmul's inputs rounded to TF32 (rounded=False: torchvision's own)."""
    base = torch.empty(1, oh, ow, 3, dtype=theta.dtype)
    base[..., 0].copy_(torch.linspace((1.0 - ow) * 0.5, (ow - 1.0) * 0.5, steps=ow))
    base[..., 1].copy_(torch.linspace((1.0 - oh) * 0.5, (oh - 1.0) * 0.5, steps=oh).unsqueeze_(-1))
    base[..., 2].fill_(1)
    rescaled = theta.transpose(1, 2).div_(torch.tensor([0.5 * w, 0.5 * h], dtype=theta.dtype))
    round_ = tf32 if rounded else (lambda t: t)
    return round_(base.view(1, oh * ow, 3)).bmm(round_(rescaled)).view(1, oh, ow, 2)


theta = torch.tensor([[[0.978, -0.208, 3.1], [0.208, 0.978, -1.7]]])
same = torch.equal(grid(theta.clone(), 32, 32, 32, 32, rounded=False), fp32_grid(theta.clone(), 32, 32, 32, 32))
print(f"torch {torch.__version__}; this copy of _affine_grid, unrounded, gives torchvision's grid bit for bit: {same}")
ra = T.RandAugment(num_ops=1)
x = torch.randint(256, (64, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
for op, m in (("Rotate", 12.0), ("Rotate", 27.0), ("ShearX", 0.12), ("TranslateX", 5.8006)):
    geometry._affine_grid = fp32_grid
    a = ra._apply_image_or_video_transform(x, op, m, ra.interpolation, ra._fill)
    geometry._affine_grid = grid
    b = ra._apply_image_or_video_transform(x, op, m, ra.interpolation, ra._fill)
    print(f"{op} {m}: {100 * (a != b).float().mean():.2f}% of the values moved by TF32")
images = torch.randint(256, (4096, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
labels = torch.zeros(4096, dtype=torch.long)
_, std = mv.norm_stats(mv.MEAN_STD["cifar10"], torch.device("cpu"))
for recipe in ("authors100", "authors", "timm"):
    cfg = mv.parse_config([f"--recipe={recipe}", "--batch_size=512"])
    out = []
    for fn in (fp32_grid, grid):
        geometry._affine_grid = fn
        loader = mv.TrainLoader(images, labels, cfg, mv.MEAN_STD["cifar10"], torch.device("cpu"),
                                torch.Generator().manual_seed(1), ahead=False)
        out.append(torch.cat([b for b, _ in loader]))
    levels = (out[0] - out[1]).abs() * std * 255
    print(f"{recipe}: {(levels.flatten(1).amax(1) > 0.5).sum()} of {len(levels)} images differ; "
          f"{100 * (levels > 0.5).float().mean():.2g}% of the values, at most {levels.max():.0f} levels of 255, "
          f"{(out[0] - out[1]).abs().max():.2g} normalised units")
geometry._affine_grid = fp32_grid
