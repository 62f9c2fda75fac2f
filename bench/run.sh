#!/usr/bin/env bash
# Tandem vs PyTorch on identical training work — the one command.
#
#   bench/run.sh [--threads N] [--rounds N] [--repeats N] [--no-setup]
#                [--workloads "fmnist_mlp cnn gemm_mlp tiny_mlp gpt gpt2_small_bytes gpt2_small_bytes_bf16"]
#                [--peers "debian pypi"]
#
# 1. Sets up the PyTorch peers (idempotent): Debian's python3-torch with
#    OpenBLAS (libopenblas0-pthread), and PyPI's current `torch` wheel in a
#    venv under $TANDEM_BENCH_CACHE (default ~/.cache/tandem-bench), installed
#    with --no-deps plus its CPU-side dependencies only (see README.md).
# 2. Builds `tandem` and every plugin in $TANDEM_BENCH_BUILD (default
#    build-bench; a no-op when up to date; the cuda and nccl plugins too where
#    the toolkit is, so the footprint is that of a full install),
#    bench/peak_flops and bench/gemm_ceiling.
# 3. Prints the CPU, its vector ISA and oneDNN's (ONEDNN_MAX_CPU_ISA caps it),
#    measures the FMA peak and what oneDNN's matmul alone reaches on the
#    GEMM-bound MLP's products (bench/gemm_ceiling.cpp), then runs each
#    workload on Tandem, PyTorch-Debian and PyTorch-PyPI, one after
#    another, same thread count, in --rounds interleaved rounds (each
#    side a fresh process per round with --repeats timed repeats): on a
#    shared or virtual machine the speed of a whole process drifts by a third
#    from one minute to the next, and rounds spread that drift over every side
#    instead of charging it to whichever ran at a bad moment. The table gives
#    the median over every repeat of every round and the range of the
#    per-round ratios. gpt2_small_bytes is GPT-2 small's shape on bytes
#    (85 M parameters); its _bf16 workload is the same model under mixed
#    precision: Tandem's amp:dtype=bf16 against PyTorch's
#    torch.autocast("cpu", torch.bfloat16); both also run against PyPI
#    PyTorch's torch.compile (compilation in the warm-up, excluded).
#    gemm_mlp is then profiled on Tandem and on the faster
#    PyTorch (each one's matmul ops' own GFLOP/s), and gpt2_small_bytes
#    per product shape (bench/products.py: each M x N x K's time on both
#    sides and its share of the FMA peak, printed after the tables). Then the footprint rows
#    (bench/footprint.py: startup commands, training the Fashion-MNIST
#    example on its real data against bench/torch_train.py, per-epoch
#    overhead), and prints the tables (bench/report.py). Raw JSON per run goes
#    to $TANDEM_BENCH_OUT (default bench/results/).
#    --peers "pypi" leaves out Debian's PyTorch (OpenBLAS, several times
#    slower than PyPI's on the GPT-2-small-shaped model: minutes a round),
#    which never is the best peer there; the ratios are over the best peer
#    that ran.
# 4. Says how busy the rest of the machine was while it measured
#    (bench/quiet.py): above half a core the figures are flagged not
#    reportable and run.sh exits 3.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=2
rounds=3
repeats=3
workloads="fmnist_mlp cnn gemm_mlp tiny_mlp gpt gpt2_small_bytes gpt2_small_bytes_bf16"
setup=1
peers="debian pypi"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --no-setup) setup=0; shift ;;
    --peers) peers=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

cache=${TANDEM_BENCH_CACHE:-$HOME/.cache/tandem-bench}
build=${TANDEM_BENCH_BUILD:-$repo/build-bench}
out=${TANDEM_BENCH_OUT:-$repo/bench/results}
venv=$cache/venv
mkdir -p "$cache" "$out"

# Steps per timed repeat, chosen so one repeat takes roughly a second here.
declare -A steps=([fmnist_mlp]=200 [cnn]=20 [gemm_mlp]=40 [tiny_mlp]=3000 [gpt]=5 [gpt2_small_bytes]=2
                  [gpt2_small_bytes_bf16]=3)
declare -A warmup=([fmnist_mlp]=20 [cnn]=5 [gemm_mlp]=5 [tiny_mlp]=200 [gpt]=2 [gpt2_small_bytes]=1
                   [gpt2_small_bytes_bf16]=1)

log() { echo "== $*" >&2; }

# ---- 1. PyTorch peers -------------------------------------------------------
if [ "$setup" = 1 ]; then
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || ! dpkg -s libopenblas0-pthread >/dev/null 2>&1; then
    log "installing Debian's python3-torch and libopenblas0-pthread"
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch libopenblas0-pthread >&2
  fi
  if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    # PyPI's default index has only the CUDA build of torch for Linux: the
    # wheel is ~540 MB, its nvidia-*/cuda-toolkit/triton deps several GB more.
    # We install torch --no-deps plus its pure-Python deps; the CUDA libraries
    # libtorch links at load time are then taken from the system where it has
    # them (/usr/local/cuda here), and only those the system lacks are
    # installed, at the versions torch pins (no GPU is used either way). If
    # torch still does not import, everything it asks for is installed.
    log "installing PyPI's torch into $venv (see README.md: CPU use, minimal CUDA runtime deps)"
    if /usr/bin/python3 -m venv "$venv" >&2 &&
       "$venv/bin/pip" install -q --no-deps torch >&2 &&
       "$venv/bin/pip" install -q numpy filelock typing-extensions sympy networkx jinja2 fsspec >&2; then
      if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
        pins=$("$venv/bin/python" - <<'PY'
import importlib.metadata as m, re
want = ("cuda-toolkit", "nvidia-cusparselt", "nvidia-nvshmem", "nvidia-nccl")
for r in m.requires("torch") or []:
    name = re.split(r"[ ;\[<>=~]", r, 1)[0]
    if name.startswith(want) and "extra ==" not in r:
        spec = r.split(";")[0].strip()
        print(spec.replace("[cublas,cudart,cufft,cufile,cupti,cusolver,cusparse,nvjitlink,nvrtc,nvtx]", "[cufile]"))
PY
)
        # shellcheck disable=SC2086
        "$venv/bin/pip" install -q $pins >&2 || true
      fi
      "$venv/bin/python" -c 'import torch' 2>/dev/null || "$venv/bin/pip" install -q torch >&2 || true
    fi
    "$venv/bin/python" -c 'import torch' 2>/dev/null ||
      log "PyPI torch could not be installed (PyPI unreachable?): its column will be empty"
  fi
fi

# ---- 2. Builds --------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_WERROR=ON -DTANDEM_BUILD_TESTS=OFF >&2
fi
cmake --build "$build" -j"$(nproc)" >&2
tandem=$build/bin/tandem
[ -x "$tandem" ] || tandem=$(find "$build" -name tandem -type f -perm -u+x | head -1)
if [ ! -x "$cache/peak_flops" ] || [ "$repo/bench/peak_flops.cpp" -nt "$cache/peak_flops" ]; then
  g++ -O3 -fopenmp "$repo/bench/peak_flops.cpp" -o "$cache/peak_flops"
fi
if [ ! -x "$cache/gemm_ceiling" ] || [ "$repo/bench/gemm_ceiling.cpp" -nt "$cache/gemm_ceiling" ]; then
  g++ -O2 -fopenmp "$repo/bench/gemm_ceiling.cpp" -ldnnl -o "$cache/gemm_ceiling"
fi
if [ ! -x "$cache/rusage" ] || [ "$repo/bench/rusage.c" -nt "$cache/rusage" ]; then
  cc -O2 "$repo/bench/rusage.c" -o "$cache/rusage"
fi

# ---- 3. Runs ----------------------------------------------------------------
rm -f "$out"/*.json
# The peers' environment. ONEDNN_MAX_CPU_ISA below AVX-512 stands in for an
# AVX2 machine: it caps oneDNN (Tandem's and PyPI torch's own), and the
# peers are capped the same way: their BLAS (MKL_ENABLE_INSTRUCTIONS,
# OpenBLAS's Haswell kernels) and torch's own vectorised kernels
# (ATEN_CPU_CAPABILITY: left alone, PyPI torch ran its gelu, softmax and
# copies with AVX-512 beside Tandem's AVX2 loops). Otherwise every library
# detects the CPU itself (their variables removed from the environment so
# each picks its AVX-512 kernels where it can).
case "${ONEDNN_MAX_CPU_ISA:-ALL}" in
  ALL | all | AVX512* | avx512*)
    peer_env=(-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u MKL_ENABLE_INSTRUCTIONS -u ATEN_CPU_CAPABILITY
              OMP_NUM_THREADS="$threads") ;;
  *)
    peer_env=(OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2
              OMP_NUM_THREADS="$threads") ;;
esac
{
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
  isa=$(grep -m1 -ow -e avx512f /proc/cpuinfo || grep -m1 -ow -e avx2 /proc/cpuinfo || echo "no AVX2")
  echo "vector ISA: $isa; ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-unset}; onednn:0 uses:" \
    "$("$tandem" devices 2>/dev/null | awk '$1 == "onednn:0" { for (i = 6; i < NF; ++i) printf "%s ", $i }')"
} | tee "$out/machine.txt" >&2
/usr/bin/python3 "$repo/bench/quiet.py" start "$out/quiet.json" $$
log "load before measuring: $(uptime)"
"$cache/peak_flops" "$threads" > "$out/peak_flops.txt"
case " $workloads " in
  *" gemm_mlp "*) "$cache/gemm_ceiling" "$threads" > "$out/gemm_ceiling.txt" ;;
esac
for round in $(seq 1 "$rounds"); do
  for w in $workloads; do
    # A _bf16 workload: its model under mixed precision on every side.
    model=$repo/bench/models/${w%_bf16}.toml
    tandem_mixed=() peer_mixed=()
    if [[ "$w" == *_bf16 ]]; then
      tandem_mixed=(--feature amp:dtype=bf16)
      peer_mixed=(--dtype bf16)
    fi
    common=(--threads "$threads" --steps "${steps[$w]}" --warmup "${warmup[$w]}" --repeats "$repeats")
    log "$w, round $round of $rounds: tandem"
    "$tandem" bench "$model" --device onednn:0 "${common[@]}" "${tandem_mixed[@]}" \
      --json "$out/$w.tandem.r$round.json" >&2
    if [[ " $peers " == *" debian "* ]]; then
      log "$w, round $round of $rounds: pytorch-debian (OpenBLAS; ${peer_env[*]})"
      env "${peer_env[@]}" /usr/bin/python3 "$repo/bench/torch_peer.py" "$model" "${common[@]}" "${peer_mixed[@]}" \
        --label pytorch-debian --json "$out/$w.debian.r$round.json" >&2 || rm -f "$out/$w.debian.r$round.json"
    fi
    if [[ " $peers " == *" pypi "* ]] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
      log "$w, round $round of $rounds: pytorch-pypi"
      env "${peer_env[@]}" "$venv/bin/python" "$repo/bench/torch_peer.py" "$model" "${common[@]}" "${peer_mixed[@]}" \
        --label pytorch-pypi --json "$out/$w.pypi.r$round.json" >&2 || rm -f "$out/$w.pypi.r$round.json"
      if [[ "$w" == gpt2_* ]]; then
        log "$w, round $round of $rounds: pytorch-pypi torch.compile"
        env "${peer_env[@]}" "$venv/bin/python" "$repo/bench/torch_peer.py" "$model" "${common[@]}" \
          "${peer_mixed[@]}" --compile --label pytorch-compile --json "$out/$w.compile.r$round.json" >&2 ||
          rm -f "$out/$w.compile.r$round.json"
      fi
    fi
  done
done
case " $workloads " in
  *" gemm_mlp "*)
    log "gemm_mlp: tandem --profile (time per node, for the matmul ops' own GFLOP/s)"
    "$tandem" bench "$repo/bench/models/gemm_mlp.toml" --device onednn:0 --threads "$threads" \
      --steps "${steps[gemm_mlp]}" --warmup "${warmup[gemm_mlp]}" --repeats 3 --profile \
      --json "$out/gemm_mlp.profile.json" >&2
    # The same for the faster PyTorch (PyPI's where installed): what its BLAS
    # reaches on these products bounds the ratio a GEMM-bound step can show.
    peer_python=/usr/bin/python3 peer_label=pytorch-debian
    if "$venv/bin/python" -c 'import torch' 2>/dev/null; then peer_python=$venv/bin/python peer_label=pytorch-pypi; fi
    log "gemm_mlp: $peer_label --profile (its matmul ops' own GFLOP/s)"
    env "${peer_env[@]}" "$peer_python" "$repo/bench/torch_peer.py" "$repo/bench/models/gemm_mlp.toml" \
      --threads "$threads" --steps "${steps[gemm_mlp]}" --warmup "${warmup[gemm_mlp]}" --repeats 1 --label "$peer_label" \
      --profile --profile-json "$out/gemm_mlp.peer-profile.json" > /dev/null 2>&1 ||
      rm -f "$out/gemm_mlp.peer-profile.json" ;;
esac

# ---- products: each GEMM shape of the GPT-2-small-shaped step, both sides ----
# One profiled run of each side (per-node timing costs a synchronisation per
# node, so not in the timed rounds); bench/products.py lines them up by
# M x N x K against the FMA peak measured above.
case " $workloads " in
  *" gpt2_small_bytes "*)
    if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
      model=$repo/bench/models/gpt2_small_bytes.toml
      log "gpt2_small_bytes: tandem --profile-nodes (every product's own time)"
      "$tandem" bench "$model" --device onednn:0 --threads "$threads" --steps 2 --warmup 1 --repeats 1 \
        --profile-nodes 100000 --json "$out/products.tandem.json" > /dev/null
      log "gpt2_small_bytes: pytorch-pypi --profile (every product's own time)"
      env "${peer_env[@]}" "$venv/bin/python" "$repo/bench/torch_peer.py" "$model" --threads "$threads" --steps 2 \
        --warmup 1 --repeats 1 --label pytorch-pypi --profile --profile-json "$out/products.peer.json" > /dev/null 2>&1 &&
        /usr/bin/python3 "$repo/bench/products.py" "$out/products.tandem.json" "$out/products.peer.json" \
          --peak "$(head -1 "$out/peak_flops.txt")" > "$out/products.txt" || rm -f "$out/products.txt"
    fi ;;
esac

# ---- footprint: what a user pays besides the steps -------------------------
log "startup: tandem plugins / devices / --help, every plugin of $build"
/usr/bin/python3 "$repo/bench/footprint.py" startup "$tandem" --rusage "$cache/rusage" --json "$out/startup.json" >&2
example=$repo/examples/fmnist_mlp.toml
log "training $example for 3 epochs on its data: tandem"
/usr/bin/python3 "$repo/bench/footprint.py" train "$tandem" "$example" --threads "$threads" --epochs 3 --rusage "$cache/rusage" \
  --json "$out/train.tandem.json" >&2
log "training it: pytorch-debian"
env "${peer_env[@]}" /usr/bin/python3 \
  "$repo/bench/torch_train.py" "$example" --threads "$threads" --label pytorch-debian \
  --json "$out/train.debian.json" >&2 || rm -f "$out/train.debian.json"
if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  log "training it: pytorch-pypi"
  env "${peer_env[@]}" "$venv/bin/python" "$repo/bench/torch_train.py" "$example" --threads "$threads" \
    --label pytorch-pypi --json "$out/train.pypi.json" >&2 || rm -f "$out/train.pypi.json"
fi
log "per-epoch overhead: 100 epochs of 1 batch against 1 epoch of 100"
/usr/bin/python3 "$repo/bench/footprint.py" epochs "$tandem" --threads "$threads" --rusage "$cache/rusage" --json "$out/epochs.json" >&2

log "load after measuring: $(uptime)"
# The peak again: on a shared machine another tenant may have held a core
# while the first was measured; report.py uses the higher of the two.
"$cache/peak_flops" "$threads" >> "$out/peak_flops.txt"
quiet=0
/usr/bin/python3 "$repo/bench/quiet.py" stop "$out/quiet.json" $$ | tee "$out/quiet.txt" >&2 || quiet=$?
/usr/bin/python3 "$repo/bench/report.py" "$out" --threads "$threads" --workloads "$workloads"
if [ -f "$out/products.txt" ]; then echo; cat "$out/products.txt"; fi
exit "$quiet"
