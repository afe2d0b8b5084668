"""What every family in the registry must do, checked for each one found (a new family's folder is picked up
with no change here): one real tiny run with all families, logged as by default (W&B offline and CSV), then per
family — its keys under its namespace and in the run's summary, strict JSON, the same results in the offline W&B
run with no logger error, statistics that do not depend on the batch size, tracking that a resumed run keeps, and
a report section that renders."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pandas as pd
import pytest
import torch
from hydra.utils import instantiate

from attn_study.analysis.aggregation import AGGREGATIONS
from attn_study.families import REGISTRY
from attn_study.job import saved
from attn_study.job.plan import OtherRuns, load_run
from attn_study.report.cli import build_report
from tests.helpers import TINY, TrainedRuns, compose_config, train_run
from tests.wandb_records import offline_runs, read_run

#: options that only make a family quick on the tiny run (none needed for a family not named here)
QUICK = {
    "jain_wallace": ["steps=30", "permutations=10"],
    "faithfulness": ["ig_steps=4"],
    "agreement": ["ig_steps=4"],
    "sanity": ["ig_steps=4"],
}
#: what a family needs to run at all on the tiny run (W&P compares with a base run)
NEEDS = {"wiegreffe_pinter": lambda base: [f"base={base}"]}
RUN = [*TINY, "encoder=average", "encoder.hidden_size=8", "trainer.max_epochs=2"]
#: key parts of what the tiny run cannot measure: a Transformer's layer attention (a one-layer model has none to
#: aggregate) and the shortcut markers (its dataset has none)
NOT_ON_THE_TINY_RUN = {*AGGREGATIONS, "markers"}


def tracks(name: str) -> bool:
    """Whether the family measures anything during training by default (its YAML's val_tests)."""
    return bool(compose_config(f"analysis=[{name}]").analysis[name].get("val_tests"))


def family_overrides(name: str, base) -> list[str]:
    options = ["max_instances=12", "val_max_instances=8", *QUICK.get(name, [])]
    options += ["every_n_epochs=1"] if tracks(name) else []
    options += NEEDS.get(name, lambda _: [])(base)
    return [f"analysis.{name}.{o}" for o in options]


class Errors(logging.Handler):
    """The error lines logged while it is attached (a logger's failure is one, ``tracking.reported``)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def train_noting_errors(overrides: list[str], run_dir, data_cache) -> None:
    """The suite's training (tests.helpers.train_run), the error lines logged meanwhile kept beside the run in
    ``errors.json``: a cached run is trained by whichever test asks first, and each test checks them."""
    errors = Errors()
    logging.getLogger("attn_study").addHandler(errors)
    try:
        train_run(overrides, run_dir, data_cache)
    finally:
        logging.getLogger("attn_study").removeHandler(errors)
    (run_dir.parent / "errors.json").write_text(json.dumps(errors.lines))


@pytest.fixture(scope="module")
def contract_run(trained_runs):
    """The base run (CSV only), then the run with every family through the default loggers, W&B offline and CSV
    (both trained once for the whole pytest run: read, never changed), and its summary."""
    base = trained_runs.get(*RUN, "logger=csv", name="base")
    overrides = [*RUN, f"analysis=[{','.join(REGISTRY)}]"]
    for name in REGISTRY:
        overrides += family_overrides(name, base)
    runs = TrainedRuns(trained_runs.root, train=train_noting_errors)
    run_dir = runs.get(*overrides)
    assert json.loads((run_dir.parent / "errors.json").read_text()) == []  # no logger (nor anything else) failed
    return run_dir, runs.summary(*overrides)


@pytest.fixture(scope="module")
def logged(contract_run):
    """The contract run's offline W&B run, read back from its file."""
    (path,) = offline_runs(contract_run[0])
    return read_run(path)


def strict_json(path):
    def refuse(constant):
        raise ValueError(f"{path}: bare {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_keys_under_the_namespace_in_strict_json_and_in_the_runs_summary(contract_run, name):
    run_dir, summary = contract_run
    family = REGISTRY[name]
    own = strict_json(run_dir / "analysis" / name / "summary.json")
    assert own, name
    assert all(k.startswith(family.namespace + "/") for k in own), [k for k in own if "/" not in k][:3]
    run_summary = strict_json(run_dir / "summary.json")
    for k, v in own.items():
        if isinstance(v, float) and math.isfinite(v):
            assert run_summary[k] == pytest.approx(v), k
    assert all(k in run_summary for k in own if isinstance(own[k], (int, float)) and math.isfinite(own[k]))


@pytest.mark.parametrize("name", list(REGISTRY))
def test_its_tracked_and_headline_statistics_are_keys_it_writes(contract_run, name):
    """What its keys.py names for the epoch charts (TRACKED) and for W&B's ``headline/`` (HEADLINE_KEYS) is spelt as
    its summary.json spells it: a misspelt key would be an empty chart and a missing headline, said nowhere. Absent
    may be only what the tiny run cannot have (:data:`NOT_ON_THE_TINY_RUN`)."""
    run_dir, _ = contract_run
    own = strict_json(run_dir / "analysis" / name / "summary.json")
    family = REGISTRY[name]
    named = [*family.tracked, *family.headline]
    absent = [k for k in named if k not in own and not NOT_ON_THE_TINY_RUN & set(k.split("/"))]
    assert absent == [] and any(k in own for k in named), (absent, named)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_wandb_run_holds_the_results(contract_run, logged, name):
    """The family's final values in W&B's summary as in its summary.json, a histogram of every numeric
    per-instance column, its figures and table as media — all in the run's last history row, with every other
    family's."""
    run_dir, _ = contract_run
    folder = run_dir / "analysis" / name
    prefix = REGISTRY[name].namespace
    own = strict_json(folder / "summary.json")
    for k, v in own.items():
        if isinstance(v, (int, float)) and math.isfinite(v):
            assert logged.summary[k] == pytest.approx(v), k
    # its few statistics a team sorts by, copied under headline/: keys the family really writes
    headline = [k for k in REGISTRY[name].headline if isinstance(own.get(k), (int, float))]
    assert headline, f"{name}: none of its HEADLINE_KEYS {REGISTRY[name].headline} in its summary"
    for k in headline:
        assert logged.summary[f"headline/{k}"] == pytest.approx(own[k]), k
    assert logged.summary["headline/test/acc"] == logged.summary["test/acc"]
    frame = pd.read_parquet(folder / "instances.parquet")
    columns = [
        c
        for c in frame.select_dtypes("number").columns
        if c not in ("index", "label", "prediction") and np.isfinite(frame[c].to_numpy(float)).any()
    ]
    assert columns, name
    for column in columns:
        drawn = logged.summary[f"{prefix}/hist/{column}"]
        finite = np.isfinite(frame[column].to_numpy(float)).sum()
        assert drawn["_type"] == "histogram" and sum(drawn["values"]) == finite, column
    last = logged.history[-1]
    media = {k.rsplit("/", 1)[0] for k in last if k.endswith("/_type")}
    assert f"{prefix}/instances" in media
    figures = [m for m in media if m.startswith(f"{prefix}/figures/")]
    assert len(figures) == len(list(folder.glob("*.png"))), (figures, sorted(p.name for p in folder.glob("*.png")))
    assert last["epoch"] == 1  # the last epoch's row


@pytest.mark.parametrize("name", list(REGISTRY))
def test_statistics_do_not_depend_on_the_batch_size(contract_run, name, tmp_path):
    run_dir, _ = contract_run
    loaded = load_run(run_dir)
    loaded.module.model.double()  # float64: what is left of a difference is the family's, not float32 rounding
    frames = []
    for size in (12, 5, 1):
        analysis = instantiate(loaded.cfg.analysis[name], batch_size=size, every_n_epochs=None)
        analysis.other_runs = OtherRuns(run_dir)  # what the job's plan hands down (a base run, …)
        analysis.analyse(loaded.module.model, loaded.datamodule, tmp_path / str(size))
        frames.append(pd.read_parquet(tmp_path / str(size) / "analysis" / name / "instances.parquet"))
    numeric = [c for c in frames[0].columns if frames[0][c].dtype.kind in "fiub"]
    assert numeric, name
    # Rank statistics (τ and its p) see ties: two equal importances (a repeated word) may differ by 1e-17 after
    # another padding's summation order, and a broken tie moves τ by O(1/n²). Everything else to 1e-9.
    ranks = [c for c in numeric if c.split("_")[0] in ("tau", "p") or "tau" in c.split("_")]
    for other in frames[1:]:
        assert list(other.columns) == list(frames[0].columns)
        for columns, atol in ((sorted(set(numeric) - set(ranks)), 1e-9), (ranks, 5e-3)):
            np.testing.assert_allclose(
                other[columns].to_numpy(float), frames[0][columns].to_numpy(float), atol=atol, rtol=0, err_msg=name
            )


@pytest.mark.parametrize("name", list(REGISTRY))
def test_what_was_tracked_survives_a_resume(contract_run, name):
    """The run tracked every epoch (epochs.csv); a fresh callback given the state a checkpoint saved (what a
    resumed run starts from; a complete run keeps its best) has the epochs up to it back, value for value, and
    passes them on through its own state."""
    run_dir, _ = contract_run
    if not tracks(name):
        pytest.skip(f"{name} tracks nothing during training")
    epochs = pd.read_csv(run_dir / "analysis" / name / "epochs.csv")
    assert epochs["epoch"].tolist() == [0, 1]
    cfg = saved.run_config(run_dir)
    checkpoint = torch.load(run_dir / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    resumed = instantiate(cfg.analysis[name])
    states = [v for k, v in checkpoint["callbacks"].items() if k.startswith(type(resumed).__qualname__)]
    assert len(states) == 1, list(checkpoint["callbacks"])
    resumed.load_state_dict(states[0])
    tracked = [k for k in REGISTRY[name].tracked if k in epochs]
    assert tracked, f"{name}: none of its TRACKED keys in epochs.csv"
    history = pd.DataFrame(resumed.history)
    assert len(history) and history["epoch"].tolist() == epochs["epoch"].tolist()[: len(history)]
    np.testing.assert_allclose(
        history[tracked].to_numpy(float), epochs[tracked].to_numpy(float)[: len(history)], atol=0, rtol=0
    )
    again = instantiate(cfg.analysis[name])
    again.load_state_dict(resumed.state_dict())
    assert again.history == resumed.history and again.history_rows == resumed.history_rows


@pytest.fixture(scope="module")
def report_page(contract_run, tmp_path_factory):
    """The report of the contract run, built once: its page and the runs it read."""
    from attn_study.report.runs import collect

    run_dir, _ = contract_run
    out = build_report(run_dir, tmp_path_factory.mktemp("report") / "report")
    return (out / "index.html").read_text(), collect(run_dir)[0]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_report_section_renders(report_page, name, tmp_path):
    page, runs = report_page
    report = REGISTRY[name].module("report")
    if report is None:
        pytest.skip(f"{name} has no report part")
    titles = [title for title, _ in report.sections(runs, tmp_path)]
    assert titles, f"{name}: no report section for a run that has its analysis"
    for title in titles:
        assert title.replace("&", "&amp;") in page or title in page


#: what a family's YAML takes from the run rather than states as a default
FROM_THE_RUN = {"seed"}


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_yaml_states_the_constructors_defaults(name):
    """A family's options are written twice — ``conf/analysis/<name>.yaml`` (what a run gets) and its callback's
    constructor (what Python users get): built both ways, the two callbacks are the same, but for what the YAML
    takes from the run. A default changed in one place only turns this red."""
    node = compose_config(f"analysis=[{name}]").analysis[name]
    from_yaml = instantiate(node)
    from_python = type(from_yaml)()
    differs = {
        option: (value, vars(from_python).get(option))
        for option, value in vars(from_yaml).items()
        if option not in FROM_THE_RUN and not _same(value, vars(from_python).get(option))
    }
    assert differs == {}


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b if not hasattr(a, "__dict__") else vars(a) == vars(b)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_familys_callback_takes_its_headline_keys_from_its_own_folder(name):
    """What an analysis logs under W&B's ``headline/`` it knows from its own ``keys.py`` (the base class reaches no
    registry): the same keys the registry lists for the family."""
    from attn_study.analysis.callback import AnalysisCallback

    module = REGISTRY[name].module("callback")
    (callback,) = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, AnalysisCallback) and c.__module__ == module.__name__
    ]
    assert callback.HEADLINE_KEYS == REGISTRY[name].headline and callback.HEADLINE_KEYS
