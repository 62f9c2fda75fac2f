#!/usr/bin/env python3
"""bench/gpu_scale.sh's two helpers.

peak:  the GPU's bf16 matrix rate, measured: an 8192^3 bf16 product
       through PyTorch (cuBLAS) on random data, 3 warm-ups, then the mean of
       10 timed by CUDA events. Writes {"bf16_tflops": ...}.
table: reads the runs' JSON (MODEL-tandem.json, MODEL-pytorch-eager.json,
       MODEL-pytorch-compile.json, peak.json) and prints tokens/s, model
       TFLOP/s, MFU against the measured peak, Tandem's ratio to each peer,
       and Tandem's planned and measured device peak.

Model FLOPs per token: 6 x parameters (forward and backward of every
weight) + 12 x layers x context x attention width (the scores and the
weighted sum, forward and backward; PaLM's count, causal half included).
"""
import argparse
import json
import os
import sys
import tomllib


def measure_peak(path):
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / 10
    tflops = 2 * n**3 / seconds / 1e12
    print(f"peak: bf16 {n}x{n}x{n} product {tflops:.1f} TFLOP/s on {torch.cuda.get_device_name()}")
    with open(path, "w") as f:
        json.dump({"bf16_tflops": tflops, "device": torch.cuda.get_device_name()}, f)


def attention_shape(spec):
    """(layers with attention, attention width = heads x head_dim)."""
    layers, width = 0, 0
    model_width = next(l["embedding_dim"] for l in spec["layers"] if l["op"] == "embedding")
    for layer in spec["layers"]:
        body, count = (layer["body"], layer["count"]) if layer["op"] == "repeat" else ([layer], 1)
        for b in body:
            if b["op"] == "attention":
                layers += count
                width = b["heads"] * b.get("head_dim", model_width // b["heads"])
    return layers, width


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def table(directory, models, repo):
    peak = load(os.path.join(directory, "peak.json"))
    peak_tflops = peak["bf16_tflops"] if peak else None
    rows = []
    for model in models:
        with open(os.path.join(repo, "bench", "models", "gpu", f"{model}.toml"), "rb") as f:
            spec = tomllib.load(f)
        layers, width = attention_shape(spec)
        context = spec["model"]["context"]
        runs = {side: load(os.path.join(directory, f"{model}-{side}.json"))
                for side in ("tandem", "tandem-f32_tiles", "tandem-f32_products", "pytorch-eager",
                             "pytorch-compile")}
        for side, run in runs.items():
            if run is None:
                if side not in ("tandem-f32_tiles", "tandem-f32_products"):
                    rows.append((model, side, "not run", "", "", "", "", ""))
                continue
            tokens = run["median_samples_per_second"] * run["tokens_per_sample"]
            flops_per_token = 6 * run["parameters"] + 12 * layers * context * width
            tflops = tokens * flops_per_token / 1e12
            mfu = f"{100 * tflops / peak_tflops:.1f} %" if peak_tflops else "-"
            ratio = ""
            if side.startswith("pytorch") and runs["tandem"]:
                ratio = f"{runs['tandem']['median_samples_per_second'] / run['median_samples_per_second']:.2f}x"
            memory = ""
            if side.startswith("tandem") and run.get("device_peak_bytes"):
                memory = f"{run['planned_bytes'] / 2**30:.2f} / {run['device_peak_bytes'] / 2**30:.2f}"
                reported = run.get("device_reported_bytes")
                memory += f" / {reported / 2**30:.2f} GiB" if reported else " / - GiB"
            rows.append((model, side, f"{tokens:,.0f}", f"{run['step_ms']:.1f}", f"{tflops:.1f}", mfu, ratio, memory))
    header = ("model", "run", "tokens/s", "ms/step", "TFLOP/s", "MFU", "tandem/peer", "planned / allocator / device")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print()
    print(f"bf16 matrix peak: {peak_tflops:.1f} TFLOP/s (measured)" if peak_tflops else "bf16 matrix peak: not measured")
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["peak", "table"])
    ap.add_argument("--json")
    ap.add_argument("--dir")
    ap.add_argument("--models", default="gpt2_small llama_1b")
    a = ap.parse_args()
    if a.what == "peak":
        measure_peak(a.json)
    else:
        table(a.dir, a.models.split(), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


if __name__ == "__main__":
    sys.exit(main())
