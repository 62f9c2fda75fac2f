#!/usr/bin/env python3
"""PyTorch's fused attention and its gradient, the peer of
tandem-attention-bench (bench/attention.sh).

torch.nn.functional.scaled_dot_product_attention on q, k, v of [B, H, T, D]
(contiguous, PyTorch's own layout, its best case), causal unless
--causal 0, f32 on the CPU with --threads intra-op threads. Each repeat
times the forward (out = sdpa(q, k, v)) and then the gradient
(out.backward(dout), which fills q.grad, k.grad, v.grad) separately; one
untimed repeat warms up. Prints one line of JSON with the same keys as
tandem-attention-bench, plus which PyTorch ran.

Exits 77 on a PyTorch without scaled_dot_product_attention (before 2.0).

Usage: torch_attention.py [--threads N] [--shape B,H,T,D] [--causal 0|1] [--repeats N]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--shape", default="32,6,128,32")
    p.add_argument("--causal", type=int, default=1)
    p.add_argument("--repeats", type=int, default=40)
    a = p.parse_args()
    if not hasattr(F, "scaled_dot_product_attention"):
        print(f"torch_attention.py: PyTorch {torch.__version__} has no scaled_dot_product_attention (2.0 and later)",
              file=sys.stderr)
        sys.exit(77)
    torch.set_num_threads(a.threads)
    B, H, T, D = (int(x) for x in a.shape.split(","))
    g = torch.Generator().manual_seed(1)
    q, k, v, dout = (torch.rand(B, H, T, D, generator=g) - 0.5 for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    forward_ms, grad_ms = [], []
    for r in range(a.repeats + 1):  # repeat 0 warms up
        for t in (q, k, v):
            t.grad = None
        t0 = time.perf_counter()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(a.causal))
        t1 = time.perf_counter()
        out.backward(dout)
        t2 = time.perf_counter()
        if r:
            forward_ms.append((t1 - t0) * 1e3)
            grad_ms.append((t2 - t1) * 1e3)
    print(json.dumps({
        "shape": [B, H, T, D], "layout": "bhtd", "causal": a.causal, "threads": a.threads,
        "forward_ms": {"fastest": min(forward_ms), "median": statistics.median(forward_ms)},
        "grad_ms": {"fastest": min(grad_ms), "median": statistics.median(grad_ms)},
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
