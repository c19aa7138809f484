"""Tests for the side scripts in extras/ (the paper's side comparisons, Table 4, figures, benchmarks, sampling,
our ablations). CPU only, no network: tiny synthetic data written here, with test_mimetic.py's helpers.

    python -m pytest -q test_mimetic.py extras/     # the README's test command: both files
"""
import json
import math
import os
import pickle
import re
import shutil
import runpy
import subprocess
import sys
import textwrap
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mimetic_lm as lm  # noqa: E402
import mimetic_vit as mv  # noqa: E402
from test_mimetic import (LM_TINY, TINY, TINY_ARGS, RunsCode, StandIn, extra, qk_products,  # noqa: E402
                          replay_noise, small_vit, vo_product, write_cifar, write_corpus)

torch.set_num_threads(1)  # the models are tiny; on busy cores a second thread only slows them down
bench_vit, compare, fig3, figures, table4, speed = (extra(n) for n in (
    "bench_vit", "compare", "fig3", "figures", "table4", "speed_vs_timm_nanogpt"))


# ==================================================================================================
# extras/*.py: one command line, one prologue; helpers of several scripts' tests


# each script's arguments before its first unknown key (its required key, so that the key check is reached)
SCRIPTS = {"bench_lm": [], "bench_vit": [], "compare": ["--compare=zero"], "evaluate_vit": [], "fig3": [],
           "fig_inits": [], "figures": ["--program=lm"], "lm_qk_basis": [], "sample": ["--out_dir=run"],
           "speed_vs_timm_nanogpt": [], "table4": ["--dataset=svhn"]}


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_takes_key_value_help_and_one_line_errors(name, tmp_path, monkeypatch, capsys):
    """One command line for every script in extras/: the same prologue (ROOT on sys.path), --key=value only (the
    program's keys through its parse_config, the script's own in KEYS); --help exits 0 with the docstring or the
    program's keys; an unknown key or a value of the wrong type is one error line, before any work."""
    assert sorted(SCRIPTS) == sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "extras"))  # keys.py: their helper
                                     if f.endswith(".py") and not f.startswith("test_") and f != "keys.py")
    monkeypatch.chdir(tmp_path)  # a script that did work would write here
    script = extra(name)
    assert script.ROOT == ROOT
    with pytest.raises(SystemExit) as e:
        script.main(["--help"])
    assert e.value.code == 0 and "--" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"^error: unknown (config )?key '(--)?colour") as e:
        script.main([*SCRIPTS[name], "--colour=red"])
    assert "\n" not in str(e.value)
    keys = getattr(script, "KEYS", {})
    for key in [k for k, v in keys.items() if isinstance(v, (int, float))][:1]:
        with pytest.raises(SystemExit, match=f"^error: --{key}=big: expected "):
            script.main([*SCRIPTS[name], f"--{key}=big"])
    assert os.listdir(tmp_path) == []


def test_scripts_run_as_commands_from_another_folder(tmp_path, monkeypatch, capsys):
    """`python extras/<script>.py` finds the program from any folder, and a user mistake is one error line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["table4.py", "--dataset=imagenet"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(os.path.join(ROOT, "extras", "table4.py"), run_name="__main__")
    assert str(e.value) == ("error: pass --dataset=svhn or --dataset=tinyimagenet (got imagenet; CIFAR-10 and "
                            "CIFAR-100: python mimetic_vit.py --dataset=...)")
    monkeypatch.setattr(sys, "argv", ["fig3.py", "--help"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(os.path.join(ROOT, "extras", "fig3.py"), run_name="__main__")
    assert e.value.code == 0 and "python extras/fig3.py" in capsys.readouterr().out


def read_image(path):
    """A PNG as uint8 (channels, H, W) (PIL: torchvision's reader is deprecated)."""
    return torch.from_numpy(np.array(Image.open(path))).permute(2, 0, 1)



# extras/evaluate_vit.py: a trained run on other folders' test sets


def test_evaluate_vit_scores_the_checkpoint_and_pairs_the_same_images(tmp_path):
    """On the run's own test set it gives the run's last test accuracy; on an identical copy a paired difference of
    0 +- 0 (paired image by image); on a copy whose pixels differ (a JPEG twin's stand-in) the difference of the
    two accuracies, with an SE; on a folder of other images (other labels) no paired difference."""
    write_cifar(tmp_path / "a")
    run = mv.main(TINY + ["--epochs=1", f"--data_dir={tmp_path / 'a'}", f"--out_dir={tmp_path / 'run'}"])
    shutil.copytree(tmp_path / "a", tmp_path / "same")
    write_cifar(tmp_path / "b")
    test = tmp_path / "b" / "cifar-10-batches-py" / "test_batch"
    with open(test, "rb") as f:
        d = pickle.load(f, encoding="latin1")
    d["data"] = 255 - d["data"]  # the same images' labels, other pixels
    with open(test, "wb") as f:
        pickle.dump(d, f)
    write_cifar(tmp_path / "c", seed=1)
    folders = ",".join(str(tmp_path / name) for name in ("a", "same", "b", "c"))
    res = extra("evaluate_vit").main([f"--out_dir={tmp_path / 'run'}", "--device=cpu", f"--data_dirs={folders}"])
    a, same, b, c = res["rows"]
    assert math.isclose(a["test_acc"], run["final_test_acc"], abs_tol=1e-4) and res["epoch"] == 1
    assert abs(a["test_loss"] - run["history"][-1]["test_loss"]) < 1e-5
    assert same["minus_first"] == 0 and same["minus_first_se"] == 0
    assert "minus_first" not in a and "minus_first" not in c
    assert math.isclose(b["minus_first"], b["test_acc"] - a["test_acc"], abs_tol=1e-4)
    assert b["test_acc"] != a["test_acc"] and 0 < b["minus_first_se"] < 10
    assert json.load(open(tmp_path / "run" / "evaluate.json"))["rows"] == res["rows"]
    again = extra("evaluate_vit").main([f"--out_dir={tmp_path / 'run'}", f"--data_dirs={tmp_path / 'b'}"])
    assert [r["data_dir"] for r in again["rows"]] == folders.split(",")  # the other folders' rows kept, in order
    assert again["rows"][2]["command"] != again["rows"][0]["command"] == res["command"]  # b's row replaced
    ckpt = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)
    for name, change, message in [("lm", {"config": {**ckpt["config"], "dataset": "ptb_char"}}, "is a ptb_char run"),
                                  ("layerscale", {"model": {**ckpt["model"], "blocks.0.scale": torch.ones(32)}},
                                   "holds another model than mimetic_vit.py's of its config")]:
        (tmp_path / name).mkdir()
        torch.save({**ckpt, **change}, tmp_path / name / "ckpt.pt")
        with pytest.raises(SystemExit, match=f"^error: .*ckpt.pt {message}"):
            extra("evaluate_vit").main([f"--out_dir={tmp_path / name}", f"--data_dirs={tmp_path / 'a'}"])

# ==================================================================================================
# extras/bench_lm.py


def test_extras_bench_lm_prints_one_line(capsys):
    tps = extra("bench_lm").main(["--width=16", "--depth=1", "--heads=2", "--seq_len=16", "--batch_size=2",
                                  "--compile=false", "--device=cpu"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert tps > 0 and last.startswith(f"benchmark: {tps:.0f} tok/s | ") and " TFLOP/s " in last
    assert " | fp32 | compile False | width 16 depth 1 heads 2 vocab 49 seq_len 16 batch 2" in last


# ==================================================================================================
# extras/bench_vit.py


def test_augmentation_device_work_does_not_grow_with_the_batch():
    """mimetic_vit.augment issues the same calls whatever the batch holds: doubling the batch (every image cropped,
    erased with noise and jittered) adds no call and no copy (bench_vit's count). The loader before it made a call per
    crop size, per (op, magnitude) and per jitter order: 500-900 calls a batch, more as the batch grew."""
    flags = ["--reprob=1", "--jitter=0.4", "--erase_fill=noise", "--crop_scale=0.75"]
    (calls, copies), (calls2, copies2) = (bench_vit.augmentation_calls(mv.parse_config(flags + [f"--batch_size={b}"]))
                                          for b in (256, 512))
    assert calls == calls2 < 350 and copies == copies2 == 0, (calls, calls2, copies, copies2)


def test_extras_bench_vit_line_and_flops(capsys, monkeypatch):
    monkeypatch.setattr(bench_vit, "TEST_IMAGES", 300)  # the test pass: 10,000 images would take the suite 13 s
    monkeypatch.setattr(bench_vit, "TRAIN_IMAGES", 1024)
    torch.set_num_threads(2)  # the draws' line says the one thread they are timed on, whatever the rest runs on
    try:
        ips = bench_vit.main(["--width=24", "--depth=1", "--heads=2", "--patch_size=8", "--batch_size=16", "--device=cpu"])
    finally:
        torch.set_num_threads(1)
    out = capsys.readouterr().out.strip().splitlines()
    assert ips > 0 and re.fullmatch(r"model step: \d+ img/s", out[-8]), out[-8]
    assert re.fullmatch(r"augmentation alone: draws \d+ img/s on one core \(CPU .+ x\d+ threads 1\); the loader "
                        r"\(on cpu\) \d+ img/s", out[-7]), out[-7]
    assert re.fullmatch(r"augmentation's device work per batch, counted on the meta device: \d+ torch calls, 0 of "
                        r"them with host data; the loader's host-to-device copies per batch: 1", out[-6]), out[-6]
    assert out[-5] == ("augmentation on cpu against the CPU: 0 of 128 images differ; 0% of the values, 0% by more than one "
                       "level of 255, at most 0")
    assert re.fullmatch(r"whole step: \d+ img/s, \d+% of the model step", out[-4]), out[-4]
    m = re.fullmatch(r"between epochs: test pass (\d+\.\d\d) s, checkpoint (\d+\.\d\d) s, (\d+\.\d)% of an epoch of "
                     r"(\d+\.\d) s at the whole step's rate", out[-3])
    assert m and float(m[1]) > 0 and float(m[4]) > 0, out[-3]  # 300 test images take a CPU more than 5 ms
    assert re.fullmatch(r"attention \(16, 2, 17, 12\), forward and backward: default \(flash_attention_for_cpu\) "
                        r"\d+\.\d\d ms(, \w+ \d+\.\d\d ms)+", out[-2]), out[-2]
    assert re.fullmatch(r"benchmark: \d+ img/s \| \d+\.\d\d TFLOP/s \(model matmuls\) \| CPU .* \| fp32 \| "
                        r"compile False \| width 24 depth 1 heads 2 patch 8 image 32 batch 16", out[-1]), out[-1]
    compiled, real_compile = [], torch.compile

    def compile_(model, **kw):
        """The GPU's path: each call recorded; only train()'s compiled (by dynamo's eager backend: inductor would take
        the suite 10 s, aot_eager 2 s), so that a compiled module goes where the GPU's would (tested as a bool, it
        raises)."""
        compiled.append(kw)
        return real_compile(model, backend="eager") if "mode" in kw else model

    monkeypatch.setattr(torch, "compile", compile_)
    assert bench_vit.main(["--width=24", "--depth=1", "--heads=2", "--patch_size=16", "--batch_size=8",
                           "--image_size=64", "--device=cpu", "--compile=true"]) > 0  # Table 7: the batch is resized
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].endswith("compile True | width 24 depth 1 heads 2 patch 16 image 64 batch 8")
    assert re.search(r"test pass \d+\.\d\d s \(\d+\.\d\d s compiled\)", out[-3])
    assert compiled == [{"mode": "default"}, {"dynamic": False}]  # train()'s, the test pass's (CUDA graphs: CUDA only)
    # the FLOP count against torch's own counter (the math attention kernel, so that it counts q k^T and att v)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    for c in (mv.ViTConfig(width=24, depth=1, heads=2, patch_size=8),
              mv.ViTConfig(image_size=64, patch_size=4, num_classes=200, width=48, depth=2, heads=3, mlp_ratio=2)):
        with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
            F.cross_entropy(mv.ViT(c)(torch.randn(1, 3, c.image_size, c.image_size)), torch.zeros(1).long()).backward()
        assert counter.get_total_flops() == bench_vit.train_flops_per_image(c)


def test_bench_vit_names_the_attention_kernel_that_torch_chooses():
    """The default backend named by the aten op it runs: the CPU's fused kernel, or math (forced, or on the meta
    device, which has no fused kernel) where attention runs as matmuls and a softmax."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(2, 3, 17, 8)
    assert bench_vit.attention_kernel(q, q, q) == "flash_attention_for_cpu"
    with sdpa_kernel(SDPBackend.MATH):
        assert bench_vit.attention_kernel(q, q, q) == "math"
    assert bench_vit.attention_kernel(*[q.to("meta")] * 3) == "math"


# ==================================================================================================
# extras/compare.py: the paper's side comparisons (Table 5, eqs 14-15, Fig. 6)


def test_compare_parse_keys_arm_defaults_and_errors():
    cfg = compare.parse(["--compare=layerscale", "--ls_init=0.4", "--seed=2"])
    assert (cfg.init, cfg.ls_init, cfg.out_dir) == ("qk", 0.4, os.path.join("out", "compare-layerscale-0.4-qk-seed2"))
    cfg = compare.parse(["--compare=subset", "--subset_size=1000", "--init=default"])
    out = os.path.join("out", "compare-subset-1000-default-seed0")
    assert (cfg.init, cfg.subset_size, cfg.out_dir) == ("default", 1000, out)
    assert compare.parse(["--compare=conv_in"]).init == "default" and compare.parse(["--compare=zero"]).conv_kernel == 3
    with pytest.raises(SystemExit, match="error: pass --compare=one of zero, tfixup, .* \\(got none\\)"):
        compare.parse(["--epochs=1"])
    with pytest.raises(SystemExit, match="error: --ls_init=big: expected float"):
        compare.parse(["--compare=layerscale", "--ls_init=big"])
    with pytest.raises(SystemExit, match="error: unknown config key 'colour'"):
        compare.parse(["--compare=zero", "--colour=red"])


def test_compare_each_arms_init_is_the_papers():
    """Table 5: both LayerScales keep the W_Q W_K^T init (qk); ZerO, T-Fixup and C start from the default;
    Fig. 6 compares mimetic (and --init=default) on subsets; impulse keeps mimetic's W_V W_proj."""
    papers = {"zero": "default", "tfixup": "default", "layerscale": "qk", "layerscale_ours": "qk",
              "conv_in": "default", "conv_out": "default", "conv_softmax": "default",
              "conv_softmax_local": "default", "subset": "mimetic", "impulse": "mimetic"}
    assert {arm: compare.parse([f"--compare={arm}"]).init for arm in compare.INIT} == papers  # every arm


def test_compare_zero_init_products_and_a_silent_branch():
    """ZerO on attention: W_Q = 0 and W_K = I, so W_Q W_K^T = 0 (the paper, Sec. 2: "the product of these weights
    remains zero"); W_V = I and W_proj = 0, so W_V W_proj = 0 and every attention branch outputs exactly 0
    at init; the rest of the model is untouched."""
    model = small_vit(width=32, heads=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compare.zero_init_(model)
    d = 32
    for block in model.blocks:
        W = block.attn.qkv.weight
        assert torch.equal(W[:d], torch.zeros(d, d)) and torch.equal(W[d:2 * d], torch.eye(d))
        assert torch.equal(W[2 * d:], torch.eye(d)) and torch.equal(block.attn.proj.weight, torch.zeros(d, d))
        assert torch.equal(block.attn(torch.randn(2, 5, d)), torch.zeros(2, 5, d))
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {f"blocks.{i}.attn.{n}" for i in range(2) for n in ("qkv.weight", "proj.weight")}


def test_compare_zero_init_zeroes_the_attention_biases():
    """ZerO sets the attention biases to 0 whatever they were (here 0.1): the branch is silent."""
    model = small_vit(width=32, heads=2)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.bias.fill_(0.1)
            block.attn.proj.bias.fill_(0.1)
    compare.zero_init_(model)
    for block in model.blocks:
        assert not block.attn.qkv.bias.any() and not block.attn.proj.bias.any()
        assert torch.equal(block.attn(torch.randn(2, 5, 32)), torch.zeros(2, 5, 32))


def test_compare_tfixup_scales_at_two_depths():
    """T-Fixup (Huang et al. 2020): Xavier uniform, bound sqrt(6 / (fan_in + fan_out)), with q, k, v each a
    d x d matrix; v, proj, fc1, fc2 scaled by 0.67 N^(-1/4): 0.473762 at depth 4, 0.359981 at depth 12.
    The largest of 9,216+ uniform draws is within 1% of the bound."""
    d = 96
    for depth, factor in ((4, 0.473762), (12, 0.359981)):
        model = mv.ViT(mv.ViTConfig(patch_size=4, width=d, depth=depth, heads=3))
        compare.tfixup_init_(model, torch.Generator().manual_seed(0))
        for block in (model.blocks[0], model.blocks[-1]):
            q, k, v = block.attn.qkv.weight.detach().chunk(3)
            cases = [(q, 1.0, 2 * d), (k, 1.0, 2 * d), (v, factor, 2 * d), (block.attn.proj.weight, factor, 2 * d),
                     (block.mlp.fc1.weight, factor, 5 * d), (block.mlp.fc2.weight, factor, 5 * d)]
            for w, scale, fans in cases:
                bound = scale * math.sqrt(6 / fans)
                assert 0.99 * bound < w.abs().max().item() <= bound * (1 + 1e-5), (depth, w.shape, scale)
        assert torch.equal(model.blocks[0].attn.qkv.bias, torch.zeros(3 * d))


def test_compare_layerscale_eq9_and_the_papers_version_eq13():
    """Eq 9 (Touvron et al.): x + D SelfAttn(norm(x)); with D = 1 the block is the program's own, with D = 0
    attention is gone. Eq 13 (ours): D x + SelfAttn(norm(x)); with D = 0 the skip path is gone."""
    model = small_vit(init="qk", width=32, heads=2)
    block, x = model.blocks[0], torch.randn(2, 5, 32)
    mlp = lambda h: h + block.mlp(block.norm2(h))  # noqa: E731
    with torch.no_grad():
        assert torch.allclose(compare.LayerScaleBlock(block, 1.0, on_skip=False)(x), block(x), atol=1e-6)
        assert torch.allclose(compare.LayerScaleBlock(block, 1.0, on_skip=True)(x), block(x), atol=1e-6)
        assert torch.allclose(compare.LayerScaleBlock(block, 0.0, on_skip=False)(x), mlp(x), atol=1e-6)
        attn_only = block.attn(block.norm1(x))
        assert torch.allclose(compare.LayerScaleBlock(block, 0.0, on_skip=True)(x), mlp(attn_only), atol=1e-6)
    cfg = compare.parse(["--compare=layerscale_ours", "--ls_init=0.6", "--width=32", "--heads=2", "--depth=2"])
    wrapped = compare.apply_comparison(small_vit(init="qk", width=32, heads=2), cfg)
    assert all(torch.equal(b.scale, torch.full((32,), 0.6)) and b.on_skip for b in wrapped.blocks)
    names = [n for n, p in wrapped.named_parameters() if n.endswith("scale")]
    decayed = mv.make_optimizer(wrapped, 1e-3, 0.01, torch.device("cpu")).param_groups[0]["params"]
    assert len(names) == 2 and not any(p is b.scale for p in decayed for b in wrapped.blocks)  # no weight decay


def test_compare_layerscale_at_a_value_between_0_and_1():
    """D = 0.3: eq 9 is x + 0.3 SelfAttn(norm(x)), eq 13 is 0.3 x + SelfAttn(norm(x)), each then the MLP."""
    model = small_vit(init="qk", width=32, heads=2)
    block, x = model.blocks[0], torch.randn(2, 5, 32)
    mlp = lambda h: h + block.mlp(block.norm2(h))  # noqa: E731
    with torch.no_grad():
        a = block.attn(block.norm1(x))
        assert torch.allclose(compare.LayerScaleBlock(block, 0.3, on_skip=False)(x), mlp(x + 0.3 * a), atol=1e-6)
        assert torch.allclose(compare.LayerScaleBlock(block, 0.3, on_skip=True)(x), mlp(0.3 * x + a), atol=1e-6)


def test_compare_circulant_c_times_an_image_is_a_circular_conv2d():
    """Eqs 14-15: C (doubly block circulant) times a flattened image equals F.conv2d of the circularly padded
    image with the same kernel, for several grids and kernels, and so does each head's ConvBiasAttention C."""
    g = torch.Generator().manual_seed(0)
    for grid, kernel in ((8, 3), (5, 5), (6, 3), (4, 1)):
        w, image = torch.randn(kernel, kernel, generator=g), torch.randn(grid, grid, generator=g)
        C = torch.cat([w.flatten(), torch.zeros(1)])[compare.circulant_index(grid, kernel)]
        r = kernel // 2
        conv = F.conv2d(F.pad(image[None, None], (r, r, r, r), mode="circular"), w[None, None])
        assert torch.allclose(C @ image.flatten(), conv.flatten(), atol=1e-5)
    attn = compare.ConvBiasAttention(mv.Attention(12, 3), 8, 3, "out", g)
    C = attn.conv_matrix()
    conv = F.conv2d(F.pad(image.new_ones(1, 1, 8, 8).cumsum(-1), (1, 1, 1, 1), mode="circular"),
                    attn.kernel.detach().view(3, 1, 3, 3))
    assert C.shape == (3, 64, 64) and torch.allclose(C.detach() @ torch.ones(8, 8).cumsum(-1).flatten(),
                                                     conv.view(3, 64), atol=1e-5)
    with pytest.raises(SystemExit, match="error: --conv_kernel=9 must be odd and at most the patch grid's side 8"):
        compare.circulant_index(8, 9)


def test_compare_conv_bias_inside_and_outside_the_softmax():
    """Eq 14 puts gamma C inside the softmax: with C a large delta kernel every patch attends only to itself,
    and the output is proj(v) of its own token. Eq 15 adds gamma C outside: the output moves by exactly
    gamma C v through proj. gamma = 0: both are the program's own Attention. C' = Softmax(gamma C) is all
    positive, each row sums to 1 and stays circulant."""
    torch.manual_seed(0)
    plain, x = mv.Attention(12, 3), torch.randn(2, 17, 12)  # class token + a 4x4 grid of patches
    layers = {v: compare.ConvBiasAttention(plain, 4, 3, v, torch.Generator().manual_seed(0))
              for v in ("in", "out", "softmax")}
    with torch.no_grad():
        for layer in layers.values():
            layer.gamma.zero_()
        assert torch.allclose(layers["in"](x), plain(x), atol=1e-6)
        assert torch.allclose(layers["out"](x), plain(x), atol=1e-6)
        layers["in"].gamma.fill_(1.0)
        layers["in"].kernel.zero_()
        layers["in"].kernel[:, 4] = 1e4  # the kernel's centre: C = 1e4 I over the patches
        v = rearrange(plain.qkv(x), "b n (three h k) -> three b h n k", three=3, h=3)[2]
        own = plain.proj(rearrange(v, "b h n k -> b n (h k)"))
        assert torch.allclose(layers["in"](x)[:, 1:], own[:, 1:], atol=1e-5)
        assert not torch.allclose(layers["in"](x)[:, 0], own[:, 0], atol=1e-3)  # the class token: no bias
        layers["out"].gamma.fill_(0.5)
        C = F.pad(layers["out"].conv_matrix(), (1, 0, 1, 0))  # (h, N, N), class token row and column 0
        shift = rearrange(0.5 * C @ v, "b h n k -> b n (h k)") @ plain.proj.weight.T
        assert torch.allclose(layers["out"](x), plain(x) + shift, atol=1e-5)
        layers["softmax"].gamma.fill_(2.0)
        Cs = torch.softmax(2.0 * layers["softmax"].conv_matrix(), dim=-1)
        assert (Cs > 0).all() and torch.allclose(Cs.sum(-1), torch.ones(3, 16))
        shifted = torch.roll(Cs[:, 4].view(3, 4, 4), 1, dims=-1)  # patch (1, 0)'s row, one column right
        assert torch.allclose(Cs[:, 5].view(3, 4, 4), shifted)  # is patch (1, 1)'s: doubly block circulant


def test_compare_conv_bias_fresh_layer_finite_scale_and_the_softmax_arms_output():
    """A fresh C layer: gamma = 1 and kernel entries N(0, 1/kernel^2), both learnable (the module docstring).
    Eq 14 at a finite scale: with q = k = 0 every score is 0, so with the kernel's centre log(16) a patch gives
    its own token 16 / (16 + 16) = 1/2 and each of the 16 others 1/32; the class token (no bias) 1/17 each.
    conv_softmax's output is the program's attention plus Softmax(gamma C) v through proj, class token 0."""
    g = torch.Generator().manual_seed(0)
    fresh = compare.ConvBiasAttention(mv.Attention(64, 64), 8, 5, "out", g)  # 64 heads x 25 = 1,600 draws
    assert fresh.gamma.item() == 1.0 and fresh.gamma.requires_grad and fresh.kernel.requires_grad
    assert abs(fresh.kernel.std().item() - 1 / 5) < 0.02  # the std's SE ~ 0.0035
    torch.manual_seed(0)
    plain, x = mv.Attention(12, 3), torch.randn(2, 17, 12)
    layer = compare.ConvBiasAttention(plain, 4, 3, "in", g)
    with torch.no_grad():
        plain.qkv.weight[:24].zero_()
        plain.qkv.bias[:24].zero_()  # q = k = 0
        layer.kernel.zero_()
        layer.kernel[:, 4] = math.log(16)
        A = torch.full((17, 17), 1 / 32)
        A[range(1, 17), range(1, 17)] = 0.5
        A[0] = 1 / 17
        v = rearrange(plain.qkv(x), "b n (three h k) -> three b h n k", three=3, h=3)[2]
        assert torch.allclose(layer(x), plain.proj(rearrange(A @ v, "b h n k -> b n (h k)")), atol=1e-5)
        torch.manual_seed(1)
        plain = mv.Attention(12, 3)
        sm = compare.ConvBiasAttention(plain, 4, 3, "softmax", g)
        sm.gamma.fill_(2.0)
        v = rearrange(plain.qkv(x), "b n (three h k) -> three b h n k", three=3, h=3)[2]
        Cs = F.pad(torch.softmax(2.0 * sm.conv_matrix(), dim=-1), (1, 0, 1, 0))  # class token row, column 0
        shift = rearrange(Cs @ v, "b h n k -> b n (h k)") @ plain.proj.weight.T
        assert torch.allclose(sm(x), plain(x) + shift, atol=1e-5)


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


def test_compare_draws_leave_torchs_rng_alone():
    """T-Fixup's, C's and impulse's draws come from their own generator: torch's RNG, which RandAugment draws from,
    is where the program leaves it, so an arm sees the augmentations of the program's own run of that seed."""
    for arm in ("tfixup", "conv_out", "impulse"):
        cfg = compare.parse([f"--compare={arm}", "--width=32", "--heads=2", "--depth=2", "--patch_size=4"])
        model = small_vit(init="default", width=32, heads=2)
        state = torch.get_rng_state()
        compare.apply_comparison(model, cfg)
        assert torch.equal(torch.get_rng_state(), state), arm


def test_compare_subset_is_class_balanced_seeded_and_keeps_the_steps(tmp_path, monkeypatch):
    """Fig. 6: n / 10 images of each class, the same for a seed and another for another seed; the run takes
    about as many optimizer steps as --epochs over the whole training set would: here 2 epochs of 320 images
    at batch 32 = 20 steps; a 100-image subset has 3 steps an epoch, so 7 epochs (21 steps)."""
    labels = torch.arange(1000) % 10
    a, b = (compare.balanced_subset(labels, 100, torch.Generator().manual_seed(s)) for s in (0, 0))
    c = compare.balanced_subset(labels, 100, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c) and len(a.unique()) == 100
    assert torch.bincount(labels[a]).tolist() == [10] * 10
    with pytest.raises(SystemExit, match="error: --subset_size=105 must be a multiple of the 10 classes"):
        compare.balanced_subset(labels, 105, None)
    write_cifar(tmp_path, n_per_batch=64)  # 320 training images
    monkeypatch.chdir(tmp_path)
    res = compare.main(["--compare=subset", "--subset_size=100", *TINY, "--epochs=2", f"--data_dir={tmp_path}"])
    assert res["config"]["epochs"] == 7 and res["epochs_done"] == 7  # 2 * (320 // 32) = 20 steps ~ 7 x 3 = 21
    assert res["command"].startswith("python extras/compare.py --compare=subset --subset_size=100")
    assert os.path.exists(tmp_path / "out" / "compare-subset-100-mimetic-seed0" / "results.json")


def test_compare_arm_draws_and_subset_follow_the_seed_and_keep_labels(tmp_path, monkeypatch):
    """--seed changes T-Fixup's and C's draws (on the same base model) and the Fig. 6 subset that main trains on;
    the images main trains on carry their own labels, 10 of each class."""
    base = ["--width=32", "--heads=2", "--depth=2", "--patch_size=4"]
    for arm, get in (("tfixup", lambda m: m.blocks[0].mlp.fc1.weight), ("conv_out", lambda m: m.blocks[0].attn.kernel)):
        a, b = (get(compare.apply_comparison(small_vit(init="default", width=32, heads=2),
                                             compare.parse([f"--compare={arm}", f"--seed={s}", *base])))
                for s in (0, 1))
        assert not torch.equal(a, b), arm
    write_cifar(tmp_path, n_per_batch=64)  # 320 training images
    monkeypatch.chdir(tmp_path)
    full_x, full_y = mv.load_dataset("cifar10", str(tmp_path))[:2]
    seen = []
    monkeypatch.setattr(compare.mv, "train", lambda model, data, *a: seen.append(data[:2]))  # returns None: stop
    picked = []
    for seed in (0, 1):
        compare.main(["--compare=subset", "--subset_size=100", *TINY, f"--seed={seed}", f"--data_dir={tmp_path}",
                      f"--out_dir=s{seed}"])
        xs, ys = (t.cpu() for t in seen[-1])
        idx = torch.tensor([(full_x == img).flatten(1).all(1).nonzero().item() for img in xs])
        assert torch.equal(full_y[idx], ys) and torch.bincount(ys, minlength=10).tolist() == [10] * 10
        picked.append(idx)
    assert not torch.equal(picked[0], picked[1])


@pytest.mark.parametrize("arm", ["tfixup", "layerscale", "conv_out", "impulse"])  # draws, wrapper, attention, SVDs
def test_compare_arms_train_and_resume_exactly(arm, tmp_path, monkeypatch):
    """An arm through compare.main on a tiny CIFAR: an epoch, stop, resume to the end equals the run in one go,
    bit for bit (its new parameters are in the checkpoint)."""
    write_cifar(tmp_path, n_per_batch=16)
    monkeypatch.chdir(tmp_path)
    args = [f"--compare={arm}", *TINY, "--epochs=2", f"--data_dir={tmp_path}"]
    whole = compare.main([*args, "--out_dir=whole"])
    compare.main([*args, "--out_dir=split", "--stop_epoch=1"])
    split = compare.main([*args, "--out_dir=split", "--resume=True"])
    assert split["history"][-1]["test_loss"] == whole["history"][-1]["test_loss"]
    assert math.isfinite(whole["history"][-1]["test_loss"])


@pytest.mark.parametrize("arm", list(compare.INIT))
def test_compare_arms_train_on_a_stand_in_device(arm, tmp_path, monkeypatch):
    """Every arm's new parameters, buffers and draws on the stand-in for a GPU (StandIn): an epoch, its
    evaluation and checkpoint, with no CPU tensor in device work (resuming on it: the program's own test)."""
    write_cifar(tmp_path, n_per_batch=16)
    monkeypatch.chdir(tmp_path)
    args = [f"--compare={arm}", *TINY, "--epochs=1", "--device=meta", f"--data_dir={tmp_path}", "--out_dir=run"]
    if arm == "subset":
        args += ["--subset_size=30", "--batch_size=10"]
    with StandIn():
        assert compare.main(args)["epochs_done"] >= 1


def test_conv_softmax_local_trains_an_epoch_through_main(tmp_path, monkeypatch):
    """The local arm end to end through compare.main on a tiny CIFAR: its arm's init (default), one epoch, a finite
    test loss; the model trained is the local arm (each layer's output is Softmax(S) plus the circular
    convolution with Softmax(gamma kernel), rebuilt here), and the first block's kernel and gamma moved."""
    write_cifar(tmp_path, n_per_batch=16)
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


# ==================================================================================================
# extras/compare.py: the impulse (structured) initialization, Zheng et al. 2025: the arm beside mimetic

IMPULSE_LAPTOP = ["--compare=impulse", "--width=96", "--depth=2", "--heads=3", "--patch_size=4"]  # laptop, 2 blocks
# (dy, dx) of heads 0-8 on the patch grid, read off their impulse_init: taps (4, 1, 5, 3, 7, 0, 2, 6, 8) of a 3 x 3
# kernel, tap t at (t // 3 - 1, t % 3 - 1): centre, up, right, left, down, then the diagonals
THEIR_OFFSETS = [(0, 0), (-1, 0), (0, 1), (0, -1), (1, 0), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def impulse_vit(*args, seed=0):
    """The impulse arm's model at init, built as compare.main builds it, and its config."""
    cfg = compare.parse([*IMPULSE_LAPTOP, f"--seed={seed}", *args])
    return compare.apply_comparison(mv.build_model(cfg, 10), cfg).eval(), cfg


def shifted_neighbours(grid, heads):
    """(head, query token, key token) for every patch whose head's neighbour is on the grid (tokens: patches from 1,
    after the class token), from THEIR_OFFSETS."""
    rows = [(h, 1 + r * grid + c, 1 + (r + dy) * grid + c + dx) for h, (dy, dx) in enumerate(THEIR_OFFSETS[:heads])
            for r in range(grid) for c in range(grid) if 0 <= r + dy < grid and 0 <= c + dx < grid]
    return torch.tensor(rows).T


def test_impulse_offsets_follow_their_order():
    assert compare.impulse_offsets(10) == THEIR_OFFSETS + [(0, 0)]  # a tenth head starts again at the centre


def test_impulse_attention_peaks_at_each_heads_shifted_neighbour():
    """At init, laptop shape (8 x 8 patches, 3 heads): in every layer, on the input the init is built for (the
    position embeddings alone, through the block's LayerNorm), head h's attention from every patch peaks at its
    neighbour at THEIR_OFFSETS[h] (head 0 the patch itself, 1 the one above, 2 the one to the right), with 0.99
    of the mass on average. On images the content blurs it: at the first layer the shifted heads still put 0.16
    of the mass on their neighbour (uniform: 1/65; mimetic: 0.01-0.02, on its diagonal instead)."""
    model, _ = impulse_vit()
    h, i, j = shifted_neighbours(8, 3)
    for block in model.blocks:
        with torch.no_grad():
            q, k, _ = rearrange(block.attn.qkv(block.norm1(model.pos_embed)), "b n (three h k) -> three b h n k",
                                three=3, h=3)
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(32), dim=-1)[0]  # (heads, N, N)
        assert torch.equal(att[h, i].argmax(-1), j)
        assert att[h, i, j].mean() > 0.95, att[h, i, j].mean()
    first = torch.softmax(next(figures.attention_scores(model, images(16), causal=False)), dim=-1).mean(0)
    shifted = h > 0
    assert first[h[shifted], i[shifted], j[shifted]].mean() > 0.1  # over 6 times the uniform 1/65


def test_impulse_targets_peak_1000_and_truncated_noise():
    """impulse_init's target: 1000 at each head's neighbour where it is on the grid (no wrap: 64 patches for the
    centre, 56 for an edge shift, 49 for a diagonal), elsewhere 3 x N(0, 0.6^2) truncated to [-2, 2] (timm's
    absolute bounds): std 3 x 0.6 x 0.9948 = 1.79, all within +-6 and some past 5."""
    T = compare.impulse_targets(8, 9, torch.Generator().manual_seed(0))
    on = T == 1000
    assert on.sum((1, 2)).tolist() == [64, 56, 56, 56, 56, 49, 49, 49, 49]
    h, i, j = shifted_neighbours(8, 9)
    assert on[h, i - 1, j - 1].all() and on.sum() == len(h)
    noise = T[~on]
    assert abs(noise.std() - 1.79) < 0.03 and abs(noise.mean()) < 0.03, (noise.std(), noise.mean())
    assert 5 < noise.abs().max() <= 6


def test_impulse_qk_is_their_rank_k_pseudo_inverse_construction():
    """Each layer and head: W_Q^h W_K^h^T = 49 A_h / (sum of A_h's singular values), A_h = L_k^+ T_h L_k^+^T, with
    L the LayerNorm of the patches' position embeddings (class token left out), L_k^+ its pseudo-inverse at rank
    k = head dimension, and T_h the target drawn afresh for each layer from the arm's generator (seed + 1); each
    factor has Frobenius norm 7. Seed 1, so that the generator's seed is seed + 1, not a constant."""
    model, cfg = impulse_vit(seed=1)
    d, heads, k = 96, 3, 32
    L = F.layer_norm(model.pos_embed[0, 1:].detach().double(), (d,))
    U, S, Vh = torch.linalg.svd(L, full_matrices=False)
    L_pinv = Vh[:k].T @ torch.diag(1 / S[:k]) @ U[:, :k].T  # (d, P)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    for block in model.blocks:
        T = compare.impulse_targets(8, heads, gen)
        W = block.attn.qkv.weight.detach().double()
        for h, product in enumerate(qk_products(W, heads)):
            A = L_pinv @ T[h] @ L_pinv.T
            expected = 49 * A / torch.linalg.matrix_norm(A, ord="nuc")
            assert (product - expected).abs().max() < 1e-5 * expected.abs().max(), h
            for rows in (W[h * k:(h + 1) * k], W[d + h * k:d + (h + 1) * k]):  # W_Q^T, W_K^T
                assert abs(rows.norm() - 7) < 1e-5


def test_impulse_keeps_mimetics_vo_and_scales_learned_position_embeddings_by_18():
    """The arm defaults to --init=mimetic and --pos_emb=learned (a later key overrides them); its position
    embeddings are 18 times the program's learned ones, its W_V W_proj is eq 2's 0.4 Z2 - 0.4 I from the program's
    draws, and every tensor but the q and k rows and the position embeddings is the mimetic arm's, bit for bit."""
    model, cfg = impulse_vit()
    assert (cfg.init, cfg.pos_emb) == ("mimetic", "learned")
    assert compare.parse([*IMPULSE_LAPTOP, "--pos_emb=sinusoidal"]).pos_emb == "sinusoidal"
    state = model.state_dict()
    learned = mv.build_model(cfg, 10).state_dict()  # the same config, without the arm
    mimetic = mv.build_model(mv.parse_config([a for a in IMPULSE_LAPTOP if "compare" not in a]), 10).state_dict()
    assert torch.equal(state["pos_embed"], 18 * learned["pos_embed"])
    d = 96
    for name, tensor in state.items():
        if name.endswith("attn.qkv.weight"):
            assert torch.equal(tensor[2 * d:], mimetic[name][2 * d:]) and not torch.equal(tensor[:d], mimetic[name][:d])
        elif name != "pos_embed":
            assert torch.equal(tensor, mimetic[name]), name
    Z = replay_noise(0, d, 2 * (3 + 1))  # per layer: Z1 of 3 heads, then Z2
    for layer, block in enumerate(model.blocks):
        target = (0.4 * Z[4 * layer + 3] - 0.4 * torch.eye(d, dtype=torch.float64)).float()
        assert (vo_product(block.attn.qkv.weight, block.attn.proj.weight) - target).abs().max() < 1e-5


def test_impulse_init_repeats_with_its_seed():
    """The same seed gives the same init bit for bit; another seed, other noise; each layer its own noise."""
    a, b, c = (impulse_vit(seed=s)[0].state_dict() for s in (0, 0, 1))
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert not torch.equal(a["blocks.0.attn.qkv.weight"][:192], c["blocks.0.attn.qkv.weight"][:192])
    assert not torch.equal(a["blocks.0.attn.qkv.weight"][:192], a["blocks.1.attn.qkv.weight"][:192])


def test_impulse_on_sinusoids_keeps_the_embeddings_numerical_rank():
    """--pos_emb=sinusoidal: the LayerNormed patch rows of our 1-D sinusoids (times 18) have numerical rank 23 at the
    laptop shape (torch.linalg.matrix_rank in float32), below k = 32, so the pseudo-inverse keeps 23: every q and k
    row lies in the span of L's top 23 right singular vectors (a rank-32 one would put nearly all of their norm on
    directions that invert float32 rounding)."""
    model, _ = impulse_vit("--pos_emb=sinusoidal")
    L = F.layer_norm(model.pos_embed[0, 1:].detach(), (96,))
    assert torch.linalg.matrix_rank(L) == 23
    V = torch.linalg.svd(L.double(), full_matrices=False)[2][:23].T  # (d, 23)
    for block in model.blocks:
        qk = block.attn.qkv.weight.detach()[:2 * 96].double()  # q, then k rows, each head's of Frobenius norm 7
        assert torch.isfinite(qk).all() and (qk - qk @ V @ V.T).norm() < 1e-4 * qk.norm()


# ==================================================================================================
# extras/fig3.py


def test_extras_fig3_measurement_and_picture(tmp_path, monkeypatch, capsys):
    d = 96
    qkv, proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
    mv.mimetic_init_(qkv.weight, proj.weight, 1, alpha1=0.7, beta1=0.7, generator=torch.Generator().manual_seed(0))
    W = qkv.weight.detach()
    a, b = fig3.measure_alpha_beta(W[:d].T @ W[d:2 * d])  # W_Q W_K^T at full rank: eq 1 exactly
    assert abs(a - 0.7) < 0.03 and abs(b - 0.7) < 0.01, (a, b)
    a, b = fig3.measure_alpha_beta(-(W[2 * d:].T @ proj.weight.detach().T))  # W_V W_proj = 0.4 Z2 - 0.4 I, negated
    assert abs(a - 0.4) < 0.03 and abs(b - 0.4) < 0.01, (a, b)
    pts = fig3.fig3_points(d=d, heads=3, steps=5)
    for rank, k in (("low rank", d // 3), ("full rank", d)):
        ratio = torch.tensor([b / a for a, b in pts["simple", rank][1:]])
        # the simple construction: one line, beta / alpha = sqrt(k / d) whatever the scale
        assert ratio.std() < 1e-4 and abs(ratio.mean() - math.sqrt(k / d)) < 0.05, (rank, ratio.mean())
        svd = torch.tensor(pts["svd", rank])
        ratio = (svd[:, 1] / svd[:, 0])[svd[:, 0] > 0.05]  # the SVD construction: a region, not a line
        assert ratio.min() < 0.1 and ratio.max() > 0.65, (rank, ratio.min(), ratio.max())
    img = read_image(fig3.save_fig3(str(tmp_path / "small.png"), pts, size=100))
    assert img.shape == (3, 108, 2 * 100 + 12)
    red, blue = (img[0] > 150) & (img[2] < 120), (img[2] > 150) & (img[0] < 120)
    assert red[:, :108].any() and red[:, 108:].any() and blue[:, :108].any() and blue[:, 108:].any()
    # the command: the default path (README.md's figure), the ratios printed; a wrong --out is one error line
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fig3, "fig3_points", lambda d, heads, seed: pts)
    assert fig3.main([]) == os.path.join("figures", "vit-fig3-alpha-beta.png")
    assert read_image("figures/vit-fig3-alpha-beta.png").shape == (3, 248, 492)
    assert "low rank, k = 32: the simple construction's beta / alpha is 0.58" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="^error: --out=fig.jpgg must name a .png file$"):
        fig3.main(["--out=fig.jpgg"])


# ==================================================================================================
# extras/fig_inits.py: the three inits' attention at init


def test_fig_inits_rows_are_their_inits_and_the_picture(tmp_path, monkeypatch, capsys):
    """On a tiny CIFAR (the laptop shape, 2 blocks): the default row is within 10% of uniform over the patches, the
    mimetic row's largest entry is each query patch itself, the impulse row's (head 1) the patch above it; the
    picture is 3 rows of 4 panels with a red box in each; a line per init; the mistakes are one error line."""
    fig_inits = extra("fig_inits")
    write_cifar(tmp_path, n_per_batch=16)  # 100 test images
    monkeypatch.chdir(tmp_path)
    seen, save = [], fig_inits.save_figure
    monkeypatch.setattr(fig_inits, "save_figure", lambda path, maps, *a: seen.append(maps) or save(path, maps, *a))
    assert fig_inits.main([f"--data_dir={tmp_path}", "--depth=2"]) == os.path.join("figures", "vit-inits-attention.png")
    (maps,) = seen  # (default, mimetic, impulse) x 4 queries x 8 x 8
    assert maps.shape == (3, 4, 8, 8) and ((maps[0] * 65 - 1).abs() < 0.1).all()
    for i, (r, c) in enumerate(fig_inits.queries(8)):
        assert divmod(maps[1, i].argmax().item(), 8) == (r, c) and divmod(maps[2, i].argmax().item(), 8) == (r - 1, c)
    img = read_image("figures/vit-inits-attention.png")
    assert img.shape == (3, 22 + 3 * 136 + 30, 150 + 4 * 136)  # 8 x 8 cells of 16 pixels, 8 between panels
    red = (img[0] > 200) & (img[1] < 80) & (img[2] < 80)
    for i in range(3):
        for j in range(4):
            y, x = 22 + i * 136, 150 + j * 136
            assert red[y:y + 128, x:x + 128].any(), (i, j)
    out = capsys.readouterr().out
    assert "impulse: layer 0 head 1, mean over the 4 queries: " in out and "on its neighbour (-1, +0)" in out
    seen.clear()  # patch 16, a 2 x 2 grid: of the queries (0, 0), (0, 1), (1, 0), (1, 1) only the lower two have a
    fig_inits.main([f"--data_dir={tmp_path}", "--depth=2", "--patch_size=16", "--out=p16.png"])  # patch above
    m = seen[0][2]  # impulse's maps: no wrap to the bottom row
    want = (m[2, 0, 0] + m[3, 0, 1]).item() / 2
    assert f"{want:.3f} on its neighbour (-1, +0) (the 2 queries that have one)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="^error: --init: each row sets its own"):
        fig_inits.main(["--init=mimetic"])
    with pytest.raises(SystemExit, match="^error: --layer=4 --head=0: the model has layers 0-3 and heads 0-2$"):
        fig_inits.main(["--layer=4", "--head=0"])


# ==================================================================================================
# extras/figures.py: Figs. 1-2


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
    for name, program, size, args in (("vit", mv, 10, ["--patch_size=8"]), ("lm", lm, 23, [])):
        for init in ("mimetic", "default"):
            model = program.build_model(program.parse_config(
                [f"--width={width}", f"--heads={heads}", f"--depth={depth}", f"--init={init}", *args]), size)
            with torch.no_grad():
                for block in model.blocks:
                    block.attn.qkv.bias.zero_()
                    block.attn.proj.bias.zero_()
            out.append((name, init, model.eval()))
    return out


def test_extras_figures_lm_products_at_init():
    """extras/figures.py's weight panels of the LM at init: every head's W_Q W_K^T is b1 I[:, :k] I[:, :k]^T (eqs
    5-7 literally, a1 = 0), W_V W_proj = a2 Z2 - b2 I (mean diagonal -0.2)."""
    model = lm.build_model(lm.parse_config(["--width=16", "--heads=2", "--depth=1"]), 11)
    qk, vo = extra("figures").weight_products(model)
    assert qk[0].shape == (2, 16, 16) and torch.allclose(qk[0][0], 0.5 * torch.diag((torch.arange(16) < 8).float()))
    assert abs(vo[0].diagonal().mean().item() + 0.2) < 0.1


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
    mv.main(TINY + ["--epochs=1", f"--data_dir={root}", f"--out_dir={root / 'vit'}"])
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
    and a run's checkpoints (its config decides the model; figures-ckpt/ beside it), three PNGs of the expected sizes;
    a folder that holds another config's figures is refused, the same config's redrawn."""
    monkeypatch.chdir(tmp_path)
    data = f"--data_dir={runs}"
    # ViT: 2 heads x 2 layers of 2 * 32 pixels; 17 tokens (patch 8), 2 layers a row
    vit = [(3, 134, 134), (3, 68, 134), (3, 21, 40)]
    fresh = figures.main(["--program=vit", *TINY, data])
    assert fresh == [os.path.join("out", "figures-vit-mimetic-seed0", f) for f in ("qk.png", "vo.png", "attention.png")]
    assert png_shapes(fresh) == vit
    model = mv.build_model(mv.parse_config(TINY + [data]), 10).eval()  # on the first 64 test images
    x = mv.to_input(mv.load_dataset("cifar10", str(runs))[2][:64], *mv.norm_stats(mv.MEAN_STD["cifar10"], "cpu"), 32)
    want = darker_is_more(figures.attention_maps(model, x, causal=False))
    assert (drawn_maps(fresh[2], 2, 17) - want).abs().max() < 1 / 255, (drawn_maps(fresh[2], 2, 17) - want).abs().max()
    trained = figures.main(["--program=vit", f"--checkpoint={runs / 'vit' / 'ckpt.pt'}", data])
    assert trained == [str(runs / "vit" / "figures-ckpt" / f) for f in ("qk.png", "vo.png", "attention.png")]
    assert figures.main(["--program=vit", *TINY, data]) == fresh  # the same config again: drawn again, in place
    with pytest.raises(SystemExit, match=r"^error: out.figures-vit-mimetic-seed0 holds the figures of another config "
                                         r"\(width=32 there\): pass --out=<another folder>$"):
        figures.main(["--program=vit", *TINY, data, "--width=64"])
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
        figures.main(TINY)
    with pytest.raises(SystemExit, match="^error: --width=64: with --checkpoint the checkpoint's config decides"):
        figures.main(["--program=vit", f"--checkpoint={runs / 'vit' / 'ckpt.pt'}", "--width=64", data])
    table4_run = mv.load_checkpoint(str(runs / "vit" / "ckpt.pt"))  # a checkpoint of extras/table4.py, say SVHN
    table4_run["config"]["dataset"] = "svhn"
    torch.save(table4_run, "svhn.pt")
    with pytest.raises(SystemExit, match=r"^error: --checkpoint=svhn.pt: a svhn run, not one of mimetic_vit.py's "
                                         r"datasets \(cifar10, cifar100\)$"):
        figures.main(["--program=vit", "--checkpoint=svhn.pt", data])
    with pytest.raises(SystemExit, match=r"^error: --checkpoint=.*best.pt: a ptb_word run, not one of mimetic_vit"):
        figures.main(["--program=vit", f"--checkpoint={runs / 'lm' / 'best.pt'}", data])
    table4_run["config"]["dataset"], table4_run["model"]["blocks.0.scale"] = "cifar10", torch.ones(32)
    torch.save(table4_run, "layerscale.pt")  # a run of extras/compare.py --compare=layerscale, say
    with pytest.raises(SystemExit, match=r"^error: --checkpoint=layerscale.pt holds another model than "
                                         r"mimetic_vit.py's of its config \(Error\(s\) in loading state_dict"):
        figures.main(["--program=vit", "--checkpoint=layerscale.pt", data])


# ==================================================================================================
# extras/lm_qk_basis.py


def test_lm_qk_basis_random_gives_each_head_its_own_directions():
    """extras/lm_qk_basis.py (our choice for a1 = 0): per head W_Q = W_K with orthonormal columns times sqrt(b1),
    so W_Q W_K^T = b1 Q Q^T has k eigenvalues b1 and the rest 0, as far from b1 I as the literal init
    (Eckart-Young: ||b1 I - P||_F^2 = b1^2 (d - k)); the heads' subspaces differ; W_V W_proj are the literal
    init's, bit for bit."""
    qk_basis = extra("lm_qk_basis")
    args = ["--dataset=ptb_char", "--width=24", "--depth=2", "--heads=3"]
    literal = lm.build_model(lm.parse_config(args), 20)
    model = qk_basis.build_model(lm.parse_config(args), 20)
    d, k = 24, 8
    for block, ref in zip(model.blocks, literal.blocks):
        W = block.attn.qkv.weight.detach()
        assert torch.equal(W[:d], W[d:2 * d])  # W_Q = W_K, every head
        products = qk_products(W, 3)
        for P in products:
            assert torch.allclose(torch.linalg.eigvalsh(P.double())[-k:], torch.full((k,), 0.5, dtype=torch.float64),
                                  atol=1e-5)
            assert math.isclose(torch.linalg.norm(0.5 * torch.eye(d) - P).item() ** 2, 0.25 * (d - k), rel_tol=1e-4)
        assert not torch.allclose(products[0], products[1], atol=1e-2)  # literal: every head the same
        assert torch.equal(W[2 * d:], ref.attn.qkv.weight[2 * d:]) and torch.equal(block.attn.proj.weight,
                                                                                    ref.attn.proj.weight)
    with pytest.raises(SystemExit, match="error: a random basis is for the W_Q W_K\\^T init with alpha1 = 0"):
        qk_basis.main([*args, "--alpha1=0.3"])


# ==================================================================================================
# extras/sample.py


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One tiny word-level run, trained for one epoch: (data_dir, out_dir). Tests copy it before changing it."""
    root = tmp_path_factory.mktemp("lm")
    write_corpus(str(root / "ptb"), lines=(150, 20, 20))
    lm.main(LM_TINY + [f"--data_dir={root}", f"--out_dir={root / 'run'}", "--epochs=1"])
    return root, root / "run"


def test_extras_sample_generate_greedy_near_temperature_0_on_the_last_block_size_tokens():
    """generate(): at temperature 1e-4 every token is the most likely one (greedy), each drawn from the last
    block_size tokens (here 8, after a prompt of 10); at temperature 1 the draws differ from greedy."""
    generate = extra("sample").generate
    model = lm.build_model(lm.parse_config(["--width=16", "--heads=2", "--depth=1", "--seq_len=8"]), 11).eval()
    idx = torch.randint(11, (2, 10))
    greedy = idx
    for _ in range(6):
        greedy = torch.cat([greedy, model(greedy[:, -8:])[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generate(model, idx, 6, 1e-4, torch.Generator().manual_seed(0)), greedy)
    assert not torch.equal(generate(model, idx, 6, 1.0, torch.Generator().manual_seed(0)), greedy)


def test_extras_sample_from_a_finished_run(finished_run, tmp_path, capsys):
    moved = tmp_path / "moved"  # best.pt carries the settings and the vocabulary: no flag needs repeating
    shutil.copytree(finished_run[1], moved)
    sample = extra("sample")
    text = sample.main([f"--out_dir={moved}", "--n=12", "--prompt=w1 w2", "--device=cpu"])
    assert text.startswith("w1 w2") and len(text.split()) + text.count("\n") == 2 + 12 and "<eos>" not in text
    assert " \n" not in text and "\n " not in text  # "<eos>" is a line break, without the spaces around it
    assert capsys.readouterr().out.strip().endswith(text.strip())
    assert sample.main([f"--out_dir={moved}", "--n=12", "--prompt=w1 w2", "--device=cpu"]) == text  # seeded
    text = sample.main([f"--out_dir={moved}", "--n=5"])
    assert len(text.split()) + text.count("\n") == 1 + 5  # starts after an end of line
    with pytest.raises(SystemExit, match="not in the 31-token vocabulary"):
        sample.main([f"--out_dir={moved}", "--prompt=w1 zebra"])
    with pytest.raises(SystemExit, match="no .*best.pt"):
        sample.main([f"--out_dir={tmp_path / 'none'}"])
    for bad, message in [("--temperature=0", r"--temperature=0.0: use a value above 0"),
                         ("--temperature=-1", r"--temperature=-1.0: use a value above 0"),
                         ("--device=gpu", r"--device=gpu: use cpu, cuda"), ("--device=cuda:99", r"--device=cuda:99: no such device here")]:
        with pytest.raises(SystemExit, match="^error: " + message):
            sample.main([f"--out_dir={moved}", bad])


def test_extras_refuse_a_checkpoint_that_runs_code(tmp_path):
    """extras/figures.py --checkpoint and extras/sample.py read a checkpoint as the programs do (weights_only=True):
    one that runs code when unpickled (here: it makes a file) is refused in one line that names it; no code runs."""
    marker, path = tmp_path / "the code ran", tmp_path / "run" / "best.pt"
    path.parent.mkdir()
    torch.save({"payload": RunsCode(f"open({str(marker)!r}, 'w').close()")}, path)
    sample = extra("sample")
    for main, argv in [(figures.main, ["--program=vit", f"--checkpoint={path}"]),
                       (figures.main, ["--program=lm", f"--checkpoint={path}"]),
                       (sample.main, [f"--out_dir={path.parent}"])]:
        with pytest.raises(SystemExit, match="^error: " + re.escape(str(path)) + " is not a readable checkpoint") as e:
            main(argv)
        assert "\n" not in str(e.value)
    assert not marker.exists()


# ==================================================================================================
# extras/speed_vs_timm_nanogpt.py


def test_speed_vs_timm_nanogpt_help_and_a_stubbed_run(tmp_path, monkeypatch, capsys):
    """timm and nanoGPT are not installed here: --help, then one round with stand-ins for both (timm's ViT is
    our ViT, nanoGPT's GPT an embedding and a head), which runs every line of the comparison but the imports."""
    with pytest.raises(SystemExit) as e:
        speed.main(["--help"])
    assert e.value.code == 0 and "--nanogpt=/tmp/nanogpt_model.py --mode=fp32" in capsys.readouterr().out
    fake = types.ModuleType("timm")
    fake.__version__, fake.layers = "stub", types.SimpleNamespace(use_fused_attn=lambda: True)
    vt = types.ModuleType("timm.models.vision_transformer")
    vt.VisionTransformer = lambda img_size, patch_size, embed_dim, depth, num_heads, num_classes, **kw: mv.ViT(
        mv.ViTConfig(image_size=img_size, patch_size=patch_size, width=embed_dim, depth=depth, heads=num_heads))
    for name, module in (("timm", fake), ("timm.models", types.ModuleType("timm.models")),
                         ("timm.models.vision_transformer", vt)):
        monkeypatch.setitem(sys.modules, name, module)
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch
        from dataclasses import dataclass

        @dataclass
        class GPTConfig:
            n_layer: int
            n_head: int
            n_embd: int
            block_size: int
            vocab_size: int
            dropout: float
            bias: bool

        class GPT(torch.nn.Module):
            def __init__(self, c):
                super().__init__()
                self.emb, self.head = torch.nn.Embedding(c.vocab_size, 8), torch.nn.Linear(8, c.vocab_size)

            def forward(self, x, y=None):
                return self.head(self.emb(x)), None
        """))
    threads = torch.get_num_threads()
    speed.main([f"--nanogpt={tmp_path / 'model.py'}", "--depth=1", "--vit_batch=2", "--lm_batch=1", "--lm_tokens=300",
                "--warmup=1", "--rounds=2", "--steps=1", "--threads=1"])
    torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert re.search(r"^ours ViT / timm ViT: x\d\.\d{3} \(throughput ratio of medians; per round", out, re.M), out
    assert re.search(r"^ours LM / nanoGPT GPT: x\d+\.\d{3} ", out, re.M) and "round 2/2" in out


# ==================================================================================================
# extras/table4.py: Table 4's SVHN and Tiny ImageNet rows


def write_tiny_imagenet(root, wnids=("n02", "n01", "n03"), per_class=3, seed=0):
    """A tiny Tiny ImageNet in the standard layout; each JPEG's brightness is set by its class (60 * label + 20
    on average); one grayscale JPEG (the second class's first); val labels not in file order."""
    g = torch.Generator().manual_seed(seed)
    base = os.path.join(root, "tiny-imagenet-200")

    def jpeg(rel, y, gray=False):
        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
        x = (torch.rand(64, 64, 1 if gray else 3, generator=g) * 40 + 60 * y).to(torch.uint8)
        Image.fromarray(x.squeeze(-1).numpy() if gray else x.numpy()).save(os.path.join(base, rel), "JPEG", quality=95)

    for y, w in enumerate(wnids):
        for i in range(per_class):
            jpeg(f"train/{w}/images/{w}_{i}.JPEG", y, gray=(y == 1 and i == 0))
    with open(os.path.join(base, "wnids.txt"), "w") as f:
        f.write("\n".join(wnids) + "\n")
    val = [(f"val_{i}.JPEG", (2 * i + 1) % len(wnids)) for i in range(5)]
    for name, y in val:
        jpeg(f"val/images/{name}", y)
    with open(os.path.join(base, "val", "val_annotations.txt"), "w") as f:
        f.writelines(f"{name}\t{wnids[y]}\t0\t0\t63\t63\n" for name, y in val)


def test_table4_defaults_patch_4_for_tiny_imagenet_and_out_dir_by_dataset():
    cfg = table4.parse(["--dataset=tinyimagenet"])
    assert (cfg.dataset, cfg.patch_size, cfg.image_size) == ("tinyimagenet", 4, 64)
    assert cfg.out_dir == os.path.join("out", "vit-tinyimagenet-mimetic-seed0")
    assert table4.parse(["--dataset=tinyimagenet", "--patch_size=8"]).patch_size == 8  # given: it wins
    cfg = table4.parse(["--dataset=svhn", "--init=default", "--seed=3"])
    assert (cfg.patch_size, cfg.image_size, cfg.out_dir) == (2, 32, os.path.join("out", "vit-svhn-default-seed3"))
    assert table4.parse(["--dataset=svhn", "--out_dir=elsewhere"]).out_dir == "elsewhere"
    for argv in ([], ["--dataset=cifar10"]):
        with pytest.raises(SystemExit, match="^error: pass --dataset=svhn or --dataset=tinyimagenet"):
            table4.parse(argv)


def test_svhn_official_layout_read_as_torchvision_reads_it(tmp_path, monkeypatch):
    """Tiny train_32x32.mat / test_32x32.mat in SVHN's layout (X: 32 x 32 x 3 x N uint8, y: N x 1 with the digit
    0 labelled 10), read by table4.py and by torchvision's SVHN (its md5 check switched off)."""
    sio = pytest.importorskip("scipy.io", reason="SVHN's .mat files need scipy (not in requirements.txt)")
    import torchvision
    g = torch.Generator().manual_seed(0)
    for split, n in (("train", 12), ("test", 7)):
        X = torch.randint(256, (32, 32, 3, n), generator=g, dtype=torch.uint8).numpy()
        y = (torch.arange(n) % 10 + 1).view(n, 1).numpy()
        sio.savemat(str(tmp_path / f"{split}_32x32.mat"), {"X": X, "y": y})
    tx, ty, vx, vy = table4.load_svhn(str(tmp_path))
    assert tx.shape == (12, 3, 32, 32) and vx.shape == (7, 3, 32, 32) and tx.dtype == torch.uint8
    assert ty.tolist() == [(i % 10 + 1) % 10 for i in range(12)] and 0 in ty.tolist() and 10 not in ty.tolist()
    monkeypatch.setattr(torchvision.datasets.SVHN, "_check_integrity", lambda self: True)
    ref = torchvision.datasets.SVHN(str(tmp_path), split="train")
    assert torch.equal(tx, torch.from_numpy(ref.data)) and ty.tolist() == ref.labels.tolist()
    (tmp_path / "test_32x32.mat").write_bytes(b"not a mat file")
    with pytest.raises(ValueError, match="test_32x32.mat is not an SVHN .mat file"):
        table4.load_svhn(str(tmp_path))
    monkeypatch.setattr(table4, "reachable", lambda url: False)  # offline and no files: one line naming the folder
    with pytest.raises(SystemExit, match=r"^error: SVHN not found: .*empty/ lacks train_32x32.mat"):
        table4.load_svhn(str(tmp_path / "empty"))


def test_tiny_imagenet_layout_cache_and_offline(tmp_path, monkeypatch, capsys):
    write_tiny_imagenet(tmp_path)
    tx, ty, vx, vy = table4.load_tinyimagenet(str(tmp_path))
    assert tx.shape == (9, 3, 64, 64) and tx.dtype == torch.uint8 and vx.shape == (5, 3, 64, 64)
    assert ty.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2] and vy.tolist() == [1, 0, 2, 1, 0]  # wnids.txt order
    assert (((tx.float().mean(dim=(1, 2, 3)) - 60 * ty - 20).abs() < 5).all())  # each image is its label's
    assert (((vx.float().mean(dim=(1, 2, 3)) - 60 * vy - 20).abs() < 5).all())
    assert torch.equal(tx[3, 0], tx[3, 1]) and torch.equal(tx[3, 0], tx[3, 2])  # the grayscale JPEG, 3 channels
    assert "decoded 14 Tiny ImageNet JPEGs" in capsys.readouterr().out
    cache = tmp_path / "tinyimagenet.cache.pt"  # the second load reads the cache and decodes nothing
    assert cache.exists()
    monkeypatch.setattr(table4, "decode_tinyimagenet", lambda base: pytest.fail("decoded again"))
    again = table4.load_tinyimagenet(str(tmp_path))
    assert all(torch.equal(a, b) for a, b in zip(again, (tx, ty, vx, vy)))
    monkeypatch.undo()
    cache.write_bytes(b"not a cache")  # unreadable: decoded again and rewritten
    assert torch.equal(table4.load_tinyimagenet(str(tmp_path))[0], tx)
    assert "cannot be read" in capsys.readouterr().out and torch.load(cache, weights_only=True)["data"][0].shape[0] == 9
    monkeypatch.setattr(table4, "reachable", lambda url: False)  # offline, no folder: one line, folder and archive
    with pytest.raises(SystemExit, match="^error: tinyimagenet not found: .*tiny-imagenet-200/ lacks wnids.txt.*"
                                         "tiny-imagenet-200.zip"):
        table4.load_tinyimagenet(str(tmp_path / "empty"))


def test_table4_trains_tiny_imagenet_end_to_end(tmp_path, monkeypatch, capsys):
    """The model as mimetic_vit.main() builds it (200 classes, 64x64, patch 4: 257 tokens), ImageNet's
    normalisation, mv.train, and results.json in out/vit-tinyimagenet-<init>-seed<seed>."""
    write_tiny_imagenet(tmp_path, per_class=12)
    monkeypatch.chdir(tmp_path)
    seen, real_train = {}, mv.train

    def spy(model, data, norm, *args):
        seen["weights"], seen["norm"] = {k: v.clone() for k, v in model.state_dict().items()}, norm
        return real_train(model, data, norm, *args)

    monkeypatch.setattr(mv, "train", spy)
    argv = ["--dataset=tinyimagenet", *TINY_ARGS, "--epochs=1", "--batch_size=12", f"--data_dir={tmp_path}"]
    res = table4.main(argv)
    assert "M parameters, 257 tokens (64x64 images, patch 4)" in capsys.readouterr().out
    torch.manual_seed(0)
    ref = mv.ViT(mv.ViTConfig(image_size=64, patch_size=4, num_classes=200, width=32, depth=2, heads=2))
    mv.init_attention_(ref, "mimetic", 0.7, 0.7, 0.4, 0.4, -1, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(v, seen["weights"][k]) for k, v in ref.state_dict().items())
    assert list(seen["norm"][0]) == pytest.approx([0.485, 0.456, 0.406])
    with open(tmp_path / "out" / "vit-tinyimagenet-mimetic-seed0" / "results.json") as f:
        saved = json.load(f)
    assert saved == json.loads(json.dumps(res)) and res["epochs_done"] == 1
    assert res["config"]["dataset"] == "tinyimagenet"
    assert (res["model_config"]["num_classes"], res["model_config"]["image_size"], res["model_config"]["patch_size"]) \
        == (200, 64, 4)
    assert res["command"].startswith("python extras/table4.py --dataset=tinyimagenet --width=32")
    with pytest.raises(SystemExit, match="already holds ckpt.pt, results.json"):  # never another run's folder
        table4.main(argv)


def test_table4_trains_on_a_stand_in_device(tmp_path, monkeypatch):
    """extras/table4.py's Tiny ImageNet path (its own normalisation statistics) on the stand-in for a GPU."""
    write_tiny_imagenet(tmp_path, per_class=12)
    monkeypatch.chdir(tmp_path)
    argv = ["--dataset=tinyimagenet", *TINY_ARGS, "--epochs=1", "--batch_size=12", "--device=meta",
            f"--data_dir={tmp_path}"]
    with StandIn():
        assert table4.main(argv)["epochs_done"] == 1


# ==================================================================================================
# results/scripts/results_readme.py: the generated blocks of results/README.md and results/INVESTIGATIONS.md

RESULTS_PAGES = ("README.md", "INVESTIGATIONS.md")  # under results/: the paper's evidence, then our investigations


def slug(title):
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def test_results_readme_blocks_are_current_and_the_index_lists_every_folder(monkeypatch):
    """results/README.md and results/INVESTIGATIONS.md are Markdown edited by hand; each block between its begin and
    end markers (a table, quoted log lines, the numbers of a sentence, a page's contents, the index) is what
    results/scripts/results_readme.py computes now from the results files and logs: a number typed into a block, a
    results file or log changed without a refresh, or a folder under results/ missing from the index fails --check
    (shown below on a stale number and a deleted index row). Every relative link of either page exists, every link to
    a section (#anchor, on its own page or the other) finds its heading, and the index links every folder that git
    tracks, naming the section of either page that discusses it."""
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("the index lists the folders that git tracks: it needs a git checkout")
    r = subprocess.run([sys.executable, os.path.join("results", "scripts", "results_readme.py"), "--check"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    pages = {page: open(os.path.join(ROOT, "results", page)).read() for page in RESULTS_PAGES}
    text = pages["README.md"]
    monkeypatch.chdir(ROOT)
    refresh = runpy.run_path(os.path.join(ROOT, "results", "scripts", "results_readme.py"))["refresh"]
    number = re.search(r"<!-- begin: table1-earlier -->.*?\[(\d)", text, re.S)
    stale = text[:number.start(1)] + str(int(number.group(1)) ^ 1) + text[number.end(1):]
    dropped = re.sub(r"\n\| \[cpu-broken-files/\]\(cpu-broken-files/\) .*", "", text)
    assert stale != text and dropped != text and refresh(stale) == text and refresh(dropped) == text
    links = [p for page in pages.values() for p in re.findall(r"\]\(([^)#]+)\)", page) if not p.startswith("https://")]
    missing = [p for p in links if not os.path.exists(os.path.join(ROOT, "results", p))]
    assert len(links) >= 600 and not missing, missing
    headings = {page: {slug(h) for h in re.findall(r"^#+ (.*)", t, re.M)} for page, t in pages.items()}
    to_sections = [(page, target or page, anchor) for page, t in pages.items()
                   for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)]+)\)", t)]
    lost = [link for link in to_sections if link[2] not in headings.get(link[1], ())]
    assert len(to_sections) >= 150 and not lost, lost
    heads = [t.split("\n## ")[0] for t in pages.values()]  # each page's header links to the other
    assert "(INVESTIGATIONS.md)" in heads[0] and "(README.md)" in heads[1]
    index = text.split("<!-- begin: index -->")[1].split("<!-- end: index -->")[0]
    assert "](INVESTIGATIONS.md#the-jpeg-copy)" in index and "](#laptop-scale-table-1)" in index
    indexed = set(re.findall(r"\]\(([^/)]+)/\)", index))
    folders = {p.split("/")[1] for p in tracked.stdout.splitlines() if p.count("/") >= 2} - {"scripts"}
    assert len(folders) >= 180
    assert folders == indexed, f"in no index line: {sorted(folders - indexed)}; no folder: {sorted(indexed - folders)}"


# (page, number): measured decimals typed in a page's prose, left to move into a generated block. None is left; a
# pair added here lets that one number through while it waits, and every other typed decimal still fails.
LEFT_TO_CONVERT = []


def typed_decimals(text):
    """The decimals typed in a results page's prose: outside the generated blocks, code spans (a command's settings,
    commits), link targets, headings and indented code, and not in a sentence or table row that quotes the paper
    (names the paper, a table of it, not "Table 1's" pair of ours, or an eq). Versions (2.14.1) and section
    numbers (Sec. 5.2) are not decimals."""
    blocks = re.compile(r"<!-- begin: (.+?) -->(.*?)<!-- end: \1 -->", re.S)
    prose = re.sub(r"`[^`]*`|\]\([^)]*\)|^#.*|^    .*|Sec\. \d+\.\d+", " ", blocks.sub(" ", text), flags=re.M)
    found = []
    for paragraph in prose.split("\n\n"):
        units = paragraph.splitlines() if paragraph.lstrip().startswith("|") else re.split(r"(?<=[.?!])\s+", paragraph)
        found += [n for unit in units if not re.search(r"paper|Table \d+(?!'s)|\beqs? \d", unit, re.I)
                  for n in re.findall(r"(?<![\d.])\d+\.\d+(?!\.?\d)", unit)]
    return found


def check_typed_decimals(page, text):
    typed = [n for n in typed_decimals(text) if (page, n) not in LEFT_TO_CONVERT]
    assert not typed, (f"results/{page} types measured decimals in its prose, outside a generated block: {typed}; "
                       "compute each in a block of results/scripts/results_readme.py, or point to its table")


def test_results_pages_type_no_measured_decimal_outside_a_block():
    """A measured number on the results pages comes from a results file through a generated block, so that it cannot
    go stale: the prose of either page holds no typed decimal but the paper's, a command's settings (in backticks), a
    commit, a version or a link target. Shown on a planted number (a copy of a page with one sentence added) and on
    each kind of number that is let through."""
    for page in RESULTS_PAGES:
        text = open(os.path.join(ROOT, "results", page)).read()
        check_typed_decimals(page, text)
    planted = text.replace("\n## Older runs\n", "\n## Older runs\n\nThe first recipe ended at 81.08 on average.\n")
    assert planted != text and typed_decimals(planted) == ["81.08"]
    with pytest.raises(AssertionError, match=r"INVESTIGATIONS.md types .*\['81.08'\]"):
        check_typed_decimals("INVESTIGATIONS.md", planted)
    let_through = ("The paper's 90.78 (Table 1). Eq 13 at 0.1. `--lr=0.001` at `7b773af`, torch 2.14.1; "
                   "[log](cpu-x-pos0.5/log.txt), Sec. 5.2.\n\n## 1.5 and 2.5\n\n    --warmup_frac=0.1522\n\n"
                   "<!-- begin: gpu-eval -->88.30 real<!-- end: gpu-eval -->\n\n| paper init | 87.90 |")
    assert typed_decimals(let_through) == []
    assert typed_decimals("Table 1's pair: 85.92, with -2.16 ± 0.90 and 12.8 minutes.\n\n| ours | 0.592 |") == [
        "85.92", "2.16", "0.90", "12.8", "0.592"]
