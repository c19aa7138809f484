"""torch.profiler, two training steps (after two warm-up steps) of our LM and nanoGPT's GPT at depth 2, 4 x 256
tokens, 1 thread; the same step closure as extras/speed_vs_timm_nanogpt.py. Its log is
results/cpu-speed-vs-timm-nanogpt/profile-lm-depth2-threads1.txt (made when this script sat in that folder).

    python results/scripts/profile_lm.py <path to nanoGPT's model.py>
"""
import os, sys, torch, torch.nn.functional as F, importlib.util
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import mimetic_lm as L
from torch.profiler import profile, ProfilerActivity
if len(sys.argv) != 2:
    sys.exit("usage: python results/scripts/profile_lm.py <path to nanoGPT's model.py>")
spec = importlib.util.spec_from_file_location("ng", sys.argv[1]); ng = importlib.util.module_from_spec(spec); spec.loader.exec_module(ng)
torch.set_num_threads(1); torch.manual_seed(0)
d = 2
ours = L.TransformerLM(L.LMConfig(vocab_size=50, block_size=256, width=384, depth=d, heads=8, dropout=0.1, emb_dropout=0.1))
gpt = ng.GPT(ng.GPTConfig(n_layer=d, n_head=8, n_embd=384, block_size=256, vocab_size=50, dropout=0.1, bias=True))
x, y = torch.randint(50, (4, 256)), torch.randint(50, (4, 256))
for name, m in (("ours", ours), ("nanoGPT", gpt)):
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    def step():
        out = m(x, y)[0] if name == "nanoGPT" else m(x)
        F.cross_entropy(out.float().flatten(0, -2), y.flatten()).backward(); opt.step(); opt.zero_grad(set_to_none=True)
    step(); step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(); step()
    print("---", name, "(two steps)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
