#!/usr/bin/env python3
"""Runs an exported ONNX model with onnxruntime on the inputs `tandem eval
--outputs` recorded and compares its logits with Tandem's.

  compare_onnx.py MODEL.onnx OUTPUTS.safetensors [--tolerance 1e-5] [--relative]

Prints the largest absolute difference (and the largest relative to the
logits' own magnitude) and the share of samples whose top class agrees;
exits 1 when the largest difference is above the tolerance (relative to
max |logit| with --relative).
"""
import argparse
import json
import struct
import sys

import numpy as np
import onnxruntime as ort

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8, "I8": np.int8}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("outputs")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--relative", action="store_true")
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    recorded = read_safetensors(a.outputs)
    inputs, expected = recorded["input"], recorded["logits"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(a.model, options, providers=["CPUExecutionProvider"])
    got = []
    for begin in range(0, len(inputs), a.batch):
        got.append(session.run(["logits"], {"input": inputs[begin:begin + a.batch]})[0])
    got = np.concatenate(got).reshape(expected.shape)
    diff = float(np.max(np.abs(got.astype(np.float64) - expected)))
    scale = float(np.max(np.abs(expected)))
    agree = float(np.mean(np.argmax(got.reshape(-1, got.shape[-1]), 1) ==
                          np.argmax(expected.reshape(-1, expected.shape[-1]), 1)))
    measured = diff / scale if a.relative else diff
    print(f"{a.model}: {len(inputs)} samples, largest |difference| {diff:.3g} (max |logit| {scale:.3g}, "
          f"relative {diff / scale:.3g}), top class agrees on {100 * agree:.2f}%")
    return 0 if measured <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
