"""Tests for extras/compare.py's all-positive C arms (eq 15, C' = Softmax(gamma C)). CPU only, tiny synthetic data
written here.

    OMP_NUM_THREADS=1 python -m pytest -q extras/test_extras.py
"""
import importlib.util
import math
import os
import pickle
import sys

import torch
import torch.nn.functional as F
from einops import rearrange

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mimetic_vit as mv  # noqa: E402

torch.set_num_threads(1)  # the models are tiny; on busy cores a second thread only slows them down
spec = importlib.util.spec_from_file_location("extras_compare", os.path.join(ROOT, "extras", "compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)

# test_mimetic.py's tiny shape (TINY)
TINY = ["--width=32", "--depth=2", "--heads=2", "--patch_size=8", "--batch_size=32", "--ra_n=1", "--log_interval=4",
        "--eval_batch_size=64"]


def write_cifar(root, n_per_batch=16, n_test=100, seed=0, classes=10):
    """test_mimetic.py's tiny CIFAR-10 in the official python layout; the mean colour depends on the label."""
    g = torch.Generator().manual_seed(seed)
    base = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(base, exist_ok=True)

    def batch(n):
        labels = torch.randint(classes, (n,), generator=g)
        x = (torch.rand(n, 3, 32, 32, generator=g) * 100 + labels.view(-1, 1, 1, 1) * 15).to(torch.uint8)
        return {"data": x.reshape(n, -1).numpy(), "labels": labels.tolist()}

    for i in range(1, 6):
        with open(os.path.join(base, f"data_batch_{i}"), "wb") as f:
            pickle.dump(batch(n_per_batch), f)
    with open(os.path.join(base, "test_batch"), "wb") as f:
        pickle.dump(batch(n_test), f)
    with open(os.path.join(base, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(classes)]}, f)


def circular_conv_matrix(w, grid):
    """(P, P) matrix of F.conv2d with the (k, k) w over a grid x grid image, circularly padded, raster order:
    column j is the image of the j-th basis image (an independent build of a doubly-block-circulant C)."""
    r = w.shape[-1] // 2
    basis = torch.eye(grid * grid).view(-1, 1, grid, grid)
    out = F.conv2d(F.pad(basis, (r, r, r, r), mode="circular"), w.view(1, 1, *w.shape))
    return out.view(grid * grid, grid * grid).T


def bias_through_forward(layer, heads, tokens):
    """Each head's added matrix as the layer's forward applies it: q = k = 0 (Softmax(S) uniform), v and proj the
    identity, so the forward of I (every head's v = I) minus the uniform map is the padded bias (heads, N, N)."""
    with torch.no_grad():
        layer.qkv.weight.zero_()
        layer.qkv.bias.zero_()
        layer.qkv.weight[2 * heads * tokens:] = torch.eye(heads * tokens)
        layer.proj.weight.copy_(torch.eye(heads * tokens))
        layer.proj.bias.zero_()
        out = layer(torch.eye(tokens).repeat(1, heads)[None])[0]  # (N, heads * N)
    return rearrange(out, "n (h m) -> h n m", h=heads) - 1 / tokens


def test_conv_softmax_local_rows_are_a_softmaxed_kernel_convolution():
    """--compare=conv_softmax_local: each patch row of C' has its k^2 kernel entries positive and summing to 1, zeros
    elsewhere, and C' is the circular convolution with Softmax(gamma kernel), per head; the class token's row and
    column are 0."""
    grid, k, heads = 8, 3, 2
    tokens = grid * grid + 1
    layer = compare.ConvBiasAttention(mv.Attention(heads * tokens, heads), grid, k, "softmax_local",
                                      torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer.gamma.fill_(1.7)  # away from 1, so a missing gamma shows
    taps = torch.softmax(1.7 * layer.kernel.detach(), dim=-1).view(heads, k, k)
    bias = bias_through_forward(layer, heads, tokens)
    assert torch.allclose(bias[:, 0], torch.zeros(heads, tokens), atol=1e-6)  # class token row and column
    assert torch.allclose(bias[:, :, 0], torch.zeros(heads, tokens), atol=1e-6)
    Cp = bias[:, 1:, 1:]
    inside = circular_conv_matrix(torch.ones(k, k), grid) > 0  # (P, P): k^2 entries in every row
    assert (inside.sum(-1) == k * k).all()
    for h in range(heads):
        assert torch.allclose(Cp[h], circular_conv_matrix(taps[h], grid), atol=1e-6)
        assert torch.allclose((Cp[h] * inside).sum(-1), torch.ones(grid * grid), atol=1e-5)
        assert (Cp[h][inside] > 0).all()
        assert torch.allclose(Cp[h][~inside], torch.zeros(()), atol=1e-6)


def test_conv_softmax_global_puts_about_k2_over_P_of_each_row_in_the_kernel_at_init():
    """--compare=conv_softmax takes the softmax over each whole row of P patches: the P - k^2 zeros outside the kernel
    get exp(0) each, so a fresh layer (gamma = 1, kernel N(0, 1/k^2)) puts about k^2 / P = 9 / 64 = 0.14 of a row in
    the kernel (E = 9 e^(1/18) / (9 e^(1/18) + 55) = 0.147), as README.md and the module docstring say. C' is
    circulant, so every row of a head holds the same mass; 12 heads here."""
    grid, k, heads = 8, 3, 2
    tokens = grid * grid + 1
    inside = circular_conv_matrix(torch.ones(k, k), grid) > 0
    masses = []
    for seed in range(6):
        layer = compare.ConvBiasAttention(mv.Attention(heads * tokens, heads), grid, k, "softmax",
                                          torch.Generator().manual_seed(seed))
        Cp = bias_through_forward(layer, heads, tokens)[:, 1:, 1:]
        assert torch.allclose(Cp.sum(-1), torch.ones(heads, grid * grid), atol=1e-5)  # whole rows sum to 1
        masses.append((Cp * inside).sum(-1))  # (heads, P)
    masses = torch.cat(masses)
    assert torch.allclose(masses, masses[:, :1].expand_as(masses), atol=1e-6)  # the same in every row of a head
    assert abs(masses.mean().item() - k * k / (grid * grid)) < 0.02 and masses.max() < 0.25


def test_conv_softmax_local_trains_an_epoch_through_main(tmp_path, monkeypatch):
    """The local arm end to end through compare.main on a tiny CIFAR: its arm's init (default), one epoch, a finite
    test loss; the model trained is the local arm (each layer's output is Softmax(S) plus the circular
    convolution with Softmax(gamma kernel), rebuilt here), and the first block's kernel and gamma moved."""
    write_cifar(tmp_path)
    monkeypatch.chdir(tmp_path)
    seen, train = [], compare.mv.train

    def spy(model, *args, **kw):
        attns = [b.attn for b in model.blocks]
        seen.append((attns, [(a.kernel.detach().clone(), a.gamma.item()) for a in attns]))
        return train(model, *args, **kw)

    monkeypatch.setattr(compare.mv, "train", spy)
    args = ["--compare=conv_softmax_local", *TINY, "--epochs=1", f"--data_dir={tmp_path}", "--out_dir=run"]
    res = compare.main(args)
    assert res["epochs_done"] == 1 and math.isfinite(res["history"][-1]["test_loss"])
    assert res["config"]["init"] == "default" and os.path.exists(tmp_path / "run" / "results.json")
    attns, start = seen[0]
    grid, k = 32 // 8, 3
    x = torch.randn(2, grid * grid + 1, 32, generator=torch.Generator().manual_seed(0))
    kernel0, gamma0 = start[0]  # the first block's: the last one's C reaches no output (the class token's row is 0)
    assert not torch.equal(attns[0].kernel.detach(), kernel0) and attns[0].gamma.item() != gamma0
    for attn in attns:
        with torch.no_grad():
            taps = torch.softmax(attn.gamma * attn.kernel, dim=-1).view(-1, k, k)
            Cp = F.pad(torch.stack([circular_conv_matrix(t, grid) for t in taps]), (1, 0, 1, 0))
            q, key, v = rearrange(attn.qkv(x), "b n (three h k) -> three b h n k", three=3, h=attn.heads)
            A = torch.softmax(q @ key.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) + Cp
            assert torch.allclose(attn(x), attn.proj(rearrange(A @ v, "b h n k -> b n (h k)")), atol=1e-5)
