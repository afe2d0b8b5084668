#!/usr/bin/env python
"""Mutation check: plant small bugs in one module, one at a time, and see whether its tests notice.

    .venv/bin/python scripts/mutate.py attn_study/families/sparsity/callback.py tests/families/sparsity/test_sparsity.py
    .venv/bin/python scripts/mutate.py attn_study/families/shortcuts/callback.py \\
        tests/families/shortcuts/test_shortcuts.py --functions choice_accuracy,measure --limit 40 -- -k "not smoke"
    .venv/bin/python scripts/mutate.py attn_study/io.py tests/test_io.py --lines 23,40   # re-check survivors' lines

Each mutant changes one place of the module's abstract syntax tree — a comparison (< ↔ <=, == ↔ !=), an
arithmetic operator (+ ↔ −, * ↔ /), a number (k → k + 1), a boolean, a reduction (mean ↔ sum, max ↔ min),
a unary minus or ``not`` dropped, or a call's second argument replaced by its first (f(a, b) → f(a, a):
"a statistic of the attention against itself") —, is written over the module, and the tests run
(``pytest -x -q`` and whatever follows ``--``). A mutant the tests fail on is *killed*; one they pass is a
*survivor*: a bug the suite cannot see, or a change that does not change behaviour (read it and decide).
A test run past ``--timeout`` is a *timeout*, counted with neither: a hang the mutant caused, or tests slower than
the limit (raise it and re-check). The tests run once on the module as it is first: they must collect and pass, or
every mutant would count as killed (a ``-k`` that selects nothing exits 5, a failing test 1), and the tool stops.
The module is restored after every mutant, also on Ctrl-C and SIGTERM; while a mutant's tests run, the file on disk
is the mutant (unparsed: other line numbers). Not part of CI: a developer's tool, run on the modules they touch
(minutes per module on 2 cores).
"""

from __future__ import annotations

import argparse
import ast
import copy
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
}
METHODS = {"mean": "sum", "sum": "mean", "max": "min", "min": "max", "amax": "amin", "amin": "amax"}


class Site:
    """One place to mutate: the node's index in a walk of the tree, and how."""

    def __init__(self, index: int, kind: str, line: int, text: str):
        self.index, self.kind, self.line, self.text = index, kind, line, text


def sites(tree: ast.AST, lines: set[int] | None) -> list[Site]:
    found = []
    for index, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", 0)
        if lines is not None and line not in lines:
            continue
        if isinstance(node, ast.Compare) and type(node.ops[0]) in SWAPS:
            found.append(Site(index, "compare", line, ast.unparse(node)))
        elif isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
            found.append(Site(index, "binop", line, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
            found.append(Site(index, "number", line, repr(node.value)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            found.append(Site(index, "boolean", line, repr(node.value)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            found.append(Site(index, "unary", line, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            found.append(Site(index, "method", line, ast.unparse(node)))
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and not isinstance(node.args[0], ast.Starred):
            found.append(Site(index, "argument", line, ast.unparse(node)))
    return found


def mutate(tree: ast.AST, site: Site) -> ast.AST:
    tree = copy.deepcopy(tree)
    node = list(ast.walk(tree))[site.index]
    if site.kind == "compare":
        node.ops[0] = SWAPS[type(node.ops[0])]()
    elif site.kind == "binop":
        node.op = SWAPS[type(node.op)]()
    elif site.kind == "number":
        node.value = node.value + 1
    elif site.kind == "boolean":
        node.value = not node.value
    elif site.kind == "unary":
        parent = next(
            p
            for p in ast.walk(tree)
            for f, v in ast.iter_fields(p)
            if v is node or (isinstance(v, list) and any(x is node for x in v))
        )
        for field, value in ast.iter_fields(parent):
            if value is node:
                setattr(parent, field, node.operand)
            elif isinstance(value, list):
                value[:] = [node.operand if x is node else x for x in value]
    elif site.kind == "method":
        node.func.attr = METHODS[node.func.attr]
    elif site.kind == "argument":
        node.args[1] = copy.deepcopy(node.args[0])
    return ast.fix_missing_locations(tree)


def function_lines(tree: ast.AST, names: list[str]) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            out |= set(range(node.lineno, node.end_lineno + 1))
    return out


def stop(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", type=Path, help="the module to mutate")
    parser.add_argument("tests", nargs="+", help="test files or node ids to run")
    parser.add_argument("--functions", default="", help="only mutate inside these functions (comma-separated)")
    parser.add_argument("--lines", default="", help="only mutate on these lines (comma-separated): a run's survivors")
    parser.add_argument("--limit", type=int, default=0, help="at most this many mutants, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="seed of that draw")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per test run")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    module = args.module.resolve()
    original = module.read_text()
    tree = ast.parse(original)
    lines = function_lines(tree, args.functions.split(",")) if args.functions else None
    if args.lines:
        chosen = {int(n) for n in args.lines.split(",")}
        lines = chosen if lines is None else lines & chosen
    found = sites(tree, lines)
    if args.limit and len(found) > args.limit:
        found = sorted(random.Random(args.seed).sample(found, args.limit), key=lambda s: s.index)
    print(f"{len(found)} mutants of {module.relative_to(REPO)}; tests: {' '.join(args.tests + extra)}", flush=True)
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args.tests, *extra]
    if found:
        try:
            baseline = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            sys.exit(f"mutate: the tests ran past --timeout {args.timeout} s on the module as it is: raise it")
        if baseline.returncode != 0:  # nothing mutated yet: a kill would mean nothing
            tail = (baseline.stdout + baseline.stderr).strip().splitlines()[-3:]
            sys.exit(
                f"mutate: the tests do not pass on the module as it is (pytest exit {baseline.returncode}): "
                + " | ".join(tail)
            )
    survivors = []
    signal.signal(signal.SIGTERM, stop)  # `timeout`, a scheduler: the module is restored as on Ctrl-C
    try:
        for n, site in enumerate(found, 1):
            module.write_text(ast.unparse(mutate(tree, site)) + "\n")
            started = time.time()
            try:
                result = subprocess.run(command, cwd=REPO, capture_output=True, timeout=args.timeout)
                verdict = "killed" if result.returncode != 0 else "SURVIVED"
            except subprocess.TimeoutExpired:  # a hang the mutant caused, or tests slower than --timeout: unknown
                verdict = "TIMEOUT"
            print(
                f"[{n}/{len(found)}] {verdict:8s} line {site.line:4d} {site.kind:8s} {site.text[:90]} "
                f"({time.time() - started:.0f} s)",
                flush=True,
            )
            if verdict != "killed":
                survivors.append((site, verdict))
    finally:
        module.write_text(original)
    print(f"\n{len(found) - len(survivors)} of {len(found)} killed; survivors and timeouts (raise --timeout):")
    for site, verdict in survivors:
        print(f"  line {site.line}: {site.kind}: {site.text[:120]}" + (" (timeout)" if verdict == "TIMEOUT" else ""))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("mutate: stopped; the module is as it was")
