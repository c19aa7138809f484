"""Each bug below, put into a scratch copy of the repository, must fail the test that guards it: a CPU tensor in
device work (the first GPU step's crash), a checkpoint error that quotes torch's message raw, a missing attention
init, training-loop bugs (labels, clipping, zero_grad, the plateau factor, the learning rate), the schedule, and
the loader's bugs (a draw moved, shared or leaked; a worker's seed; a rounding; the data stream in the checkpoint):

    python results/scripts/mutation_check.py > results/cpu-mutation-check/log.txt   # from the repository root
"""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.getcwd()
CLIP = "            if cfg.grad_clip > 0:\n                torch.nn.utils.clip_grad_norm_"
STEP = "            opt.step()\n            opt.zero_grad(set_to_none=True)"
INIT = ("    init_attention_(model, cfg.init, cfg.alpha1, cfg.beta1, cfg.alpha2, cfg.beta2, cfg.vo_sign,\n"
        "                    generator=torch.Generator().manual_seed(cfg.seed))\n    return model")
PLATEAU = '        state["lr_scale"] *= plateau_factor(history, val_loss, cfg, level)'
LR = ("            lr = get_lr(step, cfg.epochs * steps, cfg)\n            for group in opt.param_groups:\n"
      "                group[\"lr\"] = lr\n")
LR_LATE = ("            lr = get_lr(step, cfg.epochs * steps, cfg)\n            if step == first_step:\n"
           "                for group in opt.param_groups:\n                    group[\"lr\"] = lr\n")
SEEDED = "        with torch.random.fork_rng(devices=[]):\n            torch.manual_seed(seed)\n            return self.draw("
SEEDED_LEAK = "        if True:\n            torch.manual_seed(seed)\n            return self.draw("
DRAW_ORDER = ('"ops": [self.draw_op() for _ in range(cfg.ra_n)],\n'
              '                           "jitter": self.jitter_params() if cfg.jitter > 0 else None}]')
MUTS = [  # (name, file, old, new, the tests that must fail: pytest -k)
    ("ViT device mix put back (85533dc's crash)", "mimetic_vit.py", "n = torch.full((), len(yb), device=dev)",
     "n = torch.tensor(len(yb))", "vit_trains_on_a_stand_in"),
    ("checkpoint error quotes torch's message raw", "mimetic_lm.py", "if isinstance(e, pickle.UnpicklingError) else repr(e)",
     "if False else str(e)", "corrupt_checkpoint or runs_code"),
    ("ViT build_model skips the attention init", "mimetic_vit.py", INIT, "    return model",
     "main_trains_the_model_with"),
    ("LM build_model skips the attention init", "mimetic_lm.py", INIT, "    return model",
     "main_trains_the_model_with"),
    ("ViT labels not shuffled with images", "mimetic_vit.py", "self.apply(self.x[idx], *draws), self.y[idx]",
     "self.apply(self.x[idx], *draws), self.y[:len(idx)]", "own_label"),
    ("ViT clipping skipped", "mimetic_vit.py", CLIP, CLIP.replace("cfg.grad_clip > 0", "False"), "clipped"),
    ("LM clipping skipped", "mimetic_lm.py", CLIP, CLIP.replace("cfg.grad_clip > 0", "False"), "clipped"),
    ("ViT zero_grad dropped", "mimetic_vit.py", STEP, "            opt.step()", "zeroed"),
    ("LM zero_grad dropped", "mimetic_lm.py", STEP, "            opt.step()", "zeroed"),
    ("LM plateau factor computed, not applied", "mimetic_lm.py", PLATEAU,
     "        factor = plateau_factor(history, val_loss, cfg, level)", "plateau_factor_reaches"),
    ("ViT lr set at the first step only", "mimetic_vit.py", LR, LR_LATE, "the_rate_is_set"),
    ("ViT lr set in the first param group only", "mimetic_vit.py", LR,
     '            lr = get_lr(step, cfg.epochs * steps, cfg)\n            opt.param_groups[0]["lr"] = lr\n',
     "the_rate_is_set"),
    ("ViT onecycle falls at 75%, not 80%", "mimetic_vit.py", "(0.8, cfg.lr / 20)", "(0.75, cfg.lr / 20)", "onecycle"),
    ("ViT augmentation drawn once per batch", "mimetic_vit.py", "}] * cfg.ra_chunk", "}] * cfg.ra_chunk\n"
     "            per_image[1:] = per_image[:1] * (len(per_image) - 1)", "draws_per_image or bit_for_bit"),
    ("ViT batch seed leaks into the caller's RNG", "mimetic_vit.py", SEEDED, SEEDED_LEAK, "bit_for_bit"),
    ("ViT jitter drawn before RandAugment", "mimetic_vit.py", DRAW_ORDER,
     '"jitter": self.jitter_params() if cfg.jitter > 0 else None,\n'
     '                           "ops": [self.draw_op() for _ in range(cfg.ra_n)]}]', "bit_for_bit"),
    ("ViT loader's workers seeded from torch's RNG", "mimetic_vit.py", "generator=torch.Generator())  # not torch's RNG",
     ")", "bit_for_bit"),
    ("ViT jitter's blend rounded twice", "mimetic_vit.py", "torch.addcmul(y.mul(r[n, fn]), other, rest[n, fn])",
     "y.mul(r[n, fn]).add_(other * rest[n, fn])", "bit_for_bit"),
    ("ViT erasing's box a row short", "mimetic_vit.py", 'slice(e["i"], e["i"] + e["h"])',
     'slice(e["i"], e["i"] + e["h"] - 1)', "bit_for_bit"),
    ("ViT checkpoints only at epoch 1 and the end", "mimetic_vit.py", " or time.perf_counter() - saved > CHECKPOINT_S:",
     ":", "killed_epochs_after"),
    ("ViT checkpoint holds the data stream of epoch 0", "mimetic_vit.py",
     "save_checkpoint(cfg, model, opt, gen.get_state(), state, dev)",
     "save_checkpoint(cfg, model, opt, torch.Generator().manual_seed(cfg.seed).get_state(), state, dev)",
     "killed_between_epochs"),
]
for name, f, old, new, k in MUTS:
    d = os.path.join(tempfile.mkdtemp(), "repo")
    shutil.copytree(SRC, d, ignore=shutil.ignore_patterns("data", "results", "figures", ".git", "out"))
    s = open(os.path.join(d, f)).read()
    assert s.count(old) == 1, name
    open(os.path.join(d, f), "w").write(s.replace(old, new))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mimetic.py", "-k", k],
                       cwd=d, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    print(f"{name:45s} -k {k:28s} -> {r.stdout.strip().splitlines()[-1]}")
    shutil.rmtree(os.path.dirname(d))
