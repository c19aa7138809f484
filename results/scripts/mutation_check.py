"""Each bug below, put into a scratch copy of the repository, must fail the test that guards it: issue 25's device
mix (the first GPU step's crash) and a broken checkpoint's two-line error, issue 27's missing attention init (item 6)
and the training-loop bugs of its item 7. Run from the repository root:

    python results/scripts/mutation_check.py > results/cpu-mutation-check/log.txt
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
MUTS = [  # (name, file, old, new, the tests that must fail: pytest -k)
    ("ViT device mix put back (85533dc's crash)", "mimetic_vit.py", "n = torch.full((), len(yb), device=dev)",
     "n = torch.tensor(len(yb))", "vit_trains_on_a_stand_in"),
    ("checkpoint error quotes pickle's message raw", "mimetic_lm.py", "readable checkpoint ({e!r})",
     "readable checkpoint ({type(e).__name__}: {e})", "corrupt_checkpoint"),
    ("ViT build_model skips the attention init", "mimetic_vit.py", INIT, "    return model",
     "main_trains_the_model_with"),
    ("LM build_model skips the attention init", "mimetic_lm.py", INIT, "    return model",
     "main_trains_the_model_with"),
    ("ViT labels not shuffled with images", "mimetic_vit.py", "            yb = train_y[idx]",
     "            yb = train_y[i * cfg.batch_size:(i + 1) * cfg.batch_size].to(dev)", "own_label"),
    ("ViT clipping skipped", "mimetic_vit.py", CLIP, CLIP.replace("cfg.grad_clip > 0", "False"), "clipped"),
    ("LM clipping skipped", "mimetic_lm.py", CLIP, CLIP.replace("cfg.grad_clip > 0", "False"), "clipped"),
    ("ViT zero_grad dropped", "mimetic_vit.py", STEP, "            opt.step()", "zeroed"),
    ("LM zero_grad dropped", "mimetic_lm.py", STEP, "            opt.step()", "zeroed"),
    ("LM plateau factor computed, not applied", "mimetic_lm.py", PLATEAU,
     "        factor = plateau_factor(history, val_loss, cfg, level)", "plateau_factor_reaches"),
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
