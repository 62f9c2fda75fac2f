#!/usr/bin/env python3
"""Weights between Tandem and PyTorch, both ways, for a classifier model file:

  torch_roundtrip.py MODEL.toml EXPORTED.safetensors OUTPUTS.safetensors BACK.safetensors

1. Builds the model file's network in PyTorch as a user would — one
   submodule per layer, named like the layer (nn.Linear, nn.Conv2d,
   nn.BatchNorm2d/1d, nn.LayerNorm, nn.Embedding, activations, pooling) —
   and loads EXPORTED (`tandem export --format safetensors`) with
   load_state_dict(strict=True): every name and shape must match.
2. Runs it on the inputs OUTPUTS holds (`tandem eval --outputs`) and compares
   its logits with Tandem's (exit 1 above 1e-5).
3. Changes the weights in PyTorch (each tensor times 0.9) and writes them,
   under PyTorch's names, to BACK.safetensors, together with the logits
   PyTorch computes with them on the same inputs ("expected_logits"), for
   `tandem eval --weights BACK` to reproduce.
"""
import json
import math
import struct
import sys
import tomllib

import numpy as np
import torch
from torch import nn

TO_NUMPY = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "U8": np.uint8, "I8": np.int8}
FROM_NUMPY = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], TO_NUMPY[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def write(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": FROM_NUMPY[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class Net(nn.Module):
    """The model file's layers, in order, each a submodule of its name."""

    def __init__(self, spec):
        super().__init__()
        shape = list(spec["model"]["input"])
        self.steps = []
        for layer in spec["layers"]:
            name, op = layer["name"], layer["op"]
            flatten = False
            if op == "linear":
                flatten = len(shape) > 1
                inputs = math.prod(shape)
                module = nn.Linear(inputs, layer["out_features"], bias=layer.get("bias", True))
                act = layer.get("activation", "none")
                shape = [layer["out_features"]]
            elif op == "conv2d":
                k, stride, pad = layer["kernel"], layer.get("stride", 1), layer.get("padding", 0)
                module = nn.Conv2d(shape[0], layer["out_channels"], k, stride, pad, bias=layer.get("bias", True))
                shape = [layer["out_channels"], (shape[1] + 2 * pad - k) // stride + 1,
                         (shape[2] + 2 * pad - k) // stride + 1]
                act = layer.get("activation", "none")
            elif op == "max_pool2d":
                k = layer["kernel"]
                stride = layer.get("stride", k)
                module = nn.MaxPool2d(k, stride)
                shape = [shape[0], (shape[1] - k) // stride + 1, (shape[2] - k) // stride + 1]
                act = "none"
            elif op == "batch_norm":
                module = (nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d)(shape[0], eps=layer.get("epsilon", 1e-5))
                act = "none"
            elif op == "embedding":
                module = nn.Embedding(layer["num_embeddings"], layer["embedding_dim"])
                shape = shape + [layer["embedding_dim"]]
                act = "none"
            elif op in ("relu", "tanh", "sigmoid", "flatten"):
                module, act = None, op
                if op == "flatten":
                    act, flatten, shape = "none", True, [math.prod(shape)]
            else:
                sys.exit(f"torch_roundtrip: layer op {op} not supported here")
            if module is not None:
                self.add_module(name, module)
            self.steps.append((name if module is not None else None, op, flatten, act))

    def forward(self, x):
        for name, op, flatten, act in self.steps:
            if op == "embedding":
                x = x.long()
            if flatten:
                x = x.reshape(x.shape[0], -1)
            if name is not None:
                x = getattr(self, name)(x)
            x = {"none": lambda v: v, "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[act](x)
        return x


def main():
    model_file, exported, outputs, back = sys.argv[1:5]
    with open(model_file, "rb") as f:
        spec = tomllib.load(f)
    net = Net(spec).eval()
    state = {k: torch.from_numpy(v.copy()) for k, v in read(exported).items()}
    net.load_state_dict(state, strict=True)
    recorded = read(outputs)
    x = torch.from_numpy(recorded["input"].copy())
    with torch.no_grad():
        got = net(x).numpy()
    diff = float(np.max(np.abs(got - recorded["logits"].reshape(got.shape))))
    print(f"{model_file}: PyTorch with Tandem's weights: largest |difference| {diff:.3g} over {len(x)} samples")
    with torch.no_grad():
        for tensor in net.state_dict().values():
            if tensor.is_floating_point():
                tensor.mul_(0.9)
        expected = net(x).numpy()
    tensors = {k: v.numpy() for k, v in net.state_dict().items()}
    tensors["expected_logits"] = expected.astype(np.float32)
    write(back, tensors)
    return 0 if diff <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
