"""Build the components of a run from its composed config (``_target_`` entries)."""

from __future__ import annotations

import difflib
import inspect
import logging
import typing
from pathlib import Path

import numpy as np
from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from attn_study import layout, ranges
from attn_study.data.datamodule import TextDataModule
from attn_study.data.embeddings import load_embeddings
from attn_study.errors import UserError
from attn_study.models import objectives
from attn_study.models.module import AttentionModule

log = logging.getLogger(__name__)


def component(node: DictConfig, partial: bool = False, drop: tuple[str, ...] = ("name",), option: str = "", **kwargs):
    """Instantiate ``node`` without the keys in ``drop`` (``name`` labels a group option; it is not a
    constructor argument). ``option``, the node's place in the config (``encoder``,
    ``analysis.jain_wallace``), names it when a setting is not one its constructor takes."""
    params = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k not in drop}
    check_settings(params, option)
    if partial:
        params["_partial_"] = True
    try:
        return instantiate(params, **kwargs)
    except InstantiationException as err:  # Hydra wraps the constructor's error; a user mistake stays one line
        if isinstance(err.__cause__, UserError):
            raise err.__cause__ from None
        raise


#: the config's nodes built from a ``_target_`` (their settings are their constructors' parameters)
COMPONENTS = ("encoder", "attention", "projection", "trainer", "model.network", "dataset.source")


def check_components(cfg: DictConfig) -> None:
    """:func:`check_settings` of every node built from a ``_target_`` (the groups, callbacks, loggers,
    analyses), before anything is built: a typo is refused without reading any data."""
    nodes = [(path, OmegaConf.select(cfg, path)) for path in COMPONENTS]
    for group in ("callbacks", "logger", "analysis"):
        nodes += [(f"{group}.{name}", node) for name, node in (cfg.get(group) or {}).items()]
    for option, node in nodes:
        if isinstance(node, DictConfig) and "_target_" in node:
            params = OmegaConf.to_container(node, resolve=True)
            check_settings({k: v for k, v in params.items() if k != "name" or option.startswith("logger")}, option)


def constructor_parameters(target: str) -> dict[str, object] | None:
    """The keyword parameters of ``target``'s constructor — following ``**kwargs`` up the class hierarchy —, each
    with its annotation (``inspect.Parameter.empty`` where it has none); None when it takes arbitrary keywords all
    the way up, or cannot be read (Hydra says what is wrong with it)."""
    try:
        obj = get_object(target)
    except Exception:
        return None
    accepted: dict[str, object] = {}
    functions = [c.__init__ for c in obj.__mro__ if "__init__" in vars(c)] if inspect.isclass(obj) else [obj]
    for function in functions:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            return None
        try:
            hints = typing.get_type_hints(function)
        except Exception:  # an annotation that does not evaluate: those parameters are unchecked
            hints = {}
        for p in parameters:
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self":
                accepted.setdefault(p.name, hints.get(p.name, inspect.Parameter.empty))
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            return accepted
    return None  # **kwargs all the way: anything goes


def check_settings(params: dict, option: str) -> None:
    """Every key of ``params`` (but ``_target_``…) is a parameter of its ``_target_``'s constructor
    (:func:`constructor_parameters`), else a one-line ``UserError`` naming ``option.<key>``; and a setting that
    :data:`attn_study.ranges.RANGES` does not type (a family's) is of the kind its annotation says
    (``ranges.annotated``: ``'false'`` for a ``bool`` is refused). Targets that take arbitrary keywords all the way
    up are not checked."""
    target = params.get("_target_")
    if not option or not isinstance(target, str):
        return
    accepted = constructor_parameters(target)
    if accepted is None:
        return
    for key, value in params.items():
        if key.startswith("_"):
            continue
        if key not in accepted:
            close = difflib.get_close_matches(key, sorted(accepted), n=1)
            raise UserError(
                f"{option}.{key}: no such setting{f' (did you mean {close[0]}?)' if close else ''}; "
                f"{option} takes {sorted(accepted)}"
            )
        kind = ranges.annotated(accepted[key]) if f"{option}.{key}" not in ranges.RANGES else None
        if kind is not None:
            ranges.require(f"{option}.{key}", value, UserError, kind)


def build_analyses(cfg: DictConfig) -> list:
    """The chosen test families (``cfg.analysis``, a node per family) as Lightning callbacks."""
    # a node without _target_ (or with a null one) holds options for a family that is not chosen (a recipe sets them;
    # sweep=pretrained's [CLS] arm leaves out the families that perturb α): skipped
    return [
        component(node, option=f"analysis.{name}")
        for name, node in (cfg.get("analysis") or {}).items()
        if node and node.get("_target_")
    ]


def build_callbacks(cfg: DictConfig, run_dir: Path) -> list:
    """The other Lightning callbacks (``cfg.callbacks``); the checkpoints go to ``<run_dir>/checkpoints``, and a
    model checkpoint with ``save_last`` gets an :class:`EveryEpochResumePoint` beside it."""
    callbacks = []
    for name, node in (cfg.get("callbacks") or {}).items():
        if not node:
            continue
        extra = {"dirpath": str(Path(run_dir) / layout.CHECKPOINTS)} if name == "model_checkpoint" else {}
        callbacks.append(component(node, option=f"callbacks.{name}", **extra))
        if name == "model_checkpoint" and node.get("save_last"):
            callbacks.append(EveryEpochResumePoint(extra["dirpath"]))
    return callbacks


class EveryEpochResumePoint(ModelCheckpoint):
    """``last.ckpt`` written after every epoch's validation. Lightning (2.5 on) writes ``save_last`` only when the
    monitored checkpoint improved, so a killed run resumed from its best epoch and trained every epoch since then
    again (the same numbers in the end, hours lost on a long job). A ``ModelCheckpoint`` of its own (no monitor,
    one file) so that Lightning runs it after the best-on-dev one, whose updated state the file then holds."""

    def __init__(self, dirpath: str):
        super().__init__(
            dirpath=dirpath,
            filename=Path(layout.LAST).stem,
            monitor=None,
            save_top_k=1,
            enable_version_counter=False,
        )


def model_seed(cfg: DictConfig) -> int:
    """The seed of the model's initialisation and training order: ``model_seed``, or ``seed`` when it is
    null. (``seed`` also seeds the data — a generated dataset, injected markers — and the analyses.)"""
    return int(cfg.seed if cfg.get("model_seed") is None else cfg.model_seed)


def build_datamodule(cfg: DictConfig) -> TextDataModule:
    """The run's data: the dataset's instances, as a checkpoint's tokenizer splits them under encoder=pretrained."""
    data = cfg.dataset
    settings = dict(
        source=component(data.source, option="dataset.source"),
        preprocessing={**OmegaConf.to_container(data.preprocessing, resolve=True), "inject": _injection(data)},
        batch_size=data.batch_size,
        eval_batch_size=data.eval_batch_size,
        bucket=data.bucket,
        cache_dir=cfg.paths.cache_dir,
        num_workers=data.num_workers,
        seed=model_seed(cfg),  # the training order
        name=data.name,
    )
    if pretrained_encoder(cfg):
        from attn_study.models.pretrained import pretrained_data

        return pretrained_data(cfg, settings)
    return TextDataModule(**settings)


def pretrained_encoder(cfg: DictConfig) -> bool:
    """Whether the run's encoder is a Hugging Face checkpoint (``encoder=pretrained``)."""
    return (cfg.get("encoder") or {}).get("name") == "pretrained"


def _injection(data: DictConfig) -> dict | None:
    """``dataset.inject`` when it injects anything (``count`` > 0), else None (so the cache key is the same)."""
    spec = OmegaConf.to_container(data.inject, resolve=True) if data.get("inject") else None
    return spec if spec and int(spec.get("count") or 0) > 0 else None


def build_model(cfg: DictConfig, datamodule: TextDataModule) -> AttentionModule:
    """The LightningModule for ``cfg.model`` on ``datamodule``'s vocabulary and classes."""
    if pretrained_encoder(cfg) or (cfg.get("attention") or {}).get("name") == "cls":
        from attn_study.models.pretrained import pretrained_classifier

        module = _module(cfg, pretrained_classifier(cfg, datamodule, component), datamodule)
        module.embedding_coverage = None  # the checkpoint's own word pieces
        return module
    m = cfg.model
    vocab = datamodule.vocab
    dim = m.network.embedding_dim
    pretrained: np.ndarray | None = None
    coverage = None
    if m.embeddings.path:
        pretrained, coverage = load_embeddings(
            m.embeddings.path, vocab, dim, seed=model_seed(cfg), missing=m.embeddings.get("missing", "normal")
        )
        log.info("pretrained embeddings cover %.1f%% of the vocabulary", 100 * coverage)
    classifier = component(
        m.network,
        option="model.network",
        vocab_size=len(vocab),
        num_classes=datamodule.num_classes,
        encoder=_encoder(cfg),
        scorer=component(cfg.attention, partial=True, option="attention"),
        projection=component(cfg.projection, option="projection"),
        pretrained=pretrained,
        freeze_embeddings=m.embeddings.freeze,
    )
    module = _module(cfg, classifier, datamodule)
    module.embedding_coverage = coverage  # the share of the vocabulary with a pretrained vector (None: none used)
    return module


def _encoder(cfg: DictConfig):
    """The encoder's factory; ``encoder.self_attention=pooling`` (a Transformer's) gives its self-attention the
    model's own projection (``projection``: sparsegen's λ included) — Meister et al.'s sparse Transformer."""
    if cfg.encoder.get("self_attention") == "pooling":
        own = component(cfg.projection, option="projection")
        return component(cfg.encoder, partial=True, option="encoder", self_attention=own)
    return component(cfg.encoder, partial=True, option="encoder")


def _module(cfg: DictConfig, classifier, datamodule) -> AttentionModule:
    m, opt, training = cfg.model, cfg.model.optimizer, cfg.get("training") or {}
    labels = datamodule.split("train").labels
    return AttentionModule(
        classifier,
        lr=opt.lr,
        weight_decay=opt.weight_decay,
        attention_weight_decay=opt.attention_weight_decay,
        amsgrad=opt.amsgrad,
        class_weights=_class_weights(m.class_weights, labels, datamodule.num_classes),
        objective=objectives.objective(training),
        class_prior=(np.bincount(labels, minlength=datamodule.num_classes) / len(labels)).tolist(),
        word_tying=float((training.get("word_tying") or {}).get("weight", 0.0) or 0.0),
        word_tying_kind=str((training.get("word_tying") or {}).get("kind", "predict")),
    )


def _class_weights(option, labels: np.ndarray, num_classes: int) -> list[float] | None:
    """``model.class_weights``: a list, null, or ``pos_weight`` — Jain & Wallace's class-balanced binary
    loss, the positive class weighted by #negative / #positive of the training split (their
    ``pos_weight`` = #train / #positive − 1)."""
    if not option:
        return None
    if option == "pos_weight":
        if num_classes != 2:
            raise UserError(f"model.class_weights=pos_weight is for binary tasks; this one has {num_classes} classes")
        counts = np.bincount(labels, minlength=2)
        return [1.0, float(counts[0] / counts[1])]
    return [float(w) for w in option]
