"""A third round of mutants: single-point bugs in places the first two rounds did not plant (the LM's causal mask,
tied and scaled embeddings, word dropout, SmallInitEmb, tokenisation, bpc, the best weights; the ViT's default init,
the mimetic and simple inits' noise, erasing's fill, the resize, the optimizer's eps and groups, the estimate's side
effects, the run folder, the atomic save), each put into a scratch copy of the repository and run against the whole
suite (test_mimetic.py and extras/, stopping at the first failure; one thread):

    python results/cpu-mutation-check-round3/mutants.py > results/cpu-mutation-check-round3/log.txt   # from the root
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

V, L = "mimetic_vit.py", "mimetic_lm.py"
MUTS = [
 # the LM's model
 ("L1", L, "is_causal=True,", "is_causal=False,"),
 ("L2", L, "dropout_p=self.dropout if self.training else 0.0)", "dropout_p=self.dropout)"),
 ("L3", L, "        self.head.weight = self.wte.weight", "        pass"),
 ("L4", L, "bernoulli_(1 - c.word_dropout)", "bernoulli_(c.word_dropout)"),
 ("L5", L, "W = W * keep / (1 - c.word_dropout)", "W = W * keep"),
 ("L6", L, "x = self.emb_norm(x) if c.small_emb else x * math.sqrt(c.width)", "x = self.emb_norm(x) if c.small_emb else x"),
 ("L7", L, "self.emb_norm = nn.LayerNorm(c.width, eps=1e-12)", "self.emb_norm = nn.LayerNorm(c.width)"),
 ("L8", L, "nn.init.normal_(self.wte.weight, std=c.width ** -0.5)", "nn.init.normal_(self.wte.weight, std=0.02)"),
 ("L9", L, "nn.init.uniform_(self.wte.weight, -1e-4, 1e-4)", "nn.init.uniform_(self.wte.weight, -1e-2, 1e-2)"),
 ("L10", L, "return self.drop(x + self.pos_embed[:T])", "return self.drop(x + self.pos_embed[-T:])"),
 # the LM's data, evaluation and training
 ("L11", L, 'streams = {s: t.replace("\\n", "<eos>") for', 'streams = {s: t.replace("\\n", " ") for'),
 ("L12", L, "vocab = list(dict.fromkeys(w for s in SPLITS for w in streams[s]))", "vocab = sorted(set(w for s in SPLITS for w in streams[s]))"),
 ("L13", L, 'return ("bpc", loss / math.log(2)) if', 'return ("bpc", loss) if'),
 ("L14", L, "yield chunk[:, :-1], chunk[:, 1:]", "yield chunk[:, 1:], chunk[:, :-1]"),
 ("L15", L, "offset = torch.randint(L, (), generator=gen).item()", "offset = 0 * torch.randint(L, (), generator=gen).item()"),
 ("L16", L, 'model.load_state_dict(load_checkpoint(os.path.join(cfg.out_dir, "best.pt"))["model"])', "pass"),
 ("L17", L, 'improved = val_loss < state["best_val"]', 'improved = val_loss <= state["best_val"] + 1'),
 ("L18", L, "decay = {n for n, p in model.named_parameters() if p.dim() >= 2}", "decay = {n for n, p in model.named_parameters()}"),
 ("L19", L, "recent = [h[\"val_loss\"] for h in history[-cfg.plateau_window:]]", "recent = [h[\"val_loss\"] for h in history[-cfg.plateau_window - 1:]]"),
 ("L20", L, "torch.manual_seed(cfg.seed + 1 + rank)", "torch.manual_seed(cfg.seed + 1)"),
 # the ViT's model and inits
 ("V1", V, "return self.head(self.norm(x[:, 0]))", "return self.head(self.norm(x.mean(1)))"),
 ("V2", V, "nn.init.normal_(self.cls_token, std=1e-6)", "nn.init.normal_(self.cls_token, std=0.02)"),
 ("V3", V, 'if isinstance(m, nn.Linear) and name != "patch_embed":', "if isinstance(m, nn.Linear):"),
 ("V4", V, "Z1 = [Z() for _ in range(num_heads)]", "Z1 = [Z()] * num_heads"),
 ("V5", V, "    Z1 = [Z() for _ in range(num_heads)]  # \"we resample [the query/key noise] for each head\" (Sec. 4)\n    Z2 = Z()",
           "    Z2 = Z()\n    Z1 = [Z() for _ in range(num_heads)]"),
 ("V6", V, "Z_h = torch.randn(d, k, generator=generator, dtype=torch.float64, device=dev) / math.sqrt(k)",
           "Z_h = torch.randn(d, k, generator=generator, dtype=torch.float64, device=dev) / math.sqrt(d)"),
 ("V7", V, "proj_weight.copy_(-Z)", "proj_weight.copy_(Z)"),
 ("V8", V, 'value="random" if cfg.erase_fill == "noise" else 0)', "value=0)"),
 ("V9", V, 'antialias=x.shape[-1] > size)', "antialias=False)"),
 ("V10", V, "betas=(0.9, 0.999), eps=eps,", "betas=(0.9, 0.999),"),
 ("V11", V, "if decay_all or (p.dim() >= 2", "if (p.dim() >= 2"),
 ("V12", V, "        model.zero_grad(set_to_none=True)  # training starts", "        pass  # training starts"),
 ("V13", L, "        with torch.random.fork_rng(devices=[dev] if dev.type == \"cuda\" else []):  # dropout draws as without it\n",
            "        if True:\n"),
 ("V14", V, 'found = [f for f in ("ckpt.pt", "results.json")', 'found = [f for f in ("ckpt.pt",)'),
 ("V15", V, "        torch.save(obj, path + \".tmp\")\n    os.replace(",
            "        torch.save(obj, path)\n        return\n    os.replace("),
 ("V16", V, "if cfg.schedule == \"onecycle\" and not 0 < cfg.warmup_frac < 0.8:", "if False:"),
 ("C0", V, "def duration(s):", "def duration(s):"),  # a control: no change, must survive
 ("V18", V, "return cfg.lr * (step + 1) / warmup_steps", "return cfg.lr * step / warmup_steps"),
 ("V19", V, '"ra_m": (0, 30)', '"ra_m": (0, 31)'),
 ("V21", V, "top, left = torch.randint(H, (B, 1)) - cfg.cutout // 2,", "top, left = torch.randint(H, (B, 1)),"),
 ("V22", V, "train_x, train_y = train_x[:cfg.train_subset or None], train_y[:cfg.train_subset or None]", "pass"),
 ("V23", V, "torch.linalg.svd(alpha2 * Z2 + vo_sign * beta2 * eye)", "torch.linalg.svd(alpha2 * Z2 - beta2 * eye)"),
 ("V24", V, "init_qk=init != \"vo\", init_vo=init != \"qk\")", "init_qk=init != \"qk\", init_vo=init != \"vo\")"),
 ("L21", L, "self.drop = nn.Dropout(c.emb_dropout)", "self.drop = nn.Dropout(c.dropout)"),
 # extras/
 ("E1", "extras/evaluate_vit.py", "d.std().item() / len(d) ** 0.5", "d.std().item()"),
 ("E2", "extras/evaluate_vit.py", "d = 100 * (hits - first[1])", "d = 100 * (first[1] - hits)"),
 ("E3", "extras/evaluate_vit.py", "    load_weights(model, ckpt[\"model\"], path, \"mimetic_vit.py\")\n", "\n"),
 ("E4", "extras/table4.py", "flatten() % 10)", "flatten())"),
 ("E5", "extras/table4.py", "label = {w: i for i, w in enumerate(wnids)}", "label = {w: i for i, w in enumerate(sorted(wnids))}"),
 ("E6", "extras/sample.py", "[:, -1].float() / temperature", "[:, -1].float()"),
 ("E7", "extras/sample.py", "idx[:, -model.config.block_size:]", "idx[:, :model.config.block_size]"),
 ("V20", V, "x = torch.where(flip.to(self.dev)[:, None, None, None], x.flip(-1), x)",
            "x = torch.where(flip.to(self.dev)[:, None, None, None], x.flip(-2), x)"),
]

if __name__ == "__main__":
    scratch = os.path.join(tempfile.mkdtemp(), "repo")  # the repository without its data; results/ read in place
    shutil.copytree(".", scratch, ignore=shutil.ignore_patterns("data", "results", "figures", ".git", "out"))
    os.symlink(os.path.abspath("results"), os.path.join(scratch, "results"))
    for mid, f, old, new in MUTS:
        text = open(f).read()
        assert text.count(old) == 1, mid
        with open(os.path.join(scratch, f), "w") as out:
            out.write(text.replace(old, new, 1))
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "test_mimetic.py", "extras/"], cwd=scratch, capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
        verdict = {0: "SURVIVED", 1: "KILLED"}.get(r.returncode, f"rc {r.returncode}")
        failed = [line.split(" ")[1] for line in r.stdout.splitlines() if line.startswith("FAILED ")]
        print(f"{mid:4s} {verdict:8s} {time.perf_counter() - t:5.0f} s | {f}: {new.strip()[:80]!r} | "
              f"{(failed or [''])[0][:90]} | {r.stdout.strip().splitlines()[-1]}", flush=True)
        shutil.copy(f, os.path.join(scratch, f))
    shutil.rmtree(os.path.dirname(scratch))
