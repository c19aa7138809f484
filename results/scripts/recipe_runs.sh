#!/usr/bin/env bash
# The recipe issue's CPU runs (issue 33, evidence a-c), two lanes of one thread each, from the repository root:
#   bash results/scripts/recipe_runs.sh            # logs in each run's folder under results/
# Lane 1 runs the mimetic arms, lane 2 the default arms, in the same order, so that a seed's pair ends together.
# --workers=0: each run has one core of two, so it augments in its own process.
set -u
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
D12="--width=96 --depth=12 --heads=3 --patch_size=4 --epochs=4 --batch_size=128"
LAPTOP="--width=96 --depth=4 --heads=3 --patch_size=4 --epochs=2 --batch_size=128"
V1AUG="--recipe=v1 --schedule=onecycle --warmup_frac=0.4 --grad_clip=0"  # the new schedule, the old augmentation
jobs() {  # name and flags of each run, in order: the stall's seed, the laptop seeds, then the rest
    echo "w96d12h3p4-50k-e4-authors-ARM-seed0|$D12 --seed=0"
    for s in 0 1 2 3 4; do echo "w96d4h3p4-50k-e2-authors-ARM-seed$s|$LAPTOP --seed=$s"; done
    echo "w96d12h3p4-50k-e4-authors-v1aug-ARM-seed0|$D12 --seed=0 $V1AUG"
    echo "w96d12h3p4-50k-e4-authors-ARM-seed1|$D12 --seed=1"
    echo "w96d12h3p4-50k-e4-authors-ARM-seed2|$D12 --seed=2"
}
lane() {
    jobs | while IFS="|" read -r name flags; do
        out="results/cpu-cifar10jpeg-${name/ARM/$1}"
        [ -e "$out/results.json" ] && continue
        mkdir -p "$out"
        resume=""
        [ -e "$out/ckpt.pt" ] && resume="--resume=True"  # a run cut off by the end of a session goes on
        python mimetic_vit.py $flags --init="$1" --workers=0 --out_dir="$out" $resume >> "$out/log.txt" 2>&1
    done
}
while pgrep -f "mimetic_vit.py .*--out_dir=results/" > /dev/null; do sleep 20; done  # a runner before this one
lane mimetic & lane default & wait
