#!/usr/bin/env python3
"""PyTorch training what `tandem train MODEL.toml` trains, on the model file's
own IDX data, for bench/run.sh's footprint rows.

Reads the model file (tomllib): its layers (bench/torch_peer.py's builder),
[train] (SGD with momentum / nesterov / weight decay, linear warm-up then a
cosine or constant schedule, batch size, seed) and [data] (IDX images and
labels, plain or gzip; normalize_mean / normalize_std). The data is kept as
it is stored, uint8, and each shuffled batch is indexed, widened and
normalised with torch ops on `--threads` threads: PyTorch's fastest way for a
data set that fits in memory (no DataLoader worker processes). Each epoch
trains over every training sample, then evaluates the test set.

Prints and writes (--json): training samples/s (the training loops' own
time, as Tandem's per-epoch figure), the whole run's seconds, the last
epoch's test accuracy, and the peak RSS of the process.

Usage: torch_train.py MODEL.toml --threads N [--epochs 3] [--json FILE] [--label NAME]
"""
import argparse
import gzip
import json
import math
import resource
import struct
import time
import tomllib

import torch
from torch import nn

from torch_peer import build


def read_idx(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise SystemExit(f"torch_train: {path}: only u8 IDX files")
    dims = struct.unpack(f">{rank}I", data[4:4 + 4 * rank])
    return torch.frombuffer(bytearray(data[4 + 4 * rank:]), dtype=torch.uint8).reshape(dims)


def schedule(train, steps_total):
    base, warmup = train["lr"], train.get("warmup_steps", 0)
    kind = train.get("schedule", "constant")

    def lr_at(step):  # step counts from 0, as Tandem's
        if warmup and step < warmup:
            return base * (step + 1) / warmup
        if kind == "cosine":
            t = (step - warmup) / max(1, steps_total - warmup)
            return 0.5 * base * (1 + math.cos(math.pi * min(1.0, t)))
        return base
    return lr_at


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--label", default="pytorch")
    a = ap.parse_args()
    start = time.perf_counter()
    torch.set_num_threads(a.threads)
    with open(a.model, "rb") as f:
        spec = tomllib.load(f)
    train, data = spec["train"], spec["data"]
    torch.manual_seed(train.get("seed", 1))
    if data.get("format") != "idx":
        raise SystemExit("torch_train: only [data] format = \"idx\"")
    x_train, y_train = read_idx(data["train_images"]), read_idx(data["train_labels"]).long()
    x_test, y_test = read_idx(data["test_images"]), read_idx(data["test_labels"]).long()
    mean = torch.tensor(data.get("normalize_mean", [0.0])).view(1, -1, 1, 1)
    std = torch.tensor(data.get("normalize_std", [1.0])).view(1, -1, 1, 1)
    shape = [-1] + list(spec["model"]["input"])

    def batch_of(images, index):
        return images[index].view(shape).float().div_(255).sub_(mean).div_(std)

    net = build(spec)
    opt = torch.optim.SGD(net.parameters(), lr=train["lr"], momentum=train.get("momentum", 0.0),
                          nesterov=train.get("nesterov", False), weight_decay=train.get("weight_decay", 0.0))
    loss_fn = nn.CrossEntropyLoss()
    batch = train["batch_size"]
    per_epoch = math.ceil(len(y_train) / batch)
    lr_at = schedule(train, per_epoch * a.epochs)
    step, train_seconds, accuracy = 0, 0.0, 0.0
    for _ in range(a.epochs):
        net.train()
        begin = time.perf_counter()
        order = torch.randperm(len(y_train))
        for b in range(per_epoch):
            index = order[b * batch:(b + 1) * batch]
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(batch_of(x_train, index)), y_train[index])
            loss.backward()
            opt.step()
            step += 1
        loss.item()
        train_seconds += time.perf_counter() - begin
        net.eval()
        correct = 0
        with torch.no_grad():
            for b in range(0, len(y_test), batch):
                index = torch.arange(b, min(b + batch, len(y_test)))
                correct += (net(batch_of(x_test, index)).argmax(1) == y_test[index]).sum().item()
        accuracy = correct / len(y_test)
    result = {
        "framework": a.label,
        "torch_version": torch.__version__,
        "model": spec["model"]["name"],
        "threads": torch.get_num_threads(),
        "epochs": a.epochs,
        "samples_per_second": a.epochs * len(y_train) / train_seconds,
        "seconds": time.perf_counter() - start,
        "test_accuracy": accuracy,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    print(f"{a.label} {result['model']} torch {torch.__version__} threads {result['threads']}: "
          f"{result['samples_per_second']:.0f} samples/s training, {result['seconds']:.1f} s in all, "
          f"test accuracy {accuracy:.4f}, peak RSS {result['peak_rss_bytes'] / 2**20:.0f} MiB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
