"""``attn-study-analyze hf_model=<dir> hf_data=[dataset=…]``: the chosen analyses of a locally stored Hugging Face
sequence classifier (models/huggingface.py) on a dataset tokenised by its tokenizer (data/pretrained.py).

Nothing is trained: the data is composed from ``attn-study``'s own config with the ``hf_data`` overrides (a
dataset, its path, the seed of a generated one), each family runs as after testing, and the results go to
``<hydra.run.dir>/analysis/<family>/`` with ``summary.json`` beside them.
"""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from attn_study.errors import UserError
from attn_study.job import stopping


def applicable() -> list[str]:
    """The families that apply to a pretrained checkpoint (their callback's ``PRETRAINED``): its attention (raw,
    rollout, flow, norms) against token importance. Erasure and the pooled states need a pooling attention, which
    a pretrained checkpoint does not have."""
    from attn_study.analysis.callback import AnalysisCallback
    from attn_study.families import REGISTRY

    found = []
    for name, family in REGISTRY.items():
        module = family.module("callback")
        classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, AnalysisCallback)]
        if any(c.name == name and c.PRETRAINED for c in classes):
            found.append(name)
    return found


def analyze_pretrained(cfg: DictConfig, out_dir: str | Path) -> dict:
    """Run ``cfg.analysis`` on the checkpoint at ``cfg.hf_model``; returns the rebuilt summary."""
    from hydra import compose

    from attn_study.config import check_config
    from attn_study.data.pretrained import PretrainedTextData
    from attn_study.job.analyze import tidy
    from attn_study.job.components import build_analyses, component
    from attn_study.job.summary import rebuild_summary
    from attn_study.models.huggingface import PretrainedClassifier, load_pretrained, position_limit

    data_cfg = compose("config", overrides=[str(o) for o in (cfg.get("hf_data") or [])] + ["analysis=[]"])
    seed = data_cfg.seed if cfg.get("seed") is None else cfg.seed
    with open_dict(data_cfg):
        data_cfg.seed = seed
    check_config(data_cfg)  # hf_data's options and the seed, as attn-study checks them
    chosen = OmegaConf.merge({"seed": seed}, {"analysis": OmegaConf.to_container(cfg.get("analysis") or {})})
    OmegaConf.resolve(chosen)
    families = [name for name, node in (chosen.get("analysis") or {}).items() if node and "_target_" in node]
    allowed = applicable()
    other = [name for name in families if name not in allowed]
    if other:
        raise UserError(
            f"analysis=[{','.join(other)}]: {'perturbs' if len(other) == 1 else 'perturb'} a pooling attention or "
            f"its states, which a pretrained checkpoint does not have; choose from {allowed}"
        )
    analyses = build_analyses(chosen)
    if not analyses:
        raise UserError(f"attn-study-analyze: no analysis chosen; give analysis=[…] from {allowed}")
    hf_model, tokenizer = load_pretrained(cfg.hf_model)
    data = data_cfg.dataset
    datamodule = PretrainedTextData(
        component(data.source, option="dataset.source"),
        tokenizer,
        max_length=position_limit(hf_model.config, tokenizer),
        pairs=False,
        option="hf_model",
        preprocessing=OmegaConf.to_container(data.preprocessing, resolve=True),
        eval_batch_size=data.eval_batch_size,
        name=data.name,
    )
    datamodule.setup()
    model = PretrainedClassifier(hf_model)
    if model.num_classes != datamodule.num_classes:
        raise UserError(
            f"hf_model={cfg.hf_model}: {model.num_classes} labels, and {data.name} has {datamodule.num_classes} classes"
        )
    device = "cuda" if cfg.device in ("auto", "cuda") and torch.cuda.is_available() else "cpu"
    if cfg.device == "cuda" and device == "cpu":
        raise UserError("device=cuda: no CUDA device here")
    model.to(device).eval().requires_grad_(False)
    out_dir = Path(out_dir)
    for analysis in analyses:
        analysis.check(model, datamodule)
    with stopping.on_stop(lambda _signal: tidy(out_dir)):
        for analysis in analyses:
            analysis.analyse(model, datamodule, out_dir)
        return rebuild_summary(out_dir)
