"""TrainLoader.apply before and after a change to it: mimetic_vit.py at commit BEFORE (git show) against the one in
the working directory. For each recipe, at the laptop's batch of 128 and at 512: the torch calls per batch, counted on
the meta device as extras/bench_vit.py counts them (on CUDA each is a kernel launch or a view, and each call with host
data a copy that waits for the augmentation stream), whether the batches are the same bits on the CPU, and milliseconds
per batch on the CPU (one thread, medians of 15 rounds, before and after interleaved). From the repository root, or a
worktree of the commit to measure (each results/cpu-loader-* folder's README gives its call):

    python results/cpu-loader-geometric-at-once/launch_cost.py [BEFORE [RECIPE ...]]   # eba4dc3 authors100 authors timm
"""
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path[:0] = [".", "extras"]
import bench_vit  # noqa: E402
import mimetic_vit as after  # noqa: E402


def module(commit):
    path = f"{tempfile.mkdtemp()}/mimetic_vit_before.py"
    open(path, "w").write(subprocess.run(["git", "show", f"{commit}:mimetic_vit.py"], capture_output=True, text=True,
                                         check=True).stdout)
    spec = importlib.util.spec_from_file_location("mimetic_vit_before", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


torch.set_num_threads(1)
before = module(sys.argv[1] if len(sys.argv) > 1 else "eba4dc3")
print(after.hardware(torch.device("cpu")))
for batch in (128, 512):
    images = torch.randint(256, (batch, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    for recipe in sys.argv[2:] or ("authors100", "authors", "timm"):
        loaders, calls, times, out = {}, {}, {}, {}
        for name, mv in (("before", before), ("after", after)):
            cfg = mv.parse_config([f"--recipe={recipe}", f"--batch_size={batch}"])
            loaders[name] = mv.TrainLoader(images, torch.zeros(batch, dtype=torch.long), cfg, mv.MEAN_STD["cifar10"],
                                           torch.device("cpu"), None)
            calls[name], times[name] = bench_vit.augmentation_calls(cfg, mv), []
        draws = loaders["after"].draws(0)
        for _ in range(15):  # interleaved rounds
            for name, loader in loaders.items():
                t = time.perf_counter()
                out[name] = loader.apply(images, *draws)
                times[name].append(1000 * (time.perf_counter() - t))
        same = torch.equal(out["before"], out["after"])
        print(f"batch {batch}, {recipe}: the same bits before and after on the CPU: {same}; " + "; ".join(
            f"{name} {calls[name][0]} torch calls ({calls[name][1]} with host data), {statistics.median(times[name]):.1f} "
            f"ms on the CPU" for name in loaders))
