#!/bin/bash
# A screen of augmentation recipes on one GPU: ViT-Tiny, default init, three recipes at once, 40 epochs each, then
# each trained model tested on the 1,017 real CIFAR-10 test images and on their JPEG twins. Run from the repository
# root. Needs a data folder DATA (by default .carry) that holds cifar10-jpeg/ and cifar10-lossless-5k/ (copies of
# ../shared/data's folders of those names), and an output folder OUT that keeps the logs and results. Three calls:
#   bash results/scripts/gpu_screen_session.sh start            # data, the three runs in the background, first lines
#   SLEEP=300 bash results/scripts/gpu_screen_session.sh look   # a sleep, then the last lines of the logs
#   SLEEP=200 bash results/scripts/gpu_screen_session.sh collect  # logs while they run, then the tests, into OUT
# Each run writes out/gpu-screen-<recipe>/ and logs to out/gpu-screen-<recipe>.log; they outlive the call (setsid).
set -u
export PYTHONUNBUFFERED=1
DATA=${DATA:-.carry}
EPOCHS=${EPOCHS:-40}
EXTRA=${EXTRA:-}  # more flags for every run (a CPU dry run: a tiny model on a subset)
recipes() {  # name|flags: train.py's defaults (the default until the screen); the authors' 100-epoch augmentation
    # (the default since); the paper's words ("RandAugment and Cutout") at magnitude 14
    echo "authors|--recipe=authors"
    echo "authors100|--ra_n=2 --ra_m=12 --crop_scale=1.0 --jitter=0.2 --reprob=0.2"
    echo "paper-ra2m14-cutout16|--ra_n=2 --ra_m=14 --cutout=16 --crop_scale=1.0 --jitter=0 --reprob=0"
}
case "$1" in
start)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    nproc
    python3 $DATA/cifar10-jpeg/make_batches.py data | tail -1
    python3 $DATA/cifar10-lossless-5k/make_pair.py data/pair5k | tail -1
    mkdir -p out
    recipes | while IFS="|" read -r name flags; do
        setsid nohup python3 mimetic_vit.py --init=default --epochs=$EPOCHS $flags $EXTRA --out_dir=out/gpu-screen-$name \
            > out/gpu-screen-$name.log 2>&1 < /dev/null &
    done
    sleep "${SLEEP:-90}"
    for f in out/gpu-screen-*.log; do echo "== $f"; tail -n 3 "$f"; done
    ;;
look)
    sleep "${SLEEP:-240}"
    for f in out/gpu-screen-*.log; do echo "== $f"; grep "^epoch" "$f" | tail -n 2; done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    ;;
collect)  # copies the logs every 15 s until the runs end or SLEEP seconds pass, then tests what each run holds
    end=$(( $(date +%s) + ${SLEEP:-0} ))
    while [ "$(date +%s)" -lt "$end" ] && pgrep -f "mimetic_vit.py --init" > /dev/null; do
        cp out/gpu-screen-*.log $OUT/; sleep 15
    done
    recipes | while IFS="|" read -r name flags; do
        python3 extras/evaluate_vit.py --out_dir=out/gpu-screen-$name \
            --data_dirs=data/pair5k/lossless,data/pair5k/jpeg,data >> out/gpu-screen-$name.log 2>&1
    done
    cp out/gpu-screen-*.log $OUT/
    tar czf $OUT/gpu-screen-results.tar.gz out/gpu-screen-*/results.json out/gpu-screen-*/evaluate.json 2>/dev/null
    for f in out/gpu-screen-*.log; do echo "== $f"; grep -E "^epoch|^evaluate" "$f" | tail -n 5; done
    ;;
esac
