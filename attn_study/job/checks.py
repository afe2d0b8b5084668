"""What is checked before a run changes anything: the options the schema cannot see (epochs, monitored keys, a
GPU asked for), a paper's recipe, that the run directory can be written; and a full disk said in one line."""

from __future__ import annotations

import contextlib
import errno
import logging
import shutil
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from attn_study import families, keys
from attn_study.errors import UserError
from attn_study.options import CONF

log = logging.getLogger(__name__)


def ensure_writable(path: Path, option: str) -> None:
    """``path`` exists and a file can be written in it, or a one-line ``UserError`` naming ``option``."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{path}: a file, not a directory; choose another {option}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as err:
        raise UserError(f"{path}: cannot write there ({err.strerror or err}); choose another {option}") from None


def out_of_space(error: BaseException, path: Path, option: str) -> UserError | None:
    """A ``UserError`` saying so when ``error`` came from a full disk (``ENOSPC`` anywhere in its chain, or
    torch's "unexpected pos" from a truncated write with less than 64 MiB left), else None."""
    chain, seen, full = error, set(), False
    while chain is not None and id(chain) not in seen and not full:
        seen.add(id(chain))
        full = getattr(chain, "errno", None) == errno.ENOSPC or "No space left" in str(chain)
        chain = chain.__cause__ or chain.__context__
    if not full and "unexpected pos" in str(error):
        with contextlib.suppress(OSError):
            full = shutil.disk_usage(path).free < 64 * 2**20
    if not full:
        return None
    return UserError(
        f"no space left on the device of {path}: free some space, or choose another {option}; "
        "relaunching resumes from the last checkpoint"
    )


def check_pairs(cfg: DictConfig) -> None:
    """Settings that must agree with each other, known from the config alone: a Transformer's heads divide its
    width."""
    encoder = cfg.get("encoder") or {}
    if encoder.get("model_dim") and encoder.get("num_heads") and encoder.model_dim % encoder.num_heads:
        raise UserError(
            f"encoder.num_heads={encoder.num_heads} does not divide encoder.model_dim={encoder.model_dim}: each head "
            "gets model_dim / num_heads dimensions; choose sizes where it does (e.g. 128 and 4)"
        )


def check_options(cfg: DictConfig) -> None:
    """What the schema cannot see, before anything is read: the epochs leave a checkpoint to choose, the
    monitored key is one the run logs, a GPU asked for exists."""
    import torch

    from attn_study.models.objectives import objective

    trainer = cfg.get("trainer") or {}
    epochs = trainer.get("max_epochs")
    callbacks = cfg.get("callbacks") or {}
    training = cfg.get("training") or {}
    if epochs is not None:
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs == 0 or epochs < -1:
            raise UserError(f"trainer.max_epochs={epochs}: give a number of epochs >= 1 (or -1 with early stopping)")
        if epochs == -1 and not callbacks.get("early_stopping"):
            raise UserError(
                "trainer.max_epochs=-1 trains until early stopping, and callbacks has none: add "
                "callbacks=[model_checkpoint,early_stopping] or give a number of epochs"
            )
        first = objective(training).first_selectable
        if epochs > 0 and first >= epochs:
            raise UserError(
                f"trainer.max_epochs={epochs}: no epoch can be chosen as the best checkpoint — epochs "
                f"before {first} never are (training.select_from_epoch / pretrain_epochs); train at "
                f"least {first + 1} epochs"
            )
    for name in ("model_checkpoint", "early_stopping"):
        node = callbacks.get(name)
        monitor = node.get("monitor") if node else None
        if monitor and monitor not in monitored_keys(cfg) and not tracked_in_training(cfg, monitor):
            raise UserError(
                f"callbacks.{name}.monitor={monitor}: the run logs no such key; choose from "
                f"{sorted(monitored_keys(cfg))}"
            )
    accelerator = str(trainer.get("accelerator", "auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise UserError(
            "trainer=gpu: this machine has no CUDA GPU that torch can use; use trainer=auto (GPU when "
            "there is one, else CPU) or trainer=cpu"
        )


def monitored_keys(cfg: DictConfig) -> set[str]:
    """The per-epoch dev keys a run logs (what model selection and early stopping can watch)."""
    from attn_study.models.objectives import objective

    keys_ = {"val/loss", "val/acc", "val/f1", "val/auroc"} | objective(cfg.get("training")).monitored
    if (cfg.get("explainer") or {}).get("target"):
        keys_.add("val/fidelity")
    return keys_


def tracked_in_training(cfg: DictConfig, monitor: str) -> bool:
    """A family's statistic tracked during training (``val/<namespace>/…`` with ``every_n_epochs`` set)."""
    name = families.tracked_key(monitor)
    if name is None:
        return False
    family = {ns: f for f, ns in families.FAMILIES.items()}.get(keys.namespace(name))
    node = (cfg.get("analysis") or {}).get(family) or {}
    return bool(node.get("_target_") and node.get("every_n_epochs"))


RECIPE_DATASETS = CONF / "recipe_dataset"


def check_recipe(cfg: DictConfig, warn: bool = True) -> None:
    """A paper's recipe (``recipe=...``): say in one line each what it cannot reproduce here; refuse a
    model its table has no row for; note a dataset the paper did not use."""
    recipe = cfg.get("recipe")
    if not recipe:
        return
    if "row" in recipe and recipe.row.get("lr") is None:
        table = recipe.table
        models = sorted({m for d in table.values() for m in d})
        encoders = sorted({e for d in table.values() for m in d.values() for e in m})
        raise UserError(
            f"recipe={recipe.name} has no settings for dataset={cfg.dataset.name} model={cfg.model.name} "
            f"encoder={cfg.encoder.name}; its table covers dataset {sorted(table)} × model {models} × "
            f"encoder {encoders}"
        )
    if not warn:
        return
    for line in recipe.get("differs") or []:
        log.warning("recipe=%s differs from the authors' run: %s", recipe.name, line)
    if "table" not in recipe and not (RECIPE_DATASETS / recipe.name / f"{cfg.dataset.name}.yaml").is_file():
        log.warning(
            "recipe=%s: %s is not one of the paper's datasets; only its general settings apply",
            recipe.name,
            cfg.dataset.name,
        )


def check_positions(cfg: DictConfig, datamodule) -> None:
    """An encoder with a table of positions (``encoder.max_positions``) has one for the longest text of every split
    (passage or question, boundary tokens included): refused in one line once the data is read, before the model is
    built — not a traceback from inside the first batch that holds it."""
    limit = (cfg.get("encoder") or {}).get("max_positions")
    if not limit:
        return
    longest, where = 0, ""
    for split in ("train", "dev", "test"):
        rows = datamodule.split(split)
        for ids in [rows.ids] + ([rows.query_ids] if getattr(rows, "query_ids", None) is not None else []):
            size = max((len(x) for x in ids), default=0)
            if size > longest:
                longest, where = size, split
    if longest > limit:
        raise UserError(
            f"encoder.max_positions={limit}: the longest {where} text has {longest} tokens; give "
            f"encoder.max_positions={longest} or more (or shorten the texts: dataset.preprocessing.truncate)"
        )


#: the sizes a dataset or a recipe suggests to the components that read them (conf/config.yaml's dataset node)
SUGGESTIONS = (
    "dataset.rnn_hidden_size",
    "dataset.cnn_filters",
    "dataset.average_hidden_size",
    "dataset.average_activation",
    "dataset.embedding_dim",
    "dataset.decoder_dim",
)


def unread_settings(cfg: DictConfig, overrides: list[str] | None) -> list[str]:
    """One line for each suggestion the user wrote (``overrides``) that no chosen component reads
    (``dataset.average_activation=tanh`` with ``encoder=lstm``), naming the options that would read it: it is
    recorded with the run and changes nothing. (A warning, not a refusal: a sweep over encoders sets it for the
    ones that read it.)"""
    from omegaconf import OmegaConf

    from attn_study.options import readers

    given = {o.split("=", 1)[0].lstrip("+~"): o for o in overrides or [] if "=" in o}
    written = OmegaConf.to_container(cfg, resolve=False)
    texts = [str(v) for k, v in _leaves(written) if not k.startswith("dataset.")]
    lines = []
    for option in SUGGESTIONS:
        if option in given and not any(option in text for text in texts):
            who = readers(option)
            lines.append(
                f"{given[option]}: nothing in this run reads it"
                + (f" ({', '.join(who)} would)" if who else "")
                + "; it is recorded with the run and changes nothing"
            )
    return lines


def _leaves(node, prefix: str = ""):
    """(``a.b.c``, value) of every leaf of a nested dict."""
    for key, value in (node or {}).items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
