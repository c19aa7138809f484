"""Attention entropy per layer of trained ViTs: does the mimetic arm that stalls at lr 3e-3 (depth 12, seed 0) attend
differently from the arms that train? For each checkpoint, on the first 256 test images (no augmentation): every
layer's attention entropy in nats, mean over images, heads and queries (uniform over 65 tokens: ln 65 = 4.17), and the
largest attention logit |q.k| / sqrt(k). Run from the repository root:

    python results/scripts/attention_entropy.py <run folder with ckpt.pt> ...
"""
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "extras"))
import figures  # noqa: E402
import mimetic_vit as mv  # noqa: E402


@torch.no_grad()
def entropy_and_logits(model, x):
    """Per layer: (mean entropy of the attention rows, largest |logit|)."""
    out = []
    for scores in figures.attention_scores(model, x, causal=False):
        p = torch.softmax(scores, dim=-1)
        entropy = -(p * torch.log(p.clamp(min=1e-30))).sum(-1).mean().item()
        out.append((entropy, scores.abs().max().item()))
    return out


def main(folders):
    torch.set_num_threads(1)
    _, _, test_x, _ = mv.load_dataset("cifar10", "data")
    mean, std = mv.norm_stats(mv.MEAN_STD["cifar10"], torch.device("cpu"))
    for folder in folders:
        ckpt = mv.load_checkpoint(os.path.join(folder, "ckpt.pt"))
        cfg = SimpleNamespace(**{**vars(mv.parse_config([])), **ckpt["config"]})  # as extras/figures.py reads a run
        model = mv.build_model(cfg, 10)
        model.load_state_dict(ckpt["model"])
        model.eval()
        x = mv.to_input(test_x[:256], mean, std, model.config.image_size)
        layers = entropy_and_logits(model, x)
        last = ckpt["history"][-1]
        print(f"{os.path.basename(folder.rstrip('/'))}: test acc {last['test_acc']:.2f}, train loss "
              f"{last['train_loss']:.3f}")
        print("  entropy per layer: " + " ".join(f"{e:.2f}" for e, _ in layers))
        print("  max |logit| per layer: " + " ".join(f"{m:.1f}" for _, m in layers))
        print(f"  mean entropy {sum(e for e, _ in layers) / len(layers):.2f}, lowest {min(e for e, _ in layers):.2f}; "
              f"largest logit {max(m for _, m in layers):.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
