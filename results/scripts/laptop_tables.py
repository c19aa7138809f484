"""The tables of the laptop-scale runs (and of the GPU diagnosis), as Markdown, from the results files and logs under
results/ (paths from the repository root), for results_readme.py to put where a block `table <function>` stands. Every
cell links to the results file it was read from; the paper's numbers are typed in and labelled as the paper's.
Statistics: mean ± sample standard deviation (n - 1) over seeds; a gap between two arms is the mean of the per-seed
differences (same seed = same data order, augmentation and default-init draw) with its standard error, sd / sqrt(n).
"""

import json
import math
import os

VIT = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2"  # Table 2 and Fig. 4: the code at commit 4563b6d
TVRA = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2-tvra"  # Table 1: torchvision's RandAugment (7b773af)
LM = "results/cpu-ptbchar-w128d4h4s128-900k-e3"
PILOT = "results/cpu-pilot-cifar10jpeg-w96d4h3p4-50k-e2"  # seed 0 of the first Table 1, run first as the pilot
CMP = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2-cmp"  # extras/compare.py, at commit 619aac8
E = "results/cpu-cifar10jpeg-w96d4h3p4-50k"  # the laptop recipe trained for n epochs: <E>-e<n>-<arm>-seed<k>
D12 = "results/cpu-cifar10jpeg-w96d12h3p4-50k-e4"  # depth 12, 4 epochs
WORD = "results/cpu-ptbword-w128d4h4s80-e3"  # word-level PTB at laptop scale
GPU1 = "results/gpu-h200-table1-partial"  # Table 1's pair on one H200, recipe v1, cut off before epoch 100
GPU2 = "results/gpu-h200-diagnosis"  # the diagnosis on one H200: 7 (or 14) epochs of the 100-epoch schedule


def table(head, rows):
    """A Markdown table from its column names and its rows (lists of cells)."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def vit_dir(arm, seed):
    return f"{PILOT}-{arm}" if seed == 0 and arm in ("default", "mimetic") else f"{VIT}-{arm}-seed{seed}"


def seeded(prefix, seeds):
    """The run folders <prefix>-seed<k>, one per seed."""
    return [f"{prefix}-seed{s}" for s in seeds]


def pair(prefix, seeds):
    """The default and the mimetic arm's run folders, <prefix>-default-seed<k> and <prefix>-mimetic-seed<k>."""
    return seeded(f"{prefix}-default", seeds), seeded(f"{prefix}-mimetic", seeds)


def done(path):
    return os.path.exists(os.path.join(path, "results.json"))


def read(path):
    with open(os.path.join(path, "results.json")) as f:
        return json.load(f)


def metric(path):
    r = read(path)
    return next(r[k] for k in ("final_test_acc", "test_bpc", "test_ppl") if k in r)


def mean_std(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def gap(a, b):
    """Mean and standard error of the per-seed differences b - a."""
    m, sd = mean_std([y - x for x, y in zip(a, b)])
    return m, sd / math.sqrt(len(a))


def cell(path, digits=2):
    return f"[{metric(path):.{digits}f}]({path}/results.json)" if done(path) else "-"


def mean_sd(paths, digits=2):
    """mean ± std of the runs' metric."""
    m, sd = mean_std([metric(p) for p in paths])
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def minutes(paths):
    t = [read(p)["wall_time_s"] / 60 for p in paths]
    return f"{min(t):.1f}-{max(t):.1f}" if t else "-"


def seed_cell(paths, digits=2):
    """The seeds' cells (a dash for a seed not run), mean ± std of those run, and those run."""
    ran = [p for p in paths if done(p)]
    cells = " / ".join(cell(p, digits) for p in paths)
    if len(ran) < 2:
        return cells, (f"{metric(ran[0]):.{digits}f} (1 seed)" if ran else "-"), ran
    return cells, f"**{mean_sd(ran, digits)}** ({len(ran)} seeds)", ran


def arm(paths, digits=2):
    """mean ± std (n seeds): the seeds' cells."""
    cells, stat, _ = seed_cell(paths, digits)
    return f"{stat}: {cells}"


def paired(ref, paths, digits=2):
    """The gap paths - ref over the seeds both have, mean ± SE (2+ seeds) or the one difference."""
    d = [metric(b) - metric(a) for a, b in zip(ref, paths) if done(a) and done(b)]
    if len(d) < 2:
        return f"{d[0]:+.{digits}f} (1 seed)" if d else "-"
    m, se = gap([0.0] * len(d), d)
    return f"{m:+.{digits}f} ± {se:.{digits}f}"


def pair_row(label, d, m, digits=2):
    """label, each arm (mean ± std: the seeds), and the gap m - d, paired by seed."""
    return [label, arm(d, digits), arm(m, digits), paired(d, m, digits)]


def table1(seeds=range(5), learned_seeds=range(3)):
    """Mimetic vs the default init (sinusoidal positions, as every arm here), and vs the default init with learned
    positions (Table 1's base may be that: README, "Where the paper is ambiguous")."""
    d, m = pair(TVRA, seeds)
    lp = seeded(f"{TVRA}-default-learnedpos", learned_seeds)
    rows = [[s, cell(a), cell(lp[s]) if s in learned_seeds else "-", cell(b), f"{metric(b) - metric(a):+.2f}",
             f"{metric(b) - metric(lp[s]):+.2f}" if s in learned_seeds else "-"] for s, a, b in zip(seeds, d, m)]
    rows.append(["mean ± std", *(seed_cell(p)[1] for p in (d, lp, m)), f"**{paired(d, m)}** (SE)",
                 f"**{paired(lp, m)}** (SE)"])
    rows.append(["paper, Table 1 (ViT-Tiny, 100 epochs)", "86.07 (its base)", "", "90.78", "+4.71", ""])
    old_d, old_m = ([vit_dir(arm, s) for s in seeds] for arm in ("default", "mimetic"))  # RandAugment then
    rows.append(["the same, earlier RandAugment code (commit 4563b6d)", mean_sd(old_d), "", mean_sd(old_m),
                 f"{paired(old_d, old_m)} (SE)", ""])
    t = [read(p)["history"][0]["elapsed_s"] / 60 for p in d + lp + m]
    return (table(["seed", "default init", "default init, learned positions", "mimetic init", "gap to default",
                   "gap to learned positions"], rows)
            + f"\n\nWall time per run: {minutes(d + lp + m)} min; time of epoch 1: {min(t):.1f}-{max(t):.1f} min.")


TABLE2 = [  # (label, paper's Table 2 accuracy with 6 heads, our arm name, its flag)
    ("Our initialization", 91.38, "mimetic", "--init=mimetic"),
    ("W_V W_proj ~ -cI => W_V W_proj ~ +cI", 89.65, "voplus", "--vo_sign=1"),
    ("Init only W_Q, W_K", 89.17, "qk", "--init=qk"),
    ("Random pos. embeddings", 88.70, "mimetic-learnedpos", "--pos_emb=learned"),
    ("No init (only sinusoidal pos. embeddings)", 87.39, "default", "--init=default"),
    ("Init only W_V, W_proj", 87.23, "vo", "--init=vo"),
]
T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78}  # Student's t, two-sided 95%, by number of seeds (n - 1 dof)


def verdict(paper_diff, g, se, n):
    """Same sign as the paper's difference or not; 'clear' when the paired gap is outside its 95% confidence
    interval around 0 (|gap| > t * SE; with 3 seeds t = 4.30)."""
    order = "same order" if (paper_diff > 0) == (g > 0) else "reversed"
    return f"**{order}, clear**" if abs(g) > T95[n] * se else f"{order}, within noise"


def arm_row(label, paper, paths, ref):
    """label, the paper's number, ours (mean ± std), the seeds, the paired gap to ref (none in ref's row), minutes."""
    gap_to_ref = "" if paths == ref else paired(ref, paths)
    return [label, paper, f"**{mean_sd(paths)}**", seed_cell(paths)[0], gap_to_ref, minutes(paths)]


def table2(seeds=range(3), pairs=False):
    """Table 2's rows, or (pairs=True) every pair of rows, A - B: ours (paired mean ± SE) / the paper's, and whether
    our order matches the paper's (clear = outside the 95% confidence interval)."""
    runs = {arm: [vit_dir(arm, s) for s in seeds] for _, _, arm, _ in TABLE2}
    if not pairs:
        rows = [arm_row(f"{label} (`{flag}`)", f"{paper:.2f}", runs[arm], runs["mimetic"])
                for label, paper, arm, flag in TABLE2]
        return table(["ablation (paper's order)", "paper", "ours, mean ± std (3 seeds)", "seeds 0 / 1 / 2",
                      "gap to ours, paired", "minutes"], rows)
    accs = {arm: [metric(p) for p in paths] for arm, paths in runs.items()}
    rows = []
    for i, (_, pa, a, flag) in enumerate(TABLE2[:-1]):
        cells = [""] * i
        for _, pb, b, _ in TABLE2[i + 1:]:
            g, se = gap(accs[b], accs[a])
            cells.append(f"{g:+.2f} ± {se:.2f} / {pa - pb:+.2f}: {verdict(pa - pb, g, se, len(seeds))}")
        rows.append([f"`{flag}`"] + cells)
    return table(["A \\ B"] + [f"`{flag}`" for *_, flag in TABLE2[1:]], rows)


def table2_pairs():
    return table2(pairs=True)


def fig4(seeds=range(3), scales=("0.5", "1", "2", "4")):
    runs = {g: [vit_dir("mimetic" if g == "1" else f"mimetic-pos{g}", s) for s in seeds] for g in scales}
    paper = {"1": "(reference)", "2": "about +0.5 over g = 1"}
    rows = [arm_row(g, paper.get(g, "(a curve; no number printed)"), runs[g], runs["1"]) for g in scales]
    return table(["g (`--pos_scale`)", "paper, Fig. 4", "ours, mean ± std (3 seeds)", "seeds 0 / 1 / 2",
                  "gap to g = 1, paired", "minutes"], rows)


def seed_pairs(d, m, digits, paper=()):
    """One row per seed (default, mimetic, their difference), then mean ± std (the gap: ± SE) and the paper's row."""
    rows = [[s, cell(a, digits), cell(b, digits), f"{metric(b) - metric(a):+.{digits}f}"] for s, (a, b) in
            enumerate(zip(d, m))]
    rows.append([f"mean ± std ({len(d)} seeds; gap: ± SE)", f"**{mean_sd(d, digits)}**", f"**{mean_sd(m, digits)}**",
                 f"**{paired(d, m, digits)}**"])
    return table(["seed", "default init", "mimetic init", "gap"], rows + ([list(paper)] if paper else []))


def table6(seeds=range(3)):
    d, m = pair(LM, seeds)
    paper = ["paper, Table 6 (width 384, 12 layers, 100 epochs)", "1.233", "1.210", "-0.023"]
    return f"{seed_pairs(d, m, 3, paper)}\n\nWall time per run: {minutes(d + m)} min."


def rows_against(seeds, refs, rows, digits=2):
    """One row per arm of rows = [(label, the paper's number, prefix)], runs <prefix>-seed<k>: ours (mean ± std), the
    seeds, the paired gap to each of refs = [(label, prefix)], minutes."""
    out = []
    for label, paper, prefix in rows:
        paths = seeded(prefix, seeds)
        cells, stat, ran = seed_cell(paths, digits)
        gaps = ["(reference)" if prefix == ref else paired(seeded(ref, seeds), paths, digits) for _, ref in refs]
        out.append([label, paper, stat, cells, *gaps, minutes(ran)])
    return table(["arm", "paper", "ours, mean ± std", "seeds " + " / ".join(map(str, seeds)),
                  *(f"gap to {label}, paired (± SE)" for label, _ in refs), "minutes"], out)


LS_VALUES = ("0.1", "0.4", "0.6", "1.0")  # the coarse search of the diagonal's initial value, on seed 0


def table5(seeds=range(3)):
    """Table 5's five columns, plus the default init, each against mimetic init (Table 1's runs)."""
    arms = {"layerscale": "LayerScale, eq 9", "layerscaleours": "LayerScale, our version, eq 13"}
    search = [[label] + [cell(f"{CMP}-{arm}{v}-seed0") for v in LS_VALUES] for arm, label in arms.items()]
    ls, ours = (max((v for v in LS_VALUES if done(f"{CMP}-{a}{v}-seed0")), key=lambda v: metric(f"{CMP}-{a}{v}-seed0"))
                for a in arms)  # the best value on seed 0
    against = rows_against(seeds, [("mimetic", f"{TVRA}-mimetic"), ("default init", f"{TVRA}-default")], [
        ("T-Fixup (`--compare=tfixup`)", "85.38", f"{CMP}-tfixup"),
        ("ZerO (`--compare=zero`)", "87.41", f"{CMP}-zero"),
        (f"LayerScale (`--compare=layerscale --ls_init={ls}`)", "89.90", f"{CMP}-layerscale{ls}"),
        (f"LayerScale, our version (`--compare=layerscale_ours --ls_init={ours}`)", "88.68",
         f"{CMP}-layerscaleours{ours}"),
        ("Our initialization (`mimetic_vit.py`)", "91.38", f"{TVRA}-mimetic"),
        ("default init (`mimetic_vit.py --init=default`; not in Table 5)", "86.07 (Table 1)", f"{TVRA}-default")])
    return table(["`--ls_init`", *LS_VALUES], search) + "\n\n" + against


def eqs14_15(seeds=range(3)):
    return rows_against(seeds, [("plain attention", f"{TVRA}-default")], [
        ("plain attention (`mimetic_vit.py --init=default`)", "88.1", f"{TVRA}-default"),
        ("eq 14, Softmax(S + gamma C) (`--compare=conv_in`)", "87.5", f"{CMP}-convin"),
        ("eq 15, Softmax(S) + gamma C (`--compare=conv_out`)", "89.9", f"{CMP}-convout"),
        ("eq 15, Softmax(S) + Softmax(gamma C) (`--compare=conv_softmax`)", "75", f"{CMP}-convsoftmax"),
        ("eq 15, the same with the softmax over the kernel's taps (`--compare=conv_softmax_local`)", "75",
         f"{CMP}-convsoftmaxlocal"),
        ("mimetic init, no C (`mimetic_vit.py`)", "91.38 (Table 5)", f"{TVRA}-mimetic")])


def fig6(seeds=range(3), sizes=(5000, 10000, 25000, 50000)):
    rows = [pair_row(f"{n:,}", *pair(TVRA if n == 50000 else f"{CMP}-subset{n}", seeds))  # 50,000: Table 1's runs
            for n in sizes]
    return table(["training images (steps held at 780)", "default init", "mimetic init", "gap, paired (± SE)"], rows)


def lm_basis(seeds=range(3)):
    return rows_against(seeds, [("eqs 5-7 literally", f"{LM}-mimetic")], [
        ("eqs 5-7 literally: every head W_Q = W_K = sqrt(b1) I[:, :k] (`mimetic_lm.py`)", "-", f"{LM}-mimetic"),
        ("a random orthonormal basis per head (`extras/lm_qk_basis.py`)", "-", f"{LM}-mimetic-randombasis")], 3)


def training_length(lengths=(2, 4, 8, 16), seeds=range(5)):
    """The gap against the length of training, each length a whole schedule of its own (warmup and cosine over
    its own steps); 2 epochs is Table 1's five seeds. A seed counts once both of its arms are committed."""
    rows = []
    for n in lengths:
        prefix = TVRA if n == 2 else f"{E}-e{n}"
        both = [s for s in seeds if done(f"{prefix}-default-seed{s}") and done(f"{prefix}-mimetic-seed{s}")]
        d, m = pair(prefix, both)
        rows.append(pair_row(f"{n} ({n * (50000 // 128):,})", d, m) + [minutes(d + m)])
    return table(["epochs (steps)", "default init", "mimetic init", "gap, paired (± SE)", "minutes per run"], rows)


def word_ptb(seeds=range(3)):
    """Word-level PTB, the char recipe's model with the word preset's other settings: test perplexity."""
    return rows_against(seeds, [("default init", f"{WORD}-default")], [
        ("default init (`--init=default`)", "84.84", f"{WORD}-default"),
        ("mimetic init (`mimetic_lm.py`)", "82.34", f"{WORD}-mimetic")])


def epochs(log):
    """{epoch: (train loss, test accuracy, minutes since the start, test loss)} from a training log's epoch lines
    ("epoch 3/100 | train loss 1.7452 | test loss 1.5189 | test acc 44.75 | 1.2 min")."""
    out = {}
    for line in open(log):
        if line.startswith("epoch "):
            f = line.split(" | ")
            out[int(f[0].split()[1].split("/")[0])] = (float(f[1].split()[-1]), float(f[3].split()[-1]),
                                                       float(f[-1].split()[0]), float(f[2].split()[-1]))
    return out


DIAGNOSIS = [  # (arm, flags beyond --recipe=v1, seed, log): the first pair's runs (GPU1, full logs), then GPU2's
    ("mimetic (first pair)", "(none: lr 3e-3, bf16)", 0, f"{GPU1}/log-mimetic.txt"),
    ("mimetic", "(none)", 0, f"{GPU2}/mimetic.txt"), ("mimetic", "`--seed=1`", 1, f"{GPU2}/mimetic-seed1.txt"),
    ("mimetic, fp32", "`--precision=fp32`", 0, f"{GPU2}/mimetic-fp32.txt"),
    ("W_Q W_K^T only", "`--init=qk`", 0, f"{GPU2}/qk.txt"), ("W_V W_proj only", "`--init=vo`", 0, f"{GPU2}/vo.txt"),
    ("default (first pair)", "`--init=default`", 0, f"{GPU1}/log-default.txt"),
    ("default", "`--init=default`", 0, f"{GPU2}/default.txt"),
    ("mimetic, lr 1e-3", "`--lr=0.001`", 0, f"{GPU2}/mimetic-lr1e-3.txt"),
    ("mimetic, lr 1e-3", "`--lr=0.001 --seed=1`", 1, f"{GPU2}/mimetic-lr1e-3-seed1.txt"),
    ("default, lr 1e-3", "`--init=default --lr=0.001`", 0, f"{GPU2}/default-lr1e-3.txt"),
    ("default, lr 1e-3", "`--init=default --lr=0.001 --seed=1`", 1, f"{GPU2}/default-lr1e-3-seed1.txt")]


def gpu_diagnosis():
    """The paper's ViT-Tiny on one H200, the first epochs of the 100-epoch schedule: which setting stalls, beside the
    first pair's runs. Epoch 14 where the log, or the log of its resumed run (-resume.txt), holds it."""
    rows = []
    for arm, flags, seed, log in DIAGNOSIS:
        resume = log.replace(".txt", "-resume.txt")
        later = resume if os.path.exists(resume) else log
        first, second = epochs(log), epochs(later)
        rows.append([arm, flags, seed, f"{first[7][0]:.3f}", f"[{first[7][1]:.2f}]({log})",
                     f"[{second[14][1]:.2f}]({later})" if 14 in second else ""])
    return table(["arm", "flags beyond `python mimetic_vit.py --recipe=v1`", "seed", "train loss, epoch 7",
                  "test acc, epoch 7", "test acc, epoch 14"], rows)


def depth(seeds=(0, 1, 2)):
    """The laptop recipe for 4 epochs at depth 4 and at ViT-Tiny's depth 12, on a CPU in fp32, seeds paired: is the
    GPU stall a matter of depth (and rate) rather than of the GPU?"""
    d12, names, rows = E.replace("d4", "d12"), " / ".join(map(str, seeds)), []
    for label, runs in [("4, 3e-3 (the 4-epoch row above)", f"{E}-e4"), ("12, 3e-3", f"{d12}-e4"), ("12, 1e-3",
                        f"{d12}-e4-lr1e-3"), ("12, 3e-3, warmup 25% of the steps", f"{d12}-e4-warmup0.25"),
                        ("12, 3e-3, the default recipe now (`authors100`)", f"{d12}-e4-authors100")]:
        d, m = pair(runs, seeds)
        (d_cells, _, d_ran), (m_cells, _, m_ran) = seed_cell(d), seed_cell(m)
        diffs = " / ".join(f"{metric(b) - metric(a):+.2f}" if done(a) and done(b) else "-" for a, b in zip(d, m))
        rows.append([label, d_cells, m_cells, diffs, paired(d, m), minutes(d_ran + m_ran)])
    return table(["depth, peak lr", f"default init, seeds {names}", f"mimetic init, seeds {names}",
                  "difference per seed", "gap, paired (± SE)", "minutes per run"], rows)


def impulse(seeds=range(5)):
    """Impulse init (extras/compare.py) beside the default init, mimetic, and mimetic on impulse's learned position
    embeddings, on the same seeds; the paper column: Zheng et al.'s ViT-Tiny, CIFAR-10, 200 epochs, one seed."""
    arms = [("default", "-", "default"),
            ("mimetic", "-", "mimetic"),
            ("mimetic, learned positions", "91.16", "mimetic-learnedpos"),
            ("impulse (learned positions)", "91.62", "impulse")]
    prefix = {name: f"{E}-e2-authors100-{name}" for _, _, name in arms}
    return rows_against(seeds, [(label, prefix[name]) for label, _, name in arms[:3]],
                        [(label, paper, prefix[name]) for label, paper, name in arms])


def jpeg_quality(seeds=range(3), qualities=(50, 30)):
    """The laptop recipe on the JPEG copy (quality about 75) and on the copy re-encoded at lower qualities (training
    and test images both), seeds paired; each quality's cost is paired against the copy, seed by seed."""
    copy = pair(f"{E}-e2-authors100", seeds)
    rows = [pair_row("the copy (quality about 75)", *copy) + ["", ""]]
    for q in qualities:
        runs = pair(f"results/cpu-cifar10q{q}-w96d4h3p4-50k-e2-authors100", seeds)
        rows.append(pair_row(f"re-encoded at quality {q}", *runs) + [paired(c, r) for c, r in zip(copy, runs)])
    return table(["training and test images", "default init", "mimetic init", "mimetic - default, paired (± SE)",
                  "default: minus the copy, paired (± SE)", "mimetic: minus the copy, paired (± SE)"], rows)


PROXY = "results/cpu-pair5kjpeg-w96d4h3p4-1k-e150-b64"  # the overfitting proxy: 1,024 JPEG images, 150 epochs
CANDIDATES = [("authors100", "today's default (`authors100`)"), ("authors", "`--recipe=authors`"),
              ("ra2m14cutout16", "`--ra_n=2 --ra_m=14 --cutout=16 --crop_scale=1.0 --jitter=0 --reprob=0`"),
              ("ra2m9cutout16", "`--ra_n=2 --ra_m=9 --cutout=16 --crop_scale=1.0 --jitter=0 --reprob=0`"),
              ("pos2", "`--pos_scale=2`"), ("ls01", "`--label_smoothing=0.1`"), ("decayall", "`--decay_all=True`")]


def fit(paths):
    """Over the runs done, means: the best epoch's test accuracy, accuracy on the augmented training batches minus
    test accuracy at the end, and the epoch of the lowest test loss."""
    hs = [read(p)["history"] for p in paths if done(p)]
    if not hs:
        return "-"
    best = sum(max(e["test_acc"] for e in h) for h in hs) / len(hs)
    gap_end = sum(h[-1]["train_acc"] - h[-1]["test_acc"] for h in hs) / len(hs)
    low = sum(min(h, key=lambda e: e["test_loss"])["epoch"] for h in hs) / len(hs)
    return f"{best:.2f} / {gap_end:+.1f} / {low:.0f}"


def proxy(seeds=range(3)):
    """The regularisation candidates on the overfitting proxy, both arms on the same seeds."""
    rows, (d0, m0) = [], pair(f"{PROXY}-{CANDIDATES[0][0]}", seeds)
    for name, label in CANDIDATES:
        d, m = pair(f"{PROXY}-{name}", seeds)
        against = "(reference)" if d == d0 else f"{paired(d0, d)} / {paired(m0, m)}"
        rows.append(pair_row(label, d, m) + [against, fit(d), fit(m)])
    return table(["candidate", "default init, final", "mimetic init, final", "mimetic - default, paired (± SE)",
                  "minus today's default, paired (± SE): default init / mimetic init",
                  "default: best / train - test / lowest test loss at epoch",
                  "mimetic: best / train - test / lowest test loss at epoch"], rows)


def impulse_proxy(seeds=range(3)):
    """Impulse beside the two inits on the overfitting proxy, today's default recipe, the same seeds."""
    arms = [("default", f"{PROXY}-authors100-default"), ("mimetic", f"{PROXY}-authors100-mimetic"),
            ("impulse (learned positions)", f"{PROXY}-impulse")]
    return rows_against(seeds, arms[:2], [(label, "-", prefix) for label, prefix in arms])


def level_cpu(seeds=range(3)):
    """The CPU runs on the gap to the paper, each beside today's default on the same seeds; the last two beside the
    default rerun on their machine, in one session (runs differ across machines: results/cpu-laptop-rerun-1f01035)."""
    rows = []
    for label, runs, today in (("`--recipe=timm`, the laptop recipe", f"{E}-e2-timm", f"{E}-e2-authors100"),
                               ("`--adam_eps=1e-3`, depth 12, 4 epochs", f"{D12}-eps1e-3", f"{D12}-authors100"),
                               ("today's default, rerun", f"{E}-e2-authors100-rerun", f"{E}-e2-authors100-rerun"),
                               ("`--recipe=timm`, rerun", f"{E}-e2-timm-rerun", f"{E}-e2-authors100-rerun"),
                               ("`--pos_emb=sincos2d`", f"{E}-e2-sincos2d", f"{E}-e2-authors100-rerun")):
        (d, m), (td, tm) = pair(runs, seeds), pair(today, seeds)
        rows.append(pair_row(label, d, m) + [f"{paired(td, d)} / {paired(tm, m)}"])
    return table(["runs", "default init", "mimetic init", "gap, paired (± SE)",
                  "minus today's default, paired (default / mimetic)"], rows)
