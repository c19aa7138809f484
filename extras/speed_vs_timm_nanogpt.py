"""Training-step throughput of our two models beside timm's VisionTransformer and nanoGPT's GPT, in one
process, interleaved.

A step is forward + cross-entropy (fp32) + backward + AdamW step + zero_grad on synthetic input, the same
closure for every model; only the model differs. After `--warmup` steps per model (compilation, when asked,
happens there), `--rounds` rounds follow; in each round every model runs `--steps` steps back to back, timed
with time.perf_counter around them, and the order of the models rotates by one each round, so load from
other processes on the machine falls on all models alike. Reported: the median over rounds of the seconds
per step, as img/s or tok/s, and ours / reference. results/INVESTIGATIONS.md, "Speed and precision", quotes its logs in
results/cpu-speed-vs-timm-nanogpt/ (made when this script was results/cpu-speed-vs-timm-nanogpt/bench.py;
results/scripts/profile_lm.py made the profile log). No table or figure of the paper.

Run from the repository root:
    python extras/speed_vs_timm_nanogpt.py --nanogpt=/tmp/nanogpt_model.py --mode=fp32
    ... --mode=bf16 --depth=2 --vit_batch=4 --lm_batch=1      # bf16 autocast at a smaller shape
    ... --mode=compile                                       # fp32 torch.compile

timm is imported as installed (pip install timm); nanoGPT's model.py is imported from the path given,
not copied here. --profile=N prints torch.profiler's table of the N costliest ops for one step of each.
"""
import importlib.util
import os
import platform
import shlex
import statistics
import sys
import time
from contextlib import nullcontext
from types import SimpleNamespace

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_lm as lm  # noqa: E402
import mimetic_vit as mv  # noqa: E402
from keys import split_keys  # noqa: E402

KEYS = {"nanogpt": "/tmp/nanogpt_model.py",  # path of nanoGPT's model.py
        "mode": "fp32",                       # one of MODES: bf16 is autocast, compile is torch.compile
        "depth": 12,                          # blocks of every model
        "vit_batch": 32,                      # images a ViT step
        "lm_batch": 4,                        # sequences an LM step
        "lm_tokens": 256,                     # tokens a sequence
        "warmup": 2,                          # untimed steps of each model first
        "rounds": 5,                          # timed rounds, the models' order rotating by one each round
        "steps": 2,                           # steps of each model a round
        "threads": 2,                         # torch.set_num_threads
        "profile": 0}                         # N > 0: torch.profiler's N costliest ops for one step of each
MODES = ("fp32", "bf16", "compile", "bf16-compile")


def load_nanogpt(path):
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hardware():
    name = platform.processor() or platform.machine()
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            text = f.read()
        name = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("model name")), name)
        flags = set(text.split())
    simd = " ".join(sorted(f for f in flags if f.startswith(("avx", "amx"))))
    return (f"{name} x{os.cpu_count()} | torch.set_num_threads({torch.get_num_threads()}) | torch {torch.__version__}"
            f" | cpu capability {torch.backends.cpu.get_cpu_capability()} | flags: {simd}")


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def models(args, nanogpt):
    """[(name, unit, items per step, model, make input)], ours then the reference, for each pair."""
    try:
        import timm
        from timm.models.vision_transformer import VisionTransformer
    except ImportError:
        raise SystemExit("error: timm is not installed: pip install timm") from None
    d = args.depth
    ours_vit = mv.build_model(mv.parse_config([f"--depth={d}"]), 10)  # ViT-Tiny, as main() builds it
    # timm's defaults: qkv_bias=True, mlp_ratio=4, pre-norm, dropouts 0, position embedding over the
    # class token too (no_embed_class=False), fused attention (F.scaled_dot_product_attention)
    timm_vit = VisionTransformer(img_size=32, patch_size=2, embed_dim=192, depth=d, num_heads=3, num_classes=10,
                                 class_token=True, global_pool="token")
    # width 384, 8 heads, as main() builds it
    ours_lm = lm.build_model(lm.parse_config([f"--depth={d}", f"--seq_len={args.lm_tokens}"]), 50)  # position tables
    gpt = nanogpt.GPT(nanogpt.GPTConfig(n_layer=d, n_head=8, n_embd=384, block_size=args.lm_tokens, vocab_size=50,
                                        dropout=0.1, bias=True))
    print(f"timm {timm.__version__}, fused attention: {timm.layers.use_fused_attn()}")
    B, (Bl, T) = args.vit_batch, (args.lm_batch, args.lm_tokens)
    img = lambda: (torch.randn(B, 3, 32, 32), torch.randint(10, (B,)))
    tok = lambda: (torch.randint(50, (Bl, T)), torch.randint(50, (Bl, T)))
    return [("ours ViT", "img/s", B, ours_vit, img), ("timm ViT", "img/s", B, timm_vit, img),
            ("ours LM", "tok/s", Bl * T, ours_lm, tok), ("nanoGPT GPT", "tok/s", Bl * T, gpt, tok)]


def make_step(name, model, make_input, amp, compiled):
    net = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)  # the same for every model
    x, y = make_input()
    model.train()

    def step():
        with amp:
            # nanoGPT's forward returns (logits, loss), and logits at every position only when given targets;
            # we take its logits and compute the loss as for the others (its own loss adds one small
            # cross-entropy over B*T x 50 logits, forward only)
            out = net(x, y)[0] if name == "nanoGPT GPT" else net(x)
        loss = F.cross_entropy(out.float().flatten(0, -2), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def parse(argv):
    """This script's KEYS, given or default (it takes none of the programs' keys)."""
    ours, rest = split_keys(argv, KEYS, __doc__, mv.parse_args)  # rest: the program's keys
    if rest:
        raise SystemExit(f"error: unknown key {rest[0]!r}; known keys: {', '.join(KEYS)} (use --key=value)")
    if ours["mode"] not in MODES:
        raise SystemExit(f"error: --mode={ours['mode']}: use one of {', '.join(MODES)}")
    return SimpleNamespace(**ours)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if not os.path.exists(args.nanogpt):
        raise SystemExit(f"error: --nanogpt={args.nanogpt} not found: pass the path of nanoGPT's model.py "
                         f"(github.com/karpathy/nanoGPT)")
    torch.set_num_threads(args.threads)
    print("command: " + shlex.join(["python", "extras/speed_vs_timm_nanogpt.py", *argv]))
    print("hardware: " + hardware())
    print(f"load average (1, 5, 15 min) at start: {load()}")
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if args.mode.startswith("bf16") else nullcontext()
    compiled = args.mode.endswith("compile")
    entries = models(args, load_nanogpt(args.nanogpt))
    steps = {}
    for name, unit, n, model, make_input in entries:
        print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.3f}M parameters")
        steps[name] = make_step(name, model, make_input, amp, compiled)
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            steps[name]()
        print(f"  warmup: {args.warmup} steps in {time.perf_counter() - t0:.1f} s")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        for name, *_ in entries:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                steps[name]()
            print(f"--- profile, one step of {name}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.profile))
    times = {name: [] for name, *_ in entries}
    names = [e[0] for e in entries]
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        line = []
        for name in order:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                steps[name]()
            times[name].append((time.perf_counter() - t0) / args.steps)
            line.append(f"{name} {times[name][-1]:.3f}")
        print(f"round {r + 1}/{args.rounds} (s/step, in run order): " + " | ".join(line) + f" | load {load()}")
    print(f"\nmode {args.mode}, depth {args.depth}, ViT batch {args.vit_batch} (32x32, patch 2, 257 tokens), "
          f"LM batch {args.lm_batch} x {args.lm_tokens} tokens; median over {args.rounds} rounds of "
          f"{args.steps} steps")
    med = {}
    for name, unit, n, *_ in entries:
        med[name] = statistics.median(times[name])
        lo, hi = min(times[name]), max(times[name])
        print(f"{name:12s} {n / med[name]:9.1f} {unit} (median {med[name]:.3f} s/step, range {lo:.3f}-{hi:.3f})")
    for ours, ref in (("ours ViT", "timm ViT"), ("ours LM", "nanoGPT GPT")):
        ratios = [b / a for a, b in zip(times[ours], times[ref])]  # per round: ref time / our time
        print(f"{ours} / {ref}: x{med[ref] / med[ours]:.3f} (throughput ratio of medians; per round "
              f"{min(ratios):.3f}-{max(ratios):.3f})")
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
