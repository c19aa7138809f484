"""Forward + backward of the laptop recipe's ViT (width 96, depth 4, 3 heads, patch 4; batch 128 of random images, one
thread), two versions of mimetic_vit.py interleaved in one process, so that both see the same machine load. Its
numbers are in results/cpu-epoch-time-minimal/README.txt (5478cf8 against b6c6880, idle cores).

    OMP_NUM_THREADS=1 python results/scripts/modelbench.py <checkout before> <checkout after>
"""
import importlib.util
import sys
import time

import torch
import torch.nn.functional as F


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, f"{path}/mimetic_vit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(before, after, reps=12, steps=5):
    torch.set_num_threads(1)
    models = {}
    for name, m in (("before", load("vit_before", before)), ("after", load("vit_after", after))):
        torch.manual_seed(0)
        models[name] = m.ViT(m.ViTConfig(image_size=32, patch_size=4, width=96, depth=4, heads=3))
    x, y = torch.randn(128, 3, 32, 32), torch.randint(10, (128,))
    times = {"before": [], "after": []}
    for rep in range(reps):
        for name in (("before", "after") if rep % 2 else ("after", "before")):
            model = models[name]
            t = time.perf_counter()
            for _ in range(steps):
                F.cross_entropy(model(x), y).backward()
                model.zero_grad(set_to_none=True)
            times[name].append((time.perf_counter() - t) / steps)
    for name, v in times.items():
        v = sorted(v)[2:-2]
        print(f"{name}: {1000 * sum(v) / len(v):.1f} ms/step (trimmed mean of {len(v)} of {reps} blocks of {steps})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python results/scripts/modelbench.py <checkout before> <checkout after>")
    main(*sys.argv[1:3])
