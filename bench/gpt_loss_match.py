#!/usr/bin/env python3
"""Tandem and PyTorch train the same GPT from the same initial weights on the
same windows, and their losses are compared step by step.

bench/models/gpt.toml's model (or --model's: llama.toml checks rms_norm,
rope, grouped key/value heads and silu) is built in PyTorch (bench/torch_gpt.py), its
initial weights written as safetensors under Tandem's tensor names, and
`tandem train --init-from` starts from them. Both read one token file and
the same windows (the text of Debian's fortune cookies, or random bytes when
`fortunes` is not installed): Tandem's training windows start at random_below(seed,
stream 6, counter, tokens - context) (host/data/counter_rng.hpp), which this
script computes too. Tandem's metrics.jsonl (log_every = 1) holds the
running mean loss of the epoch, from which each step's loss follows. Prints
both and the largest difference; exits 1 above --tolerance.

Usage: gpt_loss_match.py --tandem build/bin/tandem [--model bench/models/gpt.toml] [--steps 50] [--threads 2]
                         [--tolerance 1e-4] [--lr 6e-4]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import tomllib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import LanguageModel  # noqa: E402

MASK = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def random_u64(seed, stream, counter):
    return mix64((mix64(seed ^ mix64((stream + 0x9E3779B97F4A7C15) & MASK)) + counter * 0x9E3779B97F4A7C15) & MASK)


def tandem_names(net):
    """Tandem's name for every parameter of the PyTorch model (a tied head has none)."""
    out = {}
    for layer in net.layers:
        module = net.mods[layer["name"].replace(".", "_")] if layer["name"].replace(".", "_") in net.mods else None
        if module is None or "tie_weight" in layer:
            continue
        for pname, p in module.named_parameters():
            if layer["op"] in ("layer_norm", "rms_norm"):
                pname = {"weight": "gamma", "bias": "beta"}[pname]
            out[f"{layer['name']}.{pname}"] = p
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tandem", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--model", default=os.path.join(here, "models", "gpt.toml"))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--lr", type=float, default=6e-4, help="for both (GPT-2 small's; the model file's 2e-3 is "
                    "for the example's short run)")
    a = ap.parse_args()
    with open(a.model, "rb") as f:
        spec = tomllib.load(f)
    train = spec["train"]
    batch, context, seed = train["batch_size"], spec["model"]["context"], train["seed"]
    torch.set_num_threads(a.threads)
    torch.manual_seed(7)
    net = LanguageModel(spec)
    net.init_like_the_model_files()

    work = tempfile.mkdtemp(prefix="gpt-loss-match-")
    text = "/usr/share/games/fortunes/cookie"  # Debian's fortunes (scripts/install-deps.sh)
    if os.path.exists(text):
        with open(text, "rb") as f:
            tokens = f.read()
    else:  # random bytes: the loss then stays near ln 256, still a comparison
        rng = random.Random(3)
        tokens = bytes(rng.randrange(256) for _ in range(200_000))
    with open(os.path.join(work, "tokens.bin"), "wb") as f:
        f.write(tokens)
    write_safetensors(os.path.join(work, "init.safetensors"), tandem_names(net))
    with open(a.model) as f:
        model_text = f.read()
    windows = a.steps * batch
    model_text += (f'\n[data]\nformat = "tokens"\ntrain_tokens = "{work}/tokens.bin"\n'
                   f"windows_per_epoch = {windows}\n")
    with open(os.path.join(work, "gpt.toml"), "w") as f:
        f.write(model_text)

    run = subprocess.run([a.tandem, "train", os.path.join(work, "gpt.toml"), "--device", "onednn:0",
                          "--threads", str(a.threads), "--init-from", os.path.join(work, "init.safetensors"),
                          "--run-dir", os.path.join(work, "run"), "--set", f"train.steps={a.steps}",
                          "--set", "train.log_every=1", "--set", f"train.lr={a.lr}"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tandem train failed:\n{run.stdout}{run.stderr}")
    means = [json.loads(line)["loss"] for line in open(os.path.join(work, "run", "metrics.jsonl"))
             if '"event":"step"' in line]
    tandem_losses = [k * m - (k - 1) * prev for k, (m, prev) in enumerate(zip(means, [0.0] + means[:-1]), 1)]

    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, betas=(train.get("beta1", 0.9), train.get("beta2", 0.999)),
                            eps=train.get("epsilon", 1e-8), weight_decay=train.get("weight_decay", 0.01))
    data = torch.tensor(list(tokens), dtype=torch.long)
    starts = len(tokens) - context
    worst = 0.0
    print(f"step  tandem     pytorch {torch.__version__}  difference")
    for step in range(a.steps):
        idx = [random_u64(seed, 6, step * batch + i) % starts for i in range(batch)]
        x = torch.stack([data[s:s + context] for s in idx])
        y = torch.stack([data[s + 1:s + 1 + context] for s in idx])
        opt.zero_grad(set_to_none=True)
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        diff = abs(loss.item() - tandem_losses[step])
        worst = max(worst, diff)
        print(f"{step + 1:4d}  {tandem_losses[step]:.6f}  {loss.item():.6f}  {diff:.2e}")
    print(f"largest loss difference over {a.steps} steps: {worst:.2e} (tolerance {a.tolerance:g})")
    sys.exit(0 if worst <= a.tolerance else 1)


if __name__ == "__main__":
    main()
