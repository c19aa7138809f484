"""Text sampled from a finished run of mimetic_lm.py: <out_dir>/best.pt holds the weights, the settings and the
vocabulary, so no training flag needs repeating.

    python extras/sample.py --out_dir=out/lm-ptb_char-mimetic-seed0 --n=300 --prompt="the " --temperature=1.0

Characters: the prompt is read as characters ("\\n" = end of line). Words: split on spaces, every word in the
vocabulary. Without a prompt, the text starts after an end of line. The draws are seeded (--seed).
"""
import os
import sys
from types import SimpleNamespace

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "extras"))
import mimetic_lm as lm  # noqa: E402
from keys import split_keys  # noqa: E402

KEYS = {"out_dir": "",       # the run's folder, holding best.pt (required)
        "n": 300,            # tokens to sample
        "prompt": "",        # text that the sample continues
        "temperature": 1.0,  # softmax temperature (> 0)
        "seed": 0,           # seed of the draws
        "device": ""}        # as mimetic_lm.py's: "" = cuda if available, else mps if available, else cpu


@torch.no_grad()
def generate(model, idx, n, temperature=1.0, generator=None):
    """Append n sampled tokens to idx (B, T), each drawn given the last block_size tokens."""
    for _ in range(n):
        logits = model(idx[:, -model.config.block_size:])[:, -1].float() / temperature
        nxt = torch.multinomial(torch.softmax(logits, -1).cpu(), 1, generator=generator).to(idx.device)
        idx = torch.cat([idx, nxt], dim=1)  # (B, T + 1)
    return idx


def parse(argv):
    """This script's KEYS, given or default: it takes none of the program's keys (the run's checkpoint holds them)."""
    ours, rest = split_keys(argv, KEYS, __doc__, lm.parse_args)  # rest: the program's keys
    if rest:
        raise SystemExit(f"error: unknown key {rest[0]!r}; known keys: {', '.join(KEYS)} (use --key=value)")
    if not ours["out_dir"]:
        raise SystemExit("error: pass --out_dir=<the folder of a finished mimetic_lm.py run>")
    if not ours["temperature"] > 0:  # 0 divides by 0; below 0 samples the least likely tokens
        raise SystemExit(f"error: --temperature={ours['temperature']}: use a value above 0 (1: the model's own)")
    return SimpleNamespace(**ours)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    path = os.path.join(args.out_dir, "best.pt")
    if not os.path.exists(path):
        raise SystemExit(f"error: no {path}: --out_dir must name a run that finished at least one epoch")
    best = lm.load_checkpoint(path)
    cfg, vocab = SimpleNamespace(**{"small_emb": False, **best["config"]}), best["vocab"]  # older runs: no small_emb
    level = lm.DATASETS[cfg.dataset][2]
    dev = lm.device_and_precision(SimpleNamespace(device=args.device, precision="fp32"))[0]  # a missing one: error
    model = lm.build_model(cfg, len(vocab))  # the shape of the run; its weights come next
    model.load_state_dict(best["model"])
    index = {w: i for i, w in enumerate(vocab)}
    pieces = list(args.prompt.replace("\n", "<eos>")) if level == "char" else args.prompt.split()
    unknown = [p for p in pieces if p not in index]
    if unknown:
        raise SystemExit(f"error: the prompt holds {unknown[:5]}, not in the {len(vocab)}-token vocabulary")
    start = [index[p] for p in pieces or (list("<eos>") if level == "char" else ["<eos>"])]
    out = generate(model.to(dev).eval(), torch.tensor([start], device=dev), args.n, args.temperature,
                   torch.Generator().manual_seed(args.seed))[0].tolist()
    if level == "char":
        text = "".join(vocab[i] for i in out).replace("<eos>", "\n")
    else:  # words joined by spaces, "<eos>" as a line break
        text = " ".join(vocab[i] for i in out).replace(" <eos> ", "\n").replace("<eos> ", "\n").replace(" <eos>", "\n")
    print(text)
    return text


if __name__ == "__main__":
    main()
