#!/usr/bin/env python3
"""The footprint rows of bench/run.sh: what a user pays besides the training
steps themselves. Each command runs under bench/rusage.c (--rusage: its
binary), which reports the command's wall time and peak RSS (libraries
included): measured from Python, a child's peak would include Python's own
image, which it was forked from.

  footprint.py startup TANDEM --rusage RUSAGE --json F
      `tandem plugins`, `tandem devices`, `tandem --help`: best wall time of
      5 runs and peak RSS, with every plugin of TANDEM's build tree loaded.
  footprint.py train TANDEM MODEL --threads N --epochs E --rusage RUSAGE --json F
      `tandem train MODEL` for E epochs on its own data: training samples/s
      (the epochs' own figures in metrics.jsonl), the whole run's seconds,
      the last test accuracy, peak RSS.
  footprint.py epochs TANDEM --threads N --rusage RUSAGE --json F
      per-epoch overhead: a 784-256-128-10 MLP trained 100 epochs of one batch
      of 128 against one epoch of 100 batches (same steps, synthetic data);
      "overhead_ms" is the extra time per epoch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


RUSAGE = None  # the bench/rusage.c binary (--rusage)


def measured(command, cwd=None):
    """{"seconds", "peak_rss_bytes"} of one run of `command`; exits on failure."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        done = subprocess.run([RUSAGE, report.name] + command, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit(f"footprint: {' '.join(command)} failed ({done.returncode}):\n{done.stdout}")
        return json.load(report)


def startup(a):
    result = {}
    for args in (["plugins"], ["devices"], ["--help"]):
        runs = [measured([a.tandem] + args) for _ in range(5)]
        result["tandem " + " ".join(args)] = {"ms": 1e3 * min(r["seconds"] for r in runs),
                                             "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs)}
    return result


def train_run(tandem, model, threads, sets, cwd):
    r = measured([tandem, "train", model, "--threads", str(threads), "--run-dir", "run"] + sets, cwd)
    samples = seconds = 0.0
    accuracy = None
    with open(os.path.join(cwd, "run", "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record.get("event") == "epoch":
                seconds += record["seconds"]
                samples += record["samples_per_second"] * record["seconds"]
                accuracy = record.get("eval_accuracy", accuracy)
    r["samples_per_second"] = samples / seconds if seconds else 0.0
    r["test_accuracy"] = accuracy
    return r


def train(a):
    with tempfile.TemporaryDirectory() as work:
        r = train_run(a.tandem, os.path.abspath(a.model), a.threads, ["--set", f"train.epochs={a.epochs}"], work)
    r.update({"framework": "tandem", "model": a.model, "threads": a.threads, "epochs": a.epochs})
    return r


MLP = """[model]
name = "epochs"
input = [784]
classes = 10
[[layers]]
name = "fc1"
op = "linear"
out_features = 256
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 128
activation = "relu"
[[layers]]
name = "fc3"
op = "linear"
out_features = 10
[train]
batch_size = 128
epochs = {epochs}
[data]
format = "synthetic"
synthetic_samples = {samples}
synthetic_test_samples = 128
"""


def epochs(a):
    result = {}
    for name, n_epochs, samples in (("100_epochs_of_1_batch", 100, 128), ("1_epoch_of_100_batches", 1, 12800)):
        with tempfile.TemporaryDirectory() as work:
            model = os.path.join(work, "m.toml")
            with open(model, "w") as f:
                f.write(MLP.format(epochs=n_epochs, samples=samples))
            result[name] = measured([a.tandem, "train", model, "--threads", str(a.threads), "--device",
                                     "onednn:0", "--run-dir", "run"], work)
    small, large = result["100_epochs_of_1_batch"]["seconds"], result["1_epoch_of_100_batches"]["seconds"]
    result["overhead_ms"] = 1e3 * (small - large) / 99
    return result


def main():
    global RUSAGE
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["startup", "train", "epochs"])
    ap.add_argument("tandem")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json", required=True)
    ap.add_argument("--rusage", required=True, help="the binary of bench/rusage.c")
    a = ap.parse_args()
    RUSAGE = a.rusage
    result = {"startup": startup, "train": train, "epochs": epochs}[a.what](a)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
