"""What tests share: paths, tiny run settings, config composition, the CLI, small models and batches,
and a reader for the offline W&B run files. Fixtures live in the conftest.py files, builders here."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from filelock import FileLock  # comes with torch
from hydra import compose, initialize_config_dir

from attn_study.analysis.importance.methods import ImportanceMethod
from attn_study.cli import CONFIG_DIR
from attn_study.data.datamodule import collate
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import AttentionClassifier
from tests.wandb_records import offline_runs, read_run

REPO = Path(__file__).resolve().parents[1]
#: the real datasets of the slow tests: $ATTN_STUDY_TEST_DATA, else a "shared/data" folder beside the repository
SHARED_DATA = Path(os.environ.get("ATTN_STUDY_TEST_DATA") or REPO.parent / "shared" / "data")
CLI = [sys.executable, "-m", "attn_study.cli"]

# a model small enough that a whole train/test run takes seconds on a CPU
TINY = [
    "trainer=debug",
    "analysis=[]",
    "dataset.source.n_train=96",
    "dataset.source.n_dev=32",
    "dataset.source.n_test=32",
    "model.network.embedding_dim=16",
]
# two sweep jobs of a few seconds each
TWO_JOBS = ["encoder=lstm,average", "encoder.hidden_size=8", *TINY]


# -- configs and the command line ----------------------------------------------------------------


#: conf/ folders whose files are not options of attn-study's command line: Hydra's own, the local overlay, the
#: recipe's per-dataset files
NOT_CHOSEN = ("hydra", "local", "recipe_dataset")


def conf_options(conf: Path = REPO / "conf") -> tuple[set[str], set[str]]:
    """(selectable ``group=option``, not selectable) from the files of conf/ themselves: what ``--help`` must list
    and every one of which must compose and pass the schema (tests/sweep/test_trust.py)."""
    selectable, other = set(), set()
    for folder in sorted(p for p in conf.iterdir() if p.is_dir()):
        for path in folder.rglob("*.yaml"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = f"{folder.name}={'/'.join(parts)}"
            hidden = folder.name in NOT_CHOSEN or any(part.startswith("_") for part in parts)
            (other if hidden else selectable).add(name)
    return selectable, other


def compose_config(*overrides: str, name: str = "config"):
    """The composed config of ``attn-study`` (``name='analyze'``: of ``attn-study-analyze``)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(name, overrides=list(overrides))


def cli_env() -> dict:
    env = dict(os.environ)
    env.setdefault("WANDB_SILENT", "true")
    return env


def entry_point(main, *args: str, monkeypatch, capsys) -> tuple[int, str, str]:
    """A console entry point (``cli.train_main``, ``cli.analyze_main``) run in this process with ``args`` as its
    command line: (exit status, stdout, stderr). What it changes in the process is undone: Hydra's global state
    and its job's config (``HydraConfig``), the root logger's handlers (Hydra's job logging). It installs no
    signal handlers (``stopping.install``): the tests that stop a run do so in a subprocess. Saves the ~6 s
    import of a fresh process per call."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from attn_study.job import stopping

    monkeypatch.setattr(sys, "argv", [main.__name__, *args])
    monkeypatch.setattr(stopping, "install", lambda app, advice: None)
    capsys.readouterr()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    code = 0
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            with contextlib.suppress(Exception):
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # else a later run in this process would think it is a sweep's job
    out = capsys.readouterr()
    return code, out.out, out.err


def launch(sweep_dir: Path, *overrides: str, timeout: int = 300, **kwargs) -> subprocess.CompletedProcess:
    """``attn-study -m`` in a subprocess, into ``sweep_dir``."""
    return subprocess.run(
        [*CLI, "-m", f"hydra.sweep.dir={sweep_dir}", *overrides],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=kwargs.pop("env", cli_env()),
        timeout=timeout,
        **kwargs,
    )


def launch_here(sweep_dir: Path, *overrides: str, monkeypatch, capsys) -> tuple[int, str, str]:
    """``attn-study -m`` into ``sweep_dir`` in this process (:func:`entry_point`): (exit status, stdout, stderr).
    The launcher's jobs run where it puts them (joblib's workers, submitit's and SLURM's processes)."""
    from attn_study.cli import train_main

    return entry_point(
        train_main, "-m", f"hydra.sweep.dir={sweep_dir}", *overrides, monkeypatch=monkeypatch, capsys=capsys
    )


def shared_data(*parts: str) -> Path:
    """A path under :data:`SHARED_DATA`, or skip the test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


# -- run directories -----------------------------------------------------------------------------


def job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in Path(sweep_dir).iterdir() if (p / ".hydra").is_dir())


def job_dir(sweep_dir: Path, part: str) -> Path:
    """The one job directory of ``sweep_dir`` whose name contains ``part`` (e.g. ``encoder=lstm``)."""
    found = [d for d in job_dirs(sweep_dir) if part in d.name.split(",")]
    assert len(found) == 1, (part, [d.name for d in job_dirs(sweep_dir)])
    return found[0]


def status(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "status.json").read_text())


def summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def accuracy_by_hand(run_dir: Path) -> float:
    """The share of the run's test instances whose label its saved best model predicts, each instance run alone
    (batches of one: no padding, no batch-wide statistic): what ``test/acc`` is for a run that tested them all."""
    from attn_study.job.plan import load_run

    loaded = load_run(run_dir, force=True)  # force: a run made by train_and_test alone has no status
    correct = []
    with torch.no_grad():
        for batch in loaded.datamodule.loader("test", batch_size=1):
            predicted = loaded.model.probabilities(loaded.model(batch)[0]).argmax(-1)
            correct.append(bool(predicted.item() == batch["labels"].item()))
    return float(np.mean(correct))


def run_benchmark(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> <args>`` from the repository, asserted to succeed (its output tails if not)."""
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


# -- runs trained once per pytest run (tests/conftest.py's trained_runs) ---------------------------


def train_run(overrides: list[str], run_dir: Path, data_cache: Path) -> None:
    """``attn-study`` with ``overrides`` into ``run_dir`` (``job.run.run``: status, record, summary), its data cached
    in ``data_cache`` and W&B offline and silent, whatever the caller (a test, a module's fixture) set."""
    from attn_study.job.run import run

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTN_STUDY_CACHE", str(data_cache))
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        run(compose_config(*overrides), run_dir)


def files_of(folder: Path) -> dict[str, list[int]]:
    """Each file under ``folder`` (its path relative to it) → [size, modification time in ns]."""
    return {
        str(path.relative_to(folder)): [path.lstat().st_size, path.lstat().st_mtime_ns]
        for path in sorted(Path(folder).rglob("*"))
        if not path.is_dir()
    }


@contextlib.contextmanager
def claimed_elsewhere(run_dir: Path):
    """Another process holds ``run_dir``'s claim (``job.state.claim``) while the block runs; it is killed after."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_CLAIM, str(run_dir)], cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


_HOLD_CLAIM = """
import sys, time
from attn_study.job.state import claim
with claim(sys.argv[1]) as held:
    print("held" if held else "refused", flush=True)
    time.sleep(120)
"""


class TrainedRuns:
    """Runs trained once per pytest run, each keyed by its overrides (and the name of its directory, which W&B groups
    it by), under ``root``: the first test to ask for a run trains it, the others — in any xdist worker — wait for it
    behind a file lock and get the same directory. A run asked for again after a failed or killed attempt is trained
    afresh. The overrides must say everything the run depends on (a test that patches the code a run calls trains
    its own)."""

    def __init__(self, root: Path, train=train_run):
        self.root, self.train = Path(root), train
        self.root.mkdir(parents=True, exist_ok=True)

    def get(self, *overrides: str, name: str = "run") -> Path:
        """The complete run of ``overrides`` at ``<root>/<key>/<name>``: to be read, never changed (:meth:`copy`).
        A run that a test changed since it was trained is refused (AssertionError naming what changed)."""
        from attn_study.job.state import is_complete

        key = hashlib.sha256(json.dumps([name, *overrides]).encode()).hexdigest()[:16]
        run_dir = self.root / key / name
        with FileLock(self.root / f"{key}.lock"):
            if not is_complete(run_dir):
                shutil.rmtree(run_dir.parent, ignore_errors=True)
                run_dir.parent.mkdir()
                (run_dir.parent / "overrides.json").write_text(json.dumps(list(overrides)))
                self.train(list(overrides), run_dir, self.root / "data-cache")
                (run_dir.parent / "files.json").write_text(json.dumps(files_of(run_dir)))
            self.check_unchanged(run_dir)
        return run_dir

    def check_unchanged(self, run_dir: Path) -> None:
        """AssertionError unless ``run_dir`` holds the very files (path, size, modification time) it held once
        trained."""
        trained, now = json.loads((run_dir.parent / "files.json").read_text()), files_of(run_dir)
        changed = sorted(path for path in trained.keys() | now.keys() if trained.get(path) != now.get(path))
        assert not changed, f"a test changed the cached run {run_dir} (use TrainedRuns.copy): {changed[:5]}"

    def check_all_unchanged(self) -> None:
        """:meth:`check_unchanged` for every run trained under ``root``."""
        for record in sorted(self.root.glob("*/files.json")):
            with FileLock(self.root / f"{record.parent.name}.lock"):  # not while another worker trains it again
                if record.is_file():
                    (run_dir,) = [p for p in record.parent.iterdir() if p.is_dir()]
                    self.check_unchanged(run_dir)

    def copy(self, *overrides: str, into: Path, name: str = "run") -> Path:
        """A private copy of :meth:`get`'s run at ``into/name``, for a test that changes it (analyses it again,
        resumes it, damages it)."""
        return Path(shutil.copytree(self.get(*overrides, name=name), Path(into) / name, symlinks=True))

    def summary(self, *overrides: str, name: str = "run") -> dict:
        """The run's ``summary.json``: what ``job.run.run`` returned when it trained it."""
        return summary(self.get(*overrides, name=name))


# -- importance methods a test defines ---------------------------------------------------------------


class Given(ImportanceMethod):
    """A test's importance method: its scores are ``compute(model, batch, α, ŷ, options)``'s."""

    paper, signed, through_attention, explains_class = "a test's", False, False, False

    def __init__(self, name: str, compute):
        self.name, self.compute = name, compute

    def scores(self, model, batch, alpha, probs, options):
        return self.compute(model, batch, alpha, probs, options)


# -- small models and batches --------------------------------------------------------------------

SOS_ID, EOS_ID = 2, 3  # the ids boundary_batch wraps the texts with


def token_batch(seqs: list[list[int]], labels: list[int] | None = None, boundary: bool = False) -> dict:
    """A padded batch of token id sequences (label 0 unless given); with ``boundary``, each sequence wrapped
    as <sos> … <eos> (ids 2 and 3) and the batch's ``token_mask`` marking the text between them."""
    labels = labels or [0] * len(seqs)
    if boundary:
        seqs = [[SOS_ID, *s, EOS_ID] for s in seqs]
    return collate([{"index": i, "ids": s, "label": labels[i], "boundary": boundary} for i, s in enumerate(seqs)])


class StubSplit(SimpleNamespace):
    """A split's columns (ids, uids, lengths, labels); its length is its number of instances."""

    def __len__(self) -> int:
        return len(self.ids)


class StubData:
    """A stand-in for a datamodule serving one batch (``batch``, e.g. from :func:`token_batch`): what
    the families read from their data (protocol.AnalysisData)."""

    name = "toy"

    def __init__(self, batch: dict, num_classes: int = 2, serve_order=None):
        """``serve_order``: a permutation of the instances — the loader then serves row r as instance
        ``serve_order[r]``, so that a batch's rows are not the split's positions (a lookup by row shows)."""
        self.batch, self.num_classes = batch, num_classes
        lengths = batch["lengths"].tolist()
        ids = [batch["ids"][r, :n].numpy() for r, n in enumerate(lengths)]
        self._split = StubSplit(
            ids=ids,
            uids=[f"t{i}" for i in range(len(ids))],
            lengths=np.array(lengths),
            labels=batch["labels"].numpy(),
            boundary="token_mask" in batch,
        )
        if serve_order is not None:
            order = torch.as_tensor(list(serve_order))
            self.batch = {
                k: v[order] if torch.is_tensor(v) and v.shape[:1] == order.shape else v for k, v in batch.items()
            }
        self.data = SimpleNamespace(label_names=[f"class {k}" for k in range(num_classes)])
        self.vocab = SimpleNamespace(decode=lambda ids: [str(i) for i in ids])

    def split(self, _name):
        return self._split

    def loader(self, _split, batch_size=None, indices=None, shuffle=False):
        """The batch whole, or (``batch_size`` < its rows) cut into consecutive batches of that many rows,
        each trimmed to its longest text as a real loader's would be (flat token batches)."""
        rows = len(self.batch["lengths"])
        if not batch_size or batch_size >= rows:
            return [self.batch]
        t_max = self.batch["mask"].shape[1]
        out = []
        for start in range(0, rows, batch_size):
            part = slice(start, start + batch_size)
            width = int(self.batch["lengths"][part].max())
            out.append(
                {
                    k: v[part][:, :width] if v.dim() >= 2 and v.shape[1] == t_max else v[part]
                    for k, v in self.batch.items()
                }
            )
        return out


def tiny_model(
    encoder=None,
    scorer=attention.AdditiveScorer,
    proj=projection.Softmax,
    num_classes: int = 2,
    seed: int = 0,
    vocab: int = 25,
    dim: int = 6,
    double: bool = False,
) -> AttentionClassifier:
    """A seeded flat model in eval mode with frozen parameters (default encoder: BiLSTM 4/direction)."""
    torch.manual_seed(seed)
    model = AttentionClassifier(
        vocab_size=vocab,
        num_classes=num_classes,
        encoder=encoder or partial(encoders.RNNEncoder, hidden_size=4),
        scorer=scorer,
        projection=proj(),
        embedding_dim=dim,
    )
    model = model.double() if double else model
    return model.eval().requires_grad_(False)


def quiet_trainer(tmp_path: Path, **settings):
    """A Lightning trainer for a test that trains a module by hand: no logger, checkpoints, bar, summary or sanity
    pass; ``settings`` (max_epochs, max_steps, limit_*_batches, …) as Lightning takes them."""
    import lightning as L

    return L.Trainer(
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        **settings,
    )


# -- figures a report draws, read back -------------------------------------------------------------------


def drawn_boxes(monkeypatch, module) -> list[tuple]:
    """The boxes of each figure ``module`` saves (its ``save_png`` kept from writing), in drawing order: per box
    (face colour as hex, centre x, width, lowest y, highest y), from its patch's vertices."""
    from matplotlib.colors import to_hex

    drawn = []

    def keep_boxes(fig, path):
        for patch in fig.axes[0].patches:
            x, y = patch.get_path().vertices.T
            drawn.append(
                (to_hex(patch.get_facecolor()[:3]), (x.min() + x.max()) / 2, x.max() - x.min(), y.min(), y.max())
            )
        return path

    monkeypatch.setattr(module, "save_png", keep_boxes)
    return drawn


# -- the offline W&B run, read back (tests/wandb_records.py) ---------------------------------------


def wandb_run_summary(run_dir: Path) -> dict:
    """The summary of the one offline W&B run under ``run_dir/wandb``, as the W&B app would show it."""
    (path,) = offline_runs(run_dir)
    return read_run(path).summary


def wandb_run_history(run_dir: Path) -> list[dict]:
    """The history rows (``wandb.log`` calls) of the one offline W&B run under ``run_dir/wandb``."""
    (path,) = offline_runs(run_dir)
    return read_run(path).history
