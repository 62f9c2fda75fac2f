#!/usr/bin/env bash
# export.onnx / export.torch — a trained model leaves Tandem and computes the
# same thing elsewhere.
#
#   roundtrip.sh onnx  TANDEM SOURCE_DIR WORK_DIR
#   roundtrip.sh torch TANDEM SOURCE_DIR WORK_DIR
#
# onnx: trains each example briefly (fmnist_mlp, fmnist_cnn, embedding_cpu,
#   gpt_fortunes) on the reference or onednn backend, exports it with
#   `tandem export --format onnx`, evaluates it with `tandem eval --outputs`
#   and runs the ONNX model with onnxruntime (PyPI, in a venv under WORK_DIR)
#   on the same inputs: every logit within 1e-5. Then the INT8 models of the
#   MLP and the CNN (`tandem quantize`): the same bits. Prints the largest
#   difference per model.
# torch: the MLP's and the CNN's weights exported under PyTorch's names
#   (`--format safetensors`) load into PyTorch modules named like the layers
#   (load_state_dict strict) and give the same logits; weights changed in
#   PyTorch and written back give, through `tandem eval --weights`, the
#   logits PyTorch computes with them. Needs Debian's python3-torch.
# Exit 77 (ctest: skipped) with the reason when onnxruntime cannot be
# installed or PyTorch is absent.
set -euo pipefail

what=${1:?onnx or torch}
tandem=${2:?tandem executable}
source=${3:?source dir}
work=${4:?work dir}
examples=$source/examples
mkdir -p "$work"
run=$(mktemp -d "$work/run.XXXXXX")
trap 'rm -rf "$run"' EXIT
cd "$run"

step() { echo "== $*"; }
fail() { echo "export.$what: $*" >&2; exit 1; }

# Each example's model file, training steps and device (reference where
# onednn would take long on two cores, or lacks an op).
train() {  # name model steps device
  "$tandem" train "$2" --set "train.steps=$3" --run-dir "$1" --device "$4" --threads 1 >"$1.train.log" 2>&1 ||
    { cat "$1.train.log" >&2; fail "training $2"; }
}
evaluate() {  # name model weights device split
  "$tandem" eval "$2" --weights "$3" --device "$4" --threads 1 --split "$5" --outputs "$1.outputs.safetensors" \
    >"$1.eval.log" 2>&1 || { cat "$1.eval.log" >&2; fail "tandem eval of $3"; }
}

if [[ $what == onnx ]]; then
  venv=$work/onnx-venv
  if ! "$venv/bin/python" -c 'import onnxruntime, numpy' 2>/dev/null; then
    step "installing onnxruntime and numpy from PyPI into $venv"
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q onnxruntime numpy; } >"$work/pip.log" 2>&1; then
      echo "SKIPPED: onnxruntime could not be installed from PyPI into $venv (see $work/pip.log)"
      exit 77
    fi
  fi
  compare() { "$venv/bin/python" "$source/tests/export/compare_onnx.py" "$@"; }
  while read -r name steps device split; do
    model=$examples/$name.toml
    step "$name: train $steps steps on $device, export, compare on the $split split"
    train "$name" "$model" "$steps" "$device"
    "$tandem" export "$model" --weights "$name" --output "$name.onnx" || fail "export of $name"
    evaluate "$name" "$model" "$name" "$device" "$split"
    compare "$name.onnx" "$name.outputs.safetensors" --tolerance 1e-5 || fail "$name: onnxruntime differs"
  done <<'EOF'
fmnist_mlp 30 onednn test
fmnist_cnn 5 onednn test
embedding_cpu 10 reference test
gpt_fortunes 3 onednn validation
EOF
  for name in fmnist_mlp fmnist_cnn; do
    step "$name INT8: quantize, export, compare"
    "$tandem" quantize "$examples/$name.toml" --weights "$name" --output "$name-int8" --device onednn --threads 1 \
      >"$name.quantize.log" 2>&1 || { cat "$name.quantize.log" >&2; fail "quantize $name"; }
    "$tandem" export "$examples/$name.toml" --weights "$name-int8" --output "$name-int8.onnx" || fail "export"
    evaluate "$name-int8" "$examples/$name.toml" "$name-int8" onednn test
    compare "$name-int8.onnx" "$name-int8.outputs.safetensors" --tolerance 0 || fail "$name INT8 differs"
  done
  echo "export.onnx: OK"
  exit 0
fi

if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch is not installed for /usr/bin/python3 (Debian's python3-torch)"
  exit 77
fi
for name in fmnist_mlp fmnist_cnn; do
  model=$examples/$name.toml
  step "$name: Tandem -> PyTorch -> Tandem"
  train "$name" "$model" 10 onednn
  "$tandem" export "$model" --weights "$name" --format safetensors --output "$name.torch.safetensors" ||
    fail "export of $name"
  evaluate "$name" "$model" "$name" onednn test
  /usr/bin/python3 "$source/tests/export/torch_roundtrip.py" "$model" "$name.torch.safetensors" \
    "$name.outputs.safetensors" "$name.back.safetensors" || fail "$name: PyTorch differs"
  evaluate "$name-back" "$model" "$name.back.safetensors" onednn test
  /usr/bin/python3 -c "
import sys, numpy as np
sys.path.insert(0, '$source/tests/export')
from torch_roundtrip import read
got = read('$name-back.outputs.safetensors')['logits']
want = read('$name.back.safetensors')['expected_logits']
diff = float(np.max(np.abs(got.reshape(want.shape) - want)))
print(f'$name: Tandem with PyTorch\'s weights: largest |difference| {diff:.3g}')
sys.exit(0 if diff <= 1e-5 else 1)" || fail "$name: Tandem with PyTorch's weights differs"
done
echo "export.torch: OK"
