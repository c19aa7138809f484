"""A tiny seeded training run of each program, both inits, in a given checkout: the history and the final weights,
for a bit-for-bit comparison of two versions of the code (the skeleton rewrite: 85533dc against its result).

    OMP_NUM_THREADS=1 python results/scripts/tinyrun.py <checkout> <out.pt>    # once per version
    python results/scripts/tinyrun.py --compare <a.pt> <b.pt>
"""
import os
import pickle
import random
import sys
import tempfile

import torch

VIT = ["--width=32", "--depth=2", "--heads=2", "--patch_size=8", "--batch_size=32", "--ra_n=2", "--epochs=2",
       "--log_interval=4"]
LM = ["--dataset=ptb_word", "--width=16", "--depth=2", "--heads=2", "--seq_len=16", "--eval_stride=8",
      "--batch_size=8", "--epochs=2", "--lr=3e-3", "--compile=false", "--device=cpu"]


def write_data(root):
    """A tiny CIFAR-10 (the mean colour follows the label) and a tiny word-level PTB, both learnable."""
    g = torch.Generator().manual_seed(0)
    base = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(base)
    for f, n in [(f"data_batch_{i}", 64) for i in range(1, 6)] + [("test_batch", 100)]:
        labels = torch.randint(10, (n,), generator=g)
        x = (torch.rand(n, 3, 32, 32, generator=g) * 100 + labels.view(-1, 1, 1, 1) * 15).to(torch.uint8)
        with open(os.path.join(base, f), "wb") as fh:
            pickle.dump({"data": x.reshape(n, -1).numpy(), "labels": labels.tolist()}, fh)
    rng = random.Random(0)
    os.makedirs(os.path.join(root, "ptb"))
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        with open(os.path.join(root, "ptb", f"ptb.{split}.txt"), "w") as fh:
            for _ in range(n):
                first = rng.randrange(30)
                words = [f"w{(first + j) % 30}" if rng.random() < 0.7 else f"w{rng.randrange(30)}"
                         for j in range(rng.randint(4, 10))]
                fh.write(" " + " ".join(words) + " \n")


def run(root):
    sys.path.insert(0, root)
    torch.set_num_threads(1)
    import mimetic_lm
    import mimetic_vit
    d, out = tempfile.mkdtemp(), {}
    write_data(d)
    for init in ("mimetic", "default"):
        for name, module, args in (("vit", mimetic_vit, VIT), ("lm", mimetic_lm, LM)):
            folder = f"{d}/{name}-{init}"
            r = module.main(args + [f"--init={init}", f"--data_dir={d}", f"--out_dir={folder}"])
            history = [{k: v for k, v in h.items() if k != "elapsed_s"} for h in r["history"]]
            out[name, init] = (history + [r.get("test_loss")],
                               torch.load(f"{folder}/ckpt.pt", weights_only=False)["model"])
    return out


def compare(a, b):
    for k in a:
        same_history = a[k][0] == b[k][0]
        same_weights = a[k][1].keys() == b[k][1].keys() and all(torch.equal(a[k][1][n], b[k][1][n]) for n in a[k][1])
        print(k, "history bit-identical" if same_history else "history DIFFERS",
              "| weights bit-identical" if same_weights else "| weights DIFFER")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(torch.load(sys.argv[2], weights_only=False), torch.load(sys.argv[3], weights_only=False))
    else:
        torch.save(run(sys.argv[1]), sys.argv[2])
