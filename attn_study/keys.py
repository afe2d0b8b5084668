"""The metric-key schema: every key a run or an analysis writes and the report reads (no torch here).

A key is a ``/``-joined path ``<namespace>/<statistic>/…/<stat>``:

- ``train/``, ``val/``, ``test/``, ``data/``, ``run/``: training, model selection and the run itself;
- one namespace per test family (:data:`FAMILIES`): ``jw/`` Jain & Wallace, ``ss/`` Serrano & Smith,
  ``sp/`` sparsity (Meister et al.), ``sc/`` combinatorial shortcuts (Bai et al.), ``ff/`` faithfulness
  (ERASER metrics);
- a mean comes with its 95 % bootstrap interval: ``…/mean``, ``…/ci_low``, ``…/ci_high``;
- per predicted class, ``class_<k>`` comes before the last part: ``jw/tau_grad/class_1/mean``;
- a family's statistics tracked during training are its keys under ``val/``: ``val/jw/tau_grad/mean``.

Analyses build their keys with the functions below and the report parses them with the same
functions, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: test family (config name, folder ``analysis/<family>/``) → key namespace
FAMILIES = {"jain_wallace": "jw", "serrano_smith": "ss", "sparsity": "sp", "shortcuts": "sc", "faithfulness": "ff",
            "wiegreffe_pinter": "wp"}
#: files of ``analysis/<family>/``: per-instance rows, the summary, and what was tracked while training
INSTANCES, SUMMARY = "instances.parquet", "summary.json"
#: in a run directory: every test instance's attention and output distribution (saved.write_attention)
ATTENTION = "attention.parquet"
EPOCHS_CSV, EPOCHS_PARQUET, EPOCHS_FIGURE = "epochs.csv", "epochs.parquet", "epochs.png"
TRAINING_NAMESPACES = ("train", "val", "test", "data", "run")
DURING_TRAINING = "val"


def key(*parts) -> str:
    """``key('jw', 'tau_grad', 'mean')`` → ``jw/tau_grad/mean`` (``None`` / empty parts are skipped)."""
    return "/".join(str(p) for p in parts if p is not None and p != "")


def class_part(k: int | None) -> str | None:
    return None if k is None else f"class_{int(k)}"


def namespace(name: str) -> str:
    return name.split("/", 1)[0]


def is_analysis_key(name: str) -> bool:
    """Whether ``name`` belongs to a test family (``jw/…``, ``ss/…``), not to training."""
    return namespace(name) in FAMILIES.values()


def during_training(name: str) -> str:
    """The key of a family statistic measured on the dev subsample while training: ``val/<key>``."""
    return key(DURING_TRAINING, name)


def tracked_key(name: str) -> str | None:
    """``val/jw/tau_grad/mean`` → ``jw/tau_grad/mean``; ``None`` for keys that are not tracked statistics."""
    head, _, rest = name.partition("/")
    return rest if head == DURING_TRAINING and is_analysis_key(rest) else None


_CLASS = re.compile(r"^class_(\d+)$")


def classes(summary: Iterable[str], stem: str) -> list[int]:
    """The predicted classes with keys ``<stem>/class_<k>/…`` in ``summary``."""
    found = set()
    for name in summary:
        if name.startswith(stem + "/"):
            match = _CLASS.match(name[len(stem) + 1:].split("/", 1)[0])
            if match:
                found.add(int(match.group(1)))
    return sorted(found)


def children(summary: Iterable[str], stem: str) -> list[str]:
    """The distinct path parts right after ``<stem>/`` in ``summary``'s keys, sorted."""
    return sorted({name[len(stem) + 1:].split("/", 1)[0] for name in summary if name.startswith(stem + "/")})


# ------------------------------------------------------------------------------------------------
# Jain & Wallace (jw/)
# ------------------------------------------------------------------------------------------------

JW = FAMILIES["jain_wallace"]
#: per-instance Kendall τ columns → the two importance rankings they correlate
CORRELATIONS = {"tau_grad": ("attention", "grad"), "tau_loo": ("attention", "loo"), "tau_grad_loo": ("grad", "loo")}


def jw(statistic: str, stat: str, cls: int | None = None) -> str:
    """``jw('tau_grad', 'mean', 1)`` → ``jw/tau_grad/class_1/mean``; ``statistic`` may hold slashes
    (``perm/median_tvd``, ``adv/emax_jsd``)."""
    return key(JW, statistic, class_part(cls), stat)


# ------------------------------------------------------------------------------------------------
# Serrano & Smith (ss/)
# ------------------------------------------------------------------------------------------------

SS = FAMILIES["serrano_smith"]
RANKINGS = ("attention", "random", "gradient", "grad_attention")
RANKING_LABELS = {"attention": "attention", "random": "random", "gradient": "gradient",
                  "grad_attention": "gradient × attention"}
#: single-weight 2×2 tables: table name → the ranking whose top item i* is erased (Table 2 / Figs 9, 12, 13)
SINGLE_TABLES = {"single": "attention", "single_grad": "gradient", "single_grad_attention": "grad_attention"}
#: cells of a 2×2 flip table: (erasing i* flips?, erasing r flips?)
CELLS = ("yes_yes", "yes_no", "no_yes", "no_no")
CELL_HEADERS = {"yes_yes": "both flip", "yes_no": "only i* flips", "no_yes": "only r flips", "no_no": "neither"}
#: paired comparisons with the attention ranking: key stem of the challenger → ranking
PAIRED = {"grad": "gradient", "grad_attention": "grad_attention"}


def single_flip_columns(table: str) -> tuple[str, str]:
    """Per-instance columns of a single-weight table: (erasing i* flips, erasing r flips), 1.0 / 0.0."""
    suffix = "" if table == "single" else table.removeprefix("single")
    return f"flip_top{suffix}", f"flip_random{suffix}"


def ss_flip_cell(table: str, cell: str) -> str:
    return key(SS, table, "flip_table", cell)


def ss_multi(ranking: str, what: str, stat: str | None = None) -> str:
    """``ss_multi('gradient', 'frac_removed', 'median')`` → ``ss/multi/gradient/frac_removed/median``."""
    return key(SS, "multi", ranking, what, stat)


def ss_rankings(summary: Iterable[str]) -> list[str]:
    """The multi-weight rankings present in ``summary`` (those with a never-flip count)."""
    summary = list(summary)
    return [r for r in children(summary, key(SS, "multi")) if ss_multi(r, "never_flip") in summary]


# ------------------------------------------------------------------------------------------------
# Sparsity, Meister et al. (sp/)
# ------------------------------------------------------------------------------------------------

SP = FAMILIES["sparsity"]
#: per-instance distributions over the real tokens whose normalised entropy is reported (sp/entropy/<name>/…)
SP_DISTRIBUTIONS = {
    "attention": "α",
    "g_input": "g_ŷ(x): ‖∂ŷ/∂e_i‖, Eq. 4",
    "loo_input": "D_ŷ(x): |ŷ − ŷ₋ᵢ|, token deleted, Eq. 6",
    "g_intermediate": "g_ŷ(h): ‖∂ŷ/∂h_i‖",
    "loo_intermediate": "D_ŷ(h): |ŷ − ŷ|h_i erased from α|",
    "g_hidden": "g_{h_p}(x): ‖∂‖h_p‖/∂e_i‖, Eq. 5; mean over p (Table 1)",
}
#: Kendall τ-b of α with each feature importance (sp/tau/<name>/…): name → distribution
SP_CORRELATIONS = {"attn_g_input": "g_input", "attn_loo_input": "loo_input",
                   "attn_g_intermediate": "g_intermediate", "attn_loo_intermediate": "loo_intermediate"}


def sp(*parts) -> str:
    """``sp('entropy', 'g_input', 'mean')`` → ``sp/entropy/g_input/mean``."""
    return key(SP, *parts)


# ------------------------------------------------------------------------------------------------
# Combinatorial shortcuts, Bai et al. (sc/)
# ------------------------------------------------------------------------------------------------

SC = FAMILIES["shortcuts"]
#: the report's columns: summary key → header
SC_COLUMNS = {"accuracy": "accuracy", "mask_only/accuracy": "mask-only acc.",
              "selected_only/accuracy": "selected-only acc.", "chance": "chance",
              "markers/mass/mean": "marker mass", "markers/selected_frac": "marker selected",
              "markers/choice_label_accuracy": "marker choice → label", "markers/choice_baseline": "(its baseline)",
              "markers/choice_label_p": "choice–label χ² p", "rationale/precision/mean": "rationale prec.",
              "posthoc/accuracy": "post-hoc acc."}


def sc(*parts) -> str:
    """``sc('mask_only', 'accuracy')`` → ``sc/mask_only/accuracy``."""
    return key(SC, *parts)


# ------------------------------------------------------------------------------------------------
# Faithfulness, ERASER metrics (ff/)
# ------------------------------------------------------------------------------------------------

FF = FAMILIES["faithfulness"]
#: importance methods: name → how it scores token t for the predicted class ŷ (p: its probability)
FF_METHODS = {
    "attention": "α_t, the model's attention",
    "gradient": "|∂p/∂e_t · e_t|, attention detached (Jain & Wallace)",
    "grad_norm": "‖∂p/∂e_t‖₂, through the attention (Meister et al. Eq. 4)",
    "input_x_gradient": "Σ_d e_td ∂p/∂e_td, signed, through the attention (Captum InputXGradient)",
    "integrated_gradients": "IG of p w.r.t. e_t summed over d, zero-embedding baseline, signed, through the "
                            "attention (Captum IntegratedGradients)",
    "loo": "p(ŷ|x) − p(ŷ|x₋ₜ), token deleted, signed",
    "random": "a uniformly random ranking (the floor)",
}
#: the per-method measures of the report: key path → header
FF_MEASURES = {"comprehensiveness/aopc": "comprehensiveness AOPC ↑", "sufficiency/aopc": "sufficiency AOPC ↓",
               "auprc": "AUPRC vs truth ↑", "ap": "AP vs truth ↑", "token_f1": "token F1 ↑", "iou_f1": "IOU F1 ↑"}
#: measures that are not a mean of per-instance values: the key part holding their point estimate
FF_POINT = {"iou_f1": "value"}


def ff(*parts) -> str:
    """``ff('loo', 'comprehensiveness', 'aopc', 'mean')`` → ``ff/loo/comprehensiveness/aopc/mean``."""
    return key(FF, *parts)


def ff_fraction(fraction: float) -> str:
    """The key part of a rationale size: 0.05 → ``k5`` (percent of the length), 0.025 → ``k2.5``."""
    return f"k{round(float(fraction) * 100, 6):g}"


# ------------------------------------------------------------------------------------------------
# statistics drawn against the epoch when tracked during training (analysis/<family>/epochs.png, report)
# ------------------------------------------------------------------------------------------------

TRACKED = {
    "jain_wallace": (jw("tau_grad", "mean"), jw("tau_loo", "mean"), jw("perm/median_tvd", "mean"),
                     jw("adv/emax_jsd", "mean")),
    "serrano_smith": (ss_multi("attention", "frac_removed", "median"), ss_multi("gradient", "frac_removed", "median"),
                      ss_multi("random", "frac_removed", "median"), key(SS, "multi", "grad_faster_than_attn"),
                      ss_flip_cell("single", "yes_no")),
    "sparsity": (sp("entropy", "g_input", "mean"), sp("entropy", "g_hidden", "mean"), sp("tau", "attn_g_input", "mean"),
                 sp("tau", "attn_g_intermediate", "mean"), sp("support", "frac", "mean")),
    "shortcuts": (sc("accuracy"), sc("mask_only", "accuracy"), sc("markers", "mass", "mean"),
                  sc("markers", "selected_frac")),
    "faithfulness": (ff("attention", "comprehensiveness", "aopc", "mean"), ff("loo", "comprehensiveness", "aopc", "mean"),
                     ff("attention", "sufficiency", "aopc", "mean"), ff("attention", "auprc", "mean"),
                     ff("gradient", "auprc", "mean")),
}


# ------------------------------------------------------------------------------------------------
# Wiegreffe & Pinter's comparison with a base run (wp/)
# ------------------------------------------------------------------------------------------------

WP = FAMILIES["wiegreffe_pinter"]


def wp(*parts) -> str:
    """``wp('jsd', 'mean')`` → ``wp/jsd/mean``."""
    return key(WP, *parts)
