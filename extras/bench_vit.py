"""
Throughput of mimetic_vit.py's training step, to estimate how long the paper's runs take on your machine
(no table or figure of the paper; README.md, "Speed", quotes it with its log).

Measures, after 5 warm-up steps (torch.compile and allocation happen there), 20 timed training steps on synthetic
input: forward, the fp32 cross-entropy, backward, gradient clipping and the AdamW step, as mimetic_vit.train()
does them (same optimizer, precision and compile choice): the model step. Then the augmentation alone on random
uint8 32x32 images: mimetic_vit.draw_augmentation's draws on one CPU core, and TrainLoader's batches (the draws
copied to the device, one copy a batch, and applied there by augment()); the torch calls augment() takes per batch
(counted on the meta device, which holds no data: on CUDA each is a kernel launch or a view) and the loader's
host-to-device copies per batch; how far the batches are from the same draws applied on the CPU; then the whole
step, loader and model, as train() runs it; then what train() does between two epochs (a test pass over 10,000
images, eager and, if compiled, compiled; a checkpoint write), beside an epoch at the whole step's rate; then
attention alone at the model's shape under each scaled_dot_product_attention backend (torch's own choice first,
named by the kernel it runs); last, if compiled on CUDA, the model step and the whole step as CUDA graphs
(--compile=graphs, untried in a whole run).
The last line is

    benchmark: N img/s | X TFLOP/s (model matmuls) | <hardware> | <precision> | compile <bool> | width .. batch ..

Run from the repository root, with mimetic_vit.py's --key=value config keys (python mimetic_vit.py --help):
    python extras/bench_vit.py --batch_size=32                                   # ViT-Tiny, Sec. 5.1
    python extras/bench_vit.py --width=96 --depth=4 --heads=3 --patch_size=4 --batch_size=128   # laptop recipe
    python extras/bench_vit.py --batch_size=512 --precision=bf16 --compile=true  # a GPU, the paper's batch
"""

import os
import sys
import tempfile
import time
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode  # private module, named in "Extending PyTorch" (tested)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import mimetic_vit as mv  # noqa: E402


TRAIN_IMAGES, TEST_IMAGES = 50_000, 10_000  # CIFAR-10's and CIFAR-100's: a loader's epoch, a test pass


class DeviceCalls(torch.overrides.TorchFunctionMode):
    """Counts the torch calls that touch a tensor on the meta device (a stand-in: on CUDA each is a launch, or a view),
    and those that bring host data to it (a CPU tensor among their arguments, or torch.tensor(..., device=))."""

    def __init__(self):
        super().__init__()
        self.calls = self.copies = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        tensors = [t for t in (*args, *kwargs.values(), out) if isinstance(t, torch.Tensor)]
        if any(t.is_meta for t in tensors):
            self.calls += 1
            self.copies += func is torch.tensor or any(not t.is_meta for t in tensors)
        return out


def augmentation_calls(cfg, seed=0, device=None):
    """(calls, copies): DeviceCalls (or `device`, a DeviceCalls that records more) of mimetic_vit.augment on one batch,
    its draws (from the batch seed `seed`) and images already on the meta device."""
    tables = mv.augmentation_tables(cfg, 32, mv.MEAN_STD[cfg.dataset], torch.device("meta"))
    draws = mv.draw_augmentation(cfg, cfg.batch_size, 32, seed).to("meta")
    images = torch.empty(cfg.batch_size, 3, 32, 32, dtype=torch.uint8, device="meta")
    with device or DeviceCalls() as device:
        mv.augment(images, draws, tables, cfg)
    return device.calls, device.copies


def loader_copies(cfg, batches=4):
    """Host-to-device copies a batch of TrainLoader on the meta device, over an epoch of `batches` batches: its copies
    less the one an epoch (the epoch's order), over the batches (the draws, once a batch)."""
    images = torch.zeros(batches * cfg.batch_size, 3, 32, 32, dtype=torch.uint8)
    loader = mv.TrainLoader(images, torch.zeros(len(images), dtype=torch.long), cfg, mv.MEAN_STD[cfg.dataset],
                            torch.device("meta"), torch.Generator().manual_seed(0))
    with DeviceCalls() as device:
        assert len(list(loader)) == batches
    return (device.copies - 1) / batches


def train_flops_per_image(c):
    """Matmul FLOPs of forward + backward for one image, ignoring norms, softmax and GELU. A matmul's backward
    costs twice its forward (gradients of weight and input); the patch embedding's input needs no gradient."""
    n, d = c.num_tokens, c.width
    per_layer = 2 * n * (4 * d * d + 2 * c.mlp_ratio * d * d) + 2 * 2 * n * n * d  # qkv, proj, MLP; q k^T, att v
    patches = 2 * (n - 1) * c.in_channels * c.patch_size ** 2 * d
    return 3 * (c.depth * per_layer + 2 * d * c.num_classes) + 2 * patches


def endless(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def seconds_per_call(fn, sync, steps=20, warmup=5):
    """Seconds per call of fn() after warmup calls (compilation and allocation happen there)."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    sync()
    return (time.perf_counter() - t0) / steps


class AtenOps(TorchDispatchMode):
    """The names of the aten ops that torch runs, below autograd (e.g. _scaled_dot_product_cudnn_attention)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def attention_kernel(q, k, v):
    """Which kernel torch's own choice of scaled_dot_product_attention runs for q, k, v, as its aten op names it:
    cudnn_attention, flash_attention, efficient_attention (CUDA), flash_attention_for_cpu; math, which has no op of
    its own (it runs as matmuls and a softmax)."""
    with AtenOps() as ops:
        F.scaled_dot_product_attention(q, k, v)
    kernels = [n.removeprefix("_scaled_dot_product_") for n in ops.names if n.startswith("_scaled_dot_product_")]
    return kernels[0] if kernels else "math"


def attention_ms(shape, dtype, dev, sync):
    """ms per forward and backward of scaled_dot_product_attention at (B, heads, tokens, head dim), torch's own
    choice first (named by the kernel it runs), then each backend forced; a backend that refuses the shape or
    device is left out."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(shape, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
    ms = {}
    for backend in (None, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.MATH):
        try:
            with sdpa_kernel(backend) if backend else torch.enable_grad():  # None: torch's own choice
                name = backend.name.lower() if backend else f"default ({attention_kernel(q, k, v)})"
                ms[name] = 1000 * seconds_per_call(lambda: F.scaled_dot_product_attention(q, k, v).sum().backward(),
                                                   sync, steps=10, warmup=2)
        except RuntimeError:  # "No available kernel" for this shape, dtype or device
            pass
    return ms


def main(argv=None):
    cfg = mv.parse_config(sys.argv[1:] if argv is None else argv)
    dev, amp, prec = mv.device_and_precision(cfg)
    print("config: " + " ".join(f"{k}={v}" for k, v in vars(cfg).items()))
    model = mv.build_model(cfg, mv.DATASETS[cfg.dataset][3]).to(dev)  # as mimetic_vit.main() builds it
    c = model.config
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {c.num_tokens} tokens")
    net = mv.compile_model(model, cfg, dev)  # as mimetic_vit.train() compiles it (on CUDA: auto)
    compiled = net is not model
    opt = mv.make_optimizer(model, cfg.lr, cfg.weight_decay, dev, cfg.decay_all, cfg.adam_eps)
    x = torch.randn(cfg.batch_size, 3, c.image_size, c.image_size, device=dev)
    y = torch.randint(c.num_classes, (cfg.batch_size,), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step(model_net=None):  # None: net, as train() compiles it
        with amp:
            logits = (net if model_net is None else model_net)(x)
        F.cross_entropy(logits.float(), y).backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    ips = cfg.batch_size / seconds_per_call(step, sync)
    print(f"model step: {ips:.0f} img/s")

    images = torch.randint(256, (TRAIN_IMAGES, 3, 32, 32), dtype=torch.uint8)
    labels = torch.randint(c.num_classes, (len(images),))
    loader = mv.TrainLoader(images, labels, cfg, mv.MEAN_STD[cfg.dataset], dev, torch.Generator().manual_seed(0))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    draw_ips = cfg.batch_size / seconds_per_call(lambda: mv.draw_augmentation(cfg, cfg.batch_size, 32, 0),
                                                 lambda: None, steps=10, warmup=2)
    host = mv.hardware(torch.device("cpu")).split(", torch")[0]  # the CPU that makes the draws, on one thread
    torch.set_num_threads(threads)
    batches = endless(loader)
    loader_ips = cfg.batch_size / seconds_per_call(lambda: next(batches), sync)
    print(f"augmentation alone: draws {draw_ips:.0f} img/s on one core ({host}); the loader (on {dev.type}) "
          f"{loader_ips:.0f} img/s")

    calls, copies = augmentation_calls(cfg)
    print(f"augmentation's device work per batch, counted on the meta device: {calls} torch calls, {copies} of them "
          f"with host data; the loader's host-to-device copies per batch: {loader_copies(cfg):g}")

    n = 8 * cfg.batch_size  # one epoch of 8 batches, its draws applied on the device and on the CPU
    same = [mv.TrainLoader(images[:n], labels[:n], cfg, mv.MEAN_STD[cfg.dataset], d, torch.Generator().manual_seed(1))
            for d in (dev, torch.device("cpu"))]
    _, std = mv.norm_stats(mv.MEAN_STD[cfg.dataset], torch.device("cpu"))
    levels = torch.cat([(a.cpu() - b).abs() * std * 255 for (a, _), (b, _) in zip(*same)])  # in 255ths, as uint8
    print(f"augmentation on {dev.type} against the CPU: {(levels.flatten(1).amax(1) > 0).sum()} of {len(levels)} images "
          f"differ; {100 * (levels > 0).float().mean():.2g}% of the values, {100 * (levels > 1.5).float().mean():.2g}% "
          f"by more than one level of 255, at most {levels.max():.0f}")

    def whole(model_net=None):  # as train() runs a step: the loader's next batch, resized, then the model step
        nonlocal x, y
        x, y = next(batches)
        x = mv.resize(x, c.image_size)
        step(model_net)

    whole_ips = cfg.batch_size / seconds_per_call(whole, sync)
    print(f"whole step: {whole_ips:.0f} img/s, {100 * whole_ips / ips:.0f}% of the model step")

    # between two epochs train() runs a test pass and writes a checkpoint
    test_x = torch.randint(256, (TEST_IMAGES, 3, 32, 32), dtype=torch.uint8, device=dev)
    test_y = torch.randint(c.num_classes, (len(test_x),), device=dev)
    stats = mv.norm_stats(mv.MEAN_STD[cfg.dataset], dev)

    def test_pass_s(m):
        return seconds_per_call(lambda: mv.evaluate(m, test_x, test_y, *stats, cfg.eval_batch_size, amp), sync, 2, 1)

    test_s = test_pass_s(model)
    compiled_test = f" ({test_pass_s(torch.compile(model, dynamic=False)):.2f} s compiled)" if compiled else ""
    with tempfile.TemporaryDirectory() as tmp:
        ckpt_cfg = SimpleNamespace(**{**vars(cfg), "out_dir": tmp})
        save_s = seconds_per_call(lambda: mv.save_checkpoint(ckpt_cfg, model, opt, torch.Generator().get_state(),
                                                             {"history": []}, dev), sync, 2, 1)
    epoch_s = TRAIN_IMAGES // cfg.batch_size * cfg.batch_size / whole_ips
    print(f"between epochs: test pass {test_s:.2f} s{compiled_test}, checkpoint {save_s:.2f} s, "
          f"{100 * (test_s + save_s) / (epoch_s + test_s + save_s):.1f}% of an epoch of {epoch_s:.1f} s at the whole "
          f"step's rate")
    shape = (cfg.batch_size, c.heads, c.num_tokens, c.width // c.heads)
    ms = attention_ms(shape, torch.bfloat16 if prec.startswith("bf16") else torch.float32, dev, sync)
    print(f"attention {shape}, forward and backward: " + ", ".join(f"{k} {v:.2f} ms" for k, v in ms.items()))
    if compiled and dev.type == "cuda":  # --compile=graphs: the model step as CUDA graphs, untried in a whole run
        graphs = torch.compile(model, mode="reduce-overhead")
        graphs_ips = cfg.batch_size / seconds_per_call(lambda: step(graphs), sync)
        whole_graphs_ips = cfg.batch_size / seconds_per_call(lambda: whole(graphs), sync)
        print(f"as CUDA graphs (--compile=graphs): model step {graphs_ips:.0f} img/s, whole step {whole_graphs_ips:.0f} "
              f"img/s ({100 * whole_graphs_ips / graphs_ips:.0f}%)")
    print(f"benchmark: {ips:.0f} img/s | {ips * train_flops_per_image(c) / 1e12:.2f} TFLOP/s (model matmuls) | "
          f"{mv.hardware(dev)} | {prec} | compile {compiled} | width {c.width} depth {c.depth} heads {c.heads} "
          f"patch {c.patch_size} image {c.image_size} batch {cfg.batch_size}")
    return ips


if __name__ == "__main__":
    main()
