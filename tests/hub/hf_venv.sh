# Sourced by the hub tests (hf_import.sh, tokenizers.sh): `hf_venv WORK`
# sets $venv to WORK/hf-venv, a venv over Debian's python3-torch (1.13) with
# transformers 4.46.3 and peft 0.13.2 (releases that run on it), tokenizers
# and sentencepiece from PyPI, made once; a lock keeps two tests running at
# once from making it together. Exits 77 (ctest: skipped) with the reason
# when it cannot be had.
hf_venv() {
  local work=$1
  venv=$work/hf-venv
  exec 9>"$work/hf-venv.lock"
  flock 9
  if ! "$venv/bin/python" -c 'import transformers, torch, safetensors, peft, tokenizers, sentencepiece' \
    2>/dev/null; then
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
      echo "SKIPPED: PyTorch is not installed for /usr/bin/python3 (Debian's python3-torch)"
      exit 77
    fi
    rm -rf "$venv"
    if ! { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
      "$venv/bin/pip" install -q "transformers==4.46.3" "peft==0.13.2" tokenizers sentencepiece; } \
      >"$work/hf-pip.log" 2>&1; then
      echo "SKIPPED: transformers, peft, tokenizers and sentencepiece could not be installed from PyPI" \
        "into $venv (see $work/hf-pip.log)"
      exit 77
    fi
  fi
  flock -u 9
}
