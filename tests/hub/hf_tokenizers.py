#!/usr/bin/env python3
"""Tokenizers trained here by Hugging Face's own libraries, the ids those
libraries give for a text, and the tokens transformers generates with a
tiny model over each tokenizer: what tokenizers.sh compares Tandem with.

  hf_tokenizers.py make WORK FILES...
      trains on FILES, in WORK/<kind>/, one tokenizer of each kind:
        gpt2    byte-level BPE, GPT-2's pre-tokenizer, <|endoftext|>, and a
                non-special <mask> that takes in the spaces before it
        llama3  byte-level BPE, Llama 3's Split pattern, ignore_merges, a
                post-processor that puts <|begin_of_text|> first
        qwen2   byte-level BPE, Qwen2's Split pattern, NFC, special tokens
                added after training (ids past the trained vocabulary)
        sp      SentencePiece BPE with byte fallback (tokenizer.model), as
                Llama 2 is made
      and a tiny random LlamaForCausalLM beside each (save_pretrained); then
      WORK/stress.txt, and per kind the prompts (<kind>.prompt-ids,
      <kind>.text-prompt) and the ids transformers' greedy generate gives
      for them (<kind>.expect, <kind>.expect-text).
  hf_tokenizers.py check WORK KIND [--joined BIN] FILE BIN [FILE BIN ...]
      the ids of each FILE against Tandem's BIN (u16); --joined: all FILEs
      with the eos token between them against one BIN. Writes
      WORK/<kind>.stress-ids (the ids of stress.txt) and
      WORK/<kind>.stress-decoded (what they decode to: the text, but for
      the white space gpt2's <mask> takes in, and in NFC for qwen2).
"""
import argparse
import json
import os
import re
import sys
import unicodedata

import numpy as np

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
KINDS = ["gpt2", "llama3", "qwen2", "sp"]
VOCAB = 3000

# Every script and space the pre-tokenizers treat apart: accents (composed
# and combining, for NFC), Greek, Cyrillic, Arabic, Hebrew, CJK, Devanagari,
# emoji with ZWJ sequences and skin tones, runs of tabs, \r\n, no-break and
# ideographic spaces, U+180E (white space to PCRE2, not to Oniguruma),
# digit runs of 1 to 7, contractions in capitals, the added tokens, and an
# unpaired "<|" that must not become one.
STRESS = (
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 cafe\u0301 nai\u0308ve (combining marks), \u00c5ngstr\u00f6m, "
    "\u0130stanbul, stra\u00dfe, \u0141\u00f3d\u017a\n"
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac: \u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 "
    "\u03ba\u03cc\u03c3\u03bc\u03b5! \u0420\u0443\u0441\u0441\u043a\u0438\u0439: \u041f\u0440\u0438\u0432\u0435"
    "\u0442, \u043c\u0438\u0440!\r\n"
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629: \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627"
    "\u0644\u0645 \u0661\u0662\u0663 \u05e2\u05d1\u05e8\u05d9\u05ea: \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5"
    "\u05dc\u05dd\n"
    "\u4e2d\u6587\uff1a\u4f60\u597d\uff0c\u4e16\u754c\u3002\u65e5\u672c\u8a9e\u3000\u3053\u3093\u306b\u3061"
    "\u306f\u3001\u4e16\u754c\uff01\ud55c\uad6d\uc5b4 \uc548\ub155\ud558\uc138\uc694\n"
    "\u0939\u093f\u0928\u094d\u0926\u0940: \u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f"
    "\u092f\u093e \u0967\u0968\u0969\n"
    "Emoji: \U0001F600 \U0001F44D\U0001F3FD \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 "
    "\U0001F3F3\uFE0F\u200D\U0001F308 \U0001F1EF\U0001F1F5 \u2764\uFE0F\U0001F525x\U0001F680\n"
    "tabs\t\tand  double  spaces   three\u00a0no-break\u202fnarrow\u3000ideographic \t \n\n\n"
    "digits 7 42 123 4567 89012 345678 9012345 3.14159 1,000,000 \u0661\u0662\u0663\u0664\n"
    "I'M YOU'RE WE'VE SHE'LL HE'D IT'S DON'T we're they'll I'd it's 'tis\r\n"
    "Special <|endoftext|> tokens<|endoftext|>glued, a stray <| and |> and <|endoftext| halves, "
    "a <mask> and   <mask>x.\n"
    "   leading spaces, trailing spaces   \n"
    "\u00a0\u2003\u2009end\u2028line\u2029para\u0085nel\x0bvt\x0cff \u180e mvs\u180e\u180e \u180e\n"
    "mixed\u0391\u0411\u05d0\u0627\u4e00\u0905 scripts\u0301\u0301 and a final line without a newline"
)


def train_bpe(kind, files, out):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                            processors, trainers)
    tok = Tokenizer(models.BPE())
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        specials = ["<|endoftext|>"]
    else:
        pattern = LLAMA3 if kind == "llama3" else QWEN2
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>"] if kind == "llama3" else []
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    if kind == "gpt2":
        tok.add_tokens([AddedToken("<mask>", lstrip=True, normalized=True, special=False)])
    if kind == "qwen2":
        tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    if kind == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                           special_tokens=[("<|begin_of_text|>", bos)])
    os.makedirs(out, exist_ok=True)
    path = f"{out}/tokenizer.json"
    tok.save(path)
    if kind == "llama3":  # Llama 3 takes a pre-token found whole in the vocabulary as one token
        j = json.load(open(path, encoding="utf-8"))
        j["model"]["ignore_merges"] = True
        json.dump(j, open(path, "w", encoding="utf-8"), ensure_ascii=False)


def train_sp(files, out):
    import sentencepiece as spm
    os.makedirs(out, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=",".join(files), model_prefix=f"{out}/tokenizer", vocab_size=VOCAB, model_type="bpe",
        byte_fallback=True, user_defined_symbols=["<|endoftext|>"], normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True,
        allow_whitespace_only_pieces=True, character_coverage=0.9995, num_threads=2, minloglevel=2)
    os.remove(f"{out}/tokenizer.vocab")


class Ids:
    """One trained tokenizer through its own library."""

    def __init__(self, work, kind):
        self.kind = kind
        if kind == "sp":
            import sentencepiece as spm
            self.sp = spm.SentencePieceProcessor(model_file=f"{work}/sp/tokenizer.model")
            self.size = self.sp.get_piece_size()
            self.eos = [self.sp.eos_id()]
        else:
            from tokenizers import Tokenizer
            self.tok = Tokenizer.from_file(f"{work}/{kind}/tokenizer.json")
            self.size = self.tok.get_vocab_size(with_added_tokens=True)
            name = {"gpt2": "<|endoftext|>", "llama3": "<|end_of_text|>", "qwen2": "<|endoftext|>"}[kind]
            self.eos = [self.tok.token_to_id(name)]

    def encode(self, text, for_model=False):
        if self.kind == "sp":
            return ([self.sp.bos_id()] if for_model else []) + self.sp.encode(text)
        return self.tok.encode(text, add_special_tokens=for_model).ids

    def decode(self, ids):
        return self.sp.decode(ids) if self.kind == "sp" else self.tok.decode(ids, skip_special_tokens=False)


def greedy(model, prompt, eos):
    import torch
    import transformers.generation.utils as generation
    # generate asks whether the model is FSDP-wrapped by importing
    # torch.distributed.fsdp, which Debian's torch 1.13 cannot import under
    # Python 3.11 (a dataclass with a mutable default); it is not wrapped.
    generation.is_fsdp_managed_module = lambda module: False
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             do_sample=False, max_new_tokens=32, eos_token_id=eos, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def make_model(work, kind, seed):
    """A tiny Llama over the tokenizer; its eos is a token greedy generation
    draws a few steps in, so that the stop is checked too."""
    import torch
    import transformers
    ids = Ids(work, kind)
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=ids.size, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, bos_token_id=None,
        eos_token_id=None, pad_token_id=None, initializer_range=0.1)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "norm" in name else 0.0))
    special = {"gpt2": "<|endoftext|>", "llama3": "<|begin_of_text|>", "qwen2": "<|im_start|>", "sp": "<|endoftext|>"}
    prompt = ids.encode(special[kind] + "Q: Why did the chicken cross the road?\nA:")
    free = greedy(model, prompt, None)
    k = next((i for i in range(20, len(free)) if free[i] not in free[:i] and free[i] not in ids.eos), None)
    stop = ids.eos + ([free[k]] if k is not None else [])
    if k is not None:
        model.config.eos_token_id = free[k]
    model.generation_config = transformers.GenerationConfig(eos_token_id=model.config.eos_token_id)
    text_prompt = "The quick brown fox said: I'M fine, 12345 times \u00e9t\u00e9"
    results = {
        "prompt-ids": ",".join(map(str, prompt)),
        "expect": ",".join(map(str, greedy(model, prompt, stop))),
        "text-prompt": text_prompt,
        "expect-text": ",".join(map(str, greedy(model, ids.encode(text_prompt, for_model=True), stop))),
    }
    model.save_pretrained(f"{work}/{kind}", safe_serialization=True)
    if kind != "sp":  # as HF writes it beside tokenizer.json: the eos a text ends with
        with open(f"{work}/{kind}/tokenizer_config.json", "w", encoding="utf-8") as f:
            json.dump({"eos_token": ids.tok.id_to_token(ids.eos[0])}, f)
    for suffix, text in results.items():
        with open(f"{work}/{kind}.{suffix}", "w", encoding="utf-8") as f:
            f.write(text)
    print(f"{kind}: vocabulary {ids.size}, eos {stop}, prompt {len(prompt)} ids, "
          f"{len(results['expect'].split(','))} generated")


def make(work, files):
    with open(f"{work}/stress.txt", "w", encoding="utf-8", newline="") as f:
        f.write(STRESS)
    for kind in KINDS:
        if kind == "sp":
            train_sp(files, f"{work}/sp")
        else:
            train_bpe(kind, files, f"{work}/{kind}")
    for seed, kind in enumerate(KINDS):
        make_model(work, kind, seed)


def first_difference(a, b):
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def check(work, kind, pairs, joined):
    ids = Ids(work, kind)
    files = pairs[0::2] if not joined else pairs
    bins = pairs[1::2] if not joined else [joined]
    texts = [open(f, "rb").read().decode("utf-8") for f in files]
    expected = [ids.encode(t) for t in texts]
    if joined:
        expected = [sum((e + (ids.eos if i + 1 < len(expected) else []) for i, e in enumerate(expected)), [])]
    ok = True
    for name, text, want, path in zip(files if not joined else ["(joined)"], texts, expected, bins):
        got = np.fromfile(path, dtype=np.uint16).tolist()
        if got != want:
            i = first_difference(got, want)
            print(f"{kind} {name}: {len(got)} ids from Tandem, {len(want)} from HF; first difference at {i}: "
                  f"Tandem {got[max(0, i - 3):i + 4]} HF {want[max(0, i - 3):i + 4]} "
                  f"({ids.decode(want[max(0, i - 3):i + 4])!r})")
            ok = False
        # <mask> takes in the white space before it (lstrip): that much is
        # lost; qwen2's text comes back in NFC.
        back = re.sub(r"\s+<mask>", "<mask>", text) if kind == "gpt2" else text
        back = unicodedata.normalize("NFC", back) if kind == "qwen2" else back
        if not joined and ids.decode(want) != back:
            print(f"{kind} {name}: HF's own decode does not give the text back")
            ok = False
        if os.path.basename(name) == "stress.txt":
            with open(f"{work}/{kind}.stress-ids", "w") as f:
                f.write(",".join(map(str, want)))
            with open(f"{work}/{kind}.stress-decoded", "w", encoding="utf-8", newline="") as f:
                f.write(back)
    tokens = sum(len(e) for e in expected)
    print(f"{kind}: {len(texts)} files, {sum(len(t) for t in texts)} characters, {tokens} ids: "
          f"{'identical' if ok else 'DIFFERENT'}")
    return ok


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("work")
    m.add_argument("files", nargs="+")
    c = sub.add_parser("check")
    c.add_argument("work")
    c.add_argument("kind", choices=KINDS)
    c.add_argument("--joined")
    c.add_argument("pairs", nargs="+")
    args = parser.parse_args()
    if args.command == "make":
        make(args.work, args.files)
        return 0
    return 0 if check(args.work, args.kind, args.pairs, args.joined) else 1


if __name__ == "__main__":
    sys.exit(main())
