"""The seeded weights of every init arm, built as each program's main() builds them, saved for a bit-for-bit
comparison of two versions of the code (the "Minimal for real" rewrite must not change them).

    OMP_NUM_THREADS=1 python results/scripts/snapshot.py <checkout> <out.pt>   # once per version
    python results/scripts/snapshot.py --compare <a.pt> <b.pt>

Arms: mimetic, default, qk, vo, mimetic with vo_sign=+1, simple; seeds 0 and 1; the laptop shapes (ViT width
96, depth 4, 3 heads, patch 4; LM width 128, depth 4, 4 heads, 128 tokens, vocabulary 49), plus the paper's
ViT-Tiny (mimetic, seed 0) and the LM with small_emb. One thread: LAPACK's SVD can differ by an ulp across
thread counts. Checkouts after 85533dc (before, main() built the model in its own steps: this file at 6794749
built those too).
"""
import sys

import torch


def snapshot(root):
    sys.path.insert(0, root)
    import mimetic_lm as L
    import mimetic_vit as V
    torch.set_num_threads(1)
    out = {}

    def build(mod, args, size):  # the one construction of each program, as its main() calls it
        model = mod.build_model(mod.parse_config(args + ["--out_dir=/tmp/seeded-weights-unused"]), size)
        return {k: v.clone() for k, v in model.state_dict().items()}

    vit, lm = 10, 49  # classes of CIFAR-10, characters of PTB
    for init, sign in [("mimetic", -1), ("default", -1), ("qk", -1), ("vo", -1), ("mimetic", 1), ("simple", -1)]:
        for seed in (0, 1):
            arm = [f"--init={init}", f"--vo_sign={sign}", f"--seed={seed}"]
            out["vit", init, sign, seed] = build(V, arm + ["--width=96", "--depth=4", "--heads=3", "--patch_size=4"], vit)
            out["lm", init, sign, seed] = build(L, arm + ["--width=128", "--depth=4", "--heads=4", "--seq_len=128"], lm)
    out["lm", "smallemb", -1, 0] = build(L, ["--small_emb=True", "--width=128", "--depth=4", "--heads=4",
                                             "--seq_len=128"], lm)
    out["vit", "paper-shape", -1, 0] = build(V, [], vit)
    return out


def compare(a, b):
    assert a.keys() == b.keys(), "different models"
    n = bad = 0
    for model in a:
        assert a[model].keys() == b[model].keys(), f"{model}: different tensors"
        for k in a[model]:
            n += 1
            bad += not torch.equal(a[model][k], b[model][k])
    print(f"{len(a)} models, {n} tensors: {n - bad} bit-identical, {bad} differ")
    return bad == 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(0 if compare(torch.load(sys.argv[2]), torch.load(sys.argv[3])) else 1)
    torch.save(snapshot(sys.argv[1]), sys.argv[2])
