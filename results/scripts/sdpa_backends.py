"""Each scaled_dot_product_attention backend at ViT-Tiny/p2's training shape (batch 512, 3 heads, 257 tokens, head
dimension 64, bf16), forward and backward, in ms a call; a backend that refuses the shape says why. One GPU:
    python results/scripts/sdpa_backends.py > results/<folder>/sdpa-backends.txt"""
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, N, K = (int(v) for v in sys.argv[1:5]) if len(sys.argv) == 5 else (512, 3, 257, 64)
dev = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if dev == "cuda" else torch.float32
q, k, v = (torch.randn(B, H, N, K, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
grad = torch.randn(B, H, N, K, device=dev, dtype=dtype)
print(f"{torch.cuda.get_device_name() if dev == 'cuda' else 'CPU'}, torch {torch.__version__}, {dtype}, "
      f"shape (B, h, N, k) = {(B, H, N, K)}")
for backend in (None, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH):
    try:
        with sdpa_kernel(backend) if backend else torch.enable_grad():  # None: torch's own choice
            for _ in range(3):  # warm-up
                F.scaled_dot_product_attention(q, k, v).backward(grad)
            if dev == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(20):
                F.scaled_dot_product_attention(q, k, v).backward(grad)
            if dev == "cuda":
                torch.cuda.synchronize()
        print(f"{backend.name if backend else 'default':20s} forward+backward {1000 * (time.perf_counter() - t) / 20:7.2f} ms")
    except RuntimeError as e:
        print(f"{backend.name if backend else 'default':20s} refused: {str(e).splitlines()[0][:150]}")
with torch.no_grad():  # the default choice, forward only (what the test pass runs)
    print("default: forward", end=" ")
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v)
    if dev == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        F.scaled_dot_product_attention(q, k, v)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"{1000 * (time.perf_counter() - t) / 20:.2f} ms")
