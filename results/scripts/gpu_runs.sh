#!/bin/bash
# ViT-Tiny runs on one GPU, all at once in the background, each trained model then tested on the 1,017 real CIFAR-10
# test images and on their JPEG twins. Run it from the repository root. DATA (default data) is the folder that holds
# this project's offline data: cifar10-jpeg/ (make_batches.py writes CIFAR-10's python layout from it into data/) and
# cifar10-lossless-5k/ (make_pair.py writes the real images and their JPEG twins into data/pair5k/); each is made only
# when missing. The runs write out/gpu-SET-<name>/ and out/gpu-SET-<name>.log; RESULTS (default out/results-SET) gets
# what to keep: the benches, the logs, the evaluations and the results files (a .tar.gz).
# SET picks the runs (100 epochs each unless EPOCHS says otherwise):
#   screen  the default init under three augmentation recipes, 40 epochs (results/gpu-h200-screen-e40-default/)
#   pair    Table 1's pair on the default recipe (results/gpu-h200-table1-authors100-partial/: cut off at epoch 87-88)
#   e1, e2  --recipe=timm, default init (results/gpu-h100-e1-timm-default/), mimetic (results/gpu-h200-e2-timm-mimetic/)
#   e3      --pos_emb=sincos2d on the default recipe, INITS (default init: results/gpu-h200-e3-sincos2d-default/)
#   p4      Table 7's patch-4 ViT-Tiny, both inits, on the default recipe and on --recipe=timm
# A step each (a run outlives its step: setsid), SLEEP the seconds to wait: SET=e1 bash results/scripts/gpu_runs.sh start
# bench (extras/bench_vit.py --batch_size=512 alone, about 90 s a recipe: model and whole step, device against CPU,
# epoch ends, SDPA, CUDA graphs; BENCH=timm benches --recipe=timm; TESTS=1: the GPU tests first)
# | start (the data, the runs, their first lines) | look (their last lines) | collect (their logs until they end or
# SLEEP runs out, then each last checkpoint tested, into ...-<name>-evaluate.txt; logs and results into RESULTS).
# Times seen: one arm alone 100 epochs in 7.9 min on an H100 before TrainLoader (e1), 10.4 (e2) and 8.9 min (e3) on an
# H200 with it, before the batched augmentation; the pair, on an H200 before it, 7.3 s an epoch; start 40 s, data 20 s.
set -u
export PYTHONUNBUFFERED=1
SET=${SET:-screen}
DATA=${DATA:-data}
RESULTS=${RESULTS:-out/results-$SET}
mkdir -p "$RESULTS"
EXTRA=${EXTRA:-}  # more flags for every run (a CPU dry run: a tiny model on a subset; --compile=graphs: CUDA graphs)
runs() {  # name|flags
    if [ "$SET" = pair ]; then
        echo "mimetic|--init=mimetic --epochs=${EPOCHS:-100}"
        echo "default|--init=default --epochs=${EPOCHS:-100}"
    elif [ "$SET" = e1 ]; then  # the level issue's decisive run: the first author's timm flags, default init
        echo "timm-default|--init=default --recipe=timm --epochs=${EPOCHS:-100}"
    elif [ "$SET" = e2 ]; then  # its mimetic arm
        echo "timm-mimetic|--init=mimetic --recipe=timm --epochs=${EPOCHS:-100}"
    elif [ "$SET" = e3 ]; then  # 2-D sine-cosine position embeddings on today's recipe, INITS="default mimetic"
        for i in ${INITS:-default}; do echo "sincos2d-$i|--init=$i --pos_emb=sincos2d --epochs=${EPOCHS:-100}"; done
    elif [ "$SET" = p4 ]; then  # Table 7's patch-4 row (paper 88.43 -> 90.47): today's recipe and timm's, per init
        for i in default mimetic; do for r in authors100 timm; do echo "p4-$r-$i|--init=$i --patch_size=4 --recipe=$r --epochs=${EPOCHS:-100}"; done; done
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
    [ "${TESTS:-0}" = 1 ] && python3 -m pytest -q -p no:cacheprovider test_mimetic.py -k "gpu or cuda" 2>&1 \
        | tee "$RESULTS/gpu-tests.txt" | tail -n 3  # TESTS=1: the suite's GPU tests first (a few minutes)
    python3 extras/bench_vit.py --batch_size=512 --recipe=${BENCH:-authors100} 2>&1 | tee "$RESULTS/bench-vit-b512-${BENCH:-authors100}.txt" | tail -n 11
    ;;
start)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    nproc
    [ -d data/cifar-10-batches-py ] || python3 "$DATA/cifar10-jpeg/make_batches.py" data | tail -1
    [ -d data/pair5k/jpeg ] || python3 "$DATA/cifar10-lossless-5k/make_pair.py" data/pair5k | tail -1
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
        cp out/gpu-$SET-*.log "$RESULTS/"; sleep 15
    done
    runs | while IFS="|" read -r name flags; do
        python3 extras/evaluate_vit.py --out_dir=out/gpu-$SET-$name \
            --data_dirs=data/pair5k/lossless,data/pair5k/jpeg,data > out/gpu-$SET-$name-evaluate.txt 2>&1
    done  # not appended to the run's log: a run still going would write over it
    cp out/gpu-$SET-*.log out/gpu-$SET-*-evaluate.txt "$RESULTS/"
    tar czf "$RESULTS/gpu-$SET-results.tar.gz" out/gpu-$SET-*/results.json out/gpu-$SET-*/evaluate.json 2>/dev/null
    tail -n 3 out/gpu-$SET-*.log out/gpu-$SET-*-evaluate.txt
    ;;
esac
