"""Paper vs this project: every published number (``report/papers/<paper>.csv``) that a run here computes, beside
ours, with a verdict.

Ours, per cell: the runs of the paper's setting (dataset, model, encoder, attention, projection, λ), one value per
seed — mean, the seeds' standard deviation s and n; the mean's 95 % bootstrap interval over instances (a run's
``…/ci_low``, ``…/ci_high``; averaged over seeds) where the key has one. The verdict:

- *not comparable*, saying what differs, when no run of the cell is at the paper's settings (:func:`departures`):
  made without the paper's recipe (``recipe=jain_wallace`` for Jain & Wallace and Meister et al.,
  ``recipe=serrano_smith`` for Serrano & Smith: other preprocessing, splits or training, so a difference says
  nothing about the method); with random embeddings where the paper's were pretrained (pretrained vectors other
  than the paper's, e.g. GloVe for fastText, are compared, and the cell names them); on data that is only the
  nearest to the paper's; from a smoke sweep (``sweeps/smoke*.yaml``) or an experiment file that is not the
  papers' (``experiment=wiegreffe_pinter/base``); trained otherwise (a
  training variant, shuffled labels, marker tokens, masked data, another run's attention or outputs); or with a
  command-line setting that changes what is measured (``trainer.max_epochs=1``,
  ``analysis.jain_wallace.max_instances=500``; where files are, loggers, threads and batch sizes do not).
  Runs at other settings beside runs at the paper's are left out of the cell, and the verdict says so;
- with one seed: never *reproduced* — "1 seed: the paper's value inside / outside our interval";
- with n ≥ 2 seeds: *reproduced* when the paper's value lies in ours ± (2 s + h + r), where h is the half-width
  of the bootstrap interval (instance sampling) and r half a unit of the paper's last printed digit (rounding);
  else *not reproduced* (ours higher / ours lower). The papers report one run each: the question is whether
  a run like theirs could have come from our seeds' spread (± 2 s), not whether the two means agree.

The embeddings each cell used are named (the papers' fastText vectors cannot be obtained here).
"""

from __future__ import annotations

import math
import re
from importlib import resources

import numpy as np
import pandas as pd

from attn_study.families.sparsity import report as sparsity_report
from attn_study.report.runs import Run
from attn_study.sweep.naming import changes_results, override_key

PAPERS = ("jain_wallace", "serrano_smith", "meister")
RECIPE = {"jain_wallace": "jain_wallace", "meister": "jain_wallace", "serrano_smith": "serrano_smith"}
SETTING = ("dataset", "model", "encoder", "attention", "projection")
#: what each paper's models started from (Serrano & Smith: Yang et al.'s word2vec trained on each corpus)
PRETRAINED = {
    "jain_wallace": "pretrained fastText",
    "meister": "pretrained fastText, Jain & Wallace's code",
    "serrano_smith": "word2vec trained on the corpus",
}

#: the experiment files (conf/experiment/) at the papers' settings: Meister et al. trained Jain & Wallace's models
#: with their code, so one BiLSTM serves both; any other experiment (Wiegreffe & Pinter's) is named in the cell
PAPER_EXPERIMENTS = {
    "jain_wallace": ("jain_wallace_sst", "meister_bilstm", "meister_transformer"),
    "meister": ("jain_wallace_sst", "meister_bilstm", "meister_transformer"),
    "serrano_smith": (),
}
#: (paper, dataset) where the data here is the nearest to the paper's, not the same
OTHER_DATA = {
    ("serrano_smith", "imdb_rating"): "aclImdb's 8 ratings (paper's: Diao et al.'s 10-class IMDB)",
}
#: command-line settings that leave what a number measures as it is: the setting's own choices (matched against
#: the paper's row), where the data and vectors are (the vectors are named in the cell), devices, batch sizes
SAME_MEASURE = re.compile(
    r"(hydra[./].*|dataset|model|encoder|attention|projection|projection\.lam|recipe|analysis|seed"
    r"|model_seed|dataset\.path|dataset\.source\.path|model\.embeddings\.path|model\.network\.embedding_dim"
    r"|dataset\.(num_workers|eval_batch_size)|trainer\.(accelerator|devices)"
    r"|analysis\.\w+\.(batch_size|internal_batch_size|\w*chunk\w*|heatmaps|every_n_epochs|val_split|val_max_instances))"
)
#: cross-run numbers (a row's ``measure``) the scorecard computes, and how the cell names them
MEASURES = {"meister_table2_tau_b": "Kendall τ-b(λ, run mean H̃(g_ŷ(x))) per seed"}
#: trainer configs (conf/trainer/) that pick a device only
SAME_TRAINERS = ("auto", "cpu", "gpu")


def references() -> pd.DataFrame:
    """Every published number, as printed (``value`` is text: its precision is the paper's)."""
    folder = resources.files("attn_study.report") / "papers"
    frames = [pd.read_csv(folder / f"{paper}.csv", dtype=str, keep_default_na=False) for paper in PAPERS]
    return pd.concat(frames, ignore_index=True)


def rounding(printed: str) -> float:
    """Half a unit of the last printed digit: ``0.81`` → 0.005, ``12`` → 0.5."""
    text = printed.strip().lstrip("<>~≈")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals


def _matching(runs: list[Run], row) -> list[Run]:
    """The complete runs of the row's setting that hold its key (a cross-run measure: its runs)."""

    def same(run, keys) -> bool:
        return all(not getattr(row, k) or str(run.config.get(k)) == getattr(row, k) for k in keys)

    if row.measure == "meister_table2_tau_b":  # sparsegen's λ and sparsemax (λ = 0) runs of the model
        candidates = sparsity_report.table2_runs([r for r in runs if r.state == "complete"])
        return [r for r in candidates if same(r, [k for k in SETTING if k != "projection"])]
    found = []
    for run in runs:
        if run.state != "complete" or row.key not in run.summary or not same(run, SETTING):
            continue
        if row.lam and (run.config.get("lam") is None or not math.isclose(float(run.config["lam"]), float(row.lam))):
            continue
        found.append(run)
    return found


def departures(run: Run, paper: str, dataset: str) -> list[str]:
    """How ``run`` departs from ``paper``'s settings, each in a few words (empty: at the paper's settings)."""
    c = run.config
    out = []
    if str(c.get("recipe")) != RECIPE[paper]:
        out.append(f"recipe {c.get('recipe')} (paper's: {RECIPE[paper]})")
    if c.get("embeddings") == "random":
        theirs = "pretrained GloVe 840B" if (paper, dataset) == ("jain_wallace", "snli") else PRETRAINED[paper]
        out.append(f"random embeddings (paper's: {theirs})")
    if (paper, dataset) in OTHER_DATA:
        out.append(f"other data: {OTHER_DATA[paper, dataset]}")
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
    for override in c.get("overrides", []):
        key = override_key(override)
        if not changes_results(override) or SAME_MEASURE.fullmatch(key):
            continue
        value = override.split("=", 1)[1] if "=" in override else ""
        if key == "trainer" and value in SAME_TRAINERS or key == "experiment" and value in PAPER_EXPERIMENTS[paper]:
            continue
        out.append(override)
    return out


def _ours(runs: list[Run], key: str, scale: float) -> dict:
    """Mean, seed std and n of ``key`` (× ``scale``) over ``runs``, one value per run; a measure's (Meister et
    al.'s Table 2: Kendall τ-b per seed over its runs) one per seed."""
    if key == "meister_table2_tau_b":
        values = np.array(sparsity_report.tau_per_seed(runs))
    else:
        values = np.array([float(r.summary[key]) for r in runs]) * scale
    values = values[np.isfinite(values)]
    out = {
        "n seeds": len(values),
        "ours": float(values.mean()) if len(values) else math.nan,
        "seed std": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
    }
    if key.endswith("/mean"):
        stem = key[: -len("mean")]
        lows = [float(r.summary.get(stem + "ci_low", math.nan)) * scale for r in runs]
        highs = [float(r.summary.get(stem + "ci_high", math.nan)) * scale for r in runs]
        out["ci low"], out["ci high"] = _mean_of_finite(lows), _mean_of_finite(highs)
    else:
        out["ci low"] = out["ci high"] = math.nan
    return out


def _mean_of_finite(values) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def verdict(paper: float, printed: str, ours: dict) -> str:
    """The rule of the module docstring, for one cell."""
    if not ours["n seeds"] or not math.isfinite(ours["ours"]):
        return "no finite value"
    half = (ours["ci high"] - ours["ci low"]) / 2 if math.isfinite(ours["ci high"]) else 0.0
    if ours["n seeds"] == 1:
        if not math.isfinite(ours["ci low"]):
            return "1 seed: no interval"
        inside = ours["ci low"] - rounding(printed) <= paper <= ours["ci high"] + rounding(printed)
        return f"1 seed: the paper's value {'inside' if inside else 'outside'} our interval"
    band = 2 * ours["seed std"] + half + rounding(printed)
    if abs(paper - ours["ours"]) <= band:
        return "reproduced"
    return f"not reproduced (ours {'higher' if ours['ours'] > paper else 'lower'})"


def scorecard(runs: list[Run]) -> pd.DataFrame:
    """One row per published number some run here computes (see the module docstring)."""
    rows = []
    for row in references().itertuples(index=False):
        if not row.key and row.measure not in MEASURES:
            continue
        matching = _matching(runs, row)
        if not matching:
            continue
        try:
            paper = float(row.value.strip().lstrip("<>~≈"))
        except ValueError:
            continue
        scale = 100.0 if row.statistic == "percent" and row.key.startswith("test/") else 1.0
        why = [departures(r, row.paper, row.dataset) for r in matching]
        at_paper = [r for r, w in zip(matching, why) if not w]
        others = list(dict.fromkeys(w for ws in why for w in ws))  # every reason once, in order
        used = at_paper or matching
        ours = _ours(used, row.key or row.measure, scale)
        if not at_paper:
            said = f"not comparable: {'; '.join(others)}"
        else:
            said = verdict(paper, row.value, ours)
            left = len(matching) - len(at_paper)
            if left:
                said += f"; {left} run{'s' * (left > 1)} at other settings left out ({'; '.join(others)})"
        rows.append(
            {
                "paper": row.paper,
                "source": row.source,
                "row": row.row,
                "column": row.column,
                "setting": " ".join(getattr(row, k) for k in SETTING if getattr(row, k))
                + (f" λ={row.lam}" if row.lam else "")
                + (f" class {row.cls}" if row.cls else ""),
                "statistic": row.statistic,
                "key": row.key or MEASURES[row.measure],
                "paper value": row.value,
                **ours,
                "embeddings": "/".join(sorted({str(r.config.get("embeddings")) for r in used})),
                "verdict": said
                + (
                    " (the paper's value is unverified: see report/papers/README.md)"
                    if row.note.startswith("UNVERIFIED")
                    else ""
                ),
            }
        )
    return pd.DataFrame(rows)
