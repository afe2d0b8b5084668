"""Run directories as the CLI writes them (``.hydra/config.yaml``, ``overrides.yaml``, ``status.json`` with its code
version, ``summary.json``), with numbers chosen against the papers' (``report/papers/``), for the scorecard and the
page tests: Jain & Wallace's SST BiLSTM and Average (3 seeds), Meister et al.'s SST BiLSTM and Transformer (softmax,
sparsemax, a λ grid; Transformers with either self-attention), a Serrano & Smith HAN on the nearest IMDB (not
comparable) and Mohankumar et al.'s Diversity LSTM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from attn_study.io import write_json_atomic

CODE_A = {"version": "0.1.0", "commit": "a" * 40, "dirty": False}
CODE_B = {"version": "0.1.0", "commit": "b" * 40, "dirty": True}
AVX512 = {"torch": "2.13.0+cpu", "cpu_capability": "AVX512"}
GLOVE = "/data/glove.6B.50d.txt.gz"


def write_run(
    root: Path,
    name: str,
    *,
    setting: dict,
    seed: int,
    summary: dict,
    analysis: str,
    recipe: str | None = "jain_wallace",
    settings: dict | None = None,
    overrides: list[str] | None = None,
    code: dict | None = None,
    numerics: dict | None = AVX512,
    finished: float = 1.0e9,
    started: float | None = None,
    attempt: int = 1,
    instances: pd.DataFrame | None = None,
) -> Path:
    """One complete run directory under ``root``; ``setting``: dataset, model, encoder, attention, projection (and
    ``lam``); ``settings``: other options (``encoder.self_attention``: value)."""
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    config = OmegaConf.create(
        {k: {"name": setting[k]} for k in ("dataset", "model", "encoder", "attention", "projection")}
        | {"seed": seed, "analysis": {analysis: {}}, "model": {"name": setting["model"], "embeddings": {"path": GLOVE}}}
    )
    if recipe:
        config.recipe = {"name": recipe}
    if setting.get("lam") is not None:
        config.projection.lam = setting["lam"]
    for key, value in (settings or {}).items():
        OmegaConf.update(config, key, value, force_add=True)
    OmegaConf.save(config, run / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(overrides or [f"seed={seed}"]), run / ".hydra" / "overrides.yaml")
    status = {
        "state": "complete",
        "started": finished - 300.0 if started is None else started,
        "finished": finished,
        "attempt": attempt,
        "labels": ["negative", "positive"],
        "code": code or CODE_A,
    }
    if numerics is not None:
        status["numerics"] = numerics
    write_json_atomic(run / "status.json", status)
    write_json_atomic(run / "summary.json", {"run/attempts": attempt, "train/seconds": 240.0, **summary})
    if instances is not None:
        (run / "analysis" / analysis).mkdir(parents=True)
        instances.to_parquet(run / "analysis" / analysis / "instances.parquet")
    return run


def jw_summary(rng, tau_g: float, tau_loo: float, f1: float) -> dict:
    out = {"test/acc": f1, "test/f1": f1, "test/auroc": f1, "val/auroc_best": f1, "data/test_size": 1725}
    for k in (0, 1):
        for stem, mean in (("tau_grad", tau_g), ("tau_loo", tau_loo)):
            m = mean + rng.normal(0, 0.01)
            out |= {
                f"jw/{stem}/class_{k}/mean": m,
                f"jw/{stem}/class_{k}/ci_low": m - 0.01,
                f"jw/{stem}/class_{k}/ci_high": m + 0.01,
                f"jw/{stem}/class_{k}/std": 0.2 + rng.normal(0, 0.005),
                f"jw/{stem}/class_{k}/sig_frac": 0.55 + rng.normal(0, 0.01),
                f"jw/{stem}/class_{k}/n": 860,
            }
    return out


def jw_instances(seed: int, n: int = 20) -> pd.DataFrame:
    """Per-instance τ's of a J&W run: uniform noise, predictions alternating between the two classes."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "prediction": np.arange(n) % 2,
            "tau_grad": rng.uniform(-1, 1, n),
            "tau_loo": rng.uniform(-1, 1, n),
            "tau_grad_loo": rng.uniform(-1, 1, n),
        }
    )


def sp_summary(rng, hidden: float, entropy: float, acc: float, support: float) -> dict:
    m = hidden + rng.normal(0, 0.01)
    return {
        "test/acc": acc,
        "test/f1": acc,
        "sp/n_instances": 400,
        "sp/entropy/g_hidden/mean": m,
        "sp/entropy/g_hidden/ci_low": m - 0.005,
        "sp/entropy/g_hidden/ci_high": m + 0.005,
        "sp/entropy/g_hidden/std": 0.06,
        "sp/entropy/g_hidden/n": 400,
        "sp/entropy/g_input/mean": entropy,
        "sp/support/frac/mean": support,
        "sp/tau/attn_g_input/mean": 0.3 + rng.normal(0, 0.01),
    }


def ss_summary() -> dict:
    cells = {"yes_yes": 0.6, "yes_no": 9.5, "no_yes": 1.4, "no_no": 88.5}
    out = {"test/acc": 0.45, "ss/n_instances": 500, "ss/single/n": 500}
    out |= {f"ss/single/flip_table/{c}": v for c, v in cells.items()}
    out |= {
        "ss/multi/n": 500,
        "ss/multi/attention/frac_removed/median": 0.4,
        "ss/multi/attention/frac_removed/mean": 0.45,
        "ss/multi/attention/never_flip": 0.25,
        "ss/multi/attention/never_flip_frac": 0.25,
        "ss/multi/grad_vs_attn_ratio": 2.0,
        "ss/multi/grad_vs_attn_sign_p": 1e-9,
    }
    return out


def paper_sweep(root: Path) -> Path:
    """The runs of the module docstring under ``root``; returns ``root``."""
    rng = np.random.default_rng(0)
    jw = {"dataset": "sst", "model": "flat", "attention": "additive", "projection": "softmax"}
    for seed in (13, 14, 15):
        code = CODE_B if seed == 15 else CODE_A  # one seed made by other, uncommitted code: the tables say so
        write_run(
            root,
            f"jw-lstm-{seed}",
            numerics={"torch": "2.9.1+cpu", "cpu_capability": "AVX2"} if seed == 14 else None if seed == 15 else AVX512,
            setting=jw | {"encoder": "lstm"},
            seed=seed,
            summary=jw_summary(rng, 0.39, 0.33, 0.81 + rng.normal(0, 0.003)),
            analysis="jain_wallace",
            code=code,
            instances=jw_instances(seed),
        )
        write_run(
            root,
            f"jw-average-{seed}",
            setting=jw | {"encoder": "average"},
            seed=seed,
            summary=jw_summary(rng, 0.74, 0.5, 0.80),
            analysis="jain_wallace",
            code=code,
            instances=jw_instances(seed),
        )
    for seed in (13, 14, 15):
        for encoder, attention in (("lstm", "additive"), ("transformer", "dot")):
            base = {"dataset": "sst", "model": "flat", "encoder": encoder, "attention": attention}
            grid = [("softmax", None), ("sparsemax", None), *(("sparsegen", lam) for lam in (-10.0, -1.0, 0.5))]
            for projection, lam in grid:
                entropy = 0.95 - 0.01 * (lam if lam is not None else 0.0) + rng.normal(0, 0.002)
                sparse = projection != "softmax"
                hidden = {"lstm": 0.92, "transformer": 0.80 if sparse else 0.74}[encoder]
                self_attention = {"encoder.self_attention": "softmax"} if encoder == "transformer" else {}
                write_run(
                    root,
                    f"sp-{encoder}-{projection}{'' if lam is None else lam}-{seed}",
                    setting=base | {"projection": projection, "lam": lam},
                    seed=seed,
                    summary=sp_summary(rng, hidden, entropy, 0.8, 0.3 if sparse else 1.0),
                    analysis="sparsity",
                    settings=self_attention,
                )
    # the paper's Transformer (sparsemax): sparsemax in the self-attention too (two seeds)
    for seed in (13, 14):
        write_run(
            root,
            f"sp-transformer-sparsemax-sparse-self-attention-{seed}",
            setting={"dataset": "sst", "model": "flat", "encoder": "transformer", "attention": "dot"}
            | {"projection": "sparsemax"},
            seed=seed,
            summary=sp_summary(rng, 0.63, 0.9, 0.75, 0.3),
            analysis="sparsity",
            settings={"encoder.self_attention": "sparsemax"},
            overrides=[f"seed={seed}", "encoder.self_attention=sparsemax"],
        )
    write_run(
        root,
        "ss-han-gru-13",
        setting={"dataset": "imdb_rating", "model": "han", "encoder": "gru", "attention": "additive"}
        | {"projection": "softmax"},
        seed=13,
        summary=ss_summary(),
        analysis="serrano_smith",
        recipe="serrano_smith",
    )
    write_run(
        root,
        "mk-diversity-13",
        setting={"dataset": "sst", "model": "flat", "encoder": "diversity_lstm", "attention": "additive"}
        | {"projection": "softmax"},
        seed=13,
        summary={"test/acc": 0.79, "test/conicity/mean": 0.19},
        analysis="jain_wallace",
        started=1.0e9 - 1200,
        attempt=2,
    )
    # an older run of seed 13's BiLSTM config, by other code: replaced by the later one, and the report says so
    write_run(
        root,
        "jw-lstm-13-before",
        setting=jw | {"encoder": "lstm"},
        seed=13,
        summary=jw_summary(rng, 0.1, 0.1, 0.5),
        analysis="jain_wallace",
        code=CODE_B,
        finished=0.9e9,
    )
    # a failed sweep job, named by all its overrides as a sweep names it
    failed = (
        root
        / "attention=additive,dataset=imdb,encoder=lstm,recipe=jain_wallace,seed=13,dataset.path=_data_imdb_-9d879b21e1"
    )
    (failed / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create({"dataset": {"name": "imdb"}, "seed": 13}), failed / ".hydra" / "config.yaml")
    write_json_atomic(
        failed / "status.json",
        {"state": "failed", "finished": 1.0e9, "error": "RuntimeError: CUDA out of memory. Tried to allocate 2.50 GiB"},
    )
    return root
