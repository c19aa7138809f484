#!/bin/bash
# The second GPU session (one NVIDIA H200, 15 minutes of device time): why was the mimetic arm behind in the first
# session's Table 1 pair (results/gpu-h200-table1-partial/: train loss flat at 1.64-1.73 over epochs 4-16, at the
# peak learning rate, while the default arm's fell)? Six arms, all on the paper's 100-epoch schedule, stopped after
# epoch $STOP (--stop_epoch), sharing the GPU: the two controls as the paper states them; the mimetic init at a
# third of the learning rate; the mimetic init in fp32 (no autocast, no TF32); and each half of the init alone
# (--init=qk: W_Q W_K^T only; --init=vo: W_V W_proj only). Results in results/gpu-h200-diagnosis/.
# Code at b3a05d9, torch 2.11.0+cu130. Four device calls, 781 s of the session's 900: (1) this script, 376 s;
# (2) SET=2 LIMIT=330, 178 s; (3) a resume without the arms' flags, refused at once, as designed ("checkpoint ... is
# from another config"); (4) the four lr 1e-3 arms resumed to epoch 14 on the same warm machine, 162 s:
#   r() { python3 mimetic_vit.py --out_dir=out/diag-$1 --resume=True --stop_epoch=14 $2 > $OUT/$1-resume.txt; }
#   r mimetic-lr1e-3 "--init=mimetic --lr=0.001" & r default-lr1e-3 "--init=default --lr=0.001" &
#   r mimetic-lr1e-3-seed1 "--init=mimetic --lr=0.001 --seed=1" & r default-lr1e-3-seed1 "... --seed=1" & wait
# Run from the repository root with the CIFAR-10 JPEG copy in .carry/ and $OUT a folder for the logs.
T0=$(date +%s); LIMIT=${LIMIT:-480}; STOP=${STOP:-7}
el() { echo "[$(( $(date +%s) - T0 ))s]"; }
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
exec > $OUT/session.txt 2>&1  # logs straight into $OUT: what is there comes back even if the call is cut off
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch,torchvision;print('torch',torch.__version__,'torchvision',torchvision.__version__)"
python3 .carry/cifar10-jpeg/make_batches.py data | tail -2
echo "$(el) data ready; code at $(git rev-parse --short HEAD 2>/dev/null)"
declare -A ARMS
if [ "${SET:-1}" = 1 ]; then  # the first call: 376 s
  ARMS=([mimetic]="--init=mimetic" [default]="--init=default" [mimetic-lr1e-3]="--init=mimetic --lr=0.001"
        [mimetic-fp32]="--init=mimetic --precision=fp32" [qk]="--init=qk" [vo]="--init=vo")
else  # the second call (SET=2 LIMIT=330): the default init at the lower rate, and a second seed
  ARMS=([default-lr1e-3]="--init=default --lr=0.001" [mimetic-seed1]="--init=mimetic --seed=1"
        [mimetic-lr1e-3-seed1]="--init=mimetic --lr=0.001 --seed=1" [default-lr1e-3-seed1]="--init=default --lr=0.001 --seed=1")
fi
for a in "${!ARMS[@]}"; do
  timeout $(( LIMIT - $(date +%s) + T0 )) python3 mimetic_vit.py ${ARMS[$a]} --stop_epoch=$STOP \
    --out_dir=out/diag-$a > $OUT/$a.txt 2>&1 < /dev/null &
done
while [ $(( $(date +%s) - T0 )) -lt $LIMIT ] && [ -n "$(jobs -r)" ]; do sleep 5; done
echo "$(el) end"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
kill $(jobs -p) 2>/dev/null
