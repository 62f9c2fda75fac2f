#!/usr/bin/env bash
# Packs what the GPU checks need into one folder that runs on a GPU machine
# without the project's build dependencies (Boost, toml++, ONNX, protobuf
# come along; the NVIDIA libraries are that machine's own):
#
#   scripts/gpu-bundle.sh [--arch 90] [--build DIR] [--jobs N] OUT_DIR
#
# Builds the host, the plugins, tandem-conformance and the cuda/nccl test
# programs for one GPU architecture (default 90: H100 and H200) in DIR
# (default build-bundle), then copies bin/ and lib/ to OUT_DIR with every
# shared library they load from this machine's /usr/lib except the C
# runtime and the NVIDIA ones, into OUT_DIR/syslib.tar.gz. On the GPU machine,
# from a checkout of the same commit:
#
#   OUT_DIR/env.sh scripts/gpu-checks.sh --build OUT_DIR --no-build --only conform,memory,kernels,costs,peer,scale
#
# (the tests step needs a build tree's CTest files: run the test programs
# in OUT_DIR/bin directly, or gpu-checks.sh where the build was made).
# env.sh unpacks and puts OUT_DIR/syslib first on LD_LIBRARY_PATH, then the NVIDIA
# libraries of python3's PyTorch wheels where the machine has them (cuBLAS,
# cuDNN, NCCL), and runs its arguments.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
arch=90
build="$repo/build-bundle"
jobs=2
while [ $# -gt 1 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "gpu-bundle.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
out=$1
targets=(tandem tandem-plugin-cuda tandem-plugin-nccl tandem-plugin-reference tandem-plugin-onednn tandem-plugin-amp
  tandem-conformance tandem-gpu-kernels-bench tandem_cuda_host_tests tandem_cuda_plugin_tests
  tandem_cuda_graph_tests tandem_cuda_vendor_tests tandem_nccl_host_tests tandem_nccl_plugin_tests
  tandem_train_tests)
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_CUDA=ON -DTANDEM_BUILD_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch-real" > /dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

rm -rf "$out"
mkdir -p "$out/syslib" "$out/bin" "$out/lib"
# The programs the checks run, the plugins and the shared libraries of the
# tests (no static libraries: a bundle should fit in tens of MiB).
for program in tandem tandem-conformance tandem-gpu-kernels-bench tandem_cuda_host_tests tandem_cuda_plugin_tests \
  tandem_cuda_graph_tests tandem_cuda_vendor_tests tandem_nccl_host_tests tandem_nccl_plugin_tests tandem_train_tests; do
  [ -f "$build/bin/$program" ] && cp -a "$build/bin/$program" "$out/bin/"
done
cp -a "$build/lib/tandem" "$out/lib/"
find "$build/lib" -maxdepth 1 -name '*.so*' -exec cp -a {} "$out/lib/" \;
# What the programs load from this machine, less the C runtime and the
# NVIDIA libraries (the GPU machine's driver and wheels have their own).
find "$out/bin" "$out/lib" -type f \( -perm -u+x -o -name '*.so*' \) -print0 | xargs -0 ldd 2> /dev/null |
  awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+|libz|libcuda|libcudart|libcublas[^/]*|libcudnn[^/]*|libnccl|libnvidia[^/]*)\.so' |
  grep -v "^$out" | while read -r lib; do cp -L "$lib" "$out/syslib/"; done
# Compressed (oneDNN alone is 40 MiB): env.sh unpacks it on first use.
tar czf "$out/syslib.tar.gz" -C "$out" syslib
rm -r "$out/syslib"
cat > "$out/env.sh" <<'ENV'
#!/usr/bin/env bash
# Runs its arguments with this bundle's libraries (unpacked from
# syslib.tar.gz on first use), then the NVIDIA ones of python3's PyTorch
# wheels, on the loader's path.
set -e
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -d "$here/syslib" ] || tar xzf "$here/syslib.tar.gz" -C "$here"
site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2> /dev/null || true)
nvidia=$(ls -d "$site"/nvidia/*/lib 2> /dev/null | tr '\n' ':' || true)
export LD_LIBRARY_PATH="$here/syslib:$nvidia${LD_LIBRARY_PATH:-}"
exec "$@"
ENV
chmod +x "$out/env.sh"
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out (sm_$arch)"
