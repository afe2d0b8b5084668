"""The house's plan, read from the source: every import, followed transitively (function-local imports count).

The shared code stands in layers, from the ground up (:data:`LAYERS`):

1. the ground: statistics (``stats/``) and the house's vocabulary — errors, io, keys, layout, names, options,
   progress, ranges — and ``tracking`` (what the loggers get); they import nothing of the package but each other;
2. ``figures/``: the house style;
3. ``data/`` and ``models/``: the datasets and the staged models;
4. ``analysis/``: what every family uses — the base callback, the importance methods, the erasures.

Above them, not layered against each other: the families (``families/``), the run side (``job/``, ``roar/``,
``sweep/``, ``config``, ``cli``) and the report (``report/``). The rules:

- a module of a layer reaches (transitively) nothing above its own layer: 0 arrows running back up;
- 0 circles;
- no module outside ``families/`` imports a family's folder (shared code asks the registry), and the base
  callback reaches not even the registry — so a copied family folder is a family of its own;
- the report reaches no measuring code, and every family's files sit in its own folder.

The package's root ``attn_study/__init__.py`` (Hydra's resolvers), which every import runs, is left out of the
graph: an import of ``attn_study.keys`` is an arrow to ``keys``, not to the root.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from attn_study.families import REGISTRY

PACKAGE = Path(__file__).resolve().parents[2] / "attn_study"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The ``attn_study`` modules ``path`` imports anywhere in it (module level or inside a function)."""
    name, tree = module_name(path), ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attn_study")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.startswith("attn_study"):
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names}
    return found


ROOT = "attn_study"


def graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports (the root package left out: the module docstring)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {m for m in imports_of(path) if m in modules and m not in (name, ROOT)} for name, path in modules.items()
    }


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Leave out "a package imports its own submodule" edges (``from . import keys`` in an ``__init__``)."""
    return {a: {b for b in bs if not b.startswith(a + ".")} for a, bs in edges.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_no_import_cycle_even_through_function_local_imports():
    assert cycles(package_edges(graph())) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def reaches(edges, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


#: the shared code's layers, from the ground up: (name, the modules and packages in it) — the module docstring
LAYERS = (
    (
        "ground",
        (
            "attn_study.errors",
            "attn_study.io",
            "attn_study.keys",
            "attn_study.layout",
            "attn_study.names",
            "attn_study.options",
            "attn_study.progress",
            "attn_study.ranges",
            "attn_study.stats",
            "attn_study.tracking",
        ),
    ),
    ("figures", ("attn_study.figures",)),
    ("data and models", ("attn_study.data", "attn_study.models")),
    ("analysis", ("attn_study.analysis",)),
)


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index of ``module``'s layer (a module in it or under a package in it), None above every layer."""
    for index, (_, members) in enumerate(layers):
        if any(module == m or module.startswith(m + ".") for m in members):
            return index
    return None


def arrows_up(edges: dict[str, set[str]], layers=LAYERS) -> list[tuple[str, str]]:
    """(module, what it reaches above its own layer) for every module of a layer, following imports transitively."""
    found = []
    for module in sorted(edges):
        own = layer_of(module, layers)
        if own is None:
            continue
        for reached in sorted(reaches(edges, module)):
            layer = layer_of(reached, layers)
            if layer is None or layer > own:
                found.append((module, reached))
    return found


def test_every_module_of_the_package_is_placed_or_above_the_layers():
    """Each layer names modules and packages that exist (a renamed one would leave its layer empty)."""
    edges = graph()
    for name, members in LAYERS:
        for member in members:
            assert any(m == member or m.startswith(member + ".") for m in edges), (name, member)


def test_no_arrow_runs_back_up_from_a_layer():
    """Statistics, figures, models and the analyses' shared code — and tracking — reach nothing above their layer:
    not a family, the registry, the run side, the report."""
    assert arrows_up(graph()) == []


def test_the_layer_rule_finds_an_arrow_up_however_deep():
    layers = (("low", ("p.low",)), ("high", ("p.high",)))
    edges = {"p.low.a": {"p.low.b"}, "p.low.b": {"p.top"}, "p.top": {"p.high.c"}, "p.high.c": {"p.low.a"}}
    assert arrows_up(edges, layers) == [  # p.top is above every layer, p.high above p.low
        ("p.high.c", "p.top"),
        ("p.low.a", "p.high.c"),
        ("p.low.a", "p.top"),
        ("p.low.b", "p.high.c"),
        ("p.low.b", "p.top"),
    ]
    assert arrows_up({"p.high.c": {"p.low.a"}, "p.low.a": set()}, layers) == []


def test_the_report_reaches_no_analysis_internals():
    """The report's own modules and each family's report part read summaries and per-instance tables only: no
    measuring code (``attn_study.analysis``; a family's callback; models; the statistics of ``stats`` they may)."""
    edges = graph()
    readers = [m for m in edges if m.startswith("attn_study.report")]
    readers += [
        f"attn_study.families.{name}.report" for name in REGISTRY if f"attn_study.families.{name}.report" in edges
    ]
    for name in readers:
        bad = sorted(
            m
            for m in reaches(edges, name)
            if m.startswith(("attn_study.analysis", "attn_study.models", "attn_study.job.components"))
            or m.endswith(".callback")
        )
        assert not bad, f"{name} reaches {bad}"


def test_every_family_module_sits_in_its_folder():
    """No module outside ``families/<name>/`` is named after a family, and no family's folder imports another's
    measuring code."""
    names = set(REGISTRY)
    stray = [p for p in PACKAGE.rglob("*.py") if p.stem in names and "families" not in p.parts]
    assert stray == []
    edges = graph()
    for name in names:
        own = f"attn_study.families.{name}"
        for module in [m for m in edges if m.startswith(own + ".")]:
            others = sorted(m for m in edges[module] if m.startswith("attn_study.families.") and not m.startswith(own))
            assert all(m.endswith(".keys") for m in others), f"{module} imports {others}"


def test_shared_code_imports_no_family_and_the_base_callback_not_even_the_registry():
    """Outside ``families/`` no module imports a family's folder (its keys, callback or report): shared code asks
    the registry. The callbacks' base class takes a family's namespace and tracked keys from the family's own
    ``keys.py``, so it reaches not even the registry, however deep (a copied folder is then its own family)."""
    edges = graph()
    names = set(REGISTRY)
    for module, imported in edges.items():
        if module.startswith("attn_study.families"):
            continue
        reached = sorted(m for m in imported if m.split(".")[:3][-1] in names and m.startswith("attn_study.families."))
        assert reached == [], f"{module} imports {reached}"
    base = reaches(edges, "attn_study.analysis.callback")
    assert "attn_study.figures.tokens" in base  # through measuring and token_scores: the walk goes deep
    assert sorted(m for m in base if m.startswith("attn_study.families")) == []


#: the literals outside ``families/`` that spell a family's name, each for a reason other than the family: a
#: convention of the authors' released code, named after their paper as the recipe that chooses it is
#: (``recipe=jain_wallace``); no other literal may
PAPER_CONVENTIONS = {
    "attn_study.data.babi": {"jain_wallace"},  # style (passage joined by " . ") and dev split of their notebook
    "attn_study.data.imdb": {"jain_wallace", ": choose standard or jain_wallace"},  # their split and tokens
    "attn_study.data.twenty_news": {"jain_wallace"},  # their post order and splits
    "attn_study.data.zhang_csv": {"jain_wallace"},  # their AG News dev split
    "attn_study.roar.job": {"jain_wallace"},  # ROAR's gradient as J&W compute it (roar.gradient)
    "attn_study.roar.scores": {"jain_wallace", " has no embedding matrix; use jain_wallace"},
    "attn_study.ranges": {"jain_wallace"},  # the kinds of those settings: a source's style and splits, roar.gradient
}


def family_literals(path: Path, names: set[str]) -> set[str]:
    """The string literals of ``path`` (docstrings aside) that hold one of ``names`` as a word."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    words = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and words.search(node.value)
    }


def test_shared_code_spells_no_family_name():
    """Outside ``families/`` (and ``conf/``) code asks the registry for the families; a literal family name there
    is a family special-cased by name — unless it is one of the papers' conventions listed above."""
    names, found = set(REGISTRY), {}
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        if module.startswith("attn_study.families"):
            continue
        extra = family_literals(path, names) - PAPER_CONVENTIONS.get(module, set())
        if extra:
            found[module] = sorted(extra)
    assert found == {}


def test_the_literal_rule_sees_a_family_named_in_shared_code(tmp_path):
    planted = tmp_path / "shared.py"
    planted.write_text('"""Docstrings may name sparsity."""\nSPECIAL = {"sanity": 1}\nLABEL = f"{x} sparsity"\n')
    assert family_literals(planted, set(REGISTRY)) == {"sanity", " sparsity"}


def test_each_familys_tests_sit_in_the_folder_that_mirrors_it():
    """``tests/families/<name>/`` mirrors ``attn_study/families/<name>/``: a family's own tests are found beside each
    other, and what every family shares stays in ``tests/analysis/`` and ``tests/families/test_*.py``."""
    tests = PACKAGE.parent / "tests"
    missing = [name for name in REGISTRY if not list((tests / "families" / name).glob("test_*.py"))]
    strays = sorted(p.name for p in (tests / "analysis").glob("test_*.py") if p.stem.removeprefix("test_") in REGISTRY)
    assert (missing, strays) == ([], [])
