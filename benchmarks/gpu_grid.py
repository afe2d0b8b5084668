"""Benchmark: the Jain & Wallace grid through the real CLI (Hydra, data module, Lightning, analyses), with
the wall time of every job and of its stages and, on a GPU, its utilisation, in one CSV.

    # on a GPU machine (processed-dataset caches copied into $ATTN_STUDY_CACHE: no spaCy needed there)
    python benchmarks/gpu_grid.py --out outputs/gpu_grid.csv --jobs 3 \\
        paths.data.sst=<trainDevTestTrees_PTB> paths.data.imdb=<aclImdb_v1.tar.gz>
    # one job on 2 CPU cores: the J&W IMDB BiLSTM under the recipe
    python benchmarks/gpu_grid.py --out imdb_lstm.csv --datasets imdb --encoders lstm --attentions additive \
        recipe=jain_wallace dataset.path=<aclImdb_v1.tar.gz> model.embeddings.path=<glove.6B.50d.txt.gz> \
        model.network.embedding_dim=50
    # anywhere, in seconds: the same code on a tiny synthetic grid (the test suite runs this)
    python benchmarks/gpu_grid.py --tiny --out /tmp/grid.csv

The grid is ``dataset`` × ``encoder`` × ``attention`` (default sst,imdb × lstm,cnn,average ×
additive,dot: 12 jobs; ``--datasets sst`` for one dataset's 6; ``--encoders``, ``--attentions``), trained and
analysed with
``analysis=[jain_wallace]``, launched as one ``attn-study -m`` into ``--sweep-dir`` (a relaunch skips
the complete jobs: delete the folder to time again). ``--jobs N`` > 1 runs N jobs at once through
``hydra/launcher=joblib``, each with cores / N torch threads.
Extra arguments are Hydra overrides passed on. Columns: job, state, wall_s (the job's
run, from its status.json), train_s, outside_training_s (data loading, testing, the analyses), epoch_s, one column
per J&W sub-test (jw_<test>_s) and per other family's (``<ns>_<test>_s``, with ``analysis=[…]``), peak_memory_mib
(peak_gpu_memory_mib), test_acc, torch_threads and, where ``nvidia-smi`` exists, gpu_util_mean
(%), gpu_util_max and gpu_mem_max_mib over the job's time span (shared by the jobs that ran together).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "dataset=synthetic",
    "encoder=lstm,average",
    "attention=additive",
    "analysis=[jain_wallace]",
    "trainer=debug",
    "dataset.source.n_train=96",
    "dataset.source.n_dev=32",
    "dataset.source.n_test=32",
    "model.network.embedding_dim=16",
    "encoder.hidden_size=8",
    "analysis.jain_wallace.steps=5",
    "analysis.jain_wallace.permutations=5",
    "logger=[csv]",
]
JW_TESTS = ("predict", "correlation", "permutation", "adversarial")


class GpuSampler(threading.Thread):
    """(time, utilisation %, memory MiB) of GPU 0 every ``interval`` seconds from ``nvidia-smi``."""

    def __init__(self, interval: float = 0.5):
        super().__init__(daemon=True)
        self.interval, self.samples, self.stopped = interval, [], threading.Event()

    def run(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-i", "0"]
        while not self.stopped.is_set():
            try:
                util, memory = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.split(",")[:2]
                self.samples.append((time.time(), float(util), float(memory)))
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            self.stopped.wait(self.interval)

    def between(self, start: float, end: float) -> dict:
        inside = [(u, m) for t, u, m in self.samples if start <= t <= end]
        if not inside:
            return {}
        return {
            "gpu_util_mean": round(sum(u for u, _ in inside) / len(inside), 1),
            "gpu_util_max": max(u for u, _ in inside),
            "gpu_mem_max_mib": max(m for _, m in inside),
        }


def job_row(job: Path, sampler: GpuSampler | None) -> dict:
    status = json.loads((job / "status.json").read_text())
    summary_file = job / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    started, finished = status.get("started"), status.get("finished")
    wall = finished - started if started and finished else None
    train = summary.get("train/seconds")
    row = {
        "job": job.name,
        "state": status.get("state"),
        "wall_s": wall,
        "train_s": train,
        "outside_training_s": wall - train if wall is not None and train is not None else None,
    }
    row["epoch_s"] = summary.get("train/seconds_per_epoch")
    for test in JW_TESTS:
        row[f"jw_{test}_s"] = summary.get(f"jw/seconds/{test}")
    for key, value in summary.items():  # every other family's sub-tests
        if "/seconds/" in key and not key.startswith("jw/"):
            row[key.replace("/seconds/", "_").replace("/", "_") + "_s"] = value
    row["peak_memory_mib"] = summary.get("run/peak_memory_mib")
    row["peak_gpu_memory_mib"] = summary.get("run/peak_gpu_memory_mib")
    row["test_acc"] = summary.get("test/acc")
    row["torch_threads"] = status.get("torch_threads")
    if sampler is not None and started and finished:
        row.update(sampler.between(started, finished))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the CSV to write")
    parser.add_argument("--sweep-dir", default=None, help="where the jobs go (default: beside --out)")
    parser.add_argument("--jobs", type=int, default=1, help="jobs at once (joblib launcher when > 1)")
    parser.add_argument("--tiny", action="store_true", help="a tiny synthetic grid, seconds on a CPU")
    parser.add_argument("--datasets", default="sst,imdb", help="the grid's datasets, comma-separated")
    parser.add_argument("--encoders", default="lstm,cnn,average", help="the grid's encoders, comma-separated")
    parser.add_argument("--attentions", default="additive,dot", help="the grid's attentions, comma-separated")
    args, overrides = parser.parse_known_args(argv)
    out = Path(args.out)
    sweep_dir = Path(args.sweep_dir) if args.sweep_dir else out.with_suffix("").with_name(out.stem + "_sweep")
    command = [
        sys.executable,
        "-m",
        "attn_study.cli",
        "-m",
        f"hydra.sweep.dir={sweep_dir}",
        *(
            TINY
            if args.tiny
            else [
                f"dataset={args.datasets}",
                f"encoder={args.encoders}",
                f"attention={args.attentions}",
                "analysis=[jain_wallace]",
            ]
        ),
    ]
    if args.jobs > 1:
        command += ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.jobs}"]
    command += overrides
    sampler = GpuSampler() if shutil.which("nvidia-smi") else None
    if sampler is not None:
        sampler.start()
    print("running:", " ".join(command), flush=True)
    started = time.time()
    launched = subprocess.run(command, cwd=REPO, env={**os.environ, "WANDB_SILENT": "true"})
    total = time.time() - started
    if sampler is not None:
        sampler.stopped.set()
    jobs = sorted(p for p in sweep_dir.iterdir() if (p / "status.json").is_file()) if sweep_dir.is_dir() else []
    rows = [job_row(job, sampler) for job in jobs]
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(key for row in rows for key in row)) or ["job"]
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    print(
        f"{len(rows)} jobs, {total:.0f} s for the launch ({'GPU sampled' if sampler else 'no nvidia-smi'}); "
        f"wrote {out}",
        flush=True,
    )
    return launched.returncode


if __name__ == "__main__":
    sys.exit(main())
