#!/bin/bash
# The one GPU session so far (2026-11-26, one NVIDIA H200, torch 2.11.0+cu130, torchvision 0.26.0, code at 7feaecc;
# results/gpu-h200-table1-partial/). Run from the repository root with the CIFAR-10 JPEG copy and PTB in .carry/
# and $OUT a folder for the logs. The session had 15 minutes of device time: this script ran 542 s (the GPU
# tests, both benchmarks, then the Table 1 pair started in the background), a second call slept 245 s, and a third
# copied each run's log from /proc/<pid>/fd/1, at epoch 49 of 100; the pair did not finish.
# One device call: data, GPU tests (+ both benchmarks), Table 1 pair, full suite; stops itself at $LIMIT s.
T0=$(date +%s); LIMIT=${LIMIT:-540}
el() { echo "[$(( $(date +%s) - T0 ))s]"; }
export PYTHONUNBUFFERED=1
exec > $OUT/gpu_log.txt 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch,torchvision,einops,PIL;print('torch',torch.__version__,'torchvision',torchvision.__version__,'einops',einops.__version__,'cuda',torch.version.cuda)"
nproc
(python3 .carry/cifar10-jpeg/make_batches.py data > /tmp/mb.txt 2>&1; cp -r .carry/ptb data/; echo "$(el) data ready" >> /tmp/mb.txt) &
MB=$!
echo "$(el) GPU tests"
timeout 240 python3 -m pytest -q -s -rs -p no:cacheprovider test_mimetic.py -k gpu 2>&1
echo "$(el) GPU tests rc=$?"
wait $MB; cat /tmp/mb.txt | tail -5
echo "$(el) Table 1 pair"
setsid nohup python3 mimetic_vit.py --out_dir=out/gpu-table1-mimetic > $OUT/table1-mimetic.log 2>&1 < /dev/null &
setsid nohup python3 mimetic_vit.py --init=default --out_dir=out/gpu-table1-default > $OUT/table1-default.log 2>&1 < /dev/null &
sleep 2
echo "$(el) full suite, GPU tests deselected (they ran above)"
timeout 200 python3 -m pytest -q -x -p no:cacheprovider test_mimetic.py extras/ -k "not gpu" 2>&1 | tail -15
echo "$(el) full suite done"
while [ $(( $(date +%s) - T0 )) -lt $LIMIT ]; do
  if [ -f out/gpu-table1-mimetic/results.json ] && [ -f out/gpu-table1-default/results.json ]; then break; fi
  sleep 5
done
echo "$(el) end"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
for a in mimetic default; do [ -f out/gpu-table1-$a/results.json ] && cp out/gpu-table1-$a/results.json $OUT/table1-$a-results.json; done
tail -3 $OUT/table1-*.log  # as run; this tail errs harmlessly with two files
