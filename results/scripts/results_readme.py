"""Refresh the generated blocks of results/README.md and results/INVESTIGATIONS.md, Markdown that a person edits:
only what stands between `<!-- begin: NAME -->` and `<!-- end: NAME -->` is rewritten, from the files under results/.

    python results/scripts/results_readme.py            # refresh every block of both pages in place (from any folder)
    python results/scripts/results_readme.py --check    # exit 1, naming each stale block (extras/test_extras.py)

NAME is one of BLOCKS below (a table, a sentence's numbers, a page's contents, README.md's index of every folder that
git tracks under results/), `table <function of laptop_tables.py>`, `lines <file under results/> <regex>` (its
matching lines, quoted) or `count <file> <regex>`. A block whose begin marker ends its line is a paragraph.
"""
import glob
import itertools
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import laptop_tables as lt  # noqa: E402

OUT, INV = "results/README.md", "results/INVESTIGATIONS.md"  # the pages; the index is OUT's, of both pages' sections
BLOCK = re.compile(r"<!-- begin: (.+?) -->(.*?)<!-- end: \1 -->", re.S)
PAPER_T1 = {"mimetic": 90.78, "default": 86.07}  # the paper's Table 1, ViT-Tiny (192/12/3) after 100 epochs


done, cell, arm, table, epochs = lt.done, lt.cell, lt.arm, lt.table, lt.epochs


def log_lines(path):
    return open(path).read().splitlines()


def lines(path, pattern, inline=False):
    """The lines of results/<path> that match pattern: joined in a sentence, or quoted below a link to the file."""
    found = [line.rstrip() for line in log_lines(f"results/{path}") if re.search(pattern, line)]
    return "; ".join(found) if inline else f"[{path}]({path}):\n\n" + "\n".join("    " + line for line in found)


def span(xs, digits=2):
    return f"{min(xs):.{digits}f}-{max(xs):.{digits}f}"


def step_loss(log, n):
    """The loss on the line of step n of a log, as printed."""
    return next(line for line in log_lines(log) if line.startswith(f"step {n}/")).split(" | ")[2].split()[-1]


def pace(log):
    """Seconds per epoch after the first, from a log's epoch lines."""
    e = epochs(log)
    return 60 * (e[max(e)][2] - e[1][2]) / (max(e) - 1)


# The recipe comparison and the laptop tables

D12 = "results/cpu-cifar10jpeg-w96d12h3p4-50k-e4"  # depth 12, 4 epochs: <D12>[-authors[-v1aug]]-<arm>-seed<k>
D4 = "results/cpu-cifar10jpeg-w96d4h3p4-50k-e2"  # the laptop recipe: <D4>-authors-<arm>-seed<k>; Table 1: <D4>-tvra-


def attention_logs():
    """{run: {"acc", "loss", "mean", "lowest", "largest", "log"}} from attention_entropy.py's logs (results/scripts/ at 36726b4)."""
    runs, keys = {}, ("acc", "loss", "mean", "lowest", "largest")
    for log in sorted(glob.glob("results/cpu-attention-entropy-*/log.txt"), key=os.path.dirname):
        for name, *values in re.findall(r"(\S+): test acc ([\d.]+), train loss ([\d.]+)\n(?:.*\n)*?\s+mean entropy "
                                        r"([\d.]+), lowest ([\d.]+); largest logit ([\d.]+)", open(log).read()):
            runs[name] = dict(zip(keys, map(float, values)), log=log)
    return runs


def pair_cells(d, m, logs):
    """Default, mimetic, their difference and their largest attention logits ("-" where no log holds one)."""
    def logit(path):
        r = logs.get(os.path.basename(path))
        return f"[{r['largest']:.0f}]({r['log']})" if r else "-"
    return [cell(d), cell(m), lt.paired([d], [m]).replace(" (1 seed)", ""), f"{logit(d)} / {logit(m)}"]


def recipe_d12():
    logs, rows = attention_logs(), []
    for s in range(3):
        rows.append([s] + pair_cells(f"{D12}-default-seed{s}", f"{D12}-mimetic-seed{s}", logs)
                    + pair_cells(f"{D12}-authors-default-seed{s}", f"{D12}-authors-mimetic-seed{s}", logs))
    gaps = [lt.paired(*lt.pair(p, range(3))) for p in (D12, f"{D12}-authors")]
    rows.append(["gap, paired (± SE)", "", "", gaps[0], "", "", "", gaps[1], ""])
    pair = ["default init", "mimetic init", "gap", "largest logit (default / mimetic)"]
    return table(["seed"] + [f"ours: {c}" for c in pair[:2]] + pair[2:] + [f"authors': {c}" for c in pair[:2]]
                 + pair[2:], rows)


def recipe_seed0():
    logs = attention_logs()
    rows = [[label] + pair_cells(f"{p}-default-seed0", f"{p}-mimetic-seed0", logs) for label, p in (
        ("ours (the old recipe)", D12), ("the authors' recipe", f"{D12}-authors"),
        ("the authors' schedule, no clipping, our old augmentation", f"{D12}-authors-v1aug"))]
    return table(["recipe", "default init", "mimetic init", "gap", "largest logit (default / mimetic)"], rows)


def recipe_laptop():
    """The laptop recipe under each recipe, seeds 0-4."""
    rows = []
    for label, p in (("ours (the old recipe; [Table 1](README.md#laptop-scale-table-1))", f"{D4}-tvra"),
                     ("the authors' script's defaults (`--recipe=authors`)", f"{D4}-authors"),
                     ("the authors' 100-epoch augmentation (the default since, `authors100`)", f"{D4}-authors100"),
                     ("the same, batched draws (today's code at `b765bdb`, the README's headline)", f"{D4}-batched")):
        rows.append(lt.pair_row(label, *lt.pair(p, range(5))))
    return table(["recipe", "default init", "mimetic init", "gap, paired (± SE)"], rows)


def table1_earlier():
    """The earlier code's arms (commit 4563b6d), beside Table 1."""
    old = {a: [lt.vit_dir(a, s) for s in range(5)] for a in ("default", "mimetic")}
    learned = lt.seeded(f"{lt.VIT}-default-learnedpos", range(3))
    return (f"default init {arm(old['default'])}; mimetic init {arm(old['mimetic'])}; default init with learned "
            f"positions, seeds 0-2: {arm(learned)}")


def e16_leads():
    """How many epochs of the 16-epoch runs the mimetic arm leads after, the epochs it is behind, its largest lead."""
    hist = {(a, s): [h["test_acc"] for h in lt.read(f"{lt.E}-e16-{a}-seed{s}")["history"]]
            for a in ("default", "mimetic") for s in range(3)}
    diffs = [(s, i + 1, m - d) for s in range(3)
             for i, (d, m) in enumerate(zip(hist["default", s], hist["mimetic", s]))]
    behind = ", ".join(f"epoch {e} of seed {s}, {g:+.2f}" for s, e, g in diffs if g <= 0)
    return (f"leads after {sum(g > 0 for _, _, g in diffs)} of the {len(diffs)} epochs (behind at {behind}), by up "
            f"to {max(g for _, _, g in diffs):.1f} points")


def d12_seed0():
    """The depth-12 pair of seed 0 at lr 3e-3: the loss at steps 50 and 150, from the logs' step lines."""
    loss = {(a, s): step_loss(f"{D12}-{a}-seed0/log.txt", s) for a in ("default", "mimetic") for s in (50, 150)}
    return (f"lower at step 50 ({loss['mimetic', 50]} against {loss['default', 50]}), then rises to "
            f"{loss['mimetic', 150]} at step 150 as the rate reaches its peak, while the default init's falls to "
            f"{loss['default', 150]}")


def attention():
    rows = []
    for name, r in attention_logs().items():
        setting = ("1e-3" if "-lr1e-3-" in name else "3e-3") + (", warmup 25%" if "-warmup0.25-" in name else "") + (
            ", authors' schedule, v1 augmentation" if "-v1aug-" in name else ", authors' recipe" if "-authors-" in name
            else "")
        init, seed = re.search(r"-(default|mimetic)-seed(\d+)$", name).groups()
        rows.append([setting, seed, init, f"[{r['acc']:.2f}](results/{name}/results.json)", f"{r['loss']:.3f}",
                     f"{r['mean']:.2f}", f"{r['lowest']:.2f}", f"{r['largest']:.1f}"])
    return table(["peak lr", "seed", "init", "test acc", "train loss", "mean entropy", "lowest layer's entropy",
                  "largest logit"], rows)


def small_emb(seeds=range(2)):
    """SmallInitEmb (--small_emb=True, not in the paper) on Table 6's laptop recipe, with and without mimetic init."""
    rows = []
    for init in ("default", "mimetic"):
        small = f"{lt.LM}-{'mimetic-' if init == 'mimetic' else ''}smallemb"
        rows.append(lt.pair_row(init, lt.seeded(f"{lt.LM}-{init}", seeds), lt.seeded(small, seeds), 3))
    return table(["`--init`", "without SmallInitEmb, seeds 0 / 1", "`--small_emb=True`, seeds 0 / 1",
                  "gap, paired (± SE)"], rows)


def word_valid():
    """Word-level PTB: how far apart the arms' validation perplexities are after every epoch, and their level."""
    ppl = {(a, s): [h["val_ppl"] for h in lt.read(f"{lt.WORD}-{a}-seed{s}")["history"]]
           for a in ("default", "mimetic") for s in range(3)}
    apart = max(abs(d - m) for s in range(3) for d, m in zip(ppl["default", s], ppl["mimetic", s]))
    level = ", ".join(f"{sum(v[e] for v in ppl.values()) / len(ppl):.0f}" for e in range(3))
    return f"within {apart:.1f} of each other after every epoch of every seed (on average {level} after epochs 1-3)"


# GPU runs

GPU1, GPU3 = lt.GPU1, "results/gpu-h100-table1-authors-partial"  # Table 1's pair: recipe v1 (H200), authors' (H100)
GPU4 = "results/gpu-h200-table1-authors100-partial"  # Table 1's pair on the default recipe (authors100), H200
GPU_E1, GPU_E2 = "results/gpu-h100-e1-timm-default", "results/gpu-h200-e2-timm-mimetic"  # --recipe=timm (E1, E2)
GPU_EPOCHS = (10, 20, 40, 49)


def gpu_recipes():
    """Table 1's pair per epoch under each recipe, from the logs: accuracy, best epoch, lowest test loss, last fit."""
    rows, runs = [], [(recipe, init, gpu, f"{folder}/log-{init}.txt") for recipe, gpu, folder in (
        ("authors100", "H200", GPU4), ("authors'", "H100", GPU3), ("v1", "H200", GPU1)) for init in ("mimetic", "default")]
    timm = [("timm", "mimetic", "H200", f"{GPU_E2}/log.txt"), ("timm", "default", "H100", f"{GPU_E1}/log.txt")]
    for recipe, init, gpu, log in timm + runs:
        e = epochs(log)
        best, low, last = max(e, key=lambda n: e[n][1]), min(e, key=lambda n: e[n][3]), max(e)
        rows.append([recipe, init, gpu] + [f"{e[n][1]:.2f}" for n in GPU_EPOCHS]
                    + [f"{e[best][1]:.2f} ({best})", f"{e[low][3]:.3f} ({low})", last, f"{e[last][0]:.3f}",
                       f"{e[last][3]:.3f}", f"[{e[last][1]:.2f}]({log})", f"{pace(log):.1f}", PAPER_T1[init]])
    return table(["recipe", "init", "GPU"] + [f"epoch {n}" for n in GPU_EPOCHS] + [
        "best (epoch)", "lowest test loss (epoch)", "last epoch", "train loss there", "test loss there",
        "test acc there", "s per epoch after the first", "paper, epoch 100"], rows)


def gpu_lead(folder=GPU3):
    """The mimetic arm's lead over the default arm, epoch by epoch, on the authors' recipe (or folder's)."""
    m, d = (epochs(f"{folder}/log-{a}.txt") for a in ("mimetic", "default"))
    gap = {n: m[n][1] - d[n][1] for n in sorted(m.keys() & d.keys())}
    behind = [n for n, g in gap.items() if g <= 0]
    late = [g for n, g in gap.items() if n >= 50]
    last = max(gap)
    short = [PAPER_T1[a] - e[last][1] for a, e in (("mimetic", m), ("default", d))]
    return (f"leads at {len(gap) - len(behind)} of the {len(gap)} epochs (behind by {span([-gap[n] for n in behind])} "
            f"at epochs {', '.join(map(str, behind))}), by {span(late)} from epoch 50 on (mean "
            f"{sum(late) / len(late):.2f}), and by {gap[last]:.2f} at epoch {last}, against the paper's "
            f"+{PAPER_T1['mimetic'] - PAPER_T1['default']:.2f} at epoch 100. At epoch {last} both arms are "
            f"{span(short, 1)} points short of the paper's final numbers")


def gpu_stall():
    """The first pair: the loss at step 97, the end of its first epoch; the train loss over epochs 4-16."""
    m, d = (epochs(f"{GPU1}/log-{a}.txt") for a in ("mimetic", "default"))
    loss = [step_loss(f"{GPU1}/log-{a}.txt", 97) for a in ("mimetic", "default")]
    return (f"loss {loss[0]} against {loss[1]} at step 97; train loss {span([m[n][0] for n in range(4, 17)])} from "
            f"epoch 4 to 16, while the default init's fell from {d[4][0]:.2f} to {d[16][0]:.2f}")


def gpu_eval():
    """The default recipe's pair on the real test images and their JPEG twins (extras/evaluate_vit.py)."""
    out = []
    for a in ("mimetic", "default"):
        ev = json.load(open(f"{GPU4}/evaluate-{a}.json"))
        real, jpeg = ev["rows"][:2]
        out.append(f"{a} (epoch {ev['epoch']}) {real['test_acc']:.2f} real, {jpeg['test_acc']:.2f} JPEG, JPEG minus "
                   f"real {jpeg['minus_first']:+.2f} ± {jpeg['minus_first_se']:.2f} (paired)")
    return "; ".join(out)


SCREEN = "results/gpu-h200-screen-e40-default"


def screen():
    """The GPU screen: each run's flags, its test accuracy, and extras/evaluate_vit.py's on real and JPEG images."""
    rows = []
    for path in sorted(p for p in glob.glob(f"{SCREEN}/*") if done(p)):
        r, ev = lt.read(path), json.load(open(f"{path}/evaluate.json"))
        tokens = r["command"].split()
        flags = " ".join(t for t in tokens[2:] + recipe_flags(tokens, r["config"])
                         if not t.startswith(("--out_dir", "--init", "--epochs")))
        real, jpeg = ev["rows"][:2]
        rows.append([f"[{os.path.basename(path)}]({path}/results.json)", f"`{flags}`",
                     f"{lt.metric(path):.2f}", f"{real['test_acc']:.2f}", f"{jpeg['test_acc']:.2f}",
                     f"{jpeg['minus_first']:+.2f} ± {jpeg['minus_first_se']:.2f}", f"{r['wall_time_s'] / 60:.1f}"])
    return table(["recipe", "flags beyond `python mimetic_vit.py --init=default --epochs=40`",
                  f"test acc, JPEG copy ({ev['rows'][2]['images']:,})", f"real test images ({real['images']:,})",
                  "their JPEG twins", "JPEG - real, paired (± SE)", "minutes"], rows)


def proxy_seeds(seeds=range(3)):
    """The overfitting proxy seed by seed (then its 512-image variant): each candidate minus today's default, and each
    run's best / train - test / lowest test loss at epoch (laptop_tables.fit); below, how many differences are < 0."""
    rows, diffs = [], []
    for (name, label), a in itertools.product(lt.CANDIDATES, ("default", "mimetic")):
        runs, ref = (lt.seeded(f"{lt.PROXY}-{n}-{a}", seeds) for n in (name, lt.CANDIDATES[0][0]))
        d = [lt.metric(p) - lt.metric(r) for p, r in zip(runs, ref)] if runs != ref else []
        diffs += d
        rows.append([label, a, " / ".join(f"{x:+.2f}" for x in d) or "(reference)"] + [lt.fit([p]) for p in runs])
    rows.append([f"[512 images, 300 epochs]({PROXY512}/results.json)", "default", "", lt.fit([PROXY512]), "", ""])
    up = [x for x in diffs if x > 0]
    head = ["candidate", "init", "minus today's default, seeds 0 / 1 / 2"] + [
        f"seed {k}: best / train - test / lowest test loss at epoch" for k in seeds]
    return table(head, rows) + (f"\n\n{len(diffs) - len(up)} of the {len(diffs)} differences are negative; of the "
                                f"{len(up)} others, {sum(x < 1 for x in up)} are under 1 point.")


PROXY512 = "results/cpu-pair5kjpeg-w96d4h3p4-512-e300-b64-authors100-default-seed0"
PAIR5K = "results/cpu-pair5k{}-w96d4h3p4-e15-{}-seed{}"  # make_pair.py's lossless/ and jpeg/ folders: train on, seed


def jpeg_cost(seeds=range(3)):
    """What the JPEG copy costs: the laptop model trained on real or JPEG images of data/pair5k, each tested on both
    test sets (extras/evaluate_vit.py); then the penalties, paired by init and seed (mean ± SE over the pairs)."""
    acc = {}  # (trained on, tested on): {(init, seed): test accuracy}
    for train, a, s in itertools.product(("lossless", "jpeg"), ("default", "mimetic"), seeds):
        path = PAIR5K.format(train, a, s)
        rows = json.load(open(f"{path}/evaluate.json"))["rows"] if os.path.exists(f"{path}/evaluate.json") else []
        for row in rows:
            acc.setdefault((train, os.path.basename(row["data_dir"])), {})[a, s] = row["test_acc"]
    ways = [("lossless", "lossless"), ("lossless", "jpeg"), ("jpeg", "lossless"), ("jpeg", "jpeg")]
    pairs = sorted(set.intersection(*(set(acc.get(w, {})) for w in ways)))
    name, rows = {"lossless": "real", "jpeg": "JPEG"}, []
    for t, u in ways:
        arms = [[acc[t, u][p] for p in pairs if p[0] == a] for a in ("default", "mimetic")]
        rows.append([f"{name[t]} -> {name[u]}"] + ["{:.2f} ± {:.2f} ({})".format(*lt.mean_std(xs), len(xs))
                                                  if len(xs) > 1 else "-" for xs in arms])
    for label, a, b in (("JPEG -> JPEG minus real -> real", 0, 3), ("JPEG -> real minus real -> real", 0, 2),
                        ("JPEG -> JPEG minus JPEG -> real (the test set's part)", 2, 3)):
        m, se = lt.gap([acc[ways[a]][p] for p in pairs], [acc[ways[b]][p] for p in pairs])
        rows.append([f"{label}, paired over {len(pairs)} (init, seed)", f"{m:+.2f} ± {se:.2f}", ""])
    return table(["trained on -> tested on", "default init", "mimetic init"], rows)


# Speed and precision

SPEED_LOGS = {  # log: what it is (the index gives each folder's commands)
    f"{GPU1}/gpu_log.txt": "the first GPU run, code `7feaecc`",
    "results/cpu-bench-xeon/log-vit.txt": "code `8c2d46a`, idle", "results/cpu-bench-xeon/log-lm.txt": "the same",
    "results/cpu-bench-after-rewrite/log-vit.txt": "after the first rewrite, idle",
    "results/cpu-bench-after-rewrite/log-lm.txt": "the same; before the LM benchmark clipped gradients",
    "results/cpu-bench-after-rewrite/log-before-6095f23.txt": "before the first rewrite (`6095f23`), the same hour",
    "results/cpu-vit-benchmark-tiny-b32/log.txt": "an earlier program (`--benchmark=True`), idle",
    "results/cpu-lm-benchmark-ptb-b2/log.txt": "the same",
    "results/cpu-vit-benchmark-tiny-b32-fp32/log.txt": "the same, `--precision=fp32`, on a loaded machine",
    "results/cpu-lm-benchmark-ptb-b2-fp32/log.txt": "the same, `--precision=fp32`, on a loaded machine",
}


def benchmarks():
    """One row per `benchmark:` line of SPEED_LOGS, with the augmentation line before a ViT line beside it."""
    rows = []
    for log, note in SPEED_LOGS.items():
        augmentation = ""
        for line in log_lines(log):
            if line.startswith("augmentation pipeline:"):
                augmentation = line.split(": ")[1]
            elif line.startswith("benchmark:"):
                speed, flops, hardware, precision, compiled, spec = (s.strip() for s in line[10:].split(" | "))
                f = dict(zip(spec.split()[::2], spec.split()[1::2]))
                size = f"{f['width']}/{f['depth']}/{f['heads']}"
                model = (f"ViT {size}, patch {f['patch']}, batch {f['batch']}" if "patch" in f
                         else f"LM {size}, {f['seq_len']} tokens, batch {f['batch']}")
                rows.append([model, f"{hardware}, {precision}, {compiled}", speed, flops.split()[0],
                             augmentation if "img/s" in speed else "", f"[{note}]({log})"])
                augmentation = ""
    return table(["model", "hardware, precision", "model step", "TFLOP/s (model matmuls)",
                  "augmentation alone", "log"], rows)


TIMM = "results/cpu-speed-vs-timm-nanogpt"


def versus():
    """extras/speed_vs_timm_nanogpt.py's logs: the throughput ratios of ours to timm's ViT and to nanoGPT."""
    rows = []
    for log in sorted(f for f in os.listdir(TIMM) if f.startswith("log-")):
        text = log_lines(f"{TIMM}/{log}")
        setting = next(line for line in text if line.startswith("mode ")).split(";")[0]
        hardware = next(line for line in text if line.startswith("hardware: ")).split(" | ")[:2]
        ratio = dict(re.findall(r"^(ours \w+ / [\w ]+): (x[\d.]+)", "\n".join(text), re.M))
        rows.append([setting, f"{hardware[0][10:]}, {hardware[1]}", ratio["ours ViT / timm ViT"],
                     ratio["ours LM / nanoGPT GPT"], f"[{log}]({TIMM}/{log})"])
    return table(["setting", "hardware", "ours ViT / timm ViT", "ours LM / nanoGPT", "log"], rows)


def precision():
    rows = []
    for program, mode in [(p, m) for p in ("vit", "lm") for m in ("fp32", "bf16")]:
        paths = [f"results/cpu-precision-{program}-{mode}-seed{s}" for s in range(2)]
        rows.append([program, mode, "test acc" if program == "vit" else "test bpc",
                     " / ".join(cell(p, 2 if program == "vit" else 4) for p in paths),
                     " / ".join(f"{lt.read(p)['wall_time_s']:.0f}" for p in paths)])
    return table(["program", "`--precision`", "metric", "seeds 0 / 1", "seconds of training, seeds 0 / 1"], rows)


# Older runs and checks


def older_vit():
    base = "results/cpu-cifar10jpeg-w128d6h4p4-10k-e10"
    d, m = ([f"{base}-{a}" if s == 0 else f"{base}-{a}-seed{s}" for s in range(3)] for a in ("default", "mimetic"))
    return lt.seed_pairs(d, m, 2)


CHECKS = [  # (results folder, what it checked); each run's command is in its results.json
    ("results/cpu-ptbchar-w128d4h4s128-900k-e3-default", "the first PTB pair of Table 6's recipe, default init"),
    ("results/cpu-ptbchar-w128d4h4s128-900k-e3-mimetic", "the same, mimetic init"),
    ("results/cpu-cifar10jpeg-table7-p8-i64-w64d2h2-2k-e1-mimetic", "Table 7's resize trains (one epoch)"),
    ("results/cpu-tinyimagenet-synthetic-p4-w64d2h2-e1-mimetic",
     "the Tiny ImageNet reader on a synthetic folder (`make_synthetic_folder.py` of results/scripts/ at `36726b4`), chance 0.5%"),
    ("results/cpu-smoke-vit-authors100", "the vision program's smoke run"), ("results/cpu-smoke-vit", "the same, recipe v1"),
    ("results/cpu-smoke-lm", "the language program's smoke run"),
]


def checks():
    rows = []
    for path, what in CHECKS:
        r = lt.read(path)
        value = f"{lt.metric(path):.2f}%" if "final_test_acc" in r else f"{lt.metric(path):.3f} bpc"
        rows.append([what, f"`{r['command']}`", r["hardware"], f"[{value}]({path}/results.json)",
                     f"{r['wall_time_s'] / 60:.1f}"])
    return table(["what", "command", "hardware", "test", "minutes"], rows)


# The index: every folder under results/

AE, SCRIPTS = "`attention_entropy.py <run folder> ...` of results/scripts/ at `36726b4`", "of results/scripts/ at `6794749`"
BENCH = "`python extras/bench_vit.py --batch_size=32`, `python extras/bench_lm.py --batch_size=2`"
PAIR = "`snapshot.py`, `tinyrun.py` of results/scripts/ at `3c8c120`"  # bit_identity.py since
MADE_BY = {  # folder: what made it, for the folders that hold no results.json of a run
    "cpu-attention-entropy-d12": f"{AE} (depth 12)", "cpu-attention-entropy-d12-authors": f"{AE} (the authors' recipe)",
    "cpu-augmentation-rate": "`python extras/bench_vit.py` at a toy model's shapes, `--device=cpu` (its log)",
    "cpu-bench-after-rewrite": f"{BENCH} (its README.txt)", "cpu-bench-xeon": f"{BENCH} (its README.txt)",
    "cpu-bit-identity-48cf082-e2bf536": f"{PAIR} (its log)", "cpu-bit-identity-465f414-48868a7": f"{PAIR} (its log)",
    "cpu-skeleton-bit-identity": f"{PAIR} (its log)", "seeded-weights": "`snapshot.py` (its log)",
    "cpu-broken-files": "`broken_files.sh` of results/scripts/ at `36726b4`",
    "cpu-bit-identity-08556b4-28c0304": "`python results/scripts/bit_identity.py` on two checkouts (its log)",
    "cpu-bit-identity-b765bdb-54b8528": "the same", "cpu-bit-identity-58792e9-89b313d": "the same",
    "cpu-loader-speed": "`python results/scripts/loader_speed.py` (its log)", "cpu-loader-speed-batched": "the same",
    "cpu-loader-draws-ahead": "its logs' scripts", "cpu-sharpen-speed": "its script; `loader_speed.py` (its logs)",
    "cpu-loader-device-calls": "`python extras/bench_vit.py` on two checkouts, then a draws-only script (its log)",
    "cpu-mutation-check": "`python results/scripts/mutation_check.py`", "cpu-mutation-check-batched": "the same, later",
    "cpu-augment-exactness": "its scripts, `augment_exactness.py` and `draw_statistics.py` (their logs)",
    "cpu-epoch-time-before-after": "the laptop recipe, `--stop_epoch=1`, two checkouts side by side (its README.txt)",
    "cpu-epoch-time-minimal": f"the same; `modelbench.py`, `stepbench.py` {SCRIPTS} (its README.txt)",
    "cpu-eq13-step-size": "`eq13_step_size.py` of results/scripts/ at `b2db6e6` (its log)",
    "cpu-first-lines": "`capture.py` of results/scripts/ at `3c8c120` (its logs)", "cpu-first-lines-skeleton": "the same",
    "cpu-laptop-whole-step": "`python extras/bench_vit.py` at the laptop shapes (its log)",
    "cpu-bench-laptop-batched": "`python extras/bench_vit.py` at the laptop shapes (its log)",
    "cpu-lm-benchmark-ptb-b2": "`python mimetic_lm.py --benchmark=True --batch_size=2` (an earlier program)",
    "cpu-vit-benchmark-tiny-b32": "`python mimetic_vit.py --benchmark=True --batch_size=32` (an earlier program)",
    "cpu-lm-benchmark-ptb-b2-fp32": "the same, `--precision=fp32`", "cpu-vit-benchmark-tiny-b32-fp32": "the same, fp32",
    "cpu-speed-vs-timm-nanogpt": f"`python extras/speed_vs_timm_nanogpt.py ...` (each log's first line), "
                                 f"`profile_lm.py` {SCRIPTS}",
    "cpu-step-time-recipe": f"`recipe_step_time.py` {SCRIPTS}", "cpu-step-time-skeleton": f"`stepbench.py` {SCRIPTS}",
    "gpu-h100-table1-authors-partial": f"`gpu_recipe_session.sh` {SCRIPTS} (one H100; its session.txt)",
    "gpu-h200-diagnosis": f"`gpu_session2.sh` {SCRIPTS} (one H200; its header gives the calls)",
    "gpu-h200-table1-partial": f"`gpu_session.sh` {SCRIPTS} (one H200)",
}


def folders():
    """The folders under results/ that git tracks (a run still going, a log and no results file, is not one yet)."""
    tracked = subprocess.run(["git", "ls-files", "results"], capture_output=True, text=True, check=True).stdout
    return sorted({p.split("/")[1] for p in tracked.splitlines() if p.count("/") >= 2} - {"scripts"})


def runs_of(folder):
    """The runs of a folder: itself if it holds a results.json, else its subfolders that do."""
    path = f"results/{folder}"
    return [path] if done(path) else sorted(f"{path}/{s}" for s in os.listdir(path) if done(f"{path}/{s}"))


def recipe_flags(tokens, config):
    """The flags for the recipe a ViT run trained with, where its command does not name one: the recipe its config
    records, or v1 (runs before the recipe key), with --ra_chunk=1 for v1 runs before 7b773af (RandAugment per image)."""
    if tokens[1] not in ("mimetic_vit.py", "extras/compare.py") or any(t.startswith("--recipe=") for t in tokens):
        return []
    recipe = config.get("recipe", "v1")
    return [f"--recipe={recipe}"] + ([] if "ra_chunk" in config or recipe != "v1" else ["--ra_chunk=1"])


def command_template(paths):
    """The runs' commands as one, --key=<a|b|...> where they differ, --out_dir dropped (and --workers, retired: the
    batches never depended on it); other keys, another one."""
    groups = {}
    for p in paths:
        res = lt.read(p)
        tokens = [t for t in res["command"].split() if not t.startswith(("--out_dir=", "--workers="))]
        tokens += recipe_flags(tokens, res["config"])
        groups.setdefault(tuple(t.split("=")[0] for t in tokens), []).append(tokens)
    out = []
    for runs in groups.values():
        words = []
        for column in zip(*runs):
            values = list(dict.fromkeys(column))
            key = column[0].split("=")[0]
            words.append(values[0] if len(values) == 1 else f"{key}=<{'|'.join(v.split('=', 1)[1] for v in values)}>")
        out.append("`" + " ".join(words) + "`")
    return "; ".join(out)


def slug(title):
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def sections(text):
    """[(heading, its text)] of the `## ` sections."""
    return [(s.split("\n", 1)[0], s) for s in text.split("\n## ")[1:]]


def index(text):
    """One row per setting (a name up to -<init>-seed<k>): its folders, what made them, the sections that link them."""
    groups = {}
    for f in folders():
        groups.setdefault(re.sub(r"(-(default|mimetic))?(-seed\d+)?$", "", f), []).append(f)
    parts = [(t, s, "") for t, s in sections(text)] + [(t, s, "INVESTIGATIONS.md") for t, s in
                                                          sections(refresh(open(INV).read()))]
    rows = []
    for key, group in groups.items():
        runs = [r for f in group for r in runs_of(f)]
        made_by = command_template(runs) if runs else " ".join(MADE_BY.get(f) or next(
            (f"its [{n}]({f}/{n})" for n in ("README.md", "README.txt") if os.path.exists(f"results/{f}/{n}")),
            "(its files)") for f in group)
        links = " · ".join(f"[{f[len(key) + 1:] or f}/]({f}/)" for f in group) if len(group) > 1 else \
            f"[{group[0]}/]({group[0]}/)"
        used = dict.fromkeys((t, p) for f in group for t, s, p in parts if t != "Index of folders" and f"({f}/" in s)
        rows.append([(f"`{key}-*`: " if len(group) > 1 else "") + links, made_by,
                     ", ".join(f"[{t}]({p}#{slug(t)})" for t, p in used) or "this index only"])
    return table(["folders", "made by", "used in"], rows)


def contents(text):
    return "\n".join(f"- [{t}](#{slug(t)})" for t, _ in sections(text))


BLOCKS = {
    "recipe-d12": recipe_d12, "recipe-seed0": recipe_seed0, "recipe-laptop": recipe_laptop, "checks": checks,
    "table1-earlier": table1_earlier, "e16-leads": e16_leads, "d12-seed0": d12_seed0, "attention": attention,
    "small-emb": small_emb, "word-valid": word_valid, "gpu-recipes": gpu_recipes, "gpu-lead": gpu_lead,
    "gpu-lead-100": lambda: gpu_lead(GPU4), "gpu-stall": gpu_stall, "screen": screen, "gpu-eval": gpu_eval,
    "jpeg-cost": jpeg_cost, "benchmarks": benchmarks, "versus": versus, "precision": precision, "older-vit": older_vit,
    "proxy-seeds": proxy_seeds}
TEXT_BLOCKS = {"contents": contents, "index": index}  # blocks computed from the rest of the file


def compute(name, text, inline):
    """The text of block `name`, its links relative to results/."""
    kind, _, args = name.partition(" ")
    if name in BLOCKS:
        out = BLOCKS[name]()
    elif name in TEXT_BLOCKS:
        out = TEXT_BLOCKS[name](text)
    elif kind == "table":
        out = getattr(lt, args)()
    elif kind in ("lines", "count"):
        path, pattern = args.split(" ", 1)
        out = lines(path, pattern, inline) if kind == "lines" else \
            str(sum(bool(re.search(pattern, line)) for line in log_lines(f"results/{path}")))
    else:
        sys.exit(f"error: a page has a block named {name!r}, which results/scripts/results_readme.py does not know")
    out = out.replace("](results/", "](")  # the blocks link from the repository root; the file is in results/
    return out if inline else f"\n{out}\n"


def refresh(text):
    """text with every block recomputed: the tables and sentences first, then the index and contents from them."""
    for from_text in (False, True):
        text = BLOCK.sub(lambda m: m.group(0) if (m.group(1) in TEXT_BLOCKS) != from_text else (
            f"<!-- begin: {m.group(1)} -->{compute(m.group(1), text, not m.group(2).startswith(chr(10)))}"
            f"<!-- end: {m.group(1)} -->"), text)
    return text


def main(argv):
    os.chdir(ROOT)  # the blocks read results/... from the repository root
    if argv not in ([], ["--check"]):
        sys.exit(f"error: unknown arguments {argv}; use no argument (refresh both pages) or --check")
    stale = []
    for page in (OUT, INV):
        old = open(page).read()
        names = [m.group(1) for m in BLOCK.finditer(old)]
        if old.count("<!-- begin: ") != len(names) or "contents" not in names or ("index" in names) != (page == OUT):
            sys.exit(f"error: {page} needs its contents block (and {OUT} its index), and an end marker for each begin")
        new = refresh(old)
        stale += [f"{page}: {a.group(1)}" for a, b in zip(BLOCK.finditer(old), BLOCK.finditer(new))
                  if a.group(0) != b.group(0)]
        if not argv:
            open(page, "w").write(new)
            print(f"refreshed {len(BLOCK.findall(new))} blocks of {page}: {len(new.splitlines())} lines")
    if argv and stale:
        sys.exit(f"stale blocks {stale}: run python results/scripts/results_readme.py and commit the pages")


if __name__ == "__main__":
    main(sys.argv[1:])
