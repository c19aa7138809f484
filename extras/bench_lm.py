"""Training speed of mimetic_lm.py's model: forward, backward, gradient clipping and the AdamW step on synthetic
tokens, as mimetic_lm.train() does them (same optimizer, precision and compile choice); one line of
results (tok/s, model-matmul TFLOP/s, hardware, precision, shape). Takes mimetic_lm.py's --key=value keys
(shape, dataset for the vocabulary size, batch_size, seq_len, precision, compile, device); reads no data.

    python extras/bench_lm.py --dataset=ptb_char --batch_size=2             # Sec. 7's PTB shape
    python extras/bench_lm.py --width=128 --depth=4 --heads=4 --seq_len=128 --compile=false
"""
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mimetic_lm as lm  # noqa: E402
from extras.bench_vit import seconds_per_call  # noqa: E402  (the ViT bench's timing)

# the vocabulary each dataset loads with (test_lm_section.py checks PTB and WikiText-2 against the files)
VOCAB_SIZES = {"ptb_char": 49, "ptb_word": 10_000, "wikitext2": 33_278, "wikitext103": 267_735}


def train_flops_per_token(c):
    """Matmul FLOPs of forward + backward for one token (3x forward), ignoring norms and softmax; the causal
    attention scores are counted in full, as SDPA computes them."""
    n, d = c.block_size, c.width
    per_layer = 2 * (4 * d * d + 2 * c.mlp_ratio * d * d) + 2 * 2 * n * d
    return 3 * (c.depth * per_layer + 2 * d * c.vocab_size)


def main(argv=None):
    cfg = lm.parse_config(sys.argv[1:] if argv is None else argv)
    dev, amp, prec = lm.device_and_precision(cfg)
    model = lm.build_model(cfg, VOCAB_SIZES[cfg.dataset]).to(dev)  # as mimetic_lm.main() builds it
    c, compiled = model.config, cfg.compile == "true" or (cfg.compile == "auto" and dev.type == "cuda")
    opt = lm.make_optimizer(model, cfg.lr, cfg.weight_decay, dev)
    net = torch.compile(model) if compiled else model
    x = torch.randint(c.vocab_size, (cfg.batch_size, cfg.seq_len), device=dev)
    y = torch.randint(c.vocab_size, (cfg.batch_size, cfg.seq_len), device=dev)

    def step():
        with amp:
            logits = net(x)
        F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    tps = cfg.batch_size * cfg.seq_len / seconds_per_call(step, sync)
    print(f"benchmark: {tps:.0f} tok/s | {tps * train_flops_per_token(c) / 1e12:.2f} TFLOP/s (model matmuls) | "
          f"{lm.hardware(dev)} | {prec} | compile {compiled} | width {c.width} depth {c.depth} "
          f"heads {c.heads} vocab {c.vocab_size} seq_len {cfg.seq_len} batch {cfg.batch_size}")
    return tps


if __name__ == "__main__":
    main()
