"""
Table 4 of the paper, its SVHN and Tiny ImageNet rows: mimetic_vit.py's ViT, init and training (mimetic_vit.train)
on these datasets, loaded here. (Its CIFAR-100 row is the program itself: python mimetic_vit.py --dataset=cifar100.)

Paper, Table 4 (ViT-Tiny, 100 epochs, "the same settings as before, though with 4x4 patches for TinyImageNet",
Sec. 5.3), default init -> mimetic: SVHN 96.40 -> 96.79 (+0.39); Tiny ImageNet 45.24 -> 50.87 (+5.63).
Ours: not yet measured.

Run from the repository root (GPU; add --init=default for the base column):
    python extras/table4.py --dataset=svhn --hflip=False      # digits: no flips (README.md, "Choices")
    python extras/table4.py --dataset=tinyimagenet            # patch 4 on 64x64 images: 256 patches + class token
CPU smoke run (checks that everything runs, not a result; on 5,000 synthetic JPEGs in /tmp/tin, written by
make_synthetic_folder.py of results/scripts/ at 36726b4, it took 1.1 min on one core when the program itself read
Tiny ImageNet:
results/cpu-tinyimagenet-synthetic-p4-w64d2h2-e1-mimetic/):
    python extras/table4.py --dataset=tinyimagenet --data_dir=/tmp/tin --width=64 --depth=2 --heads=2 --epochs=1 \
        --batch_size=128

--dataset=svhn|tinyimagenet is this script's own key; every other --key=value is mimetic_vit.py's (python
mimetic_vit.py --help), with two defaults of its own: --patch_size=4 for Tiny ImageNet (Sec. 5.3; the
program's 2 would make 1,025 tokens of a 64x64 image) and --out_dir=out/vit-<dataset>-<init>-seed<seed>.
Images are trained at their own side (32 or 64) unless --image_size is given. Writes results.json as the
program does, with this command.

Data, in --data_dir (default data/):
  - SVHN: the official train_32x32.mat and test_32x32.mat, read with scipy (pip install scipy) as torchvision
    reads them, without its md5 check so that copies work; downloaded with torchvision when missing.
  - Tiny ImageNet: tiny-imagenet-200/ (wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG,
    val/val_annotations.txt), downloaded from TINY_IMAGENET_URL when missing; the labelled val split is the
    test set. The JPEGs are decoded once and cached as uint8 tensors in tinyimagenet.cache.pt (about 1.35 GB;
    delete it to decode again).
"""

import os
import socket
import sys
import time
from urllib.parse import urlparse

import torch
from PIL import Image  # torchvision's own dependency; torchvision.io's decoders are deprecated
from torchvision.transforms.v2.functional import pil_to_tensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_vit as mv  # noqa: E402
from keys import split_keys  # noqa: E402

DATASETS = {  # name: (classes, image side, normalisation mean and std)
    "svhn": (10, 32, ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))),
    # Tiny ImageNet is a subset of ImageNet: ImageNet's mean and std (our choice)
    "tinyimagenet": (200, 64, ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))),
}
TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"  # the archive the course publishes
KEYS = {"dataset": ""}  # this script's keys, defaults: --dataset replaces the program's (CIFAR) key


def reachable(url):
    """Whether the download host answers within 5 s, so that a machine without network fails at once."""
    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=5).close()
        return True
    except OSError:
        return False


def load_svhn(root):
    """(train_x, train_y, test_x, test_y): uint8 (N, 3, 32, 32), int64 (N,) in 0-9, from <root>/*_32x32.mat."""
    try:
        import scipy.io
    except ImportError:
        raise SystemExit("error: SVHN's .mat files are read with scipy, which is not installed: "
                         "pip install scipy") from None
    paths = [os.path.join(root, f"{split}_32x32.mat") for split in ("train", "test")]
    if not all(os.path.exists(p) for p in paths):
        import torchvision
        url = torchvision.datasets.SVHN.split_list["train"][0]
        if not reachable(url):
            raise SystemExit(f"error: SVHN not found: {root}/ lacks train_32x32.mat or test_32x32.mat, and the "
                             f"download host cannot be reached. Put both files (from {url.rsplit('/', 1)[0]}/) "
                             f"in {root}/, or pass --data_dir=<folder that holds them>")
        for split in ("train", "test"):
            torchvision.datasets.SVHN(root, split=split, download=True)
    out = []
    for path in paths:
        try:
            mat = scipy.io.loadmat(path)
        except Exception as e:
            raise ValueError(f"{path} is not an SVHN .mat file: replace it with the official one") from e
        out.append(torch.from_numpy(mat["X"]).permute(3, 2, 0, 1).contiguous())  # (32, 32, 3, N) -> (N, 3, 32, 32)
        out.append(torch.from_numpy(mat["y"].astype("int64")).flatten() % 10)  # the digit 0 is labelled 10
    return tuple(out)


def load_tinyimagenet(root):
    """(train_x, train_y, val_x, val_y): uint8 (N, 3, 64, 64), int64 (N,), from the cache or the JPEGs."""
    base, cache = os.path.join(root, "tiny-imagenet-200"), os.path.join(root, "tinyimagenet.cache.pt")
    if os.path.exists(cache):
        try:
            return tuple(torch.load(cache, weights_only=True)["data"])
        except Exception as e:
            print(f"warning: the image cache {cache} cannot be read ({type(e).__name__}); decoding again")
    if not os.path.exists(os.path.join(base, "wnids.txt")):
        if not reachable(TINY_IMAGENET_URL):
            raise SystemExit(f"error: tinyimagenet not found: {base}/ lacks wnids.txt, and the download host "
                             f"cannot be reached. Unpack {TINY_IMAGENET_URL} into {root}/, or pass "
                             f"--data_dir=<folder that holds tiny-imagenet-200/>")
        from torchvision.datasets.utils import download_and_extract_archive
        download_and_extract_archive(TINY_IMAGENET_URL, root)
    t0 = time.perf_counter()
    data = decode_tinyimagenet(base)
    print(f"data: decoded {len(data[0]) + len(data[2]):,} Tiny ImageNet JPEGs in {time.perf_counter() - t0:.1f} s")
    try:
        torch.save({"data": list(data)}, cache + ".tmp")
        os.replace(cache + ".tmp", cache)  # atomic: a crash leaves no half-written cache
    except OSError as e:  # a read-only data folder
        print(f"note: cannot write the image cache {cache} ({e.strerror}); the JPEGs are decoded on every run")
    return data


def decode_tinyimagenet(base):
    """Labels are line numbers in wnids.txt; some JPEGs are grayscale, read as 3 channels."""
    with open(os.path.join(base, "wnids.txt")) as f:
        wnids = f.read().split()
    label = {w: i for i, w in enumerate(wnids)}
    train = [(os.path.join(base, "train", w, "images", f), label[w]) for w in wnids
             for f in sorted(os.listdir(os.path.join(base, "train", w, "images")))]
    with open(os.path.join(base, "val", "val_annotations.txt")) as f:  # file, wnid, bounding box; tabs
        rows = [line.split("\t") for line in f if line.strip()]
    val = [(os.path.join(base, "val", "images", r[0]), label[r[1]]) for r in rows]

    def read(items):
        x = torch.stack([pil_to_tensor(Image.open(path).convert("RGB")) for path, _ in items])  # (N, 3, 64, 64)
        return x, torch.tensor([y for _, y in items], dtype=torch.long)

    return (*read(train), *read(val))


def parse(argv):
    """The program's config with this script's KEYS (--dataset) in place of its own, and this script's defaults put
    before the rest."""
    ours, rest = split_keys(argv, KEYS, __doc__, mv.parse_args)  # rest: the program's keys
    name = ours["dataset"]
    if name not in DATASETS:
        raise SystemExit(f"error: pass --dataset=svhn or --dataset=tinyimagenet (got {name or 'none'}; "
                         f"CIFAR-10 and CIFAR-100: python mimetic_vit.py --dataset=...)")
    side = DATASETS[name][1]
    patch = ["--patch_size=4"] if name == "tinyimagenet" else []  # Sec. 5.3; a later --patch_size overrides it
    cfg = mv.parse_config([f"--image_size={side}", *patch, *rest])
    vars(cfg).update(ours)  # recorded in results.json and compared on --resume
    if not any(a.startswith("--out_dir=") and a != "--out_dir=" for a in rest):
        cfg.out_dir = os.path.join("out", f"vit-{name}-{cfg.init}-seed{cfg.seed}")
    return cfg


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse(argv)
    classes, _, (mean, std) = DATASETS[cfg.dataset]
    dev, amp, prec = mv.device_and_precision(cfg)
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = mv.open_run(cfg)

    model = mv.build_model(cfg, classes).to(dev)  # as mimetic_vit.main() builds it, with this dataset's classes
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {model.config.num_tokens} "
          f"tokens ({model.config.image_size}x{model.config.image_size} images, patch {cfg.patch_size}), "
          f"{mv.hardware(dev)}, {prec}")

    data = list((load_svhn if cfg.dataset == "svhn" else load_tinyimagenet)(cfg.data_dir))
    data[2], data[3] = data[2].to(dev), data[3].to(dev)  # as main(): mv.TrainLoader moves the training set
    history = mv.train(model, data, (mean, std), cfg, dev, amp, ckpt)
    if history is None:  # --stop_epoch
        return None
    return mv.write_results(cfg, model, dev, prec, ["python", "extras/table4.py", *argv],
                            final_test_acc=history[-1]["test_acc"], epochs_done=len(history), history=history,
                            wall_time_s=history[-1]["elapsed_s"])


if __name__ == "__main__":
    main()
