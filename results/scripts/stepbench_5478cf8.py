import importlib.util, time, torch, sys
from contextlib import nullcontext
torch.set_num_threads(1)
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
mods = {"before": load("vb", "/tmp/before/mimetic_vit.py"), "after": load("va", "/tmp/after/mimetic_vit.py")}
data = mods["after"].load_dataset("cifar10", "/work/main/data")
st = {}
for name, m in mods.items():
    cfg = m.parse_config("--width=96 --depth=4 --heads=3 --patch_size=4 --batch_size=128 --out_dir=/tmp/x".split())
    model = m.build_model(cfg, m.model_config(cfg))
    opt = m.make_optimizer(model, cfg.lr, cfg.weight_decay, torch.device("cpu"))
    mean, std = m.norm_stats(m.MEAN_STD["cifar10"], torch.device("cpu"))
    st[name] = (m, cfg, model, opt, mean, std, torch.Generator().manual_seed(0))
t = {"before": [], "after": []}
for rep in range(16):
    for name in (("before", "after") if rep % 2 else ("after", "before")):
        m, cfg, model, opt, mean, std, gen = st[name]
        s = time.perf_counter()
        for i in range(4):
            idx = torch.randint(50000, (128,), generator=gen)
            xb = m.resize(m.augment(data[0][idx], gen, cfg, mean, std), 32)
            loss, logits = m.forward_backward(model, xb, data[1][idx], nullcontext())
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(); opt.zero_grad(set_to_none=True)
        t[name].append((time.perf_counter() - s) / 4)
for k, v in t.items():
    v = sorted(v)[3:-3]; print(k, f"{1000 * sum(v) / len(v):.1f} ms/step (trimmed mean of {len(v)})")
