"""How long decoding JPEGs takes: the CIFAR-10 JPEG copy (32x32) and the synthetic Tiny ImageNet (64x64), one thread;
the log is results/cpu-tinyimagenet-synthetic-p4-w64d2h2-e1-mimetic/decode_timing.txt (made at commit 4b219db, when
mimetic_vit.py itself read Tiny ImageNet; its reader now lives in extras/table4.py, called here). Run after
extracting ../shared/data/cifar10-jpeg/cifar10-jpeg.tar.gz into <cifar folder> and writing <tin folder> with
results/scripts/make_synthetic_folder.py (the log's run: /tmp/cifj and /tmp/tin):

    OMP_NUM_THREADS=1 python -W ignore::DeprecationWarning results/scripts/decode_timing.py <cifar folder> <tin folder>
"""
import glob
import os
import sys
import time

import torch
from torchvision.io import ImageReadMode, read_image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "extras"))
import table4  # noqa: E402

if len(sys.argv) != 3:
    sys.exit("usage: python results/scripts/decode_timing.py <CIFAR-10 JPEG folder> <synthetic Tiny ImageNet folder>")
cifar, tin = sys.argv[1:]
files = sorted(glob.glob(os.path.join(cifar, "**", "*.jpg"), recursive=True))
t = time.perf_counter()
x = torch.stack([read_image(f, ImageReadMode.RGB) for f in files])
dt = time.perf_counter() - t
print(f"CIFAR-10 JPEG copy: {len(files)} 32x32 JPEGs decoded in {dt:.1f} s = {1e3 * dt / len(files):.2f} ms each")
table4.load_tinyimagenet(tin)  # decodes and writes the cache where there is none yet
t = time.perf_counter()
d = table4.load_tinyimagenet(tin)
print(f"synthetic Tiny ImageNet, second load from the cache: {time.perf_counter() - t:.2f} s for "
      f"{len(d[0]) + len(d[2])} images")
t = time.perf_counter()
d = table4.decode_tinyimagenet(os.path.join(tin, "tiny-imagenet-200"))
dt = time.perf_counter() - t
print(f"synthetic Tiny ImageNet: 5000 64x64 JPEGs decoded in {dt:.1f} s = {1e3 * dt / 5000:.2f} ms each")
