"""A whole training step of the laptop recipe (augment, forward, backward, clip, AdamW; batch 128, one thread),
two versions of mimetic_vit.py interleaved in one process, so that both see the same machine load.

    OMP_NUM_THREADS=1 python results/scripts/stepbench.py <checkout before> <checkout after> <data_dir>
"""
import importlib.util
import inspect
import sys
import time
from contextlib import nullcontext

import torch


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, f"{path}/mimetic_vit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(m, cfg):
    if "model_cfg" in inspect.signature(m.build_model).parameters:  # before build_model(cfg, num_classes)
        return m.build_model(cfg, m.model_config(cfg))
    return m.build_model(cfg, 10)


def main(before, after, data_dir, reps=16, steps=4):
    torch.set_num_threads(1)
    mods = {"before": load("vit_before", before), "after": load("vit_after", after)}
    train_x, train_y = mods["after"].load_dataset("cifar10", data_dir)[:2]
    state = {}
    for name, m in mods.items():
        cfg = m.parse_config("--width=96 --depth=4 --heads=3 --patch_size=4 --batch_size=128 --out_dir=/tmp/x".split())
        model = build(m, cfg)
        opt = m.make_optimizer(model, cfg.lr, cfg.weight_decay, torch.device("cpu"))
        state[name] = (m, cfg, model, opt, *m.norm_stats(m.MEAN_STD["cifar10"], torch.device("cpu")),
                       torch.Generator().manual_seed(0))
    times = {"before": [], "after": []}
    for rep in range(reps):
        for name in (("before", "after") if rep % 2 else ("after", "before")):
            m, cfg, model, opt, mean, std, gen = state[name]
            t = time.perf_counter()
            for _ in range(steps):
                idx = torch.randint(len(train_x), (128,), generator=gen)
                xb = m.resize(m.augment(train_x[idx], gen, cfg, mean, std), 32)
                loss, _ = m.forward_backward(model, xb, train_y[idx], nullcontext())
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
            times[name].append((time.perf_counter() - t) / steps)
    for name, v in times.items():
        v = sorted(v)[3:-3]
        print(f"{name}: {1000 * sum(v) / len(v):.1f} ms/step (trimmed mean of {len(v)} of {reps} blocks of {steps})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
