"""Is eq 13 at D = 0.1 stuck at chance (README, Table 5's search) because of the step size? A synthetic check.

Eq 13 (extras/compare.py --compare=layerscale_ours) is D x + SelfAttn(norm x): with D = 0.1 the skip path
shrinks as 0.1^depth (1e-4 at depth 4). The laptop recipe's model (width 96, depth 4, 3 heads, patch 4,
--init=qk as the arm), the program's step (AdamW, weight decay 0.01 on matrices, 5% warmup then cosine, gradients
clipped at 1), on tiny learnable data: the mean colour depends on the label (as test_mimetic.py's write_cifar),
no augmentation. D = 0.1 and the D = 1.0 control, each at lr 3e-3 (the recipe's) and 3e-4; one seed, one thread.

    OMP_NUM_THREADS=1 python results/scripts/eq13_step_size.py > results/cpu-eq13-step-size/log.txt

Result (Intel Xeon, one thread beside two training runs, torch 2.14.1, 319 s), test accuracy after 300 steps:
D = 0.1 at lr 3e-3 stalls from step 50 on (loss 1.61-1.67, about ln 5; 19.5%), at 3e-4 it learns (100.0%);
D = 1.0 learns at both (100.0%, 99.4%). One seed: a step-size effect at D = 0.1, as far as it goes; that the cause
is the skip path's D^depth = 1e-4 is our reading, not tested here.
"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extras")]
import mimetic_vit as mv  # noqa: E402
from compare import LayerScaleBlock  # noqa: E402

SHAPE = "--width=96 --depth=4 --heads=3 --patch_size=4 --init=qk --out_dir=/tmp/eq13"  # the laptop recipe's model
STEPS, BATCH, N_TRAIN, N_TEST = 300, 32, 2048, 512  # our choice: a few minutes on one thread


def synthetic(n, gen, classes=10):
    """Normalised (n, 3, 32, 32) images whose mean colour depends on the label (write_cifar's rule)."""
    y = torch.randint(classes, (n,), generator=gen)
    x = (torch.rand(n, 3, 32, 32, generator=gen) * 100 + y.view(-1, 1, 1, 1) * 15).floor() / 255
    return (x - x.mean()) / x.std(), y


def run(ls_init, lr, data, seed=0):
    cfg = mv.parse_config([*SHAPE.split(), f"--lr={lr}", f"--seed={seed}"])
    model = mv.build_model(cfg, 10)
    model.blocks = nn.ModuleList(LayerScaleBlock(b, ls_init, on_skip=True) for b in model.blocks)  # eq 13
    opt = mv.make_optimizer(model, cfg.lr, cfg.weight_decay, torch.device("cpu"))
    (x, y), (tx, ty) = data
    gen, warmup, t0 = torch.Generator().manual_seed(seed), round(cfg.warmup_frac * STEPS), time.perf_counter()
    print(f"D = {ls_init}, lr = {lr:.0e}")
    for step in range(STEPS):
        idx = torch.randint(len(x), (BATCH,), generator=gen)
        for group in opt.param_groups:
            group["lr"] = mv.get_lr(step, STEPS, warmup, cfg.lr)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % 50 == 0:
            print(f"  step {step + 1} | loss {loss.item():.4f}")
    with torch.no_grad():
        acc = (model(tx).argmax(-1) == ty).float().mean().item() * 100
        scales = " ".join(f"{b.scale.mean().item():+.3f}" for b in model.blocks)
    print(f"  test acc {acc:.1f} | mean D per block {scales} | {time.perf_counter() - t0:.0f} s")
    return acc


def main():
    torch.set_num_threads(1)
    t0, gen = time.perf_counter(), torch.Generator().manual_seed(0)
    data = synthetic(N_TRAIN, gen), synthetic(N_TEST, gen)
    print("command: OMP_NUM_THREADS=1 python results/scripts/eq13_step_size.py")
    print(f"{mv.hardware(torch.device('cpu'))}; model {SHAPE}; {STEPS} steps of {BATCH}, "
          f"{N_TRAIN} training and {N_TEST} test images, 10 classes (chance 10%)")
    results = {(d, lr): run(d, lr, data) for d in (0.1, 1.0) for lr in (3e-3, 3e-4)}
    print("test acc:  " + "  ".join(f"D={d} lr={lr:.0e}: {a:.1f}" for (d, lr), a in results.items()))
    print(f"wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
