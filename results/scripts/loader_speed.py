"""The laptop recipe's whole training step on this CPU with mimetic_vit.py's loader before and after the batched
augmentation, interleaved in one process: TrainLoader at c8f44f0 (torchvision's per-image draws replayed in Python,
applied per group of images) against today's (draw_augmentation, augment), each feeding the same model step
(forward, backward, AdamW), in rounds of 20 steps after 3 warm-up steps; and each loader alone (the augmentation's
ms a batch). Earlier versions: cpu-loader-speed/, -ce49cac/ (at e31974f, ce49cac). From the repository root, one thread:
    python results/scripts/loader_speed.py > results/cpu-loader-speed-batched/log.txt   # CIFAR-10 in data/, any copy"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.getcwd())
import mimetic_vit as mv  # noqa: E402

BEFORE, ROUNDS, STEPS, WARMUP = "c8f44f0", 6, 20, 3
LAPTOP = ["--width=96", "--depth=4", "--heads=3", "--patch_size=4", "--batch_size=128"]


def old_module():
    path = os.path.join(tempfile.mkdtemp(), "mimetic_vit_before.py")
    with open(path, "w") as f:
        f.write(subprocess.run(["git", "show", f"{BEFORE}:mimetic_vit.py"], capture_output=True, text=True, check=True).stdout)
    spec = importlib.util.spec_from_file_location("mimetic_vit_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    torch.set_num_threads(1)
    old, dev = old_module(), torch.device("cpu")
    cfg = mv.parse_config(LAPTOP)
    x, y, _, _ = mv.load_dataset("cifar10", "data")
    model = mv.build_model(cfg, 10)
    opt = mv.make_optimizer(model, cfg.lr, cfg.weight_decay, dev)
    amp = mv.nullcontext()

    def endless(program):
        loader = program.TrainLoader(x, y, program.parse_config(LAPTOP), mv.MEAN_STD["cifar10"], dev,
                                     torch.Generator().manual_seed(0))  # each program's config: keys come and go
        while True:
            yield from loader

    paths = {f"before ({BEFORE})": endless(old), "after (batched)": endless(mv)}
    rates, alone = {name: [] for name in paths}, {name: [] for name in paths}
    print(f"{mv.hardware(dev)}; laptop recipe {' '.join(LAPTOP)}; {ROUNDS} rounds of {STEPS} steps after {WARMUP}")
    for r in range(ROUNDS):
        for name, batches in paths.items():
            for i in range(WARMUP + STEPS):
                if i == WARMUP:
                    t0 = time.perf_counter()
                xb, yb = next(batches)
                mv.forward_backward(model, xb, yb, amp)
                opt.step()
                opt.zero_grad(set_to_none=True)
            rates[name].append(STEPS * cfg.batch_size / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            for _ in range(STEPS):
                next(batches)
            alone[name].append(1000 * (time.perf_counter() - t0) / STEPS)
            print(f"round {r}: {name}: whole step {rates[name][-1]:.0f} img/s; augmentation alone {alone[name][-1]:.1f} "
                  f"ms a batch", flush=True)
    for name in paths:
        v, a = rates[name], alone[name]
        print(f"{name}: whole step {sum(v) / len(v):.0f} img/s (rounds: {', '.join(f'{r:.0f}' for r in v)}); augmentation "
              f"alone {sum(a) / len(a):.1f} ms a batch of {cfg.batch_size} (rounds: {', '.join(f'{t:.1f}' for t in a)})")


if __name__ == "__main__":
    main()
