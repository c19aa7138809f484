#!/bin/bash
# The recipe issue's GPU check (issue 33, evidence d), for a session lent one GPU: the Table 1 pair on the authors'
# recipe (the programs' defaults), both runs at once, and extras/bench_vit.py at batch 512 beside them. From the
# repository root, with the CIFAR-10 JPEG copy carried in .carry/ (DEVELOPERS.md) and $OUT the device tool's folder:
#   bash results/scripts/gpu_recipe_session.sh start     # first call: data, the pair in the background, bench, GPU tests
#   bash results/scripts/gpu_recipe_session.sh look      # later calls: a sleep, then the last lines of both logs
#   SLEEP=400 bash results/scripts/gpu_recipe_session.sh collect   # the last call: logs, then results.json, to $OUT
# The runs write out/gpu-recipe-<arm>/ and log to out/gpu-recipe-<arm>.log; they outlive the call (setsid nohup).
set -u
export PYTHONUNBUFFERED=1
case "$1" in
start)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    nproc
    python3 .carry/cifar10-jpeg/make_batches.py data | tail -1
    mkdir -p out
    for arm in mimetic default; do
        setsid nohup python3 mimetic_vit.py --init=$arm --out_dir=out/gpu-recipe-$arm > out/gpu-recipe-$arm.log 2>&1 < /dev/null &
    done
    sleep 60  # both runs compiled and stepping before the bench shares the GPU with them
    python3 extras/bench_vit.py --batch_size=512 2>&1 | tee $OUT/bench-vit-b512.txt | tail -4
    tail -n 3 out/gpu-recipe-*.log
    python3 -m pytest -q test_mimetic.py -k test_gpu 2>&1 | tee $OUT/gpu-tests.txt | tail -3  # the GPU path changed
    ;;
look)
    sleep "${SLEEP:-240}"
    tail -n 2 out/gpu-recipe-*.log
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    ;;
collect)  # copies the logs every 15 s for SLEEP seconds (a cut-off call still returns the last copy), then results
    end=$(( $(date +%s) + ${SLEEP:-0} ))
    while [ "$(date +%s)" -lt "$end" ]; do cp out/gpu-recipe-*.log $OUT/; sleep 15; done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    for arm in mimetic default; do
        cp out/gpu-recipe-$arm.log $OUT/
        [ -f out/gpu-recipe-$arm/results.json ] && cp out/gpu-recipe-$arm/results.json $OUT/results-$arm.json
    done
    ls -l $OUT
    ;;
esac
