"""The batched augmentation against torchvision, measured: every RandAugment op and sign at magnitudes 8, 12 and 27
(randaugment_layer on a batch against T.RandAugment's own per-image call), the whole pipeline of each recipe on the
same draws (test_mimetic.reference_augment: torchvision's functions image by image), the crop against torchvision's
float path and its uint8 CPU kernel, Sharpness in float32 against torchvision's fused multiply-add at every magnitude,
and the device calls a batch of each recipe. From the repository root, one thread:
    python results/cpu-augment-exactness/augment_exactness.py > results/cpu-augment-exactness/log.txt"""
import os
import sys

import torch
import torchvision
import torchvision.transforms.v2 as T

sys.path.insert(0, os.getcwd())
import mimetic_vit as mv  # noqa: E402
import test_mimetic as tm  # noqa: E402

sys.path.insert(0, os.path.join(os.getcwd(), "extras"))
import bench_vit  # noqa: E402

IMAGES = 2_304


def main():
    torch.set_num_threads(1)
    print(f"{mv.hardware(torch.device('cpu'))}; torchvision {torchvision.__version__}; {IMAGES:,} images (a quarter "
          f"low in contrast, three flat)")
    x = tm.sample_images(IMAGES)
    print("\nRandAugment, each row of the tables (op, sign) on the whole batch against T.RandAugment's call per image:")
    print("| op | sign | m = 8: images differing | m = 12 | m = 27 | images changed by the op (m = 12) |")
    print("|---|---|---|---|---|---|")
    results = {}
    for m in (8, 12, 27):
        cfg = mv.parse_config([f"--ra_m={m}"])
        tables = mv.augmentation_tables(cfg, 32, mv.MEAN_STD["cifar10"], torch.device("cpu"))
        ra = T.RandAugment(num_ops=1, magnitude=m)
        for row in range(28):
            op, magnitude, signed = mv.randaugment_ops(m, 32)[row // 2]
            if not signed and row % 2:
                continue
            magnitude = -magnitude if signed and row % 2 else magnitude
            got = mv.randaugment_layer(x.clone(), torch.full((len(x),), row), tables)
            want = torch.cat([ra._apply_image_or_video_transform(i[None], op, magnitude, ra.interpolation, ra._fill)
                              for i in x])
            results[op, row % 2, m] = ((got != want).flatten(1).any(1).sum().item(),
                                       (got != x).flatten(1).any(1).sum().item())
    for (op, sign, m), _ in results.items():
        if m == 8:
            cells = [str(results[op, sign, k][0]) for k in (8, 12, 27)]
            sign_text = "-" if sign else ("+" if op not in ("Identity", "Posterize", "Solarize", "AutoContrast",
                                                             "Equalize") else "")
            print(f"| {op} | {sign_text} | {' | '.join(cells)} | {results[op, sign, 12][1]} |")
    print("\nThe whole augmentation of each recipe (three batch seeds of 256 images) against torchvision's functions "
          "image by image on the same draws:")
    mean, std = mv.norm_stats(mv.MEAN_STD["cifar10"], "cpu")
    for recipe, args in tm.RECIPES.items():
        cfg = mv.parse_config(args + ["--batch_size=256"])
        differ = 0
        for seed in range(3):
            got, draws = tm.augment(x[:256], cfg, seed)
            differ += (got != tm.reference_augment(x[:256], draws, cfg, mean, std)).flatten(1).any(1).sum().item()
        print(f"  {recipe} ({' '.join(args) or 'the default'}): {differ} of 768 images differ")
    print("\nDevice calls of augment() a batch of 512 (bench_vit's count on the meta device; the loader before it: 700 "
          "calls and 14 host copies for authors100), and the loader's host-to-device copies a batch:")
    for recipe, args in tm.RECIPES.items():
        cfg = mv.parse_config(args + ["--batch_size=512"])
        calls, copies = bench_vit.augmentation_calls(cfg)
        print(f"  {recipe}: {calls} calls, {copies} with host data; copies a batch {bench_vit.loader_copies(cfg):g}")
    print("\nThe crop (RandomResizedCrop's squares, 20 batch seeds of 256 images a scale) against torchvision's resize:")
    for scale in (0.08, 0.35, 0.75):
        cfg = mv.parse_config([f"--crop_scale={scale}", "--batch_size=256"])
        weights = mv.augmentation_tables(cfg, 32, mv.MEAN_STD["cifar10"], "cpu")["crop"]
        floats = uint8 = most = 0
        for seed in range(20):
            crop = tm.columns(mv.draw_augmentation(cfg, 256, 32, seed), cfg)["crop"].long()
            got = mv.crop_resize(x[:256], crop, weights)
            args = [(i, t, left, s) for i, (s, t, left) in zip(x[:256], crop.tolist())]
            f = torch.stack([T.functional.resized_crop(i.float(), t, left, s, s, [32, 32], antialias=True).round().byte()
                             for i, t, left, s in args])
            u = torch.stack([T.functional.resized_crop(i, t, left, s, s, [32, 32], antialias=True) for i, t, left, s in args])
            floats += (got != f).sum().item()
            uint8 += (got != u).sum().item()
            most = max(most, (got.int() - u.int()).abs().max().item())
        print(f"  crop_scale {scale}: {floats} of {20 * 256 * 3072:,} values differ from the float path; {uint8:,} "
              f"from the uint8 kernel, by at most {most} level")
    values = differ = 0
    tables = mv.augmentation_tables(mv.parse_config([]), 32, mv.MEAN_STD["cifar10"], "cpu")
    for m in range(31):
        magnitude = float(torch.linspace(0.0, 0.9, 31)[m])
        for factor in (1.0 + magnitude, 1.0 - magnitude):
            images = torch.randint(256, (256, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(m))
            images[:64] = images[:64] // 8 * 8
            alpha = torch.full((256, 1, 1, 1), 1.0 - factor)
            got, want = mv.sharpen(images, alpha, tables["blur"]), T.functional.adjust_sharpness(images, factor)
            differ += (got != want).sum().item()
            values += got.numel()
    print(f"\nSharpness in float32 (the product rounded, then the sum) against torchvision's fused multiply-add, every "
          f"magnitude 0-30, both signs, 256 images each: {differ} of {values:,} values differ")


if __name__ == "__main__":
    main()
