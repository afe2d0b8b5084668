"""What `attn-study` needs on a machine that may lack packages (a lent GPU machine has torch and Lightning),
and the wheels to bring for it.

    # there: which of the CLI's packages are missing (one distribution per line; exit 1 if any)
    python scripts/gpu/packages.py missing
    # here (package index reachable): wheels of exactly those, for that machine's Python
    python scripts/gpu/packages.py download --python 3.11 --dest wheels hydra-core omegaconf ...
    # there
    pip install --no-index --find-links wheels <the missing ones>

spaCy is needed only to tokenise a dataset without a processed cache (copy ``$ATTN_STUDY_CACHE``), W&B only
with ``logger=[wandb]`` (use ``logger=[csv]``), Captum only for ``analysis=faithfulness``: none of the
three is imported otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

#: import name → distribution, for what a run with logger=[csv] and the J&W / S&S / Meister analyses imports
NEEDED = {
    "hydra": "hydra-core",
    "omegaconf": "omegaconf",
    "antlr4": "antlr4-python3-runtime==4.9.3",
    "lightning": "lightning",
    "torchmetrics": "torchmetrics",
    "entmax": "entmax",
    "numpy": "numpy",
    "scipy": "scipy",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "matplotlib": "matplotlib",
    "tqdm": "tqdm",
    "yaml": "PyYAML",
    "joblib": "joblib",
    "hydra_plugins.hydra_joblib_launcher": "hydra-joblib-launcher",
}


def missing() -> list[str]:
    out = []
    for module, distribution in NEEDED.items():
        try:
            importlib.import_module(module)
        except ImportError:
            out.append(distribution)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("missing", help="print the missing distributions")
    download = sub.add_parser("download", help="pip download wheels (no dependencies) for another machine")
    download.add_argument("--python", required=True, help="that machine's Python, e.g. 3.11")
    download.add_argument("--dest", required=True)
    download.add_argument("distributions", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "missing":
        absent = missing()
        print("\n".join(absent) if absent else "nothing missing")
        return 1 if absent else 0
    return subprocess.call(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--only-binary=:all:",
            "--no-deps",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "manylinux_2_17_x86_64",
            "--python-version",
            args.python,
            "--dest",
            args.dest,
            *args.distributions,
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
