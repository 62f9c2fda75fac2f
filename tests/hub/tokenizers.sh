#!/usr/bin/env bash
# hub.tokenizers — Tandem's tokenizers give the ids of Hugging Face's own
# libraries, and generate continues a prompt as transformers does.
#
#   tokenizers.sh TANDEM SOURCE_DIR WORK_DIR
#
# There is no model hub here, so HF's libraries train the tokenizers on the
# text of Debian's fortunes (hf_tokenizers.py): byte-level BPE with GPT-2's
# pre-tokenizer, with Llama 3's and with Qwen2's Split patterns (NFC), and
# a SentencePiece BPE with byte fallback. For each, `tandem tokenize` must
# write exactly the ids `tokenizers` (or `sentencepiece`) gives for every
# fortunes file and for a text of every script, space and emoji sequence
# the pre-tokenizers treat apart; Tandem's decode must give that text back;
# and over a tiny random Llama saved beside the tokenizer, `tandem import`
# and `tandem generate --temperature 0` must draw the ids transformers'
# greedy generate draws, for ids and for text prompts, up to the eos.
#
# The libraries come from PyPI into a venv over Debian's python3-torch.
# Exit 77 (ctest: skipped) with the reason when they cannot be had.
set -euo pipefail

tandem=${1:?tandem executable}
source=${2:?source dir}
work=${3:?work dir}
mkdir -p "$work"
source "$source/tests/hub/hf_venv.sh"
hf_venv "$work"
fortunes=()
for f in /usr/share/games/fortunes/*; do
  [[ -f $f && ! -L $f && $f != *.dat && $f != *.u8 ]] && fortunes+=("$f")
done
if ((${#fortunes[@]} == 0)); then
  echo "SKIPPED: no text in /usr/share/games/fortunes (Debian's fortunes package; scripts/install-deps.sh)"
  exit 77
fi
run=$(mktemp -d "$work/tok-run.XXXXXX")
trap 'rm -rf "$run"' EXIT
cd "$run"
fail() { echo "hub.tokenizers: $*" >&2; exit 1; }
hf() { "$venv/bin/python" "$source/tests/hub/hf_tokenizers.py" "$@"; }

echo "== HF's libraries train a tokenizer of each kind on ${#fortunes[@]} fortunes files, and a tiny model over it"
hf make . "${fortunes[@]}" >make.log 2>&1 || { cat make.log >&2; fail "training the tokenizers"; }
grep -v '^ ' make.log | grep vocabulary

for kind in gpt2 llama3 qwen2 sp; do
  echo "== $kind: tandem tokenize against HF, file by file"
  pairs=()
  for f in "${fortunes[@]}" stress.txt; do
    out="$kind.$(basename "$f").bin"
    "$tandem" tokenize "$f" --tokenizer "$kind" --output "$out" >tokenize.log 2>&1 ||
      { cat tokenize.log >&2; fail "tandem tokenize $f with $kind"; }
    pairs+=("$f" "$out")
  done
  hf check . "$kind" "${pairs[@]}" || fail "$kind: Tandem's ids differ from HF's"

  echo "== $kind: decode gives the text back"
  "$tandem" import "$kind" --context 64 --output "$kind.toml" >import.log 2>&1 ||
    { cat import.log >&2; fail "tandem import $kind"; }
  # The prompt's text is printed first: decoded by Tandem from its ids.
  "$tandem" generate "$kind.toml" --weights "$kind" --prompt-ids "$(cat "$kind.stress-ids")" --tokens 1 \
    --temperature 0 >decoded.txt 2>generate.log || { cat generate.log >&2; fail "tandem generate with $kind"; }
  head -c "$(stat -c %s "$kind.stress-decoded")" decoded.txt | cmp -s - "$kind.stress-decoded" ||
    fail "$kind: Tandem's decode of the stress text's ids is not the text (see $run/decoded.txt)"

  echo "== $kind: greedy generation against transformers'"
  # The text prompt reads weights without tokenizer files beside them (as a
  # fine-tuning run's are): the tokenizer comes from the model file's hf_dir.
  mkdir -p "$kind-weights"
  cp "$kind/config.json" "$kind"/*.safetensors "$kind-weights/"
  for prompt in ids text; do
    if [[ $prompt == ids ]]; then
      args=(--weights "$kind" --prompt-ids "$(cat "$kind.prompt-ids")")
      expect=$(cat "$kind.expect")
    else
      args=(--weights "$kind-weights" --prompt "$(cat "$kind.text-prompt")")
      expect=$(cat "$kind.expect-text")
    fi
    got=$("$tandem" generate "$kind.toml" "${args[@]}" --tokens 32 --temperature 0 \
      --print-ids 2>generate.log) || { cat generate.log >&2; fail "tandem generate with $kind"; }
    [[ $got == "$expect" ]] || fail "$kind, $prompt prompt: Tandem generated $got, transformers $expect"
    echo "$kind, $prompt prompt: $(tr ',' '\n' <<<"$got" | wc -l) ids as transformers"
  done
done

echo "== the eos token between files"
"$tandem" tokenize "${fortunes[@]:0:3}" --tokenizer gpt2 --eos-between-files --output joined.bin
hf check . gpt2 --joined joined.bin "${fortunes[@]:0:3}" || fail "--eos-between-files"
if "$tandem" tokenize stress.txt --tokenizer gpt2 --dtype u8 --output bad.bin 2>bad.log; then
  fail "--dtype u8 was accepted"
fi
echo "hub.tokenizers: OK"
