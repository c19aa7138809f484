#!/usr/bin/env bash
# The CPU runs behind results/INVESTIGATIONS.md's "The JPEG copy", the laptop rows on the default recipe, "Impulse init
# beside mimetic", the overfitting proxy and the level runs, in two lanes of one thread (the mimetic arms; the default
# arms in the same order, so that a seed's pair ends together). DATA holds this project's offline data: cifar10-jpeg/
# (make_batches.py writes CIFAR-10's python layout from its JPEG copy) and cifar10-lossless-5k/ (make_pair.py writes
# 5,085 training and 1,017 test images with their real pixels, and their JPEG twins). With the real CIFAR-10 in data/
# instead, an equivalent pair is its images and their JPEG round trips: reencode_jpeg.py data 75. In order: the laptop
# model 15 epochs on the pair's lossless or JPEG images, tested on both test sets; the laptop recipe, seeds 0-4; the
# impulse arm (extras/compare.py) and mimetic on learned embeddings, on those seeds; the laptop recipe on the copy
# re-encoded at quality 50 and 30, seeds 0-2; depth 12, seeds 0-2; the proxy's candidates, then impulse on it, seeds
# 0-2; --recipe=timm on the laptop recipe, then --adam_eps=1e-3 at depth 12, seeds 0-2. A run cut off goes on from its
# checkpoint when this is run again. Usage: DATA=<folder> bash results/scripts/level_runs.sh (DATA relative to the
# repository root; default data, the programs' own --data_dir, which then holds cifar10-jpeg/ and cifar10-lossless-5k/)
set -u
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
DATA=${DATA:-data}
[ -d data/cifar-10-batches-py ] || python $DATA/cifar10-jpeg/make_batches.py data
[ -d data/pair5k/jpeg ] || python $DATA/cifar10-lossless-5k/make_pair.py data/pair5k
for q in 50 30; do [ -d data/cifar10-q$q ] || python results/scripts/reencode_jpeg.py data $q; done
LAPTOP="--width=96 --depth=4 --heads=3 --patch_size=4 --batch_size=128"
laptop() {  # $1 the data's name in the folder, $2 its folder (empty: the program's default), $3 the seed
    echo "cpu-$1-w96d4h3p4-50k-e2-authors100-ARM-seed$3|mimetic_vit.py $LAPTOP --epochs=2 ${2:+--data_dir=$2 }--seed=$3"
}
PROXY="${LAPTOP/batch_size=128/batch_size=64} --epochs=150 --data_dir=data/pair5k/jpeg --train_subset=1024"  # the overfitting proxy
depth12() {  # $1 the seed
    echo "cpu-cifar10jpeg-w96d12h3p4-50k-e4-authors100-ARM-seed$1|mimetic_vit.py ${LAPTOP/depth=4/depth=12} --epochs=4 --seed=$1"
}
jobs() {  # $1 the lane's arm, $2 the impulse seeds it also runs; each line: folder (ARM for the arm)|program and flags
    for s in 0 1 2; do
        for d in jpeg lossless; do echo "cpu-pair5k$d-w96d4h3p4-e15-ARM-seed$s|mimetic_vit.py $LAPTOP --epochs=15 --data_dir=data/pair5k/$d --seed=$s"; done
        laptop cifar10jpeg "" "$s"
    done
    for s in 3 4; do laptop cifar10jpeg "" "$s"; done
    for s in $2; do echo "cpu-cifar10jpeg-w96d4h3p4-50k-e2-authors100-impulse-seed$s|extras/compare.py --compare=impulse $LAPTOP --epochs=2 --seed=$s"; done
    for s in 0 1 2; do laptop cifar10q50 data/cifar10-q50 "$s"; done
    for s in $2; do  # the mimetic arm on impulse's embeddings (learned, not sinusoidal), as Zheng et al. compared them
        echo "cpu-cifar10jpeg-w96d4h3p4-50k-e2-authors100-mimetic-learnedpos-seed$s|mimetic_vit.py $LAPTOP --epochs=2 --seed=$s --pos_emb=learned --init=mimetic"
    done
    for s in 0 1 2; do laptop cifar10q30 data/cifar10-q30 "$s"; done
    for s in 0 1 2; do depth12 "$s"; done
    for s in 0 1 2; do  # the regularisation candidates on the overfitting proxy: name|flags
        for c in "authors100|" "authors|--recipe=authors" "pos2|--pos_scale=2" "ls01|--label_smoothing=0.1" \
                 "ra2m14cutout16|--ra_n=2 --ra_m=14 --cutout=16 --crop_scale=1.0 --jitter=0 --reprob=0" \
                 "ra2m9cutout16|--ra_n=2 --ra_m=9 --cutout=16 --crop_scale=1.0 --jitter=0 --reprob=0" "decayall|--decay_all=True"; do
            echo "cpu-pair5kjpeg-w96d4h3p4-1k-e150-b64-${c%%|*}-ARM-seed$s|mimetic_vit.py $PROXY ${c#*|} --seed=$s"
        done
    done
    for s in $3; do echo "cpu-pair5kjpeg-w96d4h3p4-1k-e150-b64-impulse-seed$s|extras/compare.py --compare=impulse $PROXY --seed=$s"; done
    for s in 0 1 2; do  # the level issue: the first author's timm flags on the laptop recipe; AdamW eps 1e-3 at depth 12
        echo "cpu-cifar10jpeg-w96d4h3p4-50k-e2-timm-ARM-seed$s|mimetic_vit.py $LAPTOP --epochs=2 --recipe=timm --seed=$s"
    done
    for s in 0 1 2; do echo "cpu-cifar10jpeg-w96d12h3p4-50k-e4-eps1e-3-ARM-seed$s|mimetic_vit.py ${LAPTOP/depth=4/depth=12} --epochs=4 --adam_eps=1e-3 --seed=$s"; done
}
lane() {
    jobs "$1" "$2" "$3" | while IFS="|" read -r name args; do
        out="results/${name/ARM/$1}"
        [ -e "$out/results.json" ] && continue
        mkdir -p "$out"
        resume=""
        [ -e "$out/ckpt.pt" ] && resume="--resume=True"
        [ "${args%% *}" = mimetic_vit.py ] && [ "${args/--init=/}" = "$args" ] && args="$args --init=$1"
        python $args --out_dir="$out" $resume >> "$out/log.txt" 2>&1
        case "$name" in cpu-pair5k*)  # the trained model on both test sets: real pixels, then their JPEG twins
            python extras/evaluate_vit.py --out_dir="$out" --data_dirs=data/pair5k/lossless,data/pair5k/jpeg >> "$out/log.txt" 2>&1;;
        esac
    done
}
lane mimetic "0 1 2" "0 1" & lane default "3 4" "2" & wait
