# Broken data files and checkpoints, each on the real data: the last line printed, the seconds to fail, whether a
# step line came first, whether anything on disk changed. Run from the repository root, with the data in data/
# (CIFAR-10's python layout and ptb/); it works in a scratch folder and leaves the repository as it was.
#   bash results/scripts/broken_files.sh > results/cpu-broken-files/log.txt
set -u
M=$(pwd)
D=$M/data
cd "$(mktemp -d)"
cp -r $D/ptb ptb_src
snap() { find "$1" -type f -exec md5sum {} + 2>/dev/null | sort | md5sum | cut -c1-8; }
case_() { # name, dir to watch, command...
  name=$1; watch=$2; shift 2
  before=$(snap $watch; ls -R $watch | md5sum | cut -c1-8)
  t0=$(date +%s.%N)
  out=$(OMP_NUM_THREADS=1 "$@" 2>&1); rc=$?
  t1=$(date +%s.%N)
  after=$(snap $watch; ls -R $watch | md5sum | cut -c1-8)
  steps=$(echo "$out" | grep -c "^step ")
  echo "[$name] rc=$rc $(python -c "print(f'{$t1-$t0:.1f} s')") step lines=$steps disk unchanged=$([ "$before" == "$after" ] && echo yes || echo NO)"
  echo "   last line: $(echo "$out" | tail -1)"
}
# 1 empty validation file
mkdir -p d1/ptb && cp ptb_src/* d1/ptb/ && : > d1/ptb/ptb.valid.txt
case_ empty-valid d1 python $M/mimetic_lm.py --data_dir=d1 --out_dir=d1/out
# 2 non-UTF-8 text file
mkdir -p d2/ptb && cp ptb_src/* d2/ptb/ && printf '\xa3\xff not utf-8\n' >> d2/ptb/ptb.test.txt
case_ non-utf8 d2 python $M/mimetic_lm.py --data_dir=d2 --out_dir=d2/out
# 3 truncated CIFAR batch
mkdir -p d3 && cp -r $D/cifar-10-batches-py d3/ && truncate -s 1000000 d3/cifar-10-batches-py/data_batch_3
case_ truncated-cifar d3 python $M/mimetic_vit.py --data_dir=d3 --out_dir=d3/out
# 4 corrupt ckpt.pt, ViT
mkdir -p d4/run && head -c 5000 /dev/urandom > d4/run/ckpt.pt
case_ corrupt-ckpt-vit d4 python $M/mimetic_vit.py --data_dir=$D --out_dir=d4/run --resume=True
# 5 corrupt ckpt.pt, LM
mkdir -p d5/run && (printf "Fx\n"; head -c 5000 /dev/urandom) > d5/run/ckpt.pt
case_ corrupt-ckpt-lm d5 python $M/mimetic_lm.py --data_dir=$D --out_dir=d5/run --resume=True
# 6 LM: good ckpt.pt, truncated best.pt
mkdir -p d6
OMP_NUM_THREADS=1 python $M/mimetic_lm.py --data_dir=$D --out_dir=d6/run --width=32 --depth=1 --heads=2 --seq_len=32 --eval_stride=32 --train_subset=20000 --epochs=2 --stop_epoch=1 > /dev/null 2>&1
truncate -s 3000 d6/run/best.pt
case_ truncated-best-lm d6 python $M/mimetic_lm.py --data_dir=$D --out_dir=d6/run --width=32 --depth=1 --heads=2 --seq_len=32 --eval_stride=32 --train_subset=20000 --epochs=2 --resume=True
