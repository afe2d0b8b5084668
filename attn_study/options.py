"""The options of the config groups, read from ``conf/``: the listing ``attn-study --help`` prints.

An option is a YAML file of a group's folder, ``conf/<group>/<option>.yaml`` (a subfolder gives
``<folder>/<option>``), whose name does not start with ``_`` (those are bases other options build on);
its description is its first comment line (each option file starts with one, a sentence of at most 100
characters: ``tests/test_cli.py`` checks). ``local`` (this machine's overlay,
``conf/local/default.yaml``) and ``recipe_dataset`` (chosen by ``recipe=`` for the dataset) are no
choices; Hydra's launchers are (``hydra/launcher=``): its own ``basic``, the ``joblib`` plugin and
the files of ``conf/hydra/launcher/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

CONF = Path(__file__).resolve().parent.parent / "conf"
#: folders of conf/ that are no group a user chooses from
NOT_CHOSEN = ("hydra", "local", "recipe_dataset")
#: the order of the listing; a group not named here follows, alphabetically
ORDER = (
    "dataset",
    "model",
    "encoder",
    "attention",
    "projection",
    "training",
    "analysis",
    "callbacks",
    "trainer",
    "logger",
    "recipe",
    "experiment",
    "sweep",
)
#: the groups whose choice is a list (``analysis=[jain_wallace,sparsity]``)
LISTS = ("analysis", "callbacks", "logger")
#: launchers that come with Hydra and its plugins, not from conf/
PLUGIN_LAUNCHERS = {
    "basic": "Hydra's own: the jobs one after another, in this process.",
    "joblib": "Parallel local processes (hydra.launcher.n_jobs=N); each job gets cores / n_jobs torch threads.",
}


def description(path: Path) -> str:
    """The file's first comment line (a ``# @package`` line skipped): its one-line description; '' if none."""
    for line in Path(path).read_text().splitlines():
        text = line.strip()
        if not text.startswith("#"):
            if text:
                return ""
            continue
        body = text[1:].strip()
        if body and not body.startswith("@package"):
            return body
    return ""


def groups(conf: Path = CONF) -> list[str]:
    """The groups a user chooses from, in the listing's order."""
    found = sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name not in NOT_CHOSEN)
    return [g for g in ORDER if g in found] + [g for g in found if g not in ORDER]


def options(group: str, conf: Path = CONF) -> dict[str, str]:
    """``{option: description}`` of a group (``projection`` → ``softmax``, …, ``sparsegen_grid/lam0.5``)."""
    folder = conf / group
    found = {}
    for path in sorted(folder.rglob("*.yaml")):
        parts = path.relative_to(folder).with_suffix("").parts
        if any(part.startswith("_") for part in parts):
            continue
        found["/".join(parts)] = description(path)
    return found


def having(group: str, node: str, key: str, conf: Path = CONF) -> list[str]:
    """The options of ``group`` whose file sets ``key`` in its ``node`` (``''``: the file's top level):
    ``having("model", "network", "decoder_dim")`` → ``["pair"]`` — who would read a setting the chosen one lacks."""
    found = []
    for option in options(group, conf):
        content = yaml.safe_load((conf / group / f"{option}.yaml").read_text()) or {}
        for part in [p for p in node.split(".") if p]:
            content = content.get(part) if isinstance(content, dict) else None
        if isinstance(content, dict) and key in content:
            found.append(option)
    return found


def settable(group: str, node: str, conf: Path = CONF) -> set[str]:
    """Every key some option of ``group`` sets in its ``node``: the settings a user can give it (a constructor's
    other parameters — the vocabulary's size, the encoder the model is built around — are the code's to give)."""
    keys: set[str] = set()
    for option in options(group, conf):
        content = yaml.safe_load((conf / group / f"{option}.yaml").read_text()) or {}
        for part in [p for p in node.split(".") if p]:
            content = content.get(part) if isinstance(content, dict) else None
        if isinstance(content, dict):
            keys |= {str(k) for k in content if not str(k).startswith("_") and k != "defaults"}
    return keys


def readers(option: str, conf: Path = CONF) -> list[str]:
    """The group options whose file reads ``option`` by interpolation: ``dataset.cnn_filters`` → ``["encoder=cnn"]``."""
    pattern = re.compile(r"\$\{[^}]*\b" + re.escape(option) + r"\b")
    return [
        f"{group}={name}"
        for group in groups(conf)
        for name in options(group, conf)
        if pattern.search((conf / group / f"{name}.yaml").read_text())
    ]


def launchers(conf: Path = CONF) -> dict[str, str]:
    """``{launcher: description}`` for ``hydra/launcher=``."""
    own = {p.stem: description(p) for p in sorted((conf / "hydra" / "launcher").glob("*.yaml"))}
    return {**PLUGIN_LAUNCHERS, **own}


def defaults(conf: Path = CONF, config: str = "config") -> dict[str, object]:
    """Each group's default choice in ``conf/<config>.yaml``'s defaults list (None: no option by default)."""
    chosen: dict[str, object] = {}
    for entry in yaml.safe_load((conf / f"{config}.yaml").read_text()).get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                chosen[key.replace("optional ", "").strip()] = value
    return chosen


def _default_shown(value) -> str:
    if isinstance(value, list):
        return f"[{','.join(map(str, value))}]"
    return "none" if value is None else str(value)


def listing(only: tuple[str, ...] | None = None, config: str = "config", conf: Path = CONF) -> str:
    """Every group (or ``only`` these) with how it is chosen and its default, then each option and its
    description, one line each; the launchers last."""
    chosen = defaults(conf, config)
    sections = [(g, options(g, conf)) for g in groups(conf) if only is None or g in only]
    if only is None or "hydra/launcher" in only:
        sections.append(("hydra/launcher", launchers(conf)))
        chosen.setdefault("hydra/launcher", "basic")
    lines = []
    for group, found in sections:
        form = f"{group}=[a,b,...] (a list; [] for none)" if group in LISTS else f"{group}=<option>"
        default = f", default: {_default_shown(chosen[group])}" if group in chosen else ""
        lines.append(f"{form}{default}")
        pad = max(len(name) for name in found) + 2
        lines += [f"  {name.ljust(pad)}{text}" for name, text in found.items()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def settings(config: str = "config", conf: Path = CONF) -> str:
    """The top-level settings of ``conf/<config>.yaml`` that hold a single value, each with its comment (the
    lines that continue it joined): ``seed=13  seeds everything: ...``; a ``${oc.select:…,default}`` as its
    default."""
    lines: list[tuple[str, str]] = []
    following = False
    for line in (conf / f"{config}.yaml").read_text().splitlines():
        found = re.match(r"^([a-z_]+):\s*([^#{}\s][^#]*?)\s*#\s*(.*)$", line)
        more = re.match(r"^\s+#\s*(.*)$", line)
        if found:
            name, value, text = found.groups()
            lines.append((f"{name}={_by_default(value)}", text))
        elif following and more:
            lines[-1] = (lines[-1][0], f"{lines[-1][1]} {more.group(1)}")
        following = bool(found) or (following and bool(more))
    pad = max((len(left) for left, _ in lines), default=0) + 2
    return "".join(f"  {left.ljust(pad)}{text}\n" for left, text in lines)


def _shown_value(value) -> str:
    """A YAML default as one writes it on the command line: ``[a,b]``, ``null``, ``true``."""
    if isinstance(value, list):
        return f"[{','.join(_shown_value(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}: {_shown_value(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return _by_default(str(value))


def _by_default(value: str) -> str:
    """``${oc.select:key,default}`` (a default another setting may replace) shown as its default."""
    return re.sub(r"\$\{oc\.select:[^,}]+,([^}]*)\}", r"\1", value)


def family_options(conf: Path = CONF, width: int = 116) -> str:
    """Every family's options, set as ``analysis.<family>.<key>=value``: those all share
    (``conf/analysis/_common.yaml``, each with its comment; an interpolated default shown as what it gives by
    default), then each family's own with their defaults (their comments: ``conf/analysis/<family>.yaml``)."""
    import textwrap

    lines = [line for line in settings("analysis/_common", conf).splitlines() if not line.strip().startswith("_")]
    shared = set(yaml.safe_load((conf / "analysis" / "_common.yaml").read_text()))
    for family in options("analysis", conf):
        values = yaml.safe_load((conf / "analysis" / f"{family}.yaml").read_text()) or {}
        own = [f"{k}={_shown_value(v)}" for k, v in values.items() if k not in shared and k != "defaults"]
        if own:
            lines += textwrap.wrap(
                f"{family}: {', '.join(own)}", width, initial_indent="  ", subsequent_indent="      "
            )
    return "\n".join(lines) + "\n"


def help_text(app: str) -> str:
    """What ``--help`` lists for ``app`` (``train``: attn-study, ``analyze``: attn-study-analyze): the groups'
    options, the settings, then the families' options. ``$`` escaped: Hydra fills its help template with
    ``string.Template``."""
    families = "\n== Family options: analysis.<family>.<key>=value (each explained in conf/analysis/<family>.yaml) ==\n"
    families += family_options()
    if app == "train":
        text = listing() + "\n== Settings (key=default) ==\n" + settings("config") + families
    elif app == "analyze":
        text = listing(only=("analysis",), config="analyze") + "\n== Settings (key=default) ==\n" + settings("analyze")
        text += families
    else:
        raise ValueError(f"help for {app!r}: 'train' or 'analyze'")
    return text.replace("$", "$$")
