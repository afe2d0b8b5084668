"""Mohankumar et al. (2020)'s comparison: the vanilla LSTM beside the Orthogonal and Diversity LSTMs (and
any word-tying variant), each measure as the mean over seeds with the seeds' std. Shown when the runs include
one of those models; the measures come from the families the runs ran (a missing family leaves "—")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.report.render import captioned_table, format_number
from attn_study.report.runs import Run, without_empty_variant

#: the encoders built to make attention faithful (conf/encoder/): the authors' architecture, then the bidirectional
#: variants
FAITHFUL_ENCODERS = ("orthogonal_lstm", "diversity_lstm", "orthogonal_bilstm", "diversity_bilstm")
#: the LSTMs this table compares: their vanilla LSTM (one direction, 256), Jain & Wallace's BiLSTM, the faithful ones
LSTMS = ("vanilla_lstm", "lstm", *FAITHFUL_ENCODERS)
#: header → summary key; the arrow says which way the paper expects its models to move
MEASURES = {
    "accuracy": "test/acc",
    "conicity ↓": "test/conicity/mean",
    "permutation: median TVD ↑": "jw/perm/median_tvd/mean",
    "fraction removed to flip ↓": "ss/multi/attention/frac_removed/mean",
    "attention mass on rationale ↑": "ff/attention/rationale_mass/mean",
    "τ(attention, gradient) ↑": "jw/tau_grad/mean",
    "τ(attention, integrated gradients) ↑": "ff/integrated_gradients/tau_attention/mean",
}


def _word_tying(run: Run) -> bool:
    return "word tying" in str(run.config.get("training", ""))


def applies(runs: list[Run]) -> bool:
    return any(r.config.get("encoder") in FAITHFUL_ENCODERS or _word_tying(r) for r in runs)


def comparison_table(runs: list[Run]) -> pd.DataFrame:
    """One row per dataset × LSTM × variant: n seeds, then per measure its mean over seeds and the seeds' std."""
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        if run.state == "complete" and run.config.get("model") in ("flat", "pair") and run.config["encoder"] in LSTMS:
            key = (run.config["dataset"], run.config["encoder"], run.variant_except("model_seed"))
            groups.setdefault(key, []).append(run)
    rows = []
    for (dataset, encoder, variant), members in sorted(groups.items()):
        row = {"dataset": dataset, "encoder": encoder, "variant": variant, "seeds": len(members)}
        for header, key in MEASURES.items():
            values = np.array([float(r.summary.get(key, np.nan)) for r in members], dtype=float)
            values = values[np.isfinite(values)]
            row[header] = float(values.mean()) if len(values) else np.nan
            row[f"{header} std"] = float(values.std(ddof=1)) if len(values) > 1 else np.nan
        rows.append(row)
    return without_empty_variant(pd.DataFrame(rows))


def comparison_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Each measure as "mean ± std" (the std over seeds; the mean alone with one seed)."""
    shown = frame[[c for c in frame.columns if c not in MEASURES and not c.endswith(" std")]].copy()
    for header in MEASURES:
        shown[header] = [
            format_number(m) + ("" if np.isnan(s) else f" ± {format_number(s)}")
            for m, s in zip(frame[header], frame[f"{header} std"])
        ]
    return shown


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    if not applies(runs):
        return []
    frame = comparison_table(runs)
    if frame.empty:
        return []
    caption = (
        "Attention built to be faithful (Mohankumar et al. 2020): vanilla, Orthogonal and Diversity LSTMs "
        "(one direction of 256 units, as the authors' code builds them, or the named bidirectional variants), "
        "each measure the mean over seeds ± the seeds' std. Conicity: mean cosine of each test state with the "
        "instance's mean state; permutation: Jain & Wallace's median output TVD under permuted attention; "
        "fraction removed: Serrano & Smith's share of the attention-ranked tokens erased before the decision "
        "flips; rationale mass: attention on the known rationale (data with rationales only); τ: Kendall τ-b per "
        "instance, averaged. — : the run did not compute it (its family not run, or no rationale in the data)"
    )
    body = captioned_table(frame, work, "mohankumar", caption, display=comparison_display(frame))
    return [("Faithful by design (Mohankumar et al. 2020)", body)]
