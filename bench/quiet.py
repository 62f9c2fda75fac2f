#!/usr/bin/env python3
"""Was the machine quiet while bench/run.sh measured? The load average counts
the benchmark's own threads too, so this measures what the others used:

  quiet.py start STATE_FILE PID       before measuring; PID is run.sh's own process
  quiet.py stop STATE_FILE PID        after

"Others" = all CPU time the kernel counted busy (/proc/stat) minus the CPU
time of PID's waited children (every command run.sh ran) over the wall time,
in cores. Above 0.5 the figures are flagged not reportable (exit 3); the
line printed says how busy the machine was either way.
"""
import json
import os
import sys
import time

LIMIT = 0.5


def busy_seconds():
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal: all but idle and iowait
    busy = sum(fields[:8]) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def children_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields after the command: state is [0]; cutime, cstime are [13], [14]
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def main():
    what, state, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if what == "start":
        with open(state, "w") as f:
            json.dump({"busy": busy_seconds(), "own": children_seconds(pid), "wall": time.monotonic(),
                       "load": os.getloadavg()[0]}, f)
        return 0
    with open(state) as f:
        start = json.load(f)
    wall = time.monotonic() - start["wall"]
    own = children_seconds(pid) - start["own"]
    others = max(0.0, busy_seconds() - start["busy"] - own) / wall
    verdict = "quiet" if others <= LIMIT else f"NOT QUIET: above {LIMIT}, these figures are not reportable"
    print(f"other processes used {others:.2f} cores on average over the {wall:.0f} s of measuring "
          f"(load average before: {start['load']:.2f}); {verdict}")
    return 0 if others <= LIMIT else 3


if __name__ == "__main__":
    sys.exit(main())
