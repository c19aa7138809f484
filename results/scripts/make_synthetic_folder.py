"""A synthetic Tiny ImageNet in the standard layout (the real one could not be downloaded: no internet), for the
one-epoch check in results/cpu-tinyimagenet-synthetic-p4-w64d2h2-e1-mimetic/ (there written to /tmp/tin):
200 classes (wnids s0000..s0199), 20 training and 5 validation 64x64 JPEGs per class, each a noisy
image whose mean colour depends on its class; every 50th class's first training image is grayscale.

    python results/scripts/make_synthetic_folder.py <folder>    # -> <folder>/tiny-imagenet-200/
"""
import os
import sys

import torch
from torchvision.io import encode_jpeg, write_file

if len(sys.argv) != 2:
    sys.exit("usage: python results/scripts/make_synthetic_folder.py <folder>")
root, classes, n_train, n_val = sys.argv[1], 200, 20, 5
base = os.path.join(root, "tiny-imagenet-200")
g = torch.Generator().manual_seed(0)
wnids = [f"s{i:04d}" for i in range(classes)]
colour = torch.rand(classes, 3, 1, 1, generator=g) * 180


def jpeg(path, y, gray=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    x = (colour[y] + torch.rand(3, 64, 64, generator=g) * 70).clamp(0, 255).to(torch.uint8)
    write_file(path, encode_jpeg(x[:1] if gray else x, quality=90))


for y, w in enumerate(wnids):
    for i in range(n_train):
        jpeg(os.path.join(base, "train", w, "images", f"{w}_{i}.JPEG"), y, gray=(y % 50 == 0 and i == 0))
with open(os.path.join(base, "wnids.txt"), "w") as f:
    f.write("\n".join(wnids) + "\n")
rows = []
for i in range(classes * n_val):
    y = int(torch.randint(classes, (1,), generator=g))
    jpeg(os.path.join(base, "val", "images", f"val_{i}.JPEG"), y)
    rows.append(f"val_{i}.JPEG\t{wnids[y]}\t0\t0\t63\t63\n")
with open(os.path.join(base, "val", "val_annotations.txt"), "w") as f:
    f.writelines(rows)
