"""Sharpness' blur as a sum (mimetic_vit.sharpen since b6e4bcd; unfold's since) against conv2d (at 8f8c065), this CPU:
    python results/cpu-sharpen-speed/sharpen_speed.py > results/cpu-sharpen-speed/log.txt   # CIFAR-10 in data/
1. the same bits: sharpen against T.functional.adjust_sharpness at every magnitude 0-30, both signs; and why it
   must be: the blur is S / 13 with S an integer in [0, 3315], never halfway between two integers;
2. the blur alone, (128, 3, 32, 32) float32, one thread: conv2d (oneDNN) on a fresh tensor against the two-pass sum,
   each in its own process (conv2d's time differs from process to process here), alternating;
3. the whole augment() of a laptop batch (authors100, 128 real images), before and after, interleaved in one process."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import torch
import torchvision
import torchvision.transforms.v2 as T

sys.path.insert(0, os.getcwd())
import mimetic_vit as mv  # noqa: E402

BEFORE = "8f8c065"
BLUR = """
import sys, time, torch, torchvision
import torch.nn.functional as F
torch.set_num_threads(1)
y = torch.randint(256, (128, 3, 32, 32), generator=torch.Generator().manual_seed(0)).float()
kernel = torch.tensor([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64).div(13).float()
kernel = kernel.expand(3, 1, 3, 3)
def conv():
    return F.conv2d(y.clone(), kernel, groups=3)
def summed():
    return y.clone().unfold(2, 3, 1).sum(-1).unfold(3, 3, 1).sum(-1)
f = conv if sys.argv[1] == "conv2d" else summed
for _ in range(3):
    f()
t = time.perf_counter()
for _ in range(40):
    f()
print((time.perf_counter() - t) / 40 * 1e3)
"""


def load(commit):
    path = os.path.join(tempfile.mkdtemp(), f"mimetic_vit_{commit}.py")
    with open(path, "w") as f:
        f.write(subprocess.run(["git", "show", f"{commit}:mimetic_vit.py"], capture_output=True, text=True,
                               check=True).stdout)
    spec = importlib.util.spec_from_file_location(f"mimetic_vit_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    torch.set_num_threads(1)
    print(f"{mv.hardware(torch.device('cpu'))}; torchvision {torchvision.__version__}")
    values = differ = 0
    for m in range(31):
        magnitude = float(torch.linspace(0.0, 0.9, 31)[m])
        for factor in (1.0 + magnitude, 1.0 - magnitude):
            images = torch.randint(256, (256, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(m))
            images[:64] = images[:64] // 8 * 8  # low in contrast
            images[64:70] = images[64:70, :, :1, :1]  # flat
            got = mv.sharpen(images, torch.full((256, 1, 1, 1), 1.0 - factor))
            differ += (got != T.functional.adjust_sharpness(images, factor)).sum().item()
            values += got.numel()
    S = torch.arange(0, 13 * 255 + 1, dtype=torch.float64)
    margin = ((S / 13) % 1 - 0.5).abs().min().item()
    print(f"1. sharpen against adjust_sharpness, every magnitude 0-30, both signs, 256 images each: {differ} of "
          f"{values:,} values differ; S / 13 for every S in [0, 3315] lies at least {margin:.4f} (1/26) from halfway")
    times = {"conv2d": [], "two-pass sum (unfold)": []}
    for _ in range(6):
        for name in times:
            out = subprocess.run([sys.executable, "-c", BLUR, name], capture_output=True, text=True, check=True).stdout
            times[name].append(float(out))
    for name, ms in times.items():
        print(f"2. the blur alone, {name}: ms a batch of 128 in six processes: {', '.join(f'{t:.1f}' for t in ms)}")
    before, x = load(BEFORE), mv.load_dataset("cifar10", "data")[0][:128 * 20]
    result = {}
    for _ in range(4):
        for name, module in (("before (conv2d, 8f8c065)", before), ("after (sum)", mv)):
            cfg = module.parse_config(["--batch_size=128"])
            tables = module.augmentation_tables(cfg, 32, module.MEAN_STD["cifar10"], torch.device("cpu"))
            draws = [module.draw_augmentation(cfg, 128, 32, seed) for seed in range(20)]
            for i in range(3):
                module.augment(x[:128], draws[i], tables, cfg)
            t = time.perf_counter()
            for i in range(20):
                module.augment(x[i * 128:(i + 1) * 128], draws[i], tables, cfg)
            result.setdefault(name, []).append((time.perf_counter() - t) / 20 * 1e3)
    for name, ms in result.items():
        print(f"3. augment(), a laptop batch of 128, {name}: {sum(ms) / len(ms):.1f} ms (rounds: "
              f"{', '.join(f'{t:.1f}' for t in ms)})")


if __name__ == "__main__":
    main()
