"""Two versions of the code, bit for bit: in each checkout, the seeded weights of every init arm as each program's
main() builds them, and a tiny seeded run of each program with both inits (its history and final weights).

    OMP_NUM_THREADS=1 python results/scripts/bit_identity.py <checkout> <out.pt>   # once per version
    python results/scripts/bit_identity.py --compare <a.pt> <b.pt>                 # exit 1 when anything differs

The weights: every init arm (mimetic, default, qk, vo, simple; mimetic with vo_sign=+1) at the laptop shapes, seeds 0
and 1, plus ViT-Tiny and the LM with small_emb. One thread: LAPACK's SVD can differ by an ulp across thread counts.
For checkouts after 85533dc (older: snapshot.py at 6794749); its forerunners: results/INVESTIGATIONS.md, "Older runs".
"""
import os
import pickle
import random
import sys
import tempfile

import torch

VIT = "--width=32 --depth=2 --heads=2 --patch_size=8 --batch_size=32 --ra_n=2 --epochs=2 --log_interval=4".split()
LM = ["--dataset=ptb_word", "--width=16", "--depth=2", "--heads=2", "--seq_len=16", "--eval_stride=8",
      "--batch_size=8", "--epochs=2", "--lr=3e-3", "--compile=false", "--device=cpu"]
VIT_LAPTOP = ["--width=96", "--depth=4", "--heads=3", "--patch_size=4"]
LM_LAPTOP = ["--width=128", "--depth=4", "--heads=4", "--seq_len=128"]


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
    """{"weights": {(program, init, vo_sign, seed): state_dict}, "runs": {(program, init): (history, state_dict)}}."""
    sys.path.insert(0, root)
    torch.set_num_threads(1)
    import mimetic_lm
    import mimetic_vit
    weights, runs = {}, {}

    def build(module, args, size):  # the one construction of each program, as its main() calls it
        model = module.build_model(module.parse_config(args + ["--out_dir=/tmp/seeded-weights-unused"]), size)
        return {k: v.clone() for k, v in model.state_dict().items()}

    vit, lm = 10, 49  # classes of CIFAR-10, characters of PTB
    for init, sign in [("mimetic", -1), ("default", -1), ("qk", -1), ("vo", -1), ("mimetic", 1), ("simple", -1)]:
        for seed in (0, 1):
            arm = [f"--init={init}", f"--vo_sign={sign}", f"--seed={seed}"]
            weights["vit", init, sign, seed] = build(mimetic_vit, arm + VIT_LAPTOP, vit)
            weights["lm", init, sign, seed] = build(mimetic_lm, arm + LM_LAPTOP, lm)
    weights["lm", "smallemb", -1, 0] = build(mimetic_lm, ["--small_emb=True"] + LM_LAPTOP, lm)
    weights["vit", "paper-shape", -1, 0] = build(mimetic_vit, [], vit)
    d = tempfile.mkdtemp()
    write_data(d)
    for init in ("mimetic", "default"):
        for name, module, args in (("vit", mimetic_vit, VIT), ("lm", mimetic_lm, LM)):
            folder = f"{d}/{name}-{init}"
            r = module.main(args + [f"--init={init}", f"--data_dir={d}", f"--out_dir={folder}"])
            history = [{k: v for k, v in h.items() if k != "elapsed_s"} for h in r["history"]]
            runs[name, init] = (history + [r.get("test_loss")],
                                torch.load(f"{folder}/ckpt.pt", weights_only=False)["model"])
    return {"weights": weights, "runs": runs}


def differ(a, b, model):
    """How many tensors of two state dicts of one model are not bit-identical."""
    assert a.keys() == b.keys(), f"{model}: different tensors"
    return sum(not torch.equal(a[k], b[k]) for k in a)


def compare(a, b):
    """Print, run by run, whether the histories and weights are bit-identical, then the count over the seeded
    weights; True when nothing differs."""
    assert a["runs"].keys() == b["runs"].keys() and a["weights"].keys() == b["weights"].keys(), "different models"
    ok = True
    for k in a["runs"]:
        (history_a, weights_a), (history_b, weights_b) = a["runs"][k], b["runs"][k]
        same_history, same_weights = history_a == history_b, differ(weights_a, weights_b, k) == 0
        print(k, "history bit-identical" if same_history else "history DIFFERS",
              "| weights bit-identical" if same_weights else "| weights DIFFER")
        ok = ok and same_history and same_weights
    n = sum(len(w) for w in a["weights"].values())
    bad = sum(differ(a["weights"][k], b["weights"][k], k) for k in a["weights"])
    print(f"{len(a['weights'])} models, {n} tensors: {n - bad} bit-identical, {bad} differ")
    return ok and bad == 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        a, b = (torch.load(path, weights_only=False) for path in sys.argv[2:4])
        sys.exit(0 if compare(a, b) else 1)
    torch.save(run(sys.argv[1]), sys.argv[2])
