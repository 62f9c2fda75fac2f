#!/usr/bin/env python3
"""Tiny randomly initialised Hugging Face models of each family Tandem
imports, and the logits transformers computes with them.

  hf_models.py make WORK            writes WORK/<family>/ (save_pretrained, f32),
                                    WORK/llama_bf16/ (the llama in bf16) and
                                    WORK/tokens.bin (u16 ids)
  hf_models.py compare MODEL_DIR OUTPUTS [--tolerance T] [--adapter DIR]
                                    runs the model (with PEFT's adapter from
                                    DIR over it) on the "input" windows of
                                    `tandem eval --outputs` and compares its
                                    logits with Tandem's "logits"
  hf_models.py compare-list LISTING [--tolerance T]
                                    compare for each line MODEL_DIR OUTPUTS
                                    [ADAPTER] of LISTING, in one process
  hf_models.py generate IDS MODEL_DIR... --tokens N
                                    transformers' greedy continuation of the
                                    comma-separated IDS (no end-of-sequence
                                    stop) by each model, one line each:
                                    MODEL_DIR and the ids as --print-ids
"""
import argparse
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file

VOCAB = 96

# family: (config class, model class, keyword arguments, save options)
FAMILIES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(vocab_size=VOCAB, n_embd=48, n_layer=2, n_head=4, n_positions=64), {}),
    # Llama 3.1: grouped key/value heads and its rope scaling, with an
    # original context so short that the 8 rotation pairs of a head fall in
    # all three of its bands (kept, blended, slowed by `factor`).
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=80, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                   rms_norm_eps=1e-5, rope_theta=500000.0,
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=48)), {}),
    # Llama with biases on every projection, sharded into several files.
    "llama_bias": ("LlamaConfig", "LlamaForCausalLM",
                   dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=64, attention_bias=True,
                        mlp_bias=True, tie_word_embeddings=True),
                   dict(max_shard_size="20KB")),
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                     sliding_window=64), {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                   tie_word_embeddings=True, rope_theta=1000000.0), {}),
}


def make(work):
    for i, (family, (config_class, model_class, kwargs, save)) in enumerate(FAMILIES.items()):
        torch.manual_seed(i)
        config = getattr(transformers, config_class)(**kwargs)
        model = getattr(transformers, model_class)(config).eval()
        # Random biases and norm scales too: zeros and ones would hide a
        # tensor loaded into the wrong place.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 1:
                    p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "norm" in name or "ln_" in name else 0.0))
        model.save_pretrained(f"{work}/{family}", safe_serialization=True, **save)
        if family == "llama":  # as published checkpoints mostly are: bf16
            model.to(torch.bfloat16).save_pretrained(f"{work}/llama_bf16", safe_serialization=True)
    rng = np.random.default_rng(0)
    rng.integers(0, VOCAB, size=4096, dtype=np.uint16).tofile(f"{work}/tokens.bin")


def compare(model_dir, outputs, tolerance, adapter=None):
    tensors = load_file(outputs)
    ids = torch.from_numpy(tensors["input"].astype(np.int64))
    ours = tensors["logits"].astype(np.float64)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    if adapter:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, adapter).eval()
    with torch.no_grad():
        theirs = model(ids).logits.double().numpy().reshape(ours.shape)
    worst = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
    print(f"{model_dir}{' + ' + adapter if adapter else ''} ({outputs}): {ids.shape[0]} windows of {ids.shape[1]} "
          f"tokens, largest difference {worst:.2e} of the largest logit (tolerance {tolerance:g})"
          f"{'' if worst <= tolerance else ': FAILED'}")
    return worst <= tolerance


def compare_list(listing, tolerance):
    """One process for many comparisons (torch starts once): each line of
    LISTING is MODEL_DIR OUTPUTS [ADAPTER]."""
    ok = True
    with open(listing) as f:
        for line in f:
            fields = line.split()
            if fields:
                adapter = fields[2] if len(fields) > 2 else None
                ok = compare(fields[0], fields[1], tolerance, adapter) and ok
    return ok


def generate(model_dirs, ids, tokens):
    for model_dir in model_dirs:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
        model.generation_config.eos_token_id = None  # as Tandem without a tokenizer: no stop token
        model.generation_config.pad_token_id = 0
        prompt = torch.tensor([[int(i) for i in ids.split(",")]])
        with torch.no_grad():
            out = model.generate(prompt, do_sample=False, max_new_tokens=tokens, min_new_tokens=tokens)
        print(model_dir, ",".join(str(int(i)) for i in out[0, prompt.shape[1]:]))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make").add_argument("work")
    c = sub.add_parser("compare")
    c.add_argument("model_dir")
    c.add_argument("outputs")
    c.add_argument("--tolerance", type=float, default=1e-5)
    c.add_argument("--adapter")
    c = sub.add_parser("compare-list")
    c.add_argument("listing")
    c.add_argument("--tolerance", type=float, default=1e-5)
    g = sub.add_parser("generate")
    g.add_argument("ids")
    g.add_argument("model_dirs", nargs="+")
    g.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    if args.command == "make":
        make(args.work)
        return 0
    if args.command == "generate":
        generate(args.model_dirs, args.ids, args.tokens)
        return 0
    if args.command == "compare-list":
        return 0 if compare_list(args.listing, args.tolerance) else 1
    return 0 if compare(args.model_dir, args.outputs, args.tolerance, args.adapter) else 1


if __name__ == "__main__":
    sys.exit(main())
