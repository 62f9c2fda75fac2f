#!/usr/bin/env python3
"""The table of bench/run.sh, from the JSON files one run left in a folder.

ratio = Tandem samples/s / the faster PyTorch's samples/s (>= 1.0: Tandem is
faster). GFLOP/s = 6 x parameters x samples/s; eff = that / the measured
FMA-loop peak (bench/peak_flops) on the same thread count.

run.sh runs every side once per round (files WORKLOAD.SIDE.rN.json); a side's
samples/s is the median over the repeats of all its rounds, its RSS the
largest of its rounds, and the table shows the range of the per-round ratios
beside the ratio of the medians.
"""
import argparse
import glob
import json
import os
import re
import statistics


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_rounds(folder, workload, side):
    """One side's rounds merged into one record shaped like a single run's, plus
    'rounds': each round's own record. None when no round left a file."""
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, f"{workload}.{side}.r*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    if not runs:
        return None
    merged = dict(runs[0])
    rates = [x for r in runs for x in r["samples_per_second"]]
    median = statistics.median(rates)
    merged.update({
        "samples_per_second": rates,
        "median_samples_per_second": median,
        # GFLOP/s scale with samples/s (6 x parameters x tokens per sample).
        "effective_gflops": runs[0]["effective_gflops"] * median / runs[0]["median_samples_per_second"],
        "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs),
        "rounds": runs,
    })
    return merged


def round_ratios(t, peers):
    """Tandem's median over the faster peer's, round by round (rounds all sides finished)."""
    if not t or not peers:
        return []
    n = min(len(r["rounds"]) for r in [t] + peers)
    return [t["rounds"][i]["median_samples_per_second"] /
            max(p["rounds"][i]["median_samples_per_second"] for p in peers) for i in range(n)]


def measured_peaks(folder):
    """The FMA-loop peaks run.sh measured (before and after the workloads), GFLOP/s."""
    peaks = []
    for line in read_lines(folder, "peak_flops.txt"):
        try:
            peaks.append(float(line))
        except ValueError:
            pass
    return peaks


def print_gemm_efficiency(prof, who, peak):
    """A profiled gemm_mlp run's matmul ops: their GFLOP/s over their own time and share of the step."""
    if not prof or not prof.get("gemm_gflops"):
        return
    share = prof["gemm_ms_per_step"] / prof["step_ms"] if prof.get("step_ms") else 0
    line = f"GEMM efficiency (gemm_mlp, {who}): the matmul ops reach {prof['gemm_gflops']:.1f} GFLOP/s over their own time"
    if peak:
        line += f" = {100 * prof['gemm_gflops'] / peak:.0f}% of the measured peak"
    print(line + f"; they are {100 * share:.0f}% of the profiled step")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--workloads",
                    default="fmnist_mlp cnn gemm_mlp tiny_mlp gpt gpt2_small_bytes gpt2_small_bytes_bf16")
    a = ap.parse_args()
    peaks = measured_peaks(a.folder)
    peak = max(peaks) if peaks else None

    def sps(r):
        if not r:
            return "-"
        v = r["median_samples_per_second"]
        return f"{v:.2f}" if v < 10 else f"{v:.0f}"

    def mib(r):
        return f"{r['peak_rss_bytes'] / 2**20:.0f}" if r else "-"

    header = ["workload", "batch", "thr", "tandem/s", "pt-debian/s", "pt-pypi/s", "pt-compile/s", "ratio", "rounds",
              "RSS tandem MiB", "RSS pt-deb MiB", "RSS pt-pypi MiB", "RSS/pt", "GFLOP/s tandem", "GFLOP/s best-pt"]
    rows = []
    versions = set()
    n_rounds = 0
    for w in a.workloads.split():
        t = load_rounds(a.folder, w, "tandem")
        d = load_rounds(a.folder, w, "debian")
        p = load_rounds(a.folder, w, "pypi")
        c = load_rounds(a.folder, w, "compile")
        peers = [r for r in (d, p, c) if r]
        n_rounds = max([n_rounds] + [len(r["rounds"]) for r in [t] + peers if r])
        for r in peers:
            kernels = f", {r['kernels']} kernels" if r.get("kernels") else ""
            versions.add(f"{r['framework']}: torch {r['torch_version']} ({r['blas']}{kernels})")
        best = max(peers, key=lambda r: r["median_samples_per_second"]) if peers else None
        ratio = (f"{t['median_samples_per_second'] / best['median_samples_per_second']:.2f}"
                 if t and best else "-")
        per_round = round_ratios(t, peers)
        spread = f"{min(per_round):.2f}-{max(per_round):.2f}" if len(per_round) > 1 else "-"
        gf_t = f"{t['effective_gflops']:.1f}" if t else "-"
        gf_p = f"{best['effective_gflops']:.1f}" if best else "-"
        if w == "gemm_mlp" and peak and t:
            gf_t += f" ({100 * t['effective_gflops'] / peak:.0f}%)"
        if w == "gemm_mlp" and peak and best:
            gf_p += f" ({100 * best['effective_gflops'] / peak:.0f}%)"
        batch = str((t or best or {}).get("batch", "-"))
        rss_ratio = (f"{t['peak_rss_bytes'] / min(r['peak_rss_bytes'] for r in peers):.2f}"
                     if t and peers else "-")
        rows.append([w, batch, str(a.threads), sps(t), sps(d), sps(p), sps(c), ratio, spread, mib(t), mib(d), mib(p),
                     rss_ratio, gf_t, gf_p])
    for line in read_lines(a.folder, "machine.txt"):
        print(line)
    print_table(header, rows)
    print()
    print(f"samples/s: median of the repeats of {n_rounds} interleaved rounds (training steps only, data "
          f"pre-loaded, warm-up excluded); threads: {a.threads} on every side")
    print("ratio: Tandem over the faster PyTorch (medians); rounds: the lowest and highest ratio of one round; "
          "RSS: getrusage ru_maxrss of each process (largest round); RSS/pt: Tandem's over the smaller PyTorch's")
    if peak:
        print(f"measured f32 peak ({peak_unit(a.folder)}, {a.threads} threads): {peak:.1f} GFLOP/s; "
              "GFLOP/s = 6 x parameters x samples/s (% of that peak for gemm_mlp)")
        if len(peaks) > 1 and min(peaks) < 0.9 * peak:
            print(f"the peak read {' and '.join(f'{p:.1f}' for p in peaks)} GFLOP/s before and after measuring: "
                  "the lower one had a core shared with another process or tenant; the higher is used")
    print_gemm_efficiency(load(a.folder, "gemm_mlp.profile.json"), "tandem --profile", peak)
    peer = load(a.folder, "gemm_mlp.peer-profile.json")
    print_gemm_efficiency(peer, f"{peer.get('label', 'pytorch')} --profile" if peer else "", peak)
    print_gemm_ceiling(a.folder, peak)
    for v in sorted(versions):
        print(v)
    print_footprint(a.folder)
    for line in read_lines(a.folder, "quiet.txt"):
        print(line)


def print_gemm_ceiling(folder, peak):
    """bench/gemm_ceiling's 'WARM COLD' GFLOP/s: oneDNN's matmul alone on
    gemm_mlp's three products, operands in cache and evicted."""
    lines = read_lines(folder, "gemm_ceiling.txt")
    try:
        warm, cold = (float(x) for x in lines[0].split())
    except (IndexError, ValueError):
        return
    def rate(g):
        return f"{g:.1f} GFLOP/s" + (f" ({100 * g / peak:.0f}% of the peak)" if peak else "")

    own = peak_unit(folder).startswith("AVX2")
    print(f"oneDNN's matmul alone on gemm_mlp's three products (bench/gemm_ceiling): {rate(warm)} with its "
          f"operands in cache, {rate(cold)} with them evicted"
          + ("; Tandem runs these on its own AVX2 GEMM instead" if own else ""))


def read_lines(folder, name):
    try:
        with open(os.path.join(folder, name)) as f:
            return [line.rstrip("\n") for line in f]
    except OSError:
        return []


def peak_unit(folder):
    for line in read_lines(folder, "machine.txt"):
        if line.startswith("vector ISA:"):
            # The limit the run was taken under, as run.sh recorded it (not
            # this process's environment: the report may be re-read later).
            m = re.search(r"ONEDNN_MAX_CPU_ISA=(\S+);", line)
            isa = m.group(1) if m and m.group(1) != "unset" else ""
            capped = isa and not isa.upper().startswith("AVX512") and isa.upper() != "ALL"
            return "AVX2+FMA loop" if capped or "avx512f" not in line else "AVX-512 FMA loop"
    return "FMA loop"


def print_table(header, rows):
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  ".join(h.rjust(widths[i]) for i, h in enumerate(header)))
    for r in rows:
        print("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)))


def print_footprint(folder):
    mib = lambda b: f"{b / 2**20:.0f}"
    startup = load(folder, "startup.json")
    if startup:
        print("\nstartup, every plugin of the build loaded (best of 5 runs, peak RSS):")
        print_table(["command", "ms", "RSS MiB"],
                    [[c, f"{r['ms']:.0f}", mib(r["peak_rss_bytes"])] for c, r in startup.items()])
    t = load(folder, "train.tandem.json")
    peers = [r for r in (load(folder, "train.debian.json"), load(folder, "train.pypi.json")) if r]
    if t:
        print(f"\ntraining {t['model']} for {t['epochs']} epochs on its real data, {t['threads']} threads "
              "(samples/s of the training loops; seconds and peak RSS of the whole process):")
        rows = [["tandem", f"{t['samples_per_second']:.0f}", f"{t['seconds']:.1f}", f"{t['test_accuracy']:.4f}",
                 mib(t["peak_rss_bytes"])]]
        rows += [[r["framework"], f"{r['samples_per_second']:.0f}", f"{r['seconds']:.1f}",
                  f"{r['test_accuracy']:.4f}", mib(r["peak_rss_bytes"])] for r in peers]
        print_table(["", "samples/s", "seconds", "test acc", "RSS MiB"], rows)
        if peers:
            fast = max(peers, key=lambda r: r["samples_per_second"])
            small = min(r["peak_rss_bytes"] for r in peers)
            print(f"ratio {t['samples_per_second'] / fast['samples_per_second']:.2f} (over {fast['framework']}); "
                  f"RSS {t['peak_rss_bytes'] / small:.2f}x the smaller PyTorch's")
    e = load(folder, "epochs.json")
    if e:
        print(f"\nper-epoch overhead: 100 epochs of 1 batch {e['100_epochs_of_1_batch']['seconds']:.2f} s, "
              f"1 epoch of 100 batches {e['1_epoch_of_100_batches']['seconds']:.2f} s (whole runs, "
              f"synthetic data, same steps): {e['overhead_ms']:.1f} ms per extra epoch")


if __name__ == "__main__":
    main()
