"""Tests for extras/figures.py (Figs. 1-2 of both programs). CPU only, tiny synthetic data written here.

    OMP_NUM_THREADS=1 python -m pytest -q extras/test_figures.py
"""
import importlib.util
import os
import pickle
import random
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mimetic_lm as lm  # noqa: E402
import mimetic_vit as mv  # noqa: E402

torch.set_num_threads(1)  # the models are tiny; on busy cores a second thread only slows them down
spec = importlib.util.spec_from_file_location("extras_figures", os.path.join(ROOT, "extras", "figures.py"))
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)

# test_mimetic.py's tiny shapes (TINY, LM_TINY), one epoch
VIT_TINY = ["--width=32", "--depth=2", "--heads=2", "--patch_size=8", "--batch_size=32", "--ra_n=1", "--log_interval=4",
            "--eval_batch_size=64"]
LM_TINY = ["--dataset=ptb_word", "--width=16", "--depth=1", "--heads=2", "--seq_len=16", "--eval_stride=8",
           "--batch_size=8", "--warmup_steps=5", "--lr=3e-3", "--log_interval=5", "--compile=False", "--device=cpu"]


def write_cifar(root, n_per_batch=64, n_test=100, seed=0, classes=10):
    """A tiny CIFAR-10 in the official python layout: data_batch_1..5, test_batch (test_mimetic.py's)."""
    g = torch.Generator().manual_seed(seed)
    base = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(base, exist_ok=True)

    def batch(n):
        labels = torch.randint(classes, (n,), generator=g)
        x = (torch.rand(n, 3, 32, 32, generator=g) * 100 + labels.view(-1, 1, 1, 1) * 15).to(torch.uint8)
        return {"data": x.reshape(n, -1).numpy(), "labels": labels.tolist()}

    for name, n in [(f"data_batch_{i}", n_per_batch) for i in range(1, 6)] + [("test_batch", n_test)]:
        with open(os.path.join(base, name), "wb") as f:
            pickle.dump(batch(n), f)


def write_corpus(folder, lines=(150, 20, 20), vocab=30, seed=0):
    """A small word-level corpus in PTB's layout: ' w w w \\n' per line (test_mimetic.py's)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    os.makedirs(folder, exist_ok=True)
    for split, n in zip(lm.SPLITS, lines):
        with open(os.path.join(folder, f"ptb.{split}.txt"), "w") as f:
            for _ in range(n):
                first = rng.randrange(vocab)
                seq = [words[(first + j) % vocab] if rng.random() < 0.7 else rng.choice(words)
                       for j in range(rng.randint(4, 10))]
                f.write(" " + " ".join(seq) + " \n")


def read_image(path):
    """A PNG as uint8 (channels, H, W) (PIL: torchvision's reader is deprecated)."""
    return torch.from_numpy(np.array(Image.open(path))).permute(2, 0, 1)


def images(n=16, seed=0):
    """n synthetic uint8 images through mimetic_vit.to_input, as the figures' inputs."""
    x = (torch.rand(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed)) * 255).to(torch.uint8)
    return mv.to_input(x, *mv.norm_stats(mv.MEAN_STD["cifar10"], "cpu"), 32)


def capture_sdpa(monkeypatch):
    """Every call of scaled_dot_product_attention made by a layer: a list of (q, k, v, output)."""
    calls, real = [], F.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        out = real(q, k, v, **kw)
        calls.append((q, k, v, out))
        return out
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls


def models(width, heads, depth=2):
    """Both programs' build_model at both inits, in eval mode, the attention's biases zeroed: [(name, init, model)].
    The ViT with patch 8: 17 tokens."""
    out = []
    for name, program, size, extra in (("vit", mv, 10, ["--patch_size=8"]), ("lm", lm, 23, [])):
        for init in ("mimetic", "default"):
            model = program.build_model(program.parse_config(
                [f"--width={width}", f"--heads={heads}", f"--depth={depth}", f"--init={init}", *extra]), size)
            with torch.no_grad():
                for block in model.blocks:
                    block.attn.qkv.bias.zero_()
                    block.attn.proj.bias.zero_()
            out.append((name, init, model.eval()))
    return out


def test_weight_panels_are_the_products_the_layer_applies(monkeypatch, tmp_path):
    """qk.png's panel (head h, layer l) and vo.png's panel l are the top-left 64 x 64 corner of what the layer
    computes: fed the d basis vectors as d tokens, its q_h k_h^T is W_Q^h W_K^h^T; fed each alone, its output is
    e_i W_V W_proj. Red > 0 > blue, white at 0, each panel over its own largest |value|, 2x zoom."""
    d, heads, clip = 80, 4, 64  # d > 64: the panels are a corner
    calls = capture_sdpa(monkeypatch)
    for name, init, model in models(d, heads):
        qk, vo = figures.weight_products(model)
        assert qk.shape == (2, heads, d, d) and vo.shape == (2, d, d)
        layer_qk, layer_vo = [], []
        for block in model.blocks:
            calls.clear()
            with torch.no_grad():
                layer_vo.append(block.attn(torch.eye(d)[:, None]).squeeze(1))  # d inputs of one token
                block.attn(torch.eye(d)[None])                                  # one input of d tokens
            q, k = calls[-1][0][0], calls[-1][1][0]                             # (heads, d, k) each
            layer_qk.append(q @ k.transpose(-2, -1))
        assert torch.allclose(qk, torch.stack(layer_qk), atol=1e-6), (name, init)
        assert torch.allclose(vo, torch.stack(layer_vo), atol=1e-6), (name, init)
        x = images(2) if name == "vit" else torch.randint(23, (2, 16))
        folder = tmp_path / f"{name}-{init}"
        paths = figures.save_figures(model, x, name == "lm", str(folder))
        for path, panels in zip(paths, ([layer_qk[l][h] for h in range(heads) for l in range(2)], layer_vo)):
            img = read_image(path).float() / 255  # (3, H, W): rows of 2 layers, panels 2 * 64 pixels, padding 2
            assert img.shape == (3, 2 + len(panels) // 2 * (2 * clip + 2), 2 + 2 * (2 * clip + 2))
            for i, m in enumerate(panels):
                r, c = divmod(i, 2)
                px = img[:, 2 + r * (2 * clip + 2):2 + r * (2 * clip + 2) + 2 * clip,
                         2 + c * (2 * clip + 2):2 + c * (2 * clip + 2) + 2 * clip]
                assert torch.equal(px[:, ::2, ::2], px[:, 1::2, 1::2])  # 2x zoom
                m = m[:clip, :clip] / m[:clip, :clip].abs().max()
                white, full = 1 - m.abs(), torch.ones_like(m)
                want = torch.stack([torch.where(m > 0, full, white), white, torch.where(m < 0, full, white)])
                assert (px[:, ::2, ::2] - want).abs().max() < 1 / 255 + 1e-6, (name, init, path, i)


def test_attention_maps_are_the_layers_probabilities(monkeypatch):
    """With one head and one input, map @ v is the layer's own output (so the mask, the 1/sqrt(k) scale and the
    input reaching each layer are the layer's); rows sum to 1; the LM's maps are causal (0 above the diagonal)."""
    calls = capture_sdpa(monkeypatch)
    for name, init, model in models(24, 1, depth=3):
        x = images(1) if name == "vit" else torch.randint(23, (1, 16))
        calls.clear()
        with torch.no_grad():
            model(x)
        maps = figures.attention_maps(model, x, causal=name == "lm")
        assert maps.shape == ((3, 17, 17) if name == "vit" else (3, 16, 16))
        for A, (_, _, v, out) in zip(maps, calls):
            assert torch.allclose(A @ v[0, 0], out[0, 0], atol=1e-5), (name, init)
    for name, init, model in models(32, 2):
        x = images(4) if name == "vit" else torch.randint(23, (4, 16))
        maps = figures.attention_maps(model, x, causal=name == "lm")
        assert torch.allclose(maps.sum(-1), torch.ones(maps.shape[:2]), atol=1e-5), (name, init)
        if name == "lm":
            seen = torch.ones(16, 16, dtype=torch.bool).tril()  # token i sees tokens <= i
            assert (maps[:, ~seen] == 0).all() and (maps[:, seen] > 0).all(), init


def test_vit_attention_is_local_at_mimetic_init_and_uniform_at_default():
    """Fig. 2 (a) against (d): mimetic init puts over 5 times the uniform 1/N on the diagonal in every layer; the
    default init's maps stay within 10% of 1/N everywhere."""
    x = images(16)
    for init in ("mimetic", "default"):
        model = mv.build_model(mv.parse_config(["--width=48", "--heads=2", "--depth=2", "--patch_size=4",
                                                f"--init={init}"]), 10).eval()
        maps = figures.attention_maps(model, x, causal=False)
        n = maps.shape[-1]
        if init == "mimetic":
            assert (maps.diagonal(dim1=1, dim2=2).mean(-1) > 5 / n).all(), maps.diagonal(dim1=1, dim2=2).mean(-1) * n
        else:
            assert ((maps * n - 1).abs() < 0.1).all(), (maps * n - 1).abs().max()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """data_dir with a tiny CIFAR-10 and a tiny word corpus, and one finished 1-epoch run of each program."""
    root = tmp_path_factory.mktemp("figures")
    write_cifar(str(root))
    write_corpus(str(root / "ptb"))
    mv.main(VIT_TINY + ["--epochs=1", f"--data_dir={root}", f"--out_dir={root / 'vit'}"])
    lm.main(LM_TINY + ["--epochs=1", f"--data_dir={root}", f"--out_dir={root / 'lm'}"])
    return root


def png_shapes(paths):
    return [tuple(read_image(p).shape) for p in paths]


def drawn_maps(path, layers, n):
    """attention.png's grey panels (layers, n, n) in [0, 1], in a row with padding 2 (one panel: no padding)."""
    img, pad = read_image(path)[0].float() / 255, 2 if layers > 1 else 0
    return torch.stack([img[pad:pad + n, pad + l * (n + pad):pad + l * (n + pad) + n] for l in range(layers)])


def darker_is_more(maps):
    """What attention.png should show: white = 0, black = the layer's largest probability."""
    return 1 - maps / maps.amax(dim=(1, 2), keepdim=True)


def test_main_fresh_and_from_checkpoints(runs, tmp_path, monkeypatch):
    """Both programs end to end: the fresh model of the given keys (the folder named after program, init and seed)
    and a run's checkpoints (its config decides the model; figures/ beside it), three PNGs of the expected sizes."""
    monkeypatch.chdir(tmp_path)
    data = f"--data_dir={runs}"
    # ViT: 2 heads x 2 layers of 2 * 32 pixels; 17 tokens (patch 8), 2 layers a row
    vit = [(3, 134, 134), (3, 68, 134), (3, 21, 40)]
    fresh = figures.main(["--program=vit", *VIT_TINY, data])
    assert fresh == [os.path.join("out", "figures-vit-mimetic-seed0", f) for f in ("qk.png", "vo.png", "attention.png")]
    assert png_shapes(fresh) == vit
    model = mv.build_model(mv.parse_config(VIT_TINY + [data]), 10).eval()  # on the first 64 test images
    x = mv.to_input(mv.load_dataset("cifar10", str(runs))[2][:64], *mv.norm_stats(mv.MEAN_STD["cifar10"], "cpu"), 32)
    want = darker_is_more(figures.attention_maps(model, x, causal=False))
    assert (drawn_maps(fresh[2], 2, 17) - want).abs().max() < 1 / 255, (drawn_maps(fresh[2], 2, 17) - want).abs().max()
    trained = figures.main(["--program=vit", f"--checkpoint={runs / 'vit' / 'ckpt.pt'}", data])
    assert trained == [str(runs / "vit" / "figures" / f) for f in ("qk.png", "vo.png", "attention.png")]
    assert png_shapes(trained) == vit and not torch.equal(read_image(trained[0]), read_image(fresh[0]))
    # LM: 2 heads x 1 layer of 2 * 16 pixels; 16 tokens, causal (white above the diagonal); a single panel is
    # saved without the grid's padding (torchvision's make_grid)
    lm_shapes = [(3, 70, 36), (3, 32, 32), (3, 16, 16)]
    fresh = figures.main(["--program=lm", *LM_TINY, data, "--init=default", "--out=lm-fresh"])
    assert fresh[0] == os.path.join("lm-fresh", "qk.png") and png_shapes(fresh) == lm_shapes
    for ckpt in ("best.pt", "ckpt.pt"):
        trained = figures.main(["--program=lm", f"--checkpoint={runs / 'lm' / ckpt}", data, f"--out=lm-{ckpt[:-3]}"])
        assert png_shapes(trained) == lm_shapes
        att, seen = read_image(trained[2])[0], torch.ones(16, 16, dtype=torch.bool).tril()
        assert (att[~seen] == 255).all() and (att.diagonal() < 255).all()
    # the model is the checkpoint's, its attention on 8 windows of 16 validation tokens
    best = lm.load_checkpoint(str(runs / "lm" / "best.pt"))
    qkv = best["model"]["blocks.0.attn.qkv.weight"]
    drawn = read_image(os.path.join("lm-best", "qk.png"))[:, 2:34:2, 2:34:2].float() / 255  # head 0's panel
    assert (drawn - figures.diverging((qkv[:8].T @ qkv[16:24])[None])[0]).abs().max() < 1 / 255 + 1e-6
    model = lm.build_model(SimpleNamespace(**best["config"]), len(best["vocab"])).eval()
    model.load_state_dict(best["model"])
    x = lm.load_dataset("ptb_word", str(runs))[1]["valid"][:8 * 16].long().view(8, 16)
    want = darker_is_more(figures.attention_maps(model, x, causal=True))
    assert (drawn_maps(os.path.join("lm-best", "attention.png"), 1, 16) - want).abs().max() < 1 / 255
    # a user's mistakes: one error line each
    with pytest.raises(SystemExit, match="^error: --program=: use --program=vit or --program=lm$"):
        figures.main(VIT_TINY)
    with pytest.raises(SystemExit, match="^error: --width=64: with --checkpoint the checkpoint's config decides"):
        figures.main(["--program=vit", f"--checkpoint={runs / 'vit' / 'ckpt.pt'}", "--width=64", data])
