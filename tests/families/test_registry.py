"""The families' registry (attn_study/families/__init__.py): a family folder whose keys.py breaks a rule of the
registry is refused when the package is imported, naming its keys.py; a key's family read from its namespace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attn_study.families import family_of, is_analysis_key, tracked_key
from tests.helpers import REPO

BAD = "zz_family"  # after every shipped family in the folders' order: the shipped ones are registered first


def import_with_family(root: Path, declared: str, code: str = "import attn_study.families", **parts: str):
    """``code`` run on a copy of the package (at ``root``) holding one more family folder: its keys.py ``declared``,
    and ``parts`` (``figures="…"``: its figures.py)."""
    shutil.copytree(REPO / "attn_study", root / "attn_study", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "conf").symlink_to(REPO / "conf")  # read when the package is imported
    folder = root / "attn_study" / "families" / BAD
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "keys.py").write_text(declared)
    for part, text in parts.items():
        (folder / f"{part}.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("declared", "refusal"),
    [
        (
            'NAMESPACE = "zz"\nTRACKED = ()\nDISAGREEMENT = (("tau", "low"), ("jsd", "lowest"))\n',
            "DISAGREEMENT ends ['lowest']: 'low' or 'high'",
        ),
        (
            'NAMESPACE = "jw"\nTRACKED = ()\n',
            "NAMESPACE = 'jw' is already jain_wallace's; give each family its own key prefix",
        ),
        (
            'NAMESPACE = "val"\nTRACKED = ()\n',
            "NAMESPACE = 'val' is already training's; give each family its own key prefix",
        ),
        (
            'NAMESPACE = "zz"\nTRACKED = ("zz/a/mean", "jw/tau_grad/mean")\n',
            "TRACKED keys outside zz/: ['jw/tau_grad/mean']",
        ),
        (
            'NAMESPACE = "zz"\nTRACKED = ("zz/a/mean",)\nHEADLINE_KEYS = ("zzz/a/mean",)\n',
            "HEADLINE_KEYS keys outside zz/: ['zzz/a/mean']",
        ),
    ],
)
def test_a_family_breaking_a_rule_of_the_registry_is_refused_naming_its_keys_file(tmp_path, declared, refusal):
    """The mistake is an ImportError of one line naming ``attn_study/families/<name>/keys.py``."""
    imported = import_with_family(tmp_path, f"ORDER = 99\n{declared}")
    last = imported.stderr.strip().splitlines()[-1]
    assert imported.returncode == 1 and last == f"ImportError: attn_study/families/{BAD}/keys.py: {refusal}", last


@pytest.mark.parametrize(
    ("order", "first_three"),
    [(5, ["zz_family", "jain_wallace", "serrano_smith"]), (10, ["jain_wallace", "zz_family", "serrano_smith"])],
)
def test_a_family_with_its_own_namespace_takes_its_place_in_the_order(tmp_path, order, first_three):
    """Sorted by ORDER (jain_wallace's is 10, serrano_smith's 20), a tie by name; without HEADLINE_KEYS its headline
    statistics are its TRACKED."""
    declared = f'ORDER = {order}\nNAMESPACE = "zz"\nTRACKED = ("zz/a/mean",)\n'
    shown = f"from attn_study import families; print(list(families.FAMILIES)[:3], families.REGISTRY[{BAD!r}].headline)"
    imported = import_with_family(tmp_path, declared, shown)
    assert imported.stdout.strip() == f"{first_three} ('zz/a/mean',)", imported.stderr[-2000:]


def test_a_part_a_family_lacks_is_none_and_a_part_that_fails_to_import_says_why(tmp_path):
    """``Family.module``: no ``figures.py`` → None (the family draws no figures); a ``figures.py`` that imports a
    module that is not installed → that ModuleNotFoundError, never taken for a missing part."""
    declared = 'ORDER = 99\nNAMESPACE = "zz"\nTRACKED = ()\n'
    shown = f"from attn_study import families; print(families.REGISTRY[{BAD!r}].module('figures'))"
    assert import_with_family(tmp_path / "without", declared, shown).stdout.strip() == "None"
    failing = import_with_family(tmp_path / "with", declared, shown, figures="import zz_absent\n")
    last = failing.stderr.strip().splitlines()[-1]
    assert failing.returncode == 1 and last == "ModuleNotFoundError: No module named 'zz_absent'", last


def test_a_keys_family_is_read_from_its_namespace_and_a_tracked_key_from_val():
    assert family_of("jw/tau_grad/class_1/mean") == "jain_wallace"
    assert family_of("jwx/tau_grad/mean") is None and family_of("test/acc") is None
    assert is_analysis_key("ss/multi/r1/never_flip") and not is_analysis_key("val/acc")
    assert tracked_key("val/jw/tau_grad/mean") == "jw/tau_grad/mean"
    assert tracked_key("val/acc_best") is None  # training's own, not a family's
    assert tracked_key("test/jw/tau_grad/mean") is None  # measured after training, not tracked
