#!/usr/bin/env python3
"""PyTorch doing what `tandem bench MODEL.toml` does, for bench/run.sh.

Reads the same model file (tomllib), builds the same layers (linear with its
activation, conv2d, relu, max_pool2d; flattening before a linear as Tandem
does; a language model's layers from bench/torch_gpt.py), CrossEntropyLoss
(over every token of a language model), SGD with the file's momentum /
nesterov / weight_decay or AdamW with its betas, epsilon and weight decay,
and a constant lr. One batch of N(0,1) features (uniform token ids) and
uniform labels is created once as tensors (pre-loaded); `warmup` untimed steps, then
`repeats` timed runs of `steps` steps (zero_grad(set_to_none) + forward +
backward + step), the loss read once at the end of each repeat (.item(),
inside the timed span, as Tandem reads it). Writes the same JSON keys as
`tandem bench --json`. Peak RSS is resource.getrusage(RUSAGE_SELF).ru_maxrss.

With --profile, `steps` more steps then run under torch.profiler and its
per-op table is printed (the counterpart of `tandem bench --profile`);
--profile-json FILE also writes the matrix products' (mm, addmm, bmm,
baddbmm) GFLOP/s over their own time and their share of the profiled step,
in the keys of `tandem bench --profile --json` (CPU runs), and each 2-D
product shape's time (bench/products.py compares them with Tandem's).

With --device cuda the model, the batch and the steps are on the GPU, f32
without TF32 in matrix products and convolutions (as Tandem's cuda backend
without `cuda.tf32`); the loss read at the end of each repeat waits for the
GPU, so each repeat's time is the GPU's.

With --dtype bf16 the step runs under torch.autocast(bfloat16) (f32 weights
and optimizer state, as Tandem's amp:dtype=bf16), and --compile puts the
model through torch.compile. On a GPU AdamW is the fused kernel.

Usage: torch_peer.py MODEL.toml --threads N [--steps 50 --warmup 10 --repeats 5] [--json FILE] [--label NAME]
                     [--profile [--profile-json FILE]] [--device cpu|cuda] [--dtype f32|bf16] [--compile]
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time
import tomllib

import torch
from torch import nn


def build(model):
    shape = list(model["model"]["input"])  # one sample, as [model] input
    layers = []
    for layer in model["layers"]:
        op = layer["op"]
        if op == "linear":
            if len(shape) != 1:
                layers.append(nn.Flatten())
                shape = [math.prod(shape)]
            out = layer["out_features"]
            layers.append(nn.Linear(shape[0], out, bias=layer.get("bias", True)))
            shape = [out]
            act = layer.get("activation", "none")
            if act == "relu":
                layers.append(nn.ReLU())
            elif act == "tanh":
                layers.append(nn.Tanh())
            elif act == "sigmoid":
                layers.append(nn.Sigmoid())
            elif act != "none":
                sys.exit(f"torch_peer: activation {act} not supported")
        elif op == "conv2d":
            k = layer["kernel"]
            stride = layer.get("stride", 1)
            pad = layer.get("padding", 0)
            out = layer["out_channels"]
            layers.append(nn.Conv2d(shape[0], out, k, stride=stride, padding=pad, bias=layer.get("bias", True)))
            shape = [out, (shape[1] + 2 * pad - k) // stride + 1, (shape[2] + 2 * pad - k) // stride + 1]
        elif op == "relu":
            layers.append(nn.ReLU())
        elif op == "max_pool2d":
            k = layer["kernel"]
            stride = layer.get("stride", k)
            layers.append(nn.MaxPool2d(k, stride=stride))
            shape = [shape[0], (shape[1] - k) // stride + 1, (shape[2] - k) // stride + 1]
        else:
            sys.exit(f"torch_peer: layer op {op} not supported")
    return nn.Sequential(*layers)


def kernel_level():
    """Which of torch's own vectorised kernels run (ATen's CPU capability):
    torch 2 says; 1.13 only honours ATEN_CPU_CAPABILITY, so that, or None
    when it chose by itself and cannot be asked."""
    backends_cpu = getattr(torch.backends, "cpu", None)
    if backends_cpu is not None and hasattr(backends_cpu, "get_cpu_capability"):
        return backends_cpu.get_cpu_capability()
    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    return forced.upper() if forced else None


def blas_loaded():
    """The BLAS torch uses: BLAS_INFO=mkl for the PyPI wheel; Debian's torch
    says "generic" and reaches the libblas.so.3 alternative, whose mapped
    file tells (OpenBLAS here). numpy may map its own OpenBLAS: not torch's."""
    config = torch.__config__.show()
    if "BLAS_INFO=mkl" in config:
        return "MKL"
    try:
        with open("/proc/self/maps") as f:
            paths = {os.path.realpath(line.split()[-1]) for line in f if "libblas" in line}
    except OSError:
        paths = set()
    if any("openblas" in p for p in paths):
        return "OpenBLAS"
    return "generic BLAS"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--label", default="pytorch")
    ap.add_argument("--profile", action="store_true", help="then profile `steps` steps and print the per-op table")
    ap.add_argument("--profile-json", help="with --profile: also write the matrix products' time and GFLOP/s here")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                    help="bf16: the forward and backward under torch.autocast(bfloat16), the weights and "
                         "AdamW state f32 (as Tandem's amp:dtype=bf16)")
    ap.add_argument("--compile", action="store_true", help="the model through torch.compile (compiled in the warm-up)")
    a = ap.parse_args()
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    with open(a.model, "rb") as f:
        spec = tomllib.load(f)
    train = spec["train"]
    if spec.get("loss", {}).get("op", "softmax_cross_entropy") != "softmax_cross_entropy":
        sys.exit("torch_peer: only softmax_cross_entropy models")
    batch = train["batch_size"]
    language = spec["model"].get("task") == "language_model"
    if language:  # tokens in, the next token at every position out
        from torch_gpt import LanguageModel
        net = LanguageModel(spec)
        net.init_like_the_model_files()
        vocab, context = spec["model"]["vocab_size"], spec["model"]["context"]
        x = torch.randint(0, vocab, (batch, context))
        y = torch.randint(0, vocab, (batch, context))
    else:
        net = build(spec)
        x = torch.randn(batch, *spec["model"]["input"])
        y = torch.randint(0, spec["model"]["classes"], (batch,))
    net, x, y = net.to(a.device), x.to(a.device), y.to(a.device)
    params = sum(p.numel() for p in net.parameters())
    forward = torch.compile(net) if a.compile else net
    if train.get("optimizer", "sgd") == "adamw":
        # On a GPU, PyTorch at its best: the fused multi-tensor AdamW kernel.
        fused = {"fused": True} if a.device == "cuda" else {}
        opt = torch.optim.AdamW(net.parameters(), lr=train["lr"], betas=(train.get("beta1", 0.9), train.get("beta2", 0.999)),
                                eps=train.get("epsilon", 1e-8), weight_decay=train.get("weight_decay", 0.01), **fused)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=train["lr"], momentum=train.get("momentum", 0.0),
                              nesterov=train.get("nesterov", False), weight_decay=train.get("weight_decay", 0.0))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            out = forward(x)
            loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1)) if language else loss_fn(out, y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    rates = []
    last = 0.0
    for _ in range(a.repeats):
        start = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        last = loss.item()
        rates.append(a.steps * batch / (time.perf_counter() - start))
        if not math.isfinite(last):
            sys.exit(f"torch_peer: the loss became {last}")
    median = statistics.median(rates)
    result = {
        "framework": a.label,
        "dtype": a.dtype,
        "compiled": a.compile,
        "torch_version": torch.__version__,
        "blas": blas_loaded(),
        "kernels": kernel_level(),
        "model": spec["model"]["name"],
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
        "batch": batch,
        "tokens_per_sample": spec["model"]["context"] if language else 1,
        "parameters": params,
        "steps": a.steps,
        "warmup": a.warmup,
        "repeats": a.repeats,
        "samples_per_second": rates,
        "median_samples_per_second": median,
        "min_samples_per_second": min(rates),
        "max_samples_per_second": max(rates),
        "step_ms": 1e3 * batch / median,
        "effective_gflops": 6.0 * params * median * (spec["model"]["context"] if language else 1) * 1e-9,
        "last_loss": last,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")},
    }
    print(f"{a.label} {result['model']} torch {torch.__version__} on {result['device']}, threads {result['threads']}, "
          f"batch {batch}: "
          f"median {median:.1f} samples/s (min {min(rates):.1f}, max {max(rates):.1f}), "
          f"{result['step_ms']:.3f} ms/step, peak RSS {result['peak_rss_bytes'] / 2**20:.0f} MiB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device == "cuda" else [])
        with profile(activities=activities, with_flops=True, record_shapes=True) as prof:
            start = time.perf_counter()
            for _ in range(a.steps):
                loss = step()
            loss.item()
            seconds = time.perf_counter() - start
        print(f"profiled {a.steps} steps (totals over them, not per step):")
        order = "self_cuda_time_total" if a.device == "cuda" else "self_cpu_time_total"
        print(prof.key_averages().table(sort_by=order, row_limit=20))
        if a.profile_json and a.device == "cpu":
            write_matmul_profile(a.profile_json, a.label, prof.key_averages(), a.steps, seconds,
                                 prof.key_averages(group_by_input_shape=True))


# The ops that run the BLAS's matrix products on a CPU.
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def product_dims(event):
    """M, N, K of a 2-D aten::mm (a [M, K], b [K, N]) or aten::addmm (bias,
a, b), from the shapes the profiler recorded; None for anything else."""
    shapes = event.input_shapes or []
    operands = shapes[0:2] if event.key == "aten::mm" else shapes[1:3] if event.key == "aten::addmm" else []
    if len(operands) != 2 or any(len(d) != 2 for d in operands):
        return None
    (m, k), (_, n) = operands
    return m, n, k


def write_matmul_profile(path, label, events, steps, seconds, events_by_shape=()):
    """The matrix products' share of a profiled run, in the keys `tandem bench
--profile --json` uses: their GFLOP/s over their own (wall) time, their
milliseconds a step, and the profiled step's; with events_by_shape, also
each 2-D product shape's calls and own time ("shapes", for
bench/products.py)."""
    products = [e for e in events if e.key in MATMUL_OPS]
    flops = sum(e.flops for e in products)
    own_us = sum(e.self_cpu_time_total for e in products)
    result = {
        "label": label,
        "gemm_gflops": flops / own_us * 1e-3 if own_us > 0 else 0.0,
        "gemm_ms_per_step": own_us * 1e-3 / steps,
        "step_ms": seconds * 1e3 / steps,
        "ops": {e.key: {"calls": e.count, "self_ms": e.self_cpu_time_total * 1e-3, "flops": e.flops}
                for e in products},
        "shapes": [{"op": e.key, "mnk": product_dims(e), "calls_per_step": e.count / steps,
                    "ms_per_step": e.self_cpu_time_total * 1e-3 / steps}
                   for e in events_by_shape if e.key in MATMUL_OPS and product_dims(e)],
    }
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(f"matmul ops ({', '.join(sorted(result['ops']))}): {result['gemm_gflops']:.1f} GFLOP/s over their own "
          f"time, {result['gemm_ms_per_step']:.3f} of {result['step_ms']:.3f} ms a profiled step")


if __name__ == "__main__":
    main()
