"""Paper vs this project: every published number (``report/papers/``, :mod:`attn_study.report.references`) beside
ours, with a verdict and an outcome.

Ours, per cell: the runs of the paper's setting (dataset, model, encoder, attention, projection, λ and the row's
``settings``), one value per seed — mean, the seeds' standard deviation s and n; the mean's 95 % bootstrap interval
over instances (a run's ``…/ci_low``, ``…/ci_high``; averaged over seeds) where the key has one. A number taken
over several runs (a row's ``measure``) is computed by the family's report that exports it
(``cross_run_measures()``, asked of every family). The verdict:

- *not comparable*, saying what differs, when no run of the cell is at the paper's settings (:func:`departures`):
  made without the paper's recipe (other preprocessing, splits or training, so a difference says nothing about
  the method); with random embeddings where the paper's were pretrained (pretrained vectors other than the
  paper's, e.g. GloVe for fastText, are compared, and the cell names them); on data that is only the nearest
  to the paper's; from a smoke sweep (``sweeps/smoke*.yaml``) or an experiment file that is not the papers'; trained
  otherwise (a training variant, shuffled labels, marker tokens, masked data, another run's attention or
  outputs); with another value of a setting the row fixes (``encoder.self_attention=softmax`` where
  the paper's Transformer used sparsemax); or with a command-line setting that changes what is measured
  (``trainer.max_epochs=1``, ``training.select_from_epoch=0``; where files are, loggers, threads and batch sizes
  do not). Runs at other settings beside runs at the paper's are left out of the cell, and the verdict says so.
  A family measured on a seeded uniform sample of the split (``analysis.<family>.max_instances``, or every family's
  ``analysis_max_instances``) estimates the same means and spreads as on the whole split, with a wider bootstrap
  interval (h below): it is compared, and the verdict names the sample;
- with one seed: never *reproduced* — "1 seed: the paper's value inside / outside our interval";
- with n ≥ 2 seeds: *reproduced* when the paper's value lies in ours ± (2 s + h + r), where h is the half-width
  of the bootstrap interval (instance sampling) and r half a unit of the paper's last printed digit (rounding);
  else *not reproduced* (ours higher / ours lower). The papers report one run each: the question is whether
  a run like theirs could have come from our seeds' spread (± 2 s), not whether the two means agree. A verdict
  from fewer than :data:`FIRM` runs is *tentative* (the cell, the files and the summary lines say so): with 2
  seeds, s rests on one degree of freedom.

The spread s. A recipe that draws its own split (a source's ``split_seed``: :data:`SPLIT_SEEDS`) can be run on
several splits; runs that differ only in the split seed (and the seed) are one cell, and a split seed given on
the command line is no departure from the paper. Over the cell's runs x_gi (split g = 1…G, seed i = 1…n_g,
N = Σ n_g runs, x̄_g a split's mean, x̄ the mean of all runs):

- s = √(Σ_gi (x_gi − x̄)² / (N − 1)), the std over every (seed, split) run: the spread of one run drawn as ours
  were, which is what a run like the paper's is held against. With one split (G = 1) it is the seeds' std,
  as before, and the band says "seeds"; with G ≥ 2 it holds both spreads, and the band says "seeds+splits";
- shown beside it: the seed std √(Σ_gi (x_gi − x̄_g)² / Σ_g (n_g − 1)) (pooled within splits; NaN where no split
  has two seeds) and the split std, the std of the G split means (n − 1 in every denominator).

A cross-run measure gives one value per seed, with no split: its spread is the seeds'.

Beside the verdict, never in it: where the authors released several runs of the cell
(``papers/released_runs.csv``, :func:`~attn_study.report.references.released_runs`), whether our mean lies within
the range of their runs (min…max) — the paper's number is one draw of theirs. Their spread is not added to the
band: the rule above stays the rule.

Each number's *outcome* (:data:`OUTCOMES`) sorts it for the coverage: reproduced; not reproduced, *explained* only
where ``explanations.csv`` holds a measured cause for it (in the direction we differ), else *unexplained*; not
comparable (reason: settings); no verdict (1 seed, or no finite value); not run — *data absent* (the dataset is
not here), *compute* (no run of the setting computed it) or *not computed* (no family's report computes the
measure).
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pandas as pd

from attn_study.families import REGISTRY
from attn_study.report.references import (
    CELL,
    explanations,
    papers,
    printed_value,
    references,
    released_runs,
    required_settings,
    rounding,
)
from attn_study.report.render import format_number
from attn_study.report.runs import CrossRunMeasure, Run, code_label
from attn_study.sweep.naming import changes_results, override_key

__all__ = ["departures", "judge", "references", "rounding", "scorecard", "verdict"]

SETTING = ("dataset", "model", "encoder", "attention", "projection")
#: options added after runs had been made: the value a run whose config lacks the option ran with
ADDED_LATER = {"encoder.self_attention": "softmax"}
#: command-line settings that leave what a number measures as it is: the setting's own choices (matched against
#: the paper's row), where the data and vectors are (the vectors are named in the cell), the seed of a split the
#: source draws itself (its runs are one cell: the module docstring), devices, batch sizes
SAME_MEASURE = re.compile(
    r"(hydra[./].*|dataset|model|encoder|attention|projection|projection\.lam|recipe|analysis|seed"
    r"|model_seed|dataset\.path|dataset\.source\.path|model\.embeddings\.path|model\.network\.embedding_dim"
    r"|dataset\.(source\.)?split_seed"
    r"|dataset\.(num_workers|eval_batch_size)|trainer\.(accelerator|devices)"
    r"|analysis\.\w+\.(batch_size|internal_batch_size|\w*chunk\w*|heatmaps|every_n_epochs|val_split|val_max_instances"
    r"|max_instances|subsample_seed)|analysis_max_instances)"
)
#: a family measured on a seeded uniform sample of its split (attn_study.analysis.callback: ``instances``); no
#: family named: every family's (``analysis_max_instances``, which a family's own option overrides)
SAMPLE = re.compile(r"analysis(?:\.(\w+)\.|_)max_instances")
#: trainer configs (conf/trainer/) that pick a device only
SAME_TRAINERS = ("auto", "cpu", "gpu")
#: the options that seed a split a dataset source draws itself, in the order they are looked for
SPLIT_SEEDS = ("dataset.source.split_seed", "dataset.split_seed")
#: how many runs make a verdict firm; fewer (2) make it tentative
FIRM = 3

REPRODUCED = "reproduced"
EXPLAINED = "not reproduced (explained)"
UNEXPLAINED = "not reproduced (unexplained)"
NOT_COMPARABLE = "not comparable"
NO_VERDICT = "no verdict"
NOT_RUN = "not run"
#: every number's outcome, in the order the report counts them
OUTCOMES = (REPRODUCED, EXPLAINED, UNEXPLAINED, NOT_COMPARABLE, NO_VERDICT, NOT_RUN)
#: the outcomes of a verdict on the paper's value (2 runs or more at its settings): tentative below FIRM runs
VERDICTS = (REPRODUCED, EXPLAINED, UNEXPLAINED)


def cross_run_measures() -> dict[str, CrossRunMeasure]:
    """Every family report's cross-run measures (its ``cross_run_measures()``), by name; a name two families export
    is an error (a copied family's report keeps the original's names until renamed)."""
    found: dict[str, CrossRunMeasure] = {}
    owner: dict[str, str] = {}
    for name, family in REGISTRY.items():
        module = family.module("report")
        for measure, value in (module.cross_run_measures() if hasattr(module, "cross_run_measures") else {}).items():
            if measure in owner:
                raise RuntimeError(
                    f"attn_study/families/{name}/report.py: cross_run_measures() exports {measure!r}, which "
                    f"{owner[measure]}'s report exports too; give each measure its own name"
                )
            found[measure], owner[measure] = value, name
    return found


def _matching(runs: list[Run], row, measures: dict[str, CrossRunMeasure]) -> list[Run]:
    """The complete runs of the row's setting that hold its key (a cross-run measure: its points)."""

    def same(run, keys) -> bool:
        return all(not getattr(row, k) or str(run.config.get(k)) == getattr(row, k) for k in keys)

    complete = [r for r in runs if r.state == "complete"]
    if not row.key:
        measure = measures[row.measure]
        return [r for r in measure.points(complete) if same(r, [k for k in SETTING if k not in measure.spans])]
    found = []
    for run in complete:
        if row.key not in run.summary or not same(run, SETTING):
            continue
        if row.lam and (run.config.get("lam") is None or not math.isclose(float(run.config["lam"]), float(row.lam))):
            continue
        found.append(run)
    return found


def setting_value(run: Run, option: str):
    """The run's value of a setting a paper's row fixes (an option added later: the value older runs had); a
    Transformer's ``encoder.self_attention=pooling`` is the run's own projection (what its heads used)."""
    value = run.option(option, ADDED_LATER.get(option))
    if option == "encoder.self_attention" and value == "pooling":
        return run.config.get("projection")
    return value


def departures(run: Run, paper: str, dataset: str, settings: dict | None = None) -> list[str]:
    """How ``run`` departs from ``paper``'s settings (``papers.yaml``) and from the row's ``settings``, each in a
    few words (empty: at the paper's settings)."""
    c, about, settings = run.config, papers()[paper], settings or {}
    out = []
    if str(c.get("recipe")) != about["recipe"]:
        ours = f"recipe {c.get('recipe')}" if c.get("recipe") else "no recipe"
        out.append(f"{ours} (paper's: {about['recipe']})")
    theirs = about["embeddings_per_dataset"].get(dataset, about["embeddings"])
    if c.get("embeddings") == "random" and theirs != "random":
        out.append(f"random embeddings (paper's: {theirs})")
    if dataset in about["other_data"]:
        out.append(f"other data: {about['other_data'][dataset]}")
    if str(c.get("sweep")).startswith("smoke"):  # sweeps/smoke*.yaml: a few batches of small models
        out.append(f"smoke sweep {c['sweep']}")
    if c.get("training", "standard") != "standard":
        out.append(f"training {c['training']}")
    built_on = {
        "shuffle_labels": "shuffled labels",
        "markers": "marker tokens injected",
        "roar": "masked data (ROAR)",
        "attention_source": "another run's attention",
        "explainer": "trained on another run's outputs",
    }
    out += [why for key, why in built_on.items() if c.get(key)]
    for option, wanted in settings.items():
        have = setting_value(run, option)
        if wanted is not None and str(have) != wanted:
            out.append(f"{option}={have} (paper's: {wanted})")
    for override in c.get("overrides", []):
        key = override_key(override)
        if not changes_results(override) or SAME_MEASURE.fullmatch(key) or key.lstrip("+~") in settings:
            continue
        value = override.split("=", 1)[1] if "=" in override else ""
        if key == "trainer" and value in SAME_TRAINERS or key == "experiment" and value in about["experiments"]:
            continue
        out.append(override)
    return out


def split_seed(run: Run):
    """The seed of the split the run's dataset source drew itself (:data:`SPLIT_SEEDS`); None where it has none."""
    return next((run.option(o) for o in SPLIT_SEEDS if run.option(o) is not None), None)


def _ours(runs: list[Run], row, scale: float, measures: dict[str, CrossRunMeasure]) -> dict:
    """Mean, spreads (the module docstring) and n of the row's key (× ``scale``) over ``runs``, one value per run;
    a cross-run measure's one per seed."""
    if row.key:
        values = np.array([float(r.summary[row.key]) for r in runs]) * scale
        splits = [str(split_seed(r)) for r in runs]
    else:
        values = np.array(measures[row.measure].per_seed(runs), dtype=float)
        splits = ["" for _ in values]
    finite = np.isfinite(values)
    out = {"n seeds": int(finite.sum()), "ours": float(values[finite].mean()) if finite.any() else math.nan}
    out |= spreads(values[finite], [g for g, keep in zip(splits, finite) if keep])
    out |= {"ci low": math.nan, "ci high": math.nan}
    if row.key.endswith("/mean"):
        stem = row.key[: -len("mean")]
        lows = [float(r.summary.get(stem + "ci_low", math.nan)) * scale for r in runs]
        highs = [float(r.summary.get(stem + "ci_high", math.nan)) * scale for r in runs]
        out["ci low"], out["ci high"] = _mean_of_finite(lows), _mean_of_finite(highs)
    return out


def spreads(values: np.ndarray, splits: list[str]) -> dict:
    """The spreads of one cell's runs (``values``, each run's split seed in ``splits``): ``band std`` s over every
    run, ``seed std`` pooled within splits, ``split std`` over the splits' means, ``n splits`` and ``spreads``
    (what s holds: "seeds" or "seeds+splits"); the formulas: the module docstring. NaN where undefined."""
    groups = [values[[g == split for g in splits]] for split in dict.fromkeys(splits)]
    within = sum(len(x) - 1 for x in groups)
    return {
        "band std": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
        "seed std": (
            float(math.sqrt(sum(((x - x.mean()) ** 2).sum() for x in groups) / within)) if within else math.nan
        ),
        "n splits": len(groups),
        "split std": float(np.std([x.mean() for x in groups], ddof=1)) if len(groups) > 1 else math.nan,
        "spreads": "seeds+splits" if len(groups) > 1 else "seeds",
    }


def _mean_of_finite(values) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def band(printed: str, ours: dict) -> float:
    """The verdict's band around our mean: 2 s + the interval's half-width + the paper's rounding, s the std over
    every run (``band std``; a hand-made ``ours`` without it: its ``seed std``, one split)."""
    half = (ours["ci high"] - ours["ci low"]) / 2 if math.isfinite(ours["ci high"]) else 0.0
    std = ours.get("band std", ours["seed std"])
    return 2 * (std if math.isfinite(std) else math.nan) + half + rounding(printed)


def authors_runs(row, ours: float, released: pd.DataFrame) -> dict:
    """Where the authors released several runs of the row's number: their range and whether ``ours`` lies within
    it (``within the authors' released runs −0.053…0.175 (3 runs)``; outside it: ``…: ours higher``); empty
    where they released none or ours is not a number."""
    found = released
    for column in CELL:
        found = found[found[column] == getattr(row, column)]
    if found.empty or not math.isfinite(ours):
        return {"authors' runs": "", "authors' low": math.nan, "authors' high": math.nan}
    values = found["value"].astype(float)
    low, high = float(values.min()), float(values.max())
    unverified = int((found["verified"] != "yes").sum())
    counted = f"{len(found)} run{'s' * (len(found) > 1)}" + (f", {unverified} not verified" if unverified else "")
    said = f"the authors' released runs {format_number(low, 3)}…{format_number(high, 3)} ({counted})"
    if low <= ours <= high:
        said = f"within {said}"
    else:
        said = f"outside {said}: ours {'higher' if ours > high else 'lower'}"
    return {"authors' runs": said, "authors' low": low, "authors' high": high}


def verdict(paper: float, printed: str, ours: dict) -> str:
    """The rule of the module docstring, for one cell."""
    if not ours["n seeds"] or not math.isfinite(ours["ours"]):
        return "no finite value"
    if ours["n seeds"] == 1:
        if not math.isfinite(ours["ci low"]):
            return "1 seed: no interval"
        inside = ours["ci low"] - rounding(printed) <= paper <= ours["ci high"] + rounding(printed)
        return f"1 seed: the paper's value {'inside' if inside else 'outside'} our interval"
    if abs(paper - ours["ours"]) <= band(printed, ours):
        return "reproduced"
    return f"not reproduced (ours {'higher' if ours['ours'] > paper else 'lower'})"


def _explanation(row, said: str, causes: pd.DataFrame) -> str | None:
    """The measured cause of a number not reproduced (``explanations.csv``), in the direction we differ; None
    when there is none."""
    found = causes
    for column in ("paper", "source", "dataset", "row", "column", "statistic"):
        found = found[found[column] == getattr(row, column)]
    for cause in found.itertuples(index=False):
        if not cause.when or cause.when in said:
            return f"{cause.cause} ({cause.measured_in})"
    return None


def _not_run(row, runs: list[Run], measures, available: set[str] | None) -> str:
    """Why no run gives the row's number: the report does not compute it, the data is not here, or no run of
    the setting (that computed it) was made."""
    if not row.key and row.measure not in measures:
        return f"not computed: {row.measure}"
    if row.dataset and available is not None and row.dataset not in available:
        return f"data absent: {row.dataset} is not here"
    setting = [r for r in runs if all(not getattr(row, k) or str(r.config.get(k)) == getattr(row, k) for k in SETTING)]
    if setting and row.key:
        return f"compute: {len(setting)} run(s) of the setting, none with {row.key} (its test not run)"
    return "compute: no run of the setting"


def _setting(row) -> str:
    return (
        " ".join(getattr(row, k) for k in SETTING if getattr(row, k))
        + (f" λ={row.lam}" if row.lam else "")
        + (f" class {row.cls}" if row.cls else "")
        + (f" ({row.settings})" if row.settings else "")
    )


def _counted(values) -> str:
    """``softmax (3 runs), sparsemax (1 run)``: each value and how many runs had it."""
    return ", ".join(f"{v} ({n} run{'s' * (n > 1)})" for v, n in sorted(Counter(map(str, values)).items()))


def judge(runs: list[Run], available: set[str] | None = None) -> pd.DataFrame:
    """Every published number with its outcome (:data:`OUTCOMES`) and reason, ours beside it where a run gives
    it; ``available``: the datasets that are here (None: every one; a missing one makes its numbers "data
    absent")."""
    measures, causes, released = cross_run_measures(), explanations(), released_runs()
    rows = []
    for row in references().itertuples(index=False):
        entry = {
            "paper": row.paper,
            "source": row.source,
            "row": row.row,
            "column": row.column,
            "dataset": row.dataset,
            "cls": row.cls,
            "setting": _setting(row),
            "statistic": row.statistic,
            "key": row.key or (measures[row.measure].description if row.measure in measures else row.measure),
            "paper value": row.value,
            "n seeds": 0,
            "tentative": False,
            "runs left out": 0,
            "unverified": row.note.startswith("UNVERIFIED"),
            "code labels": (),
        }
        matching = _matching(runs, row, measures) if row.key or row.measure in measures else []
        if not matching:
            rows.append({**entry, "outcome": NOT_RUN, "reason": _not_run(row, runs, measures, available)})
            continue
        settings = required_settings(row.settings)
        why = [departures(r, row.paper, row.dataset, settings) for r in matching]
        at_paper = [r for r, w in zip(matching, why) if not w]
        others = list(dict.fromkeys(w for ws in why for w in ws))  # every reason once, in order
        used = at_paper or matching
        scale = 100.0 if row.statistic == "percent" and row.key.startswith("test/") else 1.0
        ours = _ours(used, row, scale, measures)
        entry |= {
            **ours,
            "band": band(row.value, ours) if ours["n seeds"] > 1 else math.nan,
            **authors_runs(row, ours["ours"], released),
            "embeddings": "/".join(sorted({str(r.config.get("embeddings")) for r in used})),
            "named settings": "; ".join(
                f"{option}: {_counted(setting_value(r, option) for r in used)}" for option in settings
            ),
            "code": _counted(code_label(r.code) for r in used),
            "code labels": tuple(code_label(r.code) for r in used),
            "runs left out": len(matching) - len(at_paper) if at_paper else 0,
        }
        if not at_paper:
            said = f"not comparable: {'; '.join(others)}"
            outcome, reason = NOT_COMPARABLE, f"settings: {'; '.join(others)}"
        else:
            said = verdict(printed_value(row.value), row.value, ours)
            outcome, reason = _outcome(row, said, causes)
            entry["tentative"] = outcome in VERDICTS and ours["n seeds"] < FIRM
            said += _sample_note(row.key, used)
            if entry["runs left out"]:
                left = entry["runs left out"]
                said += f"; {left} run{'s' * (left > 1)} at other settings left out ({'; '.join(others)})"
        if entry["unverified"]:
            said += " (the paper's value is unverified: see report/papers/README.md)"
        rows.append({**entry, "verdict": said, "outcome": outcome, "reason": reason})
    return pd.DataFrame(rows)


def _sample_sizes(key: str, run: Run) -> set[str]:
    """The ``analysis.<family>.max_instances=N`` (else ``analysis_max_instances=N``) the run gave the family whose
    namespace ``key`` is under, where it drew a sample: N a number, and not more than the ``<namespace>/n_instances``
    it analysed (fewer: the split was smaller than N, and all of it was taken)."""
    given = {}  # family name (None: every family) → N as written
    for override in run.config.get("overrides", []):
        found = SAMPLE.fullmatch(override_key(override).lstrip("+~"))
        if found and (found.group(1) is None or found.group(1) in REGISTRY):
            given[found.group(1)] = override.split("=", 1)[1]
    sizes = set()
    for name, family in REGISTRY.items():
        size = given.get(name, given.get(None))
        if size is None or not key.startswith(family.namespace + "/"):
            continue
        if size.isdigit() and int(size) <= run.summary.get(f"{family.namespace}/n_instances", math.inf):
            sizes.add(size)
    return sizes


def _sample_note(key: str, runs: list[Run]) -> str:
    """``; measured on a seeded sample of N instances in k of n runs`` where ``key``'s family was sampled."""
    sampled = [sizes for sizes in (_sample_sizes(key, r) for r in runs) if sizes]
    if not sampled:
        return ""
    sizes = "/".join(sorted(set().union(*sampled), key=lambda size: (len(size), size)))
    return f"; measured on a seeded sample of {sizes} instances in {len(sampled)} of {len(runs)} runs"


def _outcome(row, said: str, causes: pd.DataFrame) -> tuple[str, str]:
    """The outcome of a verdict and its reason, ``<kind>: <detail>``."""
    if said == "reproduced":
        return REPRODUCED, ""
    if said.startswith("not reproduced"):
        cause = _explanation(row, said, causes)
        direction = said.removeprefix("not reproduced ").strip("()")
        return (EXPLAINED, f"measured: {cause}") if cause else (UNEXPLAINED, f"no measured cause: {direction}")
    if said.startswith("1 seed"):
        return NO_VERDICT, f"compute: {said} (a verdict needs 2 seeds)"
    return NO_VERDICT, f"no value: {said}"


#: the columns of the scorecard's files, in order
COLUMNS = [
    "paper",
    "source",
    "row",
    "column",
    "setting",
    "statistic",
    "key",
    "paper value",
    "n seeds",
    "ours",
    "seed std",
    "n splits",
    "split std",
    "band std",
    "spreads",
    "ci low",
    "ci high",
    "band",
    "embeddings",
    "named settings",
    "code",
    "verdict",
    "tentative",
    "outcome",
    "authors' runs",
]


def scorecard(runs: list[Run], available: set[str] | None = None) -> pd.DataFrame:
    """One row per published number some run here computes, with its verdict (the module docstring)."""
    judged = judge(runs, available)
    return judged[judged["outcome"] != NOT_RUN].reindex(columns=COLUMNS).reset_index(drop=True)
