"""
Our ablation of the language init (not the paper's): with a1 = 0 (Sec. 7), eqs 5-7 take the SVD of b1 I, which
any orthonormal basis satisfies; torch returns U = V = I, so every head of mimetic_lm.py gets W_Q = W_K =
sqrt(b1) I[:, :k], the same first k coordinates. Here each head gets its own random orthonormal basis Q_h
(d x k, the QR of a Gaussian) and W_Q = W_K = sqrt(b1) Q_h: W_Q W_K^T = b1 Q_h Q_h^T, as good a rank-k
approximation of b1 I (Eckart-Young), but each head attends through different directions. Everything else is
mimetic_lm.py's: its model and init (build_model), then this basis, trained by mimetic_lm.train.

Run from the repository root; Table 6's laptop recipe, as README.md's table (add --seed=1, 2):
    python extras/lm_qk_basis.py --dataset=ptb_char --width=128 --depth=4 --heads=4 --seq_len=128 \\
        --eval_stride=128 --batch_size=32 --train_subset=900000 --epochs=3 --lr=2e-3 --warmup_frac=0.1522

Every --key=value is mimetic_lm.py's (python mimetic_lm.py --help); --init must be mimetic or qk, with alpha1 = 0.
The bases are drawn after the init's draws from a generator seeded with --seed, as the language program drew them
when this lived there (commit 85533dc), so that the README's seeds give the same weights. Writes results.json as the
program does, with qk_basis=random in its config; out_dir defaults to out/lm-<dataset>-<init>-randombasis-seed<seed>.
"""
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mimetic_lm as lm  # noqa: E402


@torch.no_grad()
def random_qk_basis_(qkv_weight, num_heads, beta1, generator=None):
    """W_Q = W_K = sqrt(b1) Q_h per head h, Q_h a random orthonormal (d, k) basis; the v rows are left alone."""
    d = qkv_weight.shape[1]
    k = d // num_heads
    for h in range(num_heads):
        Q_h, _ = torch.linalg.qr(torch.randn(d, k, generator=generator, dtype=torch.float64))
        qkv_weight[h * k:(h + 1) * k] = math.sqrt(beta1) * Q_h.T          # q rows of head h hold W_Q^T
        qkv_weight[d + h * k:d + (h + 1) * k] = math.sqrt(beta1) * Q_h.T  # k rows: W_K = W_Q


def build_model(cfg, vocab_size):
    """mimetic_lm.build_model, then a random basis per head, drawn after the init's noise (Z1 of every head, then
    Z2, per block) from the same seed."""
    model = lm.build_model(cfg, vocab_size)
    gen = torch.Generator().manual_seed(cfg.seed)
    for block in model.blocks:  # the init's draws, replayed so that the bases come after them
        for _ in range(block.attn.heads + 1):
            torch.randn(cfg.width, cfg.width, generator=gen, dtype=torch.float64)
    for block in model.blocks:
        random_qk_basis_(block.attn.qkv.weight, block.attn.heads, cfg.beta1, gen)
    return model


def parse(argv):
    """mimetic_lm.py's config, marked qk_basis=random, with this script's out_dir unless one is given."""
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        raise SystemExit(0)
    cfg = lm.parse_config(argv)
    if cfg.alpha1 != 0 or cfg.init not in ("mimetic", "qk"):
        raise SystemExit(f"error: a random basis is for the W_Q W_K^T init with alpha1 = 0 (got --init={cfg.init}, "
                         f"--alpha1={cfg.alpha1}): pass --init=mimetic --alpha1=0")
    cfg.qk_basis = "random"  # recorded in results.json and compared on --resume
    if not any(a.startswith("--out_dir=") and a != "--out_dir=" for a in argv):
        cfg.out_dir = os.path.join("out", f"lm-{cfg.dataset}-{cfg.init}-randombasis-seed{cfg.seed}")
    return cfg


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse(argv)
    dev, amp, prec = lm.device_and_precision(cfg)
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    ckpt = lm.open_run(cfg)
    vocab, ids = lm.load_dataset(cfg.dataset, cfg.data_dir)
    model = build_model(cfg, len(vocab)).to(dev)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    history = lm.train(model, (vocab, ids), cfg, dev, amp, ckpt)
    if history is None:  # --stop_epoch
        return None
    model.load_state_dict(lm.load_checkpoint(os.path.join(cfg.out_dir, "best.pt"))["model"])
    level = lm.DATASETS[cfg.dataset][2]
    val, test = (lm.evaluate(model, ids[s], cfg.seq_len, cfg.eval_stride, cfg.eval_batch_size, amp)
                 for s in ("valid", "test"))
    name = lm.metric(val, level)[0]
    print(f"val {name} {lm.metric(val, level)[1]:.3f} | test {name} {lm.metric(test, level)[1]:.3f}")
    return lm.write_results(cfg, model, dev, prec, ["python", "extras/lm_qk_basis.py", *argv], metric=name,
                            val_loss=val, **{f"val_{name}": lm.metric(val, level)[1]}, test_loss=test,
                            **{f"test_{name}": lm.metric(test, level)[1]}, epochs_done=len(history),
                            history=history, wall_time_s=history[-1]["elapsed_s"])


if __name__ == "__main__":
    main()
