"""Each bug below, put into a scratch copy of the repository, must fail the test that guards it: a CPU tensor in
device work (the first GPU step's crash), a checkpoint error that quotes torch's message raw, a missing attention
init, training-loop bugs (labels, clipping, zero_grad, the plateau factor, the learning rate), the schedule, and
the augmentation's bugs (a draw shared or unseeded, a sign or coin lost, a box, an order, a rounding, a geometric
sign, the crop; a loop over images, a host read, a copy a batch too many) and the data stream in the checkpoint:

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
MUTS = [  # (name, file, old, new, the tests that must fail: pytest -k)
    ("ViT device mix put back (85533dc's crash)", "mimetic_vit.py", "n = torch.full((), len(yb), device=dev)",
     "n = torch.tensor(len(yb))", "vit_trains_on_a_stand_in"),
    ("checkpoint error quotes torch's message raw", "mimetic_lm.py", "if isinstance(e, pickle.UnpicklingError) else repr(e)",
     "if False else str(e)", "corrupt_checkpoint or runs_code"),
    ("ViT build_model skips the attention init", "mimetic_vit.py", INIT, "    return model",
     "main_trains_the_model_with"),
    ("LM build_model skips the attention init", "mimetic_lm.py", INIT, "    return model",
     "main_trains_the_model_with"),
    ("ViT labels not shuffled with images", "mimetic_vit.py", "self.tables, self.cfg), self.y[idx]",
     "self.tables, self.cfg), self.y[:len(idx)]", "own_label or loader_feeds"),
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
    ("ViT one draw for the whole batch", "mimetic_vit.py", "box, noise], dim=1).float()",
     "box, noise], dim=1)[:1].expand(B, -1).float()", "own_draws"),
    ("ViT the batch seed ignored", "mimetic_vit.py", "torch.Generator().manual_seed(seed), size",
     "torch.Generator().manual_seed(0), size", "own_draws or loader_feeds"),
    ("ViT RandAugment's sign never drawn", "mimetic_vit.py", "2 * op + sign, 0)", "2 * op, 0)", "draws_follow"),
    ("ViT RandomApply's coin ignored", "mimetic_vit.py", "< cfg.ra_p, 2 * op", "<= 1.0, 2 * op", "draws_follow"),
    ("ViT a box a row short (erasing, Cutout)", "mimetic_vit.py", "(at < top + height)", "(at < top + height - 1)",
     "torchvisions"),
    ("ViT jitter's order ignored", "mimetic_vit.py", "fn = order[:, k:k + 1].long()",
     "fn = torch.full_like(order[:, :1], k).long()", "torchvisions"),
    ("ViT sharpness' blur not rounded", "mimetic_vit.py", "alpha=4).div_(13).round_()", "alpha=4).div_(13)",
     "torchvisions"),
    ("ViT solarize at > the threshold", "mimetic_vit.py", "torch.where(x >= threshold", "torch.where(x > threshold",
     "torchvisions"),
    ("ViT the geometric ops' negative sign lost", "mimetic_vit.py", "moved(numbers, op, magnitude) if geometric",
     "moved(numbers, op, abs(magnitude)) if geometric", "torchvisions"),
    ("ViT the crop's rows placed by its left edge", "mimetic_vit.py", "(size + at - top[:, None])[:, None]",
     "(size + at - left[:, None])[:, None]", "torchvisions"),
    ("ViT AutoContrast image by image", "mimetic_vit.py",
     "x = torch.where(auto > 0, T.functional.autocontrast(x), x)",
     "x = torch.stack([T.functional.autocontrast(i) if a > 0 else i for i, a in zip(x, auto.flatten())])",
     "device_calls or stand_in"),
    ("ViT a host read in augment()", "mimetic_vit.py", "    if cfg.crop_scale < 1:\n        x = crop_resize(",
     "    if cfg.crop_scale < 1 or crop.sum() > 0:\n        x = crop_resize(", "stand_in"),
    ("ViT the epoch's order left on the host", "mimetic_vit.py", "generator=self.gen).to(self.dev)  # one copy",
     "generator=self.gen)  # one copy", "copies_to_the_device"),
    ("ViT the same order every epoch", "mimetic_vit.py", "perm = torch.randperm(len(self.x), generator=self.gen)",
     "perm = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(0))", "every_epoch or loader_feeds"),
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
