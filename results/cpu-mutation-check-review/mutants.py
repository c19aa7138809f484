"""A second round of mutants, 25 single-point bugs that results/scripts/mutation_check.py does not plant, each put
into a scratch copy of the repository and run against the tests that guard it (pytest -k). The first run, at 8fd4aa9,
left seven alive (V9, V12, V13, V14, L2, L7, L9: log-8fd4aa9.txt); the tests added since kill them (log.txt):

    python results/cpu-mutation-check-review/mutants.py > results/cpu-mutation-check-review/log.txt   # from the root
"""
import os
import shutil
import subprocess
import sys
import tempfile

V, L = "mimetic_vit.py", "mimetic_lm.py"
MUTS = [
 ("V1", V, "t = (step + 1) / total_steps", "t = step / total_steps", "onecycle or rate_is_set or schedule"),
 ("V2", V, 'n not in ("pos_embed", "cls_token")', 'n != "pos_embed"', "decay"),
 ("V3", V, 'loss += F.cross_entropy(logits.float(), yb, reduction="sum")', 'loss += F.cross_entropy(logits.float(), yb)', "evaluate or resize or cli_end_to_end or label_smoothing or nan_evaluation"),
 ("V4", V, "forward_backward(net, xb, yb, amp, cfg.label_smoothing)", "forward_backward(net, xb, yb, amp)", "label_smoothing"),
 ("V5", V, "cfg = SimpleNamespace(**{**defaults, **recipe, **given})", "cfg = SimpleNamespace(**{**defaults, **given, **recipe})", "recipe"),
 ("V7", V, "torch.rand(1) < cfg.reprob else None", "torch.rand(1) > cfg.reprob else None", "bit_for_bit or eras"),
 ("V8", V, "P = torch.cat([rows[:, None].expand(-1, grid, -1), cols[None].expand(grid, -1, -1)], dim=-1)", "P = torch.cat([rows[None].expand(grid, -1, -1), cols[:, None].expand(-1, grid, -1)], dim=-1)", "sincos2d or position or model_shapes"),
 ("V9", V, "x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)", "x = torch.cat([x, self.cls_token.expand(x.shape[0], -1, -1)], dim=1)", "class_token_comes_first or model_shapes"),
 ("V10", V, "self.pos_embed.copy_(c.pos_scale * P)", "self.pos_embed.copy_(P)", "model_shapes or sincos2d or position or sinusoids or eq8"),
 ("V11", V, '"precision": prec, "command"', '"precision": cfg.precision, "command"', "cli_end_to_end or results or recorded"),
 ("V12", V, 'elapsed = round((history[-1]["elapsed_s"] if history else 0.0) + time.perf_counter() - t0, 3)', 'elapsed = round(time.perf_counter() - t0, 3)', "elapsed_time or cli_end_to_end"),
 ("V13", V, "left = step_s * (self.total - self.start[0])", "left = step_s * self.total", "progress"),
 ("V14", V, '"data_dir", "out_dir",\n               "workers"}', '"data_dir", "out_dir", "epochs",\n               "workers"}', "resume_equals"),
 ("L1", L, "return cfg.lr * scale * min(1.0, (step + 1) / warmup_steps)", "return cfg.lr * scale * min(1.0, step / warmup_steps)", "lm_schedule or warmup or plateau"),
 ("L2", L, "if len(history) + 1 <= cfg.plateau_after or not recent:", "if len(history) <= cfg.plateau_after or not recent:", "plateau"),
 ("L3", L, 'worse = val_loss >= max(recent) if level == "word" else val_loss > max(recent)', 'worse = val_loss >= max(recent) if level == "char" else val_loss > max(recent)', "plateau"),
 ("L4", L, "lo = (end - 1 - seq_len).clamp(min=0)", "lo = (end - seq_len).clamp(min=0)", "lm_evaluate or best_pt or lm_cli"),
 ("L5", L, "scored = (pos + 1 >= s) & (pos + 1 < e)", "scored = (pos + 1 > s) & (pos + 1 < e)", "lm_evaluate or best_pt or lm_cli"),
 ("L6", L, "seg = perm[i * batch_size + rank * b:i * batch_size + (rank + 1) * b]", "seg = perm[i * b + rank * b:i * b + (rank + 1) * b]", "lm_batches or ddp"),
 ("L7", L, "perm = torch.randperm((len(train_ids) - 1 - L) // L, generator=gen).to(train_ids.device)", "perm = torch.arange((len(train_ids) - 1 - L) // L).to(train_ids.device)", "lm_batches"),
 ("L8", L, "            loss = forward_backward(net, x, y, amp)[0]\n            if cfg.grad_clip > 0:\n                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)\n",
          "            if cfg.grad_clip > 0:\n                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)\n            loss = forward_backward(net, x, y, amp)[0]\n", "clipped or zeroed"),
 ("L9", L, 'return {k: ckpt[k] for k in ("history", "lr_scale", "best_val")}', 'return {"history": ckpt["history"], "lr_scale": 1.0, "best_val": ckpt["best_val"]}', "lm_exact_resume"),
 ("L10", L, "    torch.set_rng_state(cpu_rng)\n    if cuda_rng is not None and dev.type == \"cuda\":\n        torch.cuda.set_rng_state(cuda_rng, dev)\n    return {k: ckpt",
           "    pass\n    if cuda_rng is not None and dev.type == \"cuda\":\n        torch.cuda.set_rng_state(cuda_rng, dev)\n    return {k: ckpt", "lm_exact_resume or resume"),
 ("L11", L, 'preset = PRESETS.get(given.get("dataset", defaults["dataset"]), {})', 'preset = PRESETS.get(defaults["dataset"], {})', "presets or recorded"),
 ("L12", L, "freq = torch.exp(-math.log(10000.0) * torch", "freq = torch.exp(-math.log(1000.0) * torch", "sinusoid or lm_ or eq8"),
]

if __name__ == "__main__":
    scratch = os.path.join(tempfile.mkdtemp(), "repo")  # the repository without its data; results/ read in place
    shutil.copytree(".", scratch, ignore=shutil.ignore_patterns("data", "results", "figures", ".git", "out"))
    os.symlink(os.path.abspath("results"), os.path.join(scratch, "results"))
    for mid, f, old, new, k in MUTS:
        text = open(f).read()
        assert text.count(old) == 1, mid
        with open(os.path.join(scratch, f), "w") as out:
            out.write(text.replace(old, new))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "test_mimetic.py", "-k", k], cwd=scratch, capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
        verdict = {0: "SURVIVED", 1: "KILLED"}.get(r.returncode, f"rc {r.returncode}")
        print(f"{mid:4s} {verdict:8s} | {f}: {new.strip()[:90]!r} | {r.stdout.strip().splitlines()[-1]}", flush=True)
        shutil.copy(f, os.path.join(scratch, f))
    shutil.rmtree(os.path.dirname(scratch))
