"""Wiegreffe & Pinter (2019) across runs (``sweep=wiegreffe_pinter``).

- :func:`baselines`: per dataset and model, test accuracy and macro-F1 with each attention, in their names:
  the model's own (learned), uniform, and another run's attention *pre-loaded* — the base model's, or a
  model-consistent adversary's at each λ (mean ± std over model seeds). The rows of the diagnostic MLP
  (``average`` with tanh) hold their central comparison: does an adversary's attention help a model that
  cannot re-weigh its inputs as much as the base's does? The BiLSTM with the base's attention pre-loaded is
  this project's own check, not one of their experiments, and is labelled so.
- :func:`frontier`: every run compared with a base (``wp/…``: other model seeds, model-consistent adversaries
  per λ, pre-loaded attention): mean JSD of attention and TVD of outputs to the base, with intervals.
- :func:`frontier_figure`: JSD vs TVD to the base — the seeds' per-instance cloud (the natural spread), the
  adversaries' means per λ (the frontier), and Jain & Wallace's per-instance adversaries (ε-max JSD and
  their TVD) on the same base model.

λ is this project's: their binary TVD is |Δp|/2, ours |Δp|, so our λ is twice theirs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import wrap_label
from attn_study.job import saved
from attn_study.report.render import MISSING, captioned_table, embedded_png, format_number, mean_ci
from attn_study.report.runs import Run

from . import keys

OWN_CHECK = " (this project's check, not in W&P)"


def adversary_lam(run: Run) -> float | None:
    """The λ of a model-consistent adversary (``training=model_consistent_adversary``), None for any other run."""
    if run.option("training.schedule") != "model_consistent_adversary":
        return None
    return run.option("training.lam")


def base_option(run: Run):
    """The run's ``analysis.wiegreffe_pinter.base``: the base run it is compared with (None: none)."""
    return run.option("analysis.wiegreffe_pinter.base")


def _by_path(runs: list[Run]) -> dict[Path, Run]:
    return {r.path.resolve(): r for r in runs}


def _resolved(run: Run, value, option: str, by_path: dict[Path, Run]) -> Run | None:
    try:
        return by_path.get(saved.resolve_run(value, option, run.path).resolve())
    except Exception:
        return None


def attention_kind(run: Run, by_path: dict[Path, Run]) -> str:
    """``learned``, ``uniform``, or ``pre-loaded: <whose>`` (the base's, an adversary's at λ, another run's)."""
    name = run.config["attention"]
    if name != "preloaded":
        return "uniform" if name == "uniform" else "learned"
    source = _resolved(run, run.config.get("attention_source"), "attention.source", by_path)
    if source is None:
        return f"pre-loaded: {run.config.get('attention_source')}"
    if adversary_lam(source) is not None:
        return f"pre-loaded: adversary λ={adversary_lam(source)}"
    return "pre-loaded: base" if source.config.get("attention") != "preloaded" else f"pre-loaded: {source.name}"


def role(run: Run, by_path: dict[Path, Run] | None = None) -> str:
    """How a run relates to its base: ``adversary λ=…``, ``pre-loaded: …``, ``model seed …`` (another model seed)."""
    if adversary_lam(run) is not None:
        return f"adversary λ={adversary_lam(run)}"
    if run.config["attention"] == "preloaded":
        return attention_kind(run, by_path or {}) + OWN_CHECK
    return (
        f"model seed {run.config.get('model_seed') if run.config.get('model_seed') is not None else run.config['seed']}"
    )


def _model_label(run: Run) -> str:
    encoder, activation = run.config["encoder"], run.config.get("activation")
    if encoder == "average" and activation == "tanh":
        return "diagnostic MLP (average, tanh)"
    return encoder + (OWN_CHECK if run.config["attention"] == "preloaded" else "")


def _kind_order(kind: str) -> tuple:
    head = ("learned", "uniform", "pre-loaded: base")
    if kind in head:
        return (head.index(kind), 0.0)
    lam = kind.rsplit("λ=", 1)[-1] if "λ=" in kind else ""
    try:
        return (3, float(lam))
    except ValueError:
        return (4, 0.0)


def baselines(runs: list[Run]) -> pd.DataFrame:
    """Rows dataset × model; per attention kind and metric (``acc``, ``F1``) the ``mean``, ``std`` over model
    seeds (ddof 0) and ``n`` seeds: columns ``<attention> acc mean`` … (standard training)."""
    by_path = _by_path(runs)
    rows = [
        {
            "dataset": r.config["dataset"],
            "model": _model_label(r),
            "attention": attention_kind(r, by_path),
            "acc": r.summary.get("test/acc", np.nan),
            "F1": r.summary.get("test/f1", np.nan),
        }
        for r in runs
        if r.config.get("training") == "standard" and saved_token_model(r)
    ]
    frame = pd.DataFrame(rows)
    if frame.empty or frame["attention"].nunique() < 2:
        return pd.DataFrame()
    kinds = sorted(frame["attention"].unique(), key=_kind_order)
    out = []
    for (dataset, model), g in frame.groupby(["dataset", "model"], sort=True):
        row = {"dataset": dataset, "model": model}
        for kind in kinds:
            for metric in ("acc", "F1"):
                values = g.loc[g["attention"] == kind, metric].dropna()
                row[f"{kind} {metric} mean"] = values.mean() if len(values) else np.nan
                row[f"{kind} {metric} std"] = values.std(ddof=0) if len(values) > 1 else np.nan
                row[f"{kind} {metric} n"] = len(values)
        out.append(row)
    return pd.DataFrame(out)


def baselines_display(frame: pd.DataFrame) -> pd.DataFrame:
    """One "mean ± std (n)" cell per attention kind and metric (one seed: the mean; none: —)."""
    out = frame[["dataset", "model"]].copy()
    for column in frame.columns:
        if column.endswith(" mean"):
            stem = column[: -len(" mean")]
            out[stem] = [
                MISSING if n == 0 else format_number(m) if n == 1 else f"{format_number(m)} ± {format_number(s)} ({n})"
                for m, s, n in zip(frame[column], frame[f"{stem} std"], frame[f"{stem} n"])
            ]
    return out


def saved_token_model(run: Run) -> bool:
    return run.config.get("model") in ("flat", "pair")


def _base_of(run: Run, by_path: dict[Path, Run]) -> Run | None:
    return _resolved(run, base_option(run), "analysis.wiegreffe_pinter.base", by_path)


def frontier(runs: list[Run]) -> pd.DataFrame:
    """One row per run compared with a base: dataset, base, role, mean JSD and TVD [95 % interval], agreement."""
    by_path = _by_path(runs)
    rows = []
    for run in runs:
        if keys.wp("jsd", "mean") not in run.summary:
            continue
        base = _base_of(run, by_path)
        s = run.summary
        rows.append(
            {
                "dataset": run.config["dataset"],
                "base": base.name if base else str(base_option(run)),
                "role": role(run, by_path),
                "lam": adversary_lam(run),
                "jsd": s[keys.wp("jsd", "mean")],
                "jsd_low": s.get(keys.wp("jsd", "ci_low")),
                "jsd_high": s.get(keys.wp("jsd", "ci_high")),
                "tvd": s[keys.wp("tvd", "mean")],
                "tvd_low": s.get(keys.wp("tvd", "ci_low")),
                "tvd_high": s.get(keys.wp("tvd", "ci_high")),
                "agreement": s.get(keys.wp("agreement")),
                "test acc": s.get("test/acc"),
            }
        )
    frame = pd.DataFrame(rows)
    return frame.sort_values(["dataset", "base", "role"]).reset_index(drop=True) if not frame.empty else frame


def frontier_display(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[["dataset", "base", "role"]].copy()
    for name in ("jsd", "tvd"):
        out[f"{name.upper()} to base"] = [
            mean_ci(m, lo, hi) for m, lo, hi in zip(frame[name], frame[f"{name}_low"], frame[f"{name}_high"])
        ]
    out["same prediction"] = frame["agreement"]
    out["test acc"] = frame["test acc"]
    return out


def frontier_figure(runs: list[Run], out: Path) -> Path | None:
    """JSD (x) vs TVD (y) to the base, per base model (see the module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_path = _by_path(runs)
    groups: dict[Path, list[Run]] = {}
    for run in runs:
        if keys.wp("jsd", "mean") in run.summary:
            base = _base_of(run, by_path)
            if base is not None:
                groups.setdefault(base.path, []).append(run)
    if not groups:
        return None
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.5), squeeze=False)
    for ax, (base_path, compared) in zip(axes[0], sorted(groups.items())):
        base = by_path[base_path.resolve()]
        jw = base.instances("jain_wallace")
        if jw is not None and {"adv_emax_jsd", "adv_tvd"} <= set(jw.columns):
            ax.scatter(
                jw["adv_emax_jsd"],
                jw["adv_tvd"],
                s=6,
                alpha=0.4,
                color="tab:red",
                zorder=3,
                label="J&W per-instance adversaries (ε-max)",
            )
        seeds = [r for r in compared if role(r, by_path).startswith("model seed")]
        for i, run in enumerate(seeds):
            rows = run.instances("wiegreffe_pinter")
            if rows is not None:
                ax.scatter(
                    rows["jsd"],
                    rows["tvd"],
                    s=6,
                    alpha=0.25,
                    color="tab:gray",
                    label="other seeds, per instance" if i == 0 else None,
                )
            ax.scatter(
                [run.summary[keys.wp("jsd", "mean")]],
                [run.summary[keys.wp("tvd", "mean")]],
                marker="s",
                color="black",
                label="other seeds, mean" if i == 0 else None,
            )
        adversaries = sorted(
            (r for r in compared if adversary_lam(r) is not None),
            key=lambda r: float(adversary_lam(r)),
        )
        if adversaries:
            x = [r.summary[keys.wp("jsd", "mean")] for r in adversaries]
            y = [r.summary[keys.wp("tvd", "mean")] for r in adversaries]
            ax.plot(x, y, "o-", color="tab:blue", label="model-consistent adversaries, mean per λ")
            for r, xi, yi in zip(adversaries, x, y):
                ax.annotate(f"λ={adversary_lam(r)}", (xi, yi), fontsize=8, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("JSD(attention, base attention)")
        ax.set_ylabel("TVD(output, base output)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_title(wrap_label(base.name, 60), fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """The baselines table, and each run against its base (the JSD–TVD frontier)."""
    base_table, frontier_table = baselines(runs), frontier(runs)
    if base_table.empty and frontier_table.empty:
        return []
    body = ""
    if not base_table.empty:
        caption = (
            "Wiegreffe & Pinter: test accuracy and macro-F1 with the model's own (learned), uniform and "
            "pre-loaded attention (the base model's, or a model-consistent adversary's at λ — ours, twice "
            "theirs), mean ± std over model seeds (n); the diagnostic MLP's row is their central comparison"
        )
        body += captioned_table(base_table, work, "wp_baselines", caption, display=baselines_display(base_table))
    if not frontier_table.empty:
        caption = (
            "Wiegreffe & Pinter: each run compared with its base on the test instances — mean JSD of the "
            "attentions and TVD of the outputs [95% bootstrap interval]; other seeds give the natural spread, "
            "model-consistent adversaries the frontier per λ"
        )
        body += captioned_table(
            frontier_table,
            work,
            "wp_frontier",
            caption,
            display=frontier_display(frontier_table),
            kinds={"same prediction": "fraction"},
        )
        path = frontier_figure(runs, work / "wp_jsd_vs_tvd.png")
        if path is not None:
            body += embedded_png(path)
    return [("Wiegreffe & Pinter: baselines", body)]
