"""A tiny seeded training run of each program in a given checkout: history and final weights, for a bit-for-bit
comparison of two versions of the code.
    OMP_NUM_THREADS=1 python tinyrun.py <checkout> <out.pt>;  python tinyrun.py --compare a.pt b.pt"""
import os, pickle, random, sys, tempfile, torch

def write_data(root):
    g = torch.Generator().manual_seed(0)
    base = os.path.join(root, "cifar-10-batches-py"); os.makedirs(base)
    for f, n in [(f"data_batch_{i}", 64) for i in range(1, 6)] + [("test_batch", 100)]:
        labels = torch.randint(10, (n,), generator=g)
        x = (torch.rand(n, 3, 32, 32, generator=g) * 100 + labels.view(-1, 1, 1, 1) * 15).to(torch.uint8)
        with open(os.path.join(base, f), "wb") as fh:
            pickle.dump({"data": x.reshape(n, -1).numpy(), "labels": labels.tolist()}, fh)
    rng = random.Random(0); os.makedirs(os.path.join(root, "ptb"))
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        with open(os.path.join(root, "ptb", f"ptb.{split}.txt"), "w") as fh:
            for _ in range(n):
                first = rng.randrange(30)
                fh.write(" " + " ".join(f"w{(first + j) % 30}" if rng.random() < 0.7 else f"w{rng.randrange(30)}" for j in range(rng.randint(4, 10))) + " \n")

def run(root):
    sys.path.insert(0, root); torch.set_num_threads(1)
    import mimetic_vit as V, mimetic_lm as L
    d = tempfile.mkdtemp(); write_data(d); out = {}
    for init in ("mimetic", "default"):
        r = V.main(["--width=32", "--depth=2", "--heads=2", "--patch_size=8", "--batch_size=32", "--ra_n=2", "--epochs=2", "--log_interval=4", f"--init={init}", f"--data_dir={d}", f"--out_dir={d}/vit-{init}"])
        out["vit", init] = ([{k: v for k, v in h.items() if k != "elapsed_s"} for h in r["history"]], torch.load(f"{d}/vit-{init}/ckpt.pt", weights_only=False)["model"])
        r = L.main(["--dataset=ptb_word", "--width=16", "--depth=2", "--heads=2", "--seq_len=16", "--eval_stride=8", "--batch_size=8", "--epochs=2", "--lr=3e-3", "--compile=false", "--device=cpu", f"--init={init}", f"--data_dir={d}", f"--out_dir={d}/lm-{init}"])
        out["lm", init] = ([{k: v for k, v in h.items() if k != "elapsed_s"} for h in r["history"]] + [r["test_loss"]], torch.load(f"{d}/lm-{init}/ckpt.pt", weights_only=False)["model"])
    return out

if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        a, b = torch.load(sys.argv[2], weights_only=False), torch.load(sys.argv[3], weights_only=False)
        for k in a:
            same_h = a[k][0] == b[k][0]
            same_w = a[k][1].keys() == b[k][1].keys() and all(torch.equal(a[k][1][n], b[k][1][n]) for n in a[k][1])
            print(k, "history bit-identical" if same_h else "history DIFFERS", "| weights bit-identical" if same_w else "| weights DIFFER")
    else:
        torch.save(run(sys.argv[1]), sys.argv[2])
