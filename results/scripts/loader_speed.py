"""The laptop recipe's whole training step on this CPU before and after TrainLoader, interleaved in one process: the
loader of mimetic_vit.py at 08556b4 (torchvision's transforms image by image in TrainBatches, through a DataLoader
with the CPU default of one worker process, and with none) against TrainLoader, each feeding the same model step
(forward, backward, AdamW), in rounds of 20 steps after 3 warm-up steps; and TrainLoader with its draws made ahead in
two worker processes, as on CUDA. From the repository root, with CIFAR-10 in data/ (any copy):
    python results/scripts/loader_speed.py > results/cpu-loader-speed-ce49cac/log.txt   # cpu-loader-speed/: at e31974f"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.getcwd())
import mimetic_vit as mv  # noqa: E402

BEFORE, ROUNDS, STEPS, WARMUP = "08556b4", 6, 20, 3
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

    def endless_old(workers):
        loader, order = old.train_loader(x, y, old.parse_config(LAPTOP + [f"--workers={workers}"]), mv.MEAN_STD["cifar10"], dev)
        gen = torch.Generator().manual_seed(0)
        while True:
            yield from old.start_epoch(loader, order, gen, cfg.batch_size, len(x) // cfg.batch_size)

    def endless_new(ahead=None):
        loader = mv.TrainLoader(x, y, cfg, mv.MEAN_STD["cifar10"], dev, torch.Generator().manual_seed(0), ahead)
        while True:
            yield from loader

    paths = {"before, 1 worker process (the CPU default)": endless_old(1), "before, no worker": endless_old(0),
             "TrainLoader": endless_new(), "TrainLoader, draws in 2 workers": endless_new(True)}
    rates = {name: [] for name in paths}
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
            print(f"round {r}: {name}: {rates[name][-1]:.0f} img/s", flush=True)
    for name, v in rates.items():
        print(f"whole step, {name}: {sum(v) / len(v):.0f} img/s (rounds: {', '.join(f'{r:.0f}' for r in v)})")


if __name__ == "__main__":
    main()
