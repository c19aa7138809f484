"""The laptop-scale tables (Tables 1, 2, 5, 6, Fig. 4, eqs 14-15, Fig. 6, the gap against the length of training,
depth, word-level PTB, our a1 = 0 basis) from the results files, and the GPU diagnosis from its logs, as Markdown.
results/scripts/results_readme.py calls these functions to write results/README.md; alone, this prints them all:

    python results/scripts/laptop_tables.py        # from the repository root

Every cell is read from a results.json below results/ and links to it (from the repository root); nothing is typed
by hand. The side comparisons (extras/compare.py) print the seeds whose results are committed so far.
Statistics: mean +- sample standard deviation (n - 1) over seeds; a gap between two arms is the mean
of the per-seed differences (same seed = same data order, augmentation and default-init draw) with
its standard error, sd(differences) / sqrt(n).
"""

import json
import math
import os

VIT = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2"  # Table 2 and Fig. 4: the code at commit 4563b6d
TVRA = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2-tvra"  # Table 1: today's code (torchvision's RandAugment)
LM = "results/cpu-ptbchar-w128d4h4s128-900k-e3"
PILOT = "results/cpu-pilot-cifar10jpeg-w96d4h3p4-50k-e2"  # seed 0 of the first Table 1, run first as the pilot
CMP = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2-cmp"  # extras/compare.py, at commit 619aac8


def vit_dir(arm, seed):
    if seed == 0 and arm in ("default", "mimetic"):
        return f"{PILOT}-{arm}"
    return f"{VIT}-{arm}-seed{seed}"


def read(path):
    with open(os.path.join(path, "results.json")) as f:
        return json.load(f)


def metric(path):
    r = read(path)
    return next(r[k] for k in ("final_test_acc", "test_bpc", "test_ppl") if k in r)


def metrics(paths):
    return [metric(p) for p in paths]


def mean_std(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, sd


def gap(a, b):
    """Mean and standard error of the per-seed differences b - a."""
    d = [y - x for x, y in zip(a, b)]
    m, sd = mean_std(d)
    return m, sd / math.sqrt(len(d))


def cell(path, digits):
    return f"[{metric(path):.{digits}f}]({path}/results.json)"


def minutes(paths):
    t = [read(p)["wall_time_s"] / 60 for p in paths]
    return f"{min(t):.1f}-{max(t):.1f}"


def epoch1(paths):
    t = [read(p)["history"][0]["elapsed_s"] / 60 for p in paths]
    return f"{min(t):.1f}-{max(t):.1f}"


def arm_row(label, paper, paths, digits=2, extra=""):
    m, sd = mean_std(metrics(paths))
    seeds = " / ".join(cell(p, digits) for p in paths)
    return f"| {label} | {paper} | **{m:.{digits}f} ± {sd:.{digits}f}** | {seeds} |{extra} {minutes(paths)} |"


def table1(seeds=range(5), learned_seeds=range(3)):
    """Mimetic vs the default init (sinusoidal positions, as every arm here), and vs the default init
    with learned positions (Table 1's base may be that: README, "Where the paper is ambiguous")."""
    d = [f"{TVRA}-default-seed{s}" for s in seeds]
    m = [f"{TVRA}-mimetic-seed{s}" for s in seeds]
    lp = [f"{TVRA}-default-learnedpos-seed{s}" for s in learned_seeds]
    print("| seed | default init | default init, learned positions | mimetic init | gap to default | gap to learned positions |")
    print("|---|---|---|---|---|---|")
    for s, a, b in zip(seeds, d, m):
        c, g2 = ("-", "-") if s not in learned_seeds else (cell(lp[s], 2), f"{metric(b) - metric(lp[s]):+.2f}")
        print(f"| {s} | {cell(a, 2)} | {c} | {cell(b, 2)} | {metric(b) - metric(a):+.2f} | {g2} |")
    (ma, sa), (ml, sl), (mb, sb) = mean_std(metrics(d)), mean_std(metrics(lp)), mean_std(metrics(m))
    g, se = gap(metrics(d), metrics(m))
    gl, sel = gap(metrics(lp), metrics(m[:len(lp)]))
    print(f"| mean ± std | **{ma:.2f} ± {sa:.2f}** ({len(d)} seeds) | **{ml:.2f} ± {sl:.2f}** ({len(lp)} seeds) | "
          f"**{mb:.2f} ± {sb:.2f}** ({len(m)} seeds) | **{g:+.2f} ± {se:.2f}** (SE) | **{gl:+.2f} ± {sel:.2f}** (SE) |")
    print("| paper, Table 1 (ViT-Tiny, 100 epochs) | 86.07 (its base) | | 90.78 | +4.71 | |")
    old_d = metrics([vit_dir("default", s) for s in seeds])  # the same recipe before the RandAugment change
    old_m = metrics([vit_dir("mimetic", s) for s in seeds])
    (oa, osa), (ob, osb), (og, ose) = mean_std(old_d), mean_std(old_m), gap(old_d, old_m)
    print(f"| the same, earlier RandAugment code (commit 4563b6d) | {oa:.2f} ± {osa:.2f} | | {ob:.2f} ± {osb:.2f} | "
          f"{og:+.2f} ± {ose:.2f} (SE) | |")
    print(f"\nWall time per run: {minutes(d + lp + m)} min; time of epoch 1: {epoch1(d + lp + m)} min.")


TABLE2 = [  # (label, paper's Table 2 accuracy with 6 heads, our arm name)
    ("Our initialization", 91.38, "mimetic"),
    ("W_V W_proj ~ -cI => W_V W_proj ~ +cI", 89.65, "voplus"),
    ("Init only W_Q, W_K", 89.17, "qk"),
    ("Random pos. embeddings", 88.70, "mimetic-learnedpos"),
    ("No init (only sinusoidal pos. embeddings)", 87.39, "default"),
    ("Init only W_V, W_proj", 87.23, "vo"),
]
FLAGS = {"mimetic": "--init=mimetic", "voplus": "--vo_sign=1", "qk": "--init=qk",
         "mimetic-learnedpos": "--pos_emb=learned", "default": "--init=default", "vo": "--init=vo"}


T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78}  # Student's t, two-sided 95%, by number of seeds (n - 1 dof)


def verdict(paper_diff, g, se, n):
    """Same sign as the paper's difference or not; 'clear' when the paired gap is outside its 95%
    confidence interval around 0 (|gap| > t * SE; with 3 seeds t = 4.30)."""
    same = (paper_diff > 0) == (g > 0)
    clear = abs(g) > T95[n] * se
    if same:
        return "**same order, clear**" if clear else "same order, within noise"
    return "**reversed, clear**" if clear else "reversed, within noise"


def table2(seeds=range(3)):
    runs = {arm: [vit_dir(arm, s) for s in seeds] for _, _, arm in TABLE2}
    accs = {arm: metrics(paths) for arm, paths in runs.items()}
    print("| ablation (paper's order) | paper | ours, mean ± std (3 seeds) | seeds 0 / 1 / 2 | gap to ours, paired | minutes |")
    print("|---|---|---|---|---|---|")
    for label, paper, arm in TABLE2:
        g, se = gap(accs["mimetic"], accs[arm])
        extra = " |" if arm == "mimetic" else f" {g:+.2f} ± {se:.2f} |"
        print(arm_row(f"{label} (`{FLAGS[arm]}`)", f"{paper:.2f}", runs[arm], extra=extra))
    print("\nEvery pair of rows, A - B: ours (paired mean ± SE over seeds 0-2) / the paper's, and whether our order "
          "matches the paper's (clear = outside the 95% confidence interval, |gap| > 4.30 SE):\n")
    print("| A \\ B | " + " | ".join(f"`{FLAGS[b]}`" for _, _, b in TABLE2[1:]) + " |")
    print("|---|" + "---|" * (len(TABLE2) - 1))
    for i, (la, pa, a) in enumerate(TABLE2[:-1]):
        cells = ["" for _ in TABLE2[1:i + 1]]
        for lb, pb, b in TABLE2[i + 1:]:
            g, se = gap(accs[b], accs[a])
            cells.append(f"{g:+.2f} ± {se:.2f} / {pa - pb:+.2f}: {verdict(pa - pb, g, se, len(seeds))}")
        print(f"| `{FLAGS[a]}` | " + " | ".join(cells) + " |")


def fig4(seeds=range(3), scales=("0.5", "1", "2", "4")):
    def paths(g):
        return [vit_dir("mimetic" if g == "1" else f"mimetic-pos{g}", s) for s in seeds]
    base = metrics(paths("1"))
    print("| g (`--pos_scale`) | paper, Fig. 4 | ours, mean ± std (3 seeds) | seeds 0 / 1 / 2 | gap to g = 1, paired | minutes |")
    print("|---|---|---|---|---|---|")
    paper = {"1": "(reference)", "2": "about +0.5 over g = 1"}
    for g in scales:
        d, se = gap(base, metrics(paths(g)))
        extra = " |" if g == "1" else f" {d:+.2f} ± {se:.2f} |"
        print(arm_row(g, paper.get(g, "(a curve; no number printed)"), paths(g), extra=extra))


def table6(seeds=range(3)):
    d = [f"{LM}-default-seed{s}" for s in seeds]
    m = [f"{LM}-mimetic-seed{s}" for s in seeds]
    print("| seed | default init, test bpc | mimetic init, test bpc | gap |")
    print("|---|---|---|---|")
    for s, a, b in zip(seeds, d, m):
        print(f"| {s} | {cell(a, 3)} | {cell(b, 3)} | {metric(b) - metric(a):+.3f} |")
    base, init = metrics(d), metrics(m)
    (ma, sa), (mb, sb) = mean_std(base), mean_std(init)
    g, se = gap(base, init)
    print(f"| mean ± std ({len(d)} seeds) | **{ma:.3f} ± {sa:.3f}** | **{mb:.3f} ± {sb:.3f}** | "
          f"**{g:+.3f} ± {se:.3f}** (SE) |")
    print("| paper, Table 6 (width 384, 12 layers, 100 epochs) | 1.233 | 1.210 | -0.023 |")
    print(f"\nWall time per run: {minutes(d + m)} min.")


def seed_cell(paths, digits=2):
    """The seeds' cells (a dash for a seed not run yet), mean ± std of those run, and their count."""
    done = [p for p in paths if os.path.exists(os.path.join(p, "results.json"))]
    cells = " / ".join(cell(p, digits) if p in done else "-" for p in paths)
    if len(done) < 2:
        return cells, (f"{metric(done[0]):.{digits}f} (1 seed)" if done else "-"), done
    m, sd = mean_std(metrics(done))
    return cells, f"**{m:.{digits}f} ± {sd:.{digits}f}** ({len(done)} seeds)", done


def paired(ref, paths, digits=2):
    """The gap paths - ref over the seeds both have, mean ± SE (2+ seeds) or the one difference."""
    both = [(a, b) for a, b in zip(ref, paths) if all(os.path.exists(os.path.join(p, "results.json")) for p in (a, b))]
    if not both:
        return "-"
    d = [metric(b) - metric(a) for a, b in both]
    if len(d) == 1:
        return f"{d[0]:+.{digits}f} (1 seed)"
    m, se = gap([0.0] * len(d), d)
    return f"{m:+.{digits}f} ± {se:.{digits}f}"


def rows_against(refs, rows, digits=2):
    """One row per arm: the paper's number, ours (mean ± std), the seeds, the paired gap to each of
    refs = [(label, paths)], minutes."""
    gaps = " | ".join(f"gap to {label}, paired (± SE)" for label, _ in refs)
    print(f"| arm | paper | ours, mean ± std | seeds 0 / 1 / 2 | {gaps} | minutes |")
    print("|---|---|---|---|" + "---|" * len(refs) + "---|")
    for label, paper, paths in rows:
        cells, stat, done = seed_cell(paths, digits)
        g = " | ".join("(reference)" if paths == ref else paired(ref, paths, digits) for _, ref in refs)
        print(f"| {label} | {paper} | {stat} | {cells} | {g} | {minutes(done) if done else '-'} |")


LS_VALUES = ("0.1", "0.4", "0.6", "1.0")  # the coarse search of the diagonal's initial value, on seed 0


def best_ls(arm):
    """The LayerScale value with the best seed-0 accuracy (of those run)."""
    done = [v for v in LS_VALUES if os.path.exists(f"{CMP}-{arm}{v}-seed0/results.json")]
    return max(done, key=lambda v: metric(f"{CMP}-{arm}{v}-seed0")) if done else LS_VALUES[0]


def table5(seeds=range(3)):
    """Table 5's five columns, plus the default init, each against mimetic init (Table 1's runs)."""
    print("Search of the diagonal's initial value, seed 0 (`--ls_init`):\n")
    print("| `--ls_init` | " + " | ".join(LS_VALUES) + " |")
    print("|---|" + "---|" * len(LS_VALUES))
    for arm, label in (("layerscale", "LayerScale, eq 9"), ("layerscaleours", "LayerScale, our version, eq 13")):
        cells = [cell(f"{CMP}-{arm}{v}-seed0", 2) if os.path.exists(f"{CMP}-{arm}{v}-seed0/results.json") else "-"
                 for v in LS_VALUES]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    mimetic, default = ([f"{TVRA}-{arm}-seed{s}" for s in seeds] for arm in ("mimetic", "default"))
    ls, ours = best_ls("layerscale"), best_ls("layerscaleours")
    rows_against([("mimetic", mimetic), ("default init", default)], [
        ("T-Fixup (`--compare=tfixup`)", "85.38", [f"{CMP}-tfixup-seed{s}" for s in seeds]),
        ("ZerO (`--compare=zero`)", "87.41", [f"{CMP}-zero-seed{s}" for s in seeds]),
        (f"LayerScale (`--compare=layerscale --ls_init={ls}`)", "89.90",
         [f"{CMP}-layerscale{ls}-seed{s}" for s in seeds]),
        (f"LayerScale, our version (`--compare=layerscale_ours --ls_init={ours}`)", "88.68",
         [f"{CMP}-layerscaleours{ours}-seed{s}" for s in seeds]),
        ("Our initialization (`mimetic_vit.py`)", "91.38", mimetic),
        ("default init (`mimetic_vit.py --init=default`; not in Table 5)", "86.07 (Table 1)", default),
    ])


def eqs14_15(seeds=range(3)):
    plain = [f"{TVRA}-default-seed{s}" for s in seeds]
    rows_against([("plain attention", plain)], [
        ("plain attention (`mimetic_vit.py --init=default`)", "88.1", plain),
        ("eq 14, Softmax(S + gamma C) (`--compare=conv_in`)", "87.5", [f"{CMP}-convin-seed{s}" for s in seeds]),
        ("eq 15, Softmax(S) + gamma C (`--compare=conv_out`)", "89.9", [f"{CMP}-convout-seed{s}" for s in seeds]),
        ("eq 15, Softmax(S) + Softmax(gamma C) (`--compare=conv_softmax`)", "75",
         [f"{CMP}-convsoftmax-seed{s}" for s in seeds]),
        ("eq 15, the same with the softmax over the kernel's taps (`--compare=conv_softmax_local`)", "75",
         [f"{CMP}-convsoftmaxlocal-seed{s}" for s in seeds]),
        ("mimetic init, no C (`mimetic_vit.py`)", "91.38 (Table 5)", [f"{TVRA}-mimetic-seed{s}" for s in seeds]),
    ])


def fig6(seeds=range(3), sizes=(5000, 10000, 25000)):
    print("| training images (steps held at 780) | default init | mimetic init | gap, paired (± SE) |")
    print("|---|---|---|---|")
    for n in (*sizes, 50000):
        if n == 50000:
            d, m = ([f"{TVRA}-{arm}-seed{s}" for s in seeds] for arm in ("default", "mimetic"))
        else:
            d, m = ([f"{CMP}-subset{n}-{arm}-seed{s}" for s in seeds] for arm in ("default", "mimetic"))
        (dc, ds, _), (mc, ms, _) = seed_cell(d), seed_cell(m)
        print(f"| {n:,} | {ds}: {dc} | {ms}: {mc} | {paired(d, m)} |")


def lm_basis(seeds=range(3)):
    literal = [f"{LM}-mimetic-seed{s}" for s in seeds]
    rows_against([("eqs 5-7 literally", literal)], [
        ("eqs 5-7 literally: every head W_Q = W_K = sqrt(b1) I[:, :k] (`mimetic_lm.py`)", "-", literal),
        ("a random orthonormal basis per head (`extras/lm_qk_basis.py`)", "-",
         [f"{LM}-mimetic-randombasis-seed{s}" for s in seeds]),
    ], digits=3)


E = "results/cpu-cifar10jpeg-w96d4h3p4-50k"  # the laptop recipe trained for n epochs: <E>-e<n>-<arm>-seed<k>
STEPS_PER_EPOCH = 50000 // 128


def training_length(lengths=(4, 8, 16), seeds=range(5)):
    """The gap against the length of training, each length a whole schedule of its own (warmup and cosine over
    its own steps); 2 epochs is Table 1's five seeds. A seed counts once both of its arms are committed."""
    print("| epochs (steps) | default init | mimetic init | gap, paired (± SE) | minutes per run |")
    print("|---|---|---|---|---|")
    for n in (2, *lengths):
        runs = {arm: [f"{TVRA}-{arm}-seed{s}" if n == 2 else f"{E}-e{n}-{arm}-seed{s}" for s in seeds]
                for arm in ("default", "mimetic")}
        both = [i for i in range(len(seeds)) if all(os.path.exists(os.path.join(runs[a][i], "results.json"))
                                                   for a in runs)]
        d, m = ([runs[arm][i] for i in both] for arm in ("default", "mimetic"))
        if not both:
            print(f"| {n} ({n * STEPS_PER_EPOCH:,}) | (not yet run) | (not yet run) | | |")
            continue
        (dc, ds, _), (mc, ms, _) = seed_cell(d), seed_cell(m)
        print(f"| {n} ({n * STEPS_PER_EPOCH:,}) | {ds}: {dc} | {ms}: {mc} | {paired(d, m)} | {minutes(d + m)} |")


WORD = "results/cpu-ptbword-w128d4h4s80-e3"  # word-level PTB at laptop scale


def word_ptb(seeds=range(3)):
    """Word-level PTB, the char recipe's model with the word preset's other settings: test perplexity."""
    rows_against([("default init", [f"{WORD}-default-seed{s}" for s in seeds])], [
        ("default init (`--init=default`)", "84.84", [f"{WORD}-default-seed{s}" for s in seeds]),
        ("mimetic init (`mimetic_lm.py`)", "82.34", [f"{WORD}-mimetic-seed{s}" for s in seeds]),
    ], digits=2)


GPU1 = "results/gpu-h200-table1-partial"  # the first GPU session: Table 1's pair, cut off at epoch 49
GPU2 = "results/gpu-h200-diagnosis"  # the second: results/scripts/gpu_session2.sh, 7 (or 14) epochs of 100


def epoch_line(log, n):
    """(train loss, test accuracy) from the line "epoch n/..." of a training log, or None."""
    for line in open(log):
        if line.startswith(f"epoch {n}/"):
            fields = line.split(" | ")
            return float(fields[1].split()[-1]), float(fields[3].split()[-1])
    return None


def gpu_diagnosis():
    """The paper's ViT-Tiny on one H200, the first epochs of the 100-epoch schedule: which setting stalls."""
    print("| arm | flags beyond `python mimetic_vit.py --recipe=v1` | seed | train loss, epoch 7 | test acc, epoch 7 | test acc, epoch 14 |")
    print("|---|---|---|---|---|---|")
    for arm, flags, seed, log, later in [
        ("mimetic (first session)", "(none: lr 3e-3, bf16)", 0, f"{GPU1}/log-mimetic.txt", f"{GPU1}/log-mimetic.txt"),
        ("mimetic", "(none)", 0, f"{GPU2}/mimetic.txt", None),
        ("mimetic", "`--seed=1`", 1, f"{GPU2}/mimetic-seed1.txt", None),
        ("mimetic, fp32", "`--precision=fp32`", 0, f"{GPU2}/mimetic-fp32.txt", None),
        ("W_Q W_K^T only", "`--init=qk`", 0, f"{GPU2}/qk.txt", None),
        ("W_V W_proj only", "`--init=vo`", 0, f"{GPU2}/vo.txt", None),
        ("default (first session)", "`--init=default`", 0, f"{GPU1}/log-default.txt", f"{GPU1}/log-default.txt"),
        ("default", "`--init=default`", 0, f"{GPU2}/default.txt", None),
        ("mimetic, lr 1e-3", "`--lr=0.001`", 0, f"{GPU2}/mimetic-lr1e-3.txt", f"{GPU2}/mimetic-lr1e-3-resume.txt"),
        ("mimetic, lr 1e-3", "`--lr=0.001 --seed=1`", 1, f"{GPU2}/mimetic-lr1e-3-seed1.txt",
         f"{GPU2}/mimetic-lr1e-3-seed1-resume.txt"),
        ("default, lr 1e-3", "`--init=default --lr=0.001`", 0, f"{GPU2}/default-lr1e-3.txt",
         f"{GPU2}/default-lr1e-3-resume.txt"),
        ("default, lr 1e-3", "`--init=default --lr=0.001 --seed=1`", 1, f"{GPU2}/default-lr1e-3-seed1.txt",
         f"{GPU2}/default-lr1e-3-seed1-resume.txt"),
    ]:
        loss, acc = epoch_line(log, 7)
        acc14 = f"[{epoch_line(later, 14)[1]:.2f}]({later})" if later else ""
        print(f"| {arm} | {flags} | {seed} | {loss:.3f} | [{acc:.2f}]({log}) | {acc14} |")


def depth(seeds=(0, 1, 2)):
    """The laptop recipe for 4 epochs at depth 4 and at ViT-Tiny's depth 12, on a CPU in fp32, seeds paired: is the
    GPU stall a matter of depth (and rate) rather than of the GPU?"""
    names = " / ".join(map(str, seeds))
    print(f"| depth, peak lr | default init, seeds {names} | mimetic init, seeds {names} | difference per seed | "
          f"gap, paired (± SE) | minutes per run |")
    print("|---|---|---|---|---|---|")
    d12 = E.replace("d4", "d12")  # the same recipe at depth 12
    rows = [("4, 3e-3 (the 4-epoch row above)", f"{E}-e4"), ("12, 3e-3", f"{d12}-e4"), ("12, 1e-3", f"{d12}-e4-lr1e-3"),
            ("12, 3e-3, warmup 25% of the steps", f"{d12}-e4-warmup0.25")]
    for label, runs in rows:
        d, m = ([f"{runs}-{arm}-seed{k}" for k in seeds] for arm in ("default", "mimetic"))
        (d_cells, _, d_done), (m_cells, _, m_done) = seed_cell(d), seed_cell(m)
        diffs = " / ".join(f"{metric(b) - metric(a):+.2f}" if a in d_done and b in m_done else "-"
                           for a, b in zip(d, m))
        print(f"| {label} | {d_cells} | {m_cells} | {diffs} | {paired(d, m)} | {minutes(d_done + m_done)} |")


if __name__ == "__main__":
    for title, table in [("Table 1", table1), ("Table 2", table2), ("Fig. 4", fig4), ("Table 6", table6),
                         ("Table 5", table5), ("Eqs 14-15", eqs14_15), ("Fig. 6", fig6), ("a1 = 0 basis", lm_basis),
                         ("Training length", training_length), ("Word PTB", word_ptb),
                         ("GPU diagnosis", gpu_diagnosis), ("Depth", depth)]:
        print(f"### {title}\n")
        table()
        print()
