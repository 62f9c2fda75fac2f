#!/usr/bin/env python3
"""The table of bench/run.sh, from the JSON files one run left in a folder.

ratio = Tandem samples/s / the faster PyTorch's samples/s (>= 1.0: Tandem is
faster). GFLOP/s = 6 x parameters x samples/s; eff = that / the measured
FMA-loop peak (bench/peak_flops) on the same thread count.
"""
import argparse
import json
import os


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--workloads", default="fmnist_mlp cnn gemm_mlp tiny_mlp gpt")
    a = ap.parse_args()
    peak = None
    try:
        with open(os.path.join(a.folder, "peak_flops.txt")) as f:
            peak = float(f.read().strip())
    except (OSError, ValueError):
        pass

    def sps(r):
        return f"{r['median_samples_per_second']:.0f}" if r else "-"

    def mib(r):
        return f"{r['peak_rss_bytes'] / 2**20:.0f}" if r else "-"

    header = ["workload", "batch", "thr", "tandem/s", "pt-debian/s", "pt-pypi/s", "ratio",
              "RSS tandem MiB", "RSS pt-deb MiB", "RSS pt-pypi MiB", "GFLOP/s tandem", "GFLOP/s best-pt"]
    rows = []
    versions = set()
    for w in a.workloads.split():
        t = load(a.folder, f"{w}.tandem.json")
        d = load(a.folder, f"{w}.debian.json")
        p = load(a.folder, f"{w}.pypi.json")
        peers = [r for r in (d, p) if r]
        for r in peers:
            versions.add(f"{r['framework']}: torch {r['torch_version']} ({r['blas']})")
        best = max(peers, key=lambda r: r["median_samples_per_second"]) if peers else None
        ratio = (f"{t['median_samples_per_second'] / best['median_samples_per_second']:.2f}"
                 if t and best else "-")
        gf_t = f"{t['effective_gflops']:.1f}" if t else "-"
        gf_p = f"{best['effective_gflops']:.1f}" if best else "-"
        if w == "gemm_mlp" and peak and t:
            gf_t += f" ({100 * t['effective_gflops'] / peak:.0f}%)"
        if w == "gemm_mlp" and peak and best:
            gf_p += f" ({100 * best['effective_gflops'] / peak:.0f}%)"
        batch = str((t or best or {}).get("batch", "-"))
        rows.append([w, batch, str(a.threads), sps(t), sps(d), sps(p), ratio, mib(t), mib(d), mib(p),
                     gf_t, gf_p])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(widths[i]) for i, h in enumerate(header)))
    for r in rows:
        print("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)))
    print()
    print(f"samples/s: median of the repeats (training steps only, data pre-loaded, warm-up excluded); "
          f"threads: {a.threads} on every side")
    print("ratio: Tandem over the faster PyTorch; RSS: getrusage ru_maxrss of each process")
    if peak:
        print(f"measured f32 peak (AVX-512 FMA loop, {a.threads} threads): {peak:.1f} GFLOP/s; "
              "GFLOP/s = 6 x parameters x samples/s (% of that peak for gemm_mlp)")
    prof = load(a.folder, "gemm_mlp.profile.json")
    if prof and prof.get("gemm_gflops"):
        share = prof["gemm_ms_per_step"] / prof["step_ms"] if prof.get("step_ms") else 0
        line = (f"GEMM efficiency (gemm_mlp, tandem --profile): the matmul ops reach {prof['gemm_gflops']:.1f} "
                f"GFLOP/s over their own time")
        if peak:
            line += f" = {100 * prof['gemm_gflops'] / peak:.0f}% of the measured peak"
        print(line + f"; they are {100 * share:.0f}% of the profiled step")
    for v in sorted(versions):
        print(v)


if __name__ == "__main__":
    main()
