"""CIFAR-10 in the official python layout with every image re-encoded as JPEG at a lower quality (Pillow, 4:2:0
chroma, as the copy itself was made): the trend of what compression costs (results/INVESTIGATIONS.md, "The JPEG copy").

    python results/scripts/reencode_jpeg.py data 50     # data/cifar-10-batches-py/ -> data/cifar10-q50/cifar-10-batches-py/
"""
import io
import os
import pickle
import sys

import numpy as np
from PIL import Image


def main(root, quality):
    src, dst = os.path.join(root, "cifar-10-batches-py"), os.path.join(root, f"cifar10-q{quality}", "cifar-10-batches-py")
    os.makedirs(dst, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        with open(os.path.join(src, name), "rb") as f:
            d = pickle.load(f, encoding="latin1")
        for row in d.get("data", []):  # (3072,) uint8 rows, replaced in place by their JPEG round trip
            buf = io.BytesIO()
            Image.fromarray(row.reshape(3, 32, 32).transpose(1, 2, 0)).save(buf, "JPEG", quality=quality, subsampling=2)
            row[:] = np.asarray(Image.open(buf)).transpose(2, 0, 1).reshape(3072)
        with open(os.path.join(dst, name), "wb") as f:
            pickle.dump(d, f, protocol=4)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
