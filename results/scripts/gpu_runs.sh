#!/bin/bash
# ViT-Tiny runs on one GPU, all at once in the background, each trained model then tested on the 1,017 real CIFAR-10
# test images and on their JPEG twins. From the repository root, with DATA (default .carry) holding copies of
# ../shared/data's cifar10-jpeg/ and cifar10-lossless-5k/, and OUT for what comes back. SET picks the runs:
#   screen  the default init under three augmentation recipes, 40 epochs each (results/gpu-h200-screen-e40-default/)
#   pair    Table 1's pair on the default recipe, 100 epochs each (results/gpu-h200-table1-authors100-partial/)
# One call each (a run outlives its call: setsid), SLEEP the seconds to wait: SET=pair bash results/scripts/gpu_runs.sh
# bench (extras/bench_vit.py --batch_size=512 alone) | start (the data, the runs, their first lines) | look (their
# last lines) | collect (their logs until they end, then each last checkpoint tested, into ...-<name>-evaluate.txt)
# The pair in one lent session (15 min of device time, 10 a call; it needs about 13 of them on an H200: 30 s to start
# the machine, 20 s of data, 7.3 s an epoch each with both at once, 1.4 min to epoch 7 with compiling; an H100 took
# 8.5 s an epoch, 14.2 min: it does not fit), two calls back to back and nothing else, kind nvidia-h200, carry
# [".carry"]:   SET=pair SLEEP=540 bash results/scripts/gpu_runs.sh start
# then at once: SET=pair SLEEP=260 bash results/scripts/gpu_runs.sh collect
# A shorter first call (the last try's was 120 s) leaves the second unable to wait for the end (600 s a call). If the
# time runs out first, what collect copied every 15 s still comes back; the runs' results.json do not.
set -u
export PYTHONUNBUFFERED=1
SET=${SET:-screen}
DATA=${DATA:-.carry}
EXTRA=${EXTRA:-}  # more flags for every run (a CPU dry run: a tiny model on a subset)
runs() {  # name|flags
    if [ "$SET" = pair ]; then
        echo "mimetic|--init=mimetic --epochs=${EPOCHS:-100}"
        echo "default|--init=default --epochs=${EPOCHS:-100}"
    elif [ "$SET" = e1 ]; then  # the level issue's decisive run: the first author's timm flags, default init
        echo "timm-default|--init=default --recipe=timm --epochs=${EPOCHS:-100}"
    elif [ "$SET" = e2 ]; then  # its mimetic arm
        echo "timm-mimetic|--init=mimetic --recipe=timm --epochs=${EPOCHS:-100}"
    elif [ "$SET" = e3 ]; then  # 2-D sine-cosine position embeddings on today's recipe, default init
        echo "sincos2d-default|--init=default --pos_emb=sincos2d --epochs=${EPOCHS:-100}"
    else  # train.py's defaults (the default until the screen); the authors' 100-epoch augmentation (the default
        # since); the paper's words ("RandAugment and Cutout") at magnitude 14
        local e="--init=default --epochs=${EPOCHS:-40}"
        echo "authors|$e --recipe=authors"
        echo "authors100|$e --ra_n=2 --ra_m=12 --crop_scale=1.0 --jitter=0.2 --reprob=0.2"
        echo "paper-ra2m14-cutout16|$e --ra_n=2 --ra_m=14 --cutout=16 --crop_scale=1.0 --jitter=0 --reprob=0"
    fi
}
case "$1" in
bench)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 extras/bench_vit.py --batch_size=512 2>&1 | tee $OUT/bench-vit-b512-alone.txt | tail -n 4
    ;;
start)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    nproc
    python3 $DATA/cifar10-jpeg/make_batches.py data | tail -1
    python3 $DATA/cifar10-lossless-5k/make_pair.py data/pair5k | tail -1
    mkdir -p out
    runs | while IFS="|" read -r name flags; do
        setsid nohup python3 mimetic_vit.py $flags $EXTRA --out_dir=out/gpu-$SET-$name \
            > out/gpu-$SET-$name.log 2>&1 < /dev/null &
    done
    sleep "${SLEEP:-90}"
    for f in out/gpu-$SET-*.log; do echo "== $f"; tail -n 3 "$f"; done
    ;;
look)
    sleep "${SLEEP:-240}"
    for f in out/gpu-$SET-*.log; do echo "== $f"; grep "^epoch" "$f" | tail -n 2; done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    ;;
collect)  # copies the logs every 15 s until the runs end or SLEEP seconds pass, then tests what each run holds
    end=$(( $(date +%s) + ${SLEEP:-0} ))
    while [ "$(date +%s)" -lt "$end" ] && pgrep -f "mimetic_vit.py --init" > /dev/null; do
        cp out/gpu-$SET-*.log $OUT/; sleep 15
    done
    runs | while IFS="|" read -r name flags; do
        python3 extras/evaluate_vit.py --out_dir=out/gpu-$SET-$name \
            --data_dirs=data/pair5k/lossless,data/pair5k/jpeg,data > out/gpu-$SET-$name-evaluate.txt 2>&1
    done  # not appended to the run's log: a run still going would write over it
    cp out/gpu-$SET-*.log out/gpu-$SET-*-evaluate.txt $OUT/
    tar czf $OUT/gpu-$SET-results.tar.gz out/gpu-$SET-*/results.json out/gpu-$SET-*/evaluate.json 2>/dev/null
    tail -n 3 out/gpu-$SET-*.log out/gpu-$SET-*-evaluate.txt
    ;;
esac
