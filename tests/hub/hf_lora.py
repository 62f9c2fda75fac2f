#!/usr/bin/env python3
"""Tandem's LoRA against PEFT's on the same base model, adapters and batch.

  hf_lora.py grads BASE_DIR RUN_DIR TOKENS --context T --lr LR --rank R --alpha A TARGET...

RUN_DIR holds the checkpoints of steps 1 and 2 of a Tandem run with plain
SGD at learning rate LR on one window (the TOKENS file's T + 1 tokens), the
model file's [features.lora] on TARGETs (Tandem's names, "<block>.<i>.
self_attn.q"). PEFT wraps the transformers model of BASE_DIR with the same
rank, alpha and targets, takes the adapters of step 1 and computes the
loss's gradients; Tandem's are (step 1 - step 2) / LR. Every adapter
gradient must agree within 1e-5 of the largest.
"""
import argparse
import sys

import numpy as np
import torch
import transformers
from peft import LoraConfig, get_peft_model
from safetensors.numpy import load_file

PROJECTIONS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"}


def peft_name(tandem):
    """layers.3.self_attn.q.lora_A -> base_model.model.model.layers.3.self_attn.q_proj.lora_A.default.weight"""
    block, index, attention, projection, matrix = tandem.split(".")
    return (f"base_model.model.model.{block}.{index}.{attention}.{PROJECTIONS[projection]}."
            f"{matrix}.default.weight")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["grads"])
    parser.add_argument("base")
    parser.add_argument("run")
    parser.add_argument("tokens")
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--alpha", type=float, required=True)
    parser.add_argument("targets", nargs="+")
    args = parser.parse_args()
    step1 = load_file(f"{args.run}/checkpoints/step-000000001.safetensors")
    step2 = load_file(f"{args.run}/checkpoints/step-000000002.safetensors")
    adapters = sorted(name for name in step1 if name.endswith((".lora_A", ".lora_B")))

    base = transformers.AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float32)
    modules = sorted({PROJECTIONS[t.split(".")[-1]] for t in args.targets})
    model = get_peft_model(base, LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=0.0,
                                            target_modules=modules))
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in adapters:
            params[peft_name(name)].copy_(torch.from_numpy(step1[name]))
    ids = torch.from_numpy(np.fromfile(args.tokens, dtype=np.uint16).astype(np.int64))
    window = ids[: args.context + 1]
    logits = model(window[None, :-1]).logits[0]
    loss = torch.nn.functional.cross_entropy(logits, window[1:])
    loss.backward()
    worst, largest = 0.0, 0.0
    for name in adapters:
        ours = (step1[name].astype(np.float64) - step2[name]) / args.lr
        theirs = params[peft_name(name)].grad.double().numpy()
        worst = max(worst, float(np.max(np.abs(ours - theirs))))
        largest = max(largest, float(np.max(np.abs(theirs))))
    print(f"{len(adapters)} adapter tensors, loss {loss.item():.6f}: largest gradient {largest:.3e}, "
          f"largest difference {worst:.3e} ({worst / largest:.2e} of it; tolerance 1e-5)")
    return 0 if largest > 0 and worst <= 1e-5 * largest else 1


if __name__ == "__main__":
    sys.exit(main())
