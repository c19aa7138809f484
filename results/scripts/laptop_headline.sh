#!/usr/bin/env bash
# The README's laptop headline: the laptop command, seeds 0-4, both inits, at the current commit, two lanes of one
# thread each (default | mimetic, the same seed side by side). From the repository root, CIFAR-10 in data/:
#     bash results/scripts/laptop_headline.sh batched      # -> results/cpu-cifar10jpeg-w96d4h3p4-50k-e2-batched-<init>-seed<k>/
set -euo pipefail
TAG=${1:?usage: laptop_headline.sh TAG}
lane() {
  for seed in 0 1 2 3 4; do
    out=results/cpu-cifar10jpeg-w96d4h3p4-50k-e2-$TAG-$1-seed$seed
    mkdir -p "$out"
    OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 python mimetic_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 \
      --batch_size=128 --seed=$seed --init=$1 --out_dir="$out" > "$out/log.txt" 2>&1
    rm -f "$out/ckpt.pt"
  done
}
lane default & lane mimetic & wait
