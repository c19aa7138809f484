"""Where TrainLoader.apply's calls with host data come from: one batch of 512 random images per recipe, counted on
the meta device as extras/bench_vit.py counts them (DeviceCalls), each attributed to the innermost function of
torchvision or mimetic_vit.py on the stack. On CUDA each is a copy from pageable host memory, which starts only once
the stream's earlier work is done (CUDA runtime API, "API synchronization behavior"): the launching thread waits
there. From the repository root: python results/cpu-loader-host-copies/copies.py"""
import collections
import sys
import traceback

sys.path[:0] = [".", "extras"]
import bench_vit  # noqa: E402
import mimetic_vit as mv  # noqa: E402


class Where(bench_vit.DeviceCalls):
    def __init__(self):
        super().__init__()
        self.where = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        before = self.copies
        out = super().__torch_function__(func, types, args, kwargs)
        if self.copies > before:
            frames = [f for f in traceback.extract_stack() if "torchvision" in f.filename or "mimetic_vit" in f.filename]
            where = f"{frames[-1].filename.split('/')[-1]}:{frames[-1].name}" if frames else "TrainLoader.apply's caller"
            self.where[f"{getattr(func, '__name__', func)} in {where}"] += 1
        return out


for recipe in ("authors100", "timm"):
    counted = Where()
    bench_vit.augmentation_calls(mv.parse_config([f"--recipe={recipe}", "--batch_size=512"]), device=counted)
    print(f"{recipe}: {counted.copies} calls with host data in a batch: "
          + ", ".join(f"{n} {where}" for where, n in counted.where.most_common()))
