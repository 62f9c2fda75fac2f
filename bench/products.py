#!/usr/bin/env python3
"""Each matrix-product shape of one training step, Tandem against PyTorch.

Reads `tandem bench MODEL --profile-nodes N --json T.json` (every node: the
matrix products carry their M x N x K) and `torch_peer.py MODEL
--profile --profile-json P.json` (each 2-D aten::mm / aten::addmm shape's
own time), groups both by the product's M x N x K (a linear's forward is
tokens x out x in, its dx tokens x in x out, its dw out x in x tokens, as
PyTorch's autograd shapes them too) and prints, per shape: the calls a step,
each side's milliseconds a step and GFLOP/s over its own time, Tandem's share
of the FMA peak, and PyTorch's time over Tandem's (above 1: Tandem is
faster). A shape is marked where Tandem is more than 5 % slower than PyTorch
or below 75 % of the peak.

Usage: products.py TANDEM.json PEER.json [--peak GFLOPS] [--label NAME]
"""
import argparse
import json
import sys
from collections import defaultdict


def tandem_dims(node):
    """A matrix-product node's M, N, K (`tandem bench --json`'s "mnk"), or
None for other nodes."""
    return tuple(node["mnk"]) if "mnk" in node else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tandem_json")
    ap.add_argument("peer_json")
    ap.add_argument("--peak", type=float, default=0.0, help="the FMA peak in GFLOP/s (bench/peak_flops)")
    ap.add_argument("--label", default="", help="a heading for the table")
    a = ap.parse_args()
    with open(a.tandem_json) as f:
        tandem = json.load(f)
    with open(a.peer_json) as f:
        peer = json.load(f)
    if "shapes" not in peer:
        sys.exit(f"products.py: {a.peer_json} has no per-shape times (torch_peer.py --profile --profile-json)")

    ours = defaultdict(lambda: {"calls": 0, "ms": 0.0, "ops": set()})
    for node in tandem.get("slowest_nodes", []):
        dims = tandem_dims(node)
        if dims is None:
            continue
        entry = ours[tuple(dims)]
        entry["calls"] += 1
        entry["ms"] += node["ms_per_step"]
        entry["ops"].add(node["op"].replace("linear_grad_", "d").replace("linear", "fwd"))
    theirs = defaultdict(lambda: {"calls": 0.0, "ms": 0.0})
    for shape in peer["shapes"]:
        entry = theirs[tuple(shape["mnk"])]
        entry["calls"] += shape["calls_per_step"]
        entry["ms"] += shape["ms_per_step"]
    if not ours:
        sys.exit(f"products.py: {a.tandem_json} lists no matrix products (tandem bench --profile-nodes N --json)")

    print(a.label or f"matrix products per step: {tandem.get('model', '?')}, {tandem.get('threads', '?')} threads"
          + (f", FMA peak {a.peak:.0f} GFLOP/s" if a.peak else ""))
    print(f"  {'M x N x K':<20} {'calls':>5} {'as':<12} {'tandem ms':>10} {'GFLOP/s':>8} {'% peak':>7}"
          f" {'pytorch ms':>11} {'GFLOP/s':>8} {'ratio':>6}")
    total_ours = total_theirs = 0.0
    for dims in sorted(ours, key=lambda d: -ours[d]["ms"]):
        m, n, k = dims
        flop = 2.0 * m * n * k
        mine = ours[dims]
        rate = flop * mine["calls"] / (mine["ms"] * 1e6) if mine["ms"] > 0 else 0.0
        share = 100 * rate / a.peak if a.peak else 0.0
        other = theirs.get(dims)
        line = (f"  {f'{m} x {n} x {k}':<20} {mine['calls']:>5} {'/'.join(sorted(mine['ops'])):<12}"
                f" {mine['ms']:>10.2f} {rate:>8.1f} {share:>6.0f}%")
        marks = []
        if other and other["ms"] > 0:
            their_rate = flop * other["calls"] / (other["ms"] * 1e6)
            ratio = other["ms"] / mine["ms"] * (mine["calls"] / other["calls"])
            line += f" {other['ms']:>11.2f} {their_rate:>8.1f} {ratio:>6.2f}"
            total_ours += mine["ms"]
            total_theirs += other["ms"] * mine["calls"] / other["calls"]
            if ratio < 0.95:
                marks.append("more than 5 % slower than PyTorch")
        else:
            line += f" {'-':>11} {'-':>8} {'-':>6}"
        if a.peak and share < 75:
            marks.append("below 75 % of the peak")
        print(line + ("  <- " + ", ".join(marks) if marks else ""))
    if total_ours > 0:
        print(f"  all shapes both ran: tandem {total_ours:.1f} ms, pytorch {total_theirs:.1f} ms a step, "
              f"ratio {total_theirs / total_ours:.2f}")


if __name__ == "__main__":
    main()
