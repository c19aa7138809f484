# run as: OMP_NUM_THREADS=1 python -W ignore::DeprecationWarning decode_timing.py  (from the repository root,
# after extracting ../shared/data/cifar10-jpeg/cifar10-jpeg.tar.gz to /tmp/cifj and make_synthetic_folder.py /tmp/tin)
import glob, time, torch
from torchvision.io import read_image, ImageReadMode
import mimetic_vit as mv
files = sorted(glob.glob("/tmp/cifj/**/*.jpg", recursive=True))
t = time.perf_counter()
x = torch.stack([read_image(f, ImageReadMode.RGB) for f in files])
dt = time.perf_counter() - t
print(f"CIFAR-10 JPEG copy: {len(files)} 32x32 JPEGs decoded in {dt:.1f} s = {1e3 * dt / len(files):.2f} ms each")
t = time.perf_counter()
d = mv.load_dataset("tinyimagenet", "/tmp/tin")
print(f"synthetic Tiny ImageNet, second load from the cache: {time.perf_counter() - t:.2f} s for {len(d[0]) + len(d[2])} images")
t = time.perf_counter()
d = mv.decode_tinyimagenet("/tmp/tin/tiny-imagenet-200")
dt = time.perf_counter() - t
print(f"synthetic Tiny ImageNet: 5000 64x64 JPEGs decoded in {dt:.1f} s = {1e3 * dt / 5000:.2f} ms each")
