"""The laptop recipe's step before and after the recipe issue, interleaved in one process on one thread, so that
both see the same machine load: the old augmentation (recipe v1 on the device tensor, at commit 10529bc), the new
one (the authors' pipeline drawn per image, mimetic_vit.TrainBatches, in this process as --workers=0 runs it) and
the model step (forward, backward, AdamW), at the laptop recipe's shapes (width 96, depth 4, patch 4, batch 128).

    git show 10529bc:mimetic_vit.py > /tmp/old_mimetic_vit.py
    python results/scripts/recipe_step_time.py /tmp/old_mimetic_vit.py      # from the repository root
"""
import importlib.util
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import mimetic_vit as mv  # noqa: E402

torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("old_vit", sys.argv[1])
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
LAPTOP = ["--width=96", "--depth=4", "--heads=3", "--patch_size=4", "--batch_size=128"]
cfg, old_cfg = mv.parse_config(LAPTOP), old.parse_config(LAPTOP)
x, y = mv.load_dataset("cifar10", "data")[:2]
batches = mv.TrainBatches(x, y, cfg, mv.MEAN_STD["cifar10"])
mean_std, gen = mv.norm_stats(mv.MEAN_STD["cifar10"], "cpu"), torch.Generator().manual_seed(0)
model = mv.build_model(cfg, 10)
opt = mv.make_optimizer(model, cfg.lr, cfg.weight_decay, torch.device("cpu"))


def model_step(xb, yb):
    F.cross_entropy(model(xb), yb).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


times = {"old augmentation": [], "new augmentation": [], "model step": []}
for r in range(40):
    idx = torch.randperm(len(x), generator=gen)[:128]
    t0 = time.perf_counter()
    old.augment(x[idx], gen, old_cfg, *mean_std)
    t1 = time.perf_counter()
    xb, yb = batches[(idx, r)]
    t2 = time.perf_counter()
    model_step(xb, yb)
    t3 = time.perf_counter()
    if r >= 5:  # the first rounds pay one-time costs
        for k, t in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
            times[k].append(1000 * t)
for k, v in times.items():
    print(f"{k}: {statistics.median(v):.1f} ms median, {statistics.mean(v):.1f} ms mean over {len(v)} batches of 128")
before, after, step = (statistics.median(times[k]) for k in times)
before, after = step + before, step + after
print(f"a step with the augmentation in the process: {before:.1f} ms before, {after:.1f} ms after "
      f"({100 * (after / before - 1):+.1f}%); beside a worker on another core: {max(step, after - step):.1f} ms")
print(f"{mv.hardware(torch.device('cpu'))}, fp32, one thread, beside two training runs")
