"""Train the flat model on a processed dataset on a machine without Hydra/spaCy (e.g. a lent GPU).

    # here: tokenise once and write a compact, portable copy of the processed dataset
    python benchmarks/device_train.py export --dataset imdb --path aclImdb_v1.tar.gz --out data.npz
    # there: train/test each encoder with the defaults read from conf/ (same classes as attn-study)
    python benchmarks/device_train.py train --data data.npz --encoders lstm cnn average --out results.json

The ``train`` step builds components from the ``_target_`` entries of ``conf/{model,encoder,
attention,projection}/*.yaml`` and runs Lightning exactly as ``attn_study.run`` does (8 epochs,
checkpoint best on dev accuracy, test with it). It needs torch, lightning, torchmetrics, entmax, PyYAML.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def export(args) -> None:
    from hydra import compose, initialize_config_dir

    from attn_study.build import build_datamodule

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"dataset={args.dataset}", f"dataset.path={args.path}"])
    dm = build_datamodule(cfg)
    dm.setup()
    data = dm.data
    arrays = {"itos": np.array(data.vocab.itos, dtype=object)}
    for split, s in data.splits.items():
        arrays[f"{split}_ids"] = np.concatenate(s.ids).astype(np.int32)
        arrays[f"{split}_offsets"] = np.cumsum([0] + [len(x) for x in s.ids])
        arrays[f"{split}_labels"] = s.labels
    meta = {"name": data.name, "num_classes": data.num_classes, "label_names": data.label_names, "stats": data.stats,
            "batch_size": cfg.dataset.batch_size, "eval_batch_size": cfg.dataset.eval_batch_size}
    np.savez_compressed(args.out, meta=np.array(json.dumps(meta)), **arrays)
    print(f"wrote {args.out}: {meta['stats']}")


def load(path: Path):
    from attn_study.data.processed import ProcessedDataset, ProcessedSplit
    from attn_study.data.text import Vocab

    z = np.load(path, allow_pickle=True)
    meta = json.loads(str(z["meta"]))
    splits = {}
    for split in ("train", "dev", "test"):
        ids, off = z[f"{split}_ids"].astype(np.int64), z[f"{split}_offsets"]
        splits[split] = ProcessedSplit(ids=[ids[a:b] for a, b in zip(off[:-1], off[1:])],
                                       labels=z[f"{split}_labels"], uids=[str(i) for i in range(len(off) - 1)])
    vocab = Vocab(list(z["itos"])[2:])
    return ProcessedDataset(meta["name"], meta["num_classes"], meta["label_names"], vocab, splits, meta["stats"]), meta


def from_yaml(group: str, option: str, **overrides):
    import yaml

    node = yaml.safe_load((REPO / "conf" / group / f"{option}.yaml").read_text())
    node.pop("name", None)
    module, _, cls = node.pop("_target_").rpartition(".")
    return partial(getattr(importlib.import_module(module), cls), **{**node, **overrides})


def train(args) -> None:
    import lightning as L
    import torch
    import yaml
    from lightning.pytorch.callbacks import ModelCheckpoint

    from attn_study.data.datamodule import TextDataModule
    from attn_study.models.module import AttentionModule

    data, meta = load(Path(args.data))
    model_cfg = yaml.safe_load((REPO / "conf" / "model" / "flat.yaml").read_text())
    results = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "runs": {}}
    for enc in args.encoders:
        L.seed_everything(args.seed, workers=True, verbose=False)
        dm = TextDataModule(source=type("S", (), {"name": data.name, "num_classes": data.num_classes})(),
                            batch_size=meta["batch_size"], eval_batch_size=meta["eval_batch_size"], seed=args.seed)
        dm.data = data
        network = {k: v for k, v in model_cfg["network"].items() if k != "_target_"}
        module_name, _, cls = model_cfg["network"]["_target_"].rpartition(".")
        model = getattr(importlib.import_module(module_name), cls)(
            vocab_size=len(data.vocab), num_classes=data.num_classes, encoder=from_yaml("encoder", enc),
            scorer=from_yaml("attention", args.attention), projection=from_yaml("projection", "softmax")(),
            **network,
        )
        opt = model_cfg["optimizer"]
        module = AttentionModule(model, lr=opt["lr"], weight_decay=opt["weight_decay"],
                                 attention_weight_decay=opt["attention_weight_decay"], amsgrad=opt["amsgrad"])
        ckpt = ModelCheckpoint(dirpath=f"/tmp/ckpt_{enc}", filename="best", monitor="val/acc", mode="max")
        trainer = L.Trainer(accelerator="auto", devices=1, max_epochs=args.epochs, deterministic=False,
                            logger=False, callbacks=[ckpt], enable_progress_bar=False, enable_model_summary=False,
                            num_sanity_val_steps=0)
        t0 = time.time()
        trainer.fit(module, datamodule=dm)
        fit = time.time() - t0
        tested = trainer.test(module, datamodule=dm, ckpt_path=ckpt.best_model_path, verbose=False)[0]
        results["runs"][enc] = {**{k: float(v) for k, v in tested.items()}, "val/acc_best": float(ckpt.best_model_score),
                                "train/seconds_per_epoch": fit / args.epochs, "epochs": args.epochs}
        print(enc, results["runs"][enc], flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--dataset", required=True)
    e.add_argument("--path", required=True)
    e.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", required=True)
    t.add_argument("--encoders", nargs="+", default=["lstm", "cnn", "average"])
    t.add_argument("--attention", default="additive")
    t.add_argument("--epochs", type=int, default=8)
    t.add_argument("--seed", type=int, default=13)
    t.add_argument("--out", required=True)
    args = parser.parse_args()
    export(args) if args.cmd == "export" else train(args)


if __name__ == "__main__":
    main()
