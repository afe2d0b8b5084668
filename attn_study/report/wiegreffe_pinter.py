"""Wiegreffe & Pinter (2019) across runs (``sweep=wiegreffe_pinter``).

- :func:`baselines`: per dataset and encoder, test accuracy and macro-F1 of learned, uniform and frozen
  attention (mean ± std over seeds): "does the task need learned attention?"; the rows of the Average
  encoder with tanh are the diagnostic MLP's table (F1 per attention source).
- :func:`frontier`: every run compared with a base (``wp/…``: other seeds, model-consistent adversaries
  per λ, frozen attention): mean JSD of attention and TVD of outputs to the base, with intervals.
- :func:`frontier_figure`: JSD vs TVD to the base — the seeds' per-instance cloud (the natural spread), the
  adversaries' means per λ (the frontier), and Jain & Wallace's per-instance adversaries (ε-max JSD and
  their TVD) on the same base model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study import keys, saved
from attn_study.report.runs import Run

ATTENTIONS = ("learned", "uniform", "frozen")


def attention_kind(run: Run) -> str:
    return run.config["attention"] if run.config["attention"] in ("uniform", "frozen") else "learned"


def role(run: Run) -> str:
    """How a run relates to its base: ``adversary λ=…``, ``frozen``, ``seed …`` (another seed)."""
    if run.config.get("adversary_lam") is not None:
        return f"adversary λ={run.config['adversary_lam']}"
    if attention_kind(run) == "frozen":
        return "frozen"
    return f"seed {run.config['seed']}"


def _spread(values: pd.Series) -> str:
    values = values.dropna()
    if values.empty:
        return "—"
    return f"{values.mean():.3f}" if len(values) == 1 else f"{values.mean():.3f} ± {values.std(ddof=0):.3f} ({len(values)})"


def baselines(runs: list[Run]) -> pd.DataFrame:
    """Rows dataset × encoder, columns acc / F1 of learned, uniform and frozen attention (standard training)."""
    rows = [{"dataset": r.config["dataset"], "encoder": r.config["encoder"], "attention": attention_kind(r),
             "acc": r.summary.get("test/acc", np.nan), "f1": r.summary.get("test/f1", np.nan)}
            for r in runs if r.config.get("training") == "standard" and saved_token_model(r)]
    frame = pd.DataFrame(rows)
    if frame.empty or frame["attention"].nunique() < 2:
        return pd.DataFrame()
    out = []
    for (dataset, encoder), g in frame.groupby(["dataset", "encoder"], sort=True):
        row = {"dataset": dataset, "encoder": encoder}
        for kind in ATTENTIONS:
            part = g[g["attention"] == kind]
            row[f"{kind} acc"], row[f"{kind} F1"] = _spread(part["acc"]), _spread(part["f1"])
        out.append(row)
    return pd.DataFrame(out)


def saved_token_model(run: Run) -> bool:
    return run.config.get("model") in ("flat", "pair")


def _base_of(run: Run, by_path: dict[Path, Run]) -> Run | None:
    try:
        path = saved.resolve_run(run.config["wp_base"], "analysis.wiegreffe_pinter.base", run.path).resolve()
    except Exception:
        return None
    return by_path.get(path)


def frontier(runs: list[Run]) -> pd.DataFrame:
    """One row per run compared with a base: dataset, base, role, mean JSD and TVD [95 % interval], agreement."""
    by_path = {r.path.resolve(): r for r in runs}
    rows = []
    for run in runs:
        if keys.wp("jsd", "mean") not in run.summary:
            continue
        base = _base_of(run, by_path)
        s = run.summary
        rows.append({"dataset": run.config["dataset"], "base": base.name if base else str(run.config["wp_base"]),
                     "role": role(run), "lam": run.config.get("adversary_lam"),
                     "jsd": s[keys.wp("jsd", "mean")], "jsd_low": s.get(keys.wp("jsd", "ci_low")),
                     "jsd_high": s.get(keys.wp("jsd", "ci_high")), "tvd": s[keys.wp("tvd", "mean")],
                     "tvd_low": s.get(keys.wp("tvd", "ci_low")), "tvd_high": s.get(keys.wp("tvd", "ci_high")),
                     "agreement": s.get(keys.wp("agreement")), "test acc": s.get("test/acc")})
    frame = pd.DataFrame(rows)
    return frame.sort_values(["dataset", "base", "role"]).reset_index(drop=True) if not frame.empty else frame


def frontier_display(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[["dataset", "base", "role"]].copy()
    for name in ("jsd", "tvd"):
        out[f"{name.upper()} to base"] = [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                                          zip(frame[name], frame[f"{name}_low"], frame[f"{name}_high"])]
    out["same prediction"] = frame["agreement"].map(lambda v: f"{v:.3f}")
    out["test acc"] = frame["test acc"].map(lambda v: f"{v:.3f}")
    return out


def frontier_figure(runs: list[Run], out: Path) -> Path | None:
    """JSD (x) vs TVD (y) to the base, per base model (see the module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_path = {r.path.resolve(): r for r in runs}
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
            ax.scatter(jw["adv_emax_jsd"], jw["adv_tvd"], s=6, alpha=0.4, color="tab:red", zorder=3,
                       label="J&W per-instance adversaries (ε-max)")
        seeds = [r for r in compared if role(r).startswith("seed")]
        for i, run in enumerate(seeds):
            rows = run.instances("wiegreffe_pinter")
            if rows is not None:
                ax.scatter(rows["jsd"], rows["tvd"], s=6, alpha=0.25, color="tab:gray",
                           label="other seeds, per instance" if i == 0 else None)
            ax.scatter([run.summary[keys.wp("jsd", "mean")]], [run.summary[keys.wp("tvd", "mean")]],
                       marker="s", color="black", label="other seeds, mean" if i == 0 else None)
        adversaries = sorted((r for r in compared if r.config.get("adversary_lam") is not None),
                             key=lambda r: float(r.config["adversary_lam"]))
        if adversaries:
            x = [r.summary[keys.wp("jsd", "mean")] for r in adversaries]
            y = [r.summary[keys.wp("tvd", "mean")] for r in adversaries]
            ax.plot(x, y, "o-", color="tab:blue", label="model-consistent adversaries, mean per λ")
            for r, xi, yi in zip(adversaries, x, y):
                ax.annotate(f"λ={r.config['adversary_lam']}", (xi, yi), fontsize=8, xytext=(3, 3),
                            textcoords="offset points")
        ax.set_xlabel("JSD(attention, base attention)")
        ax.set_ylabel("TVD(output, base output)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_title(base.name, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
