import importlib.util, time, torch, sys
torch.set_num_threads(1)
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
B, A = load("vb", "/tmp/before/mimetic_vit.py"), load("va", "/tmp/after/mimetic_vit.py")
models = {}
for name, m in (("before", B), ("after", A)):
    torch.manual_seed(0)
    models[name] = m.ViT(m.ViTConfig(image_size=32, patch_size=4, width=96, depth=4, heads=3))
x, y = torch.randn(128, 3, 32, 32), torch.randint(10, (128,))
t = {"before": [], "after": []}
for rep in range(12):
    for name in (("before", "after") if rep % 2 else ("after", "before")):
        model = models[name]
        s = time.perf_counter()
        for _ in range(5):
            loss = torch.nn.functional.cross_entropy(model(x), y); loss.backward(); model.zero_grad(set_to_none=True)
        t[name].append((time.perf_counter() - s) / 5)
for k, v in t.items():
    v = sorted(v)[2:-2]; print(k, f"{1000 * sum(v) / len(v):.1f} ms/step")
