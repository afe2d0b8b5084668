"""Read an offline W&B run back from its ``run-<id>.wandb`` file, as ``wandb sync`` would upload it.

wandb 0.31 has no Python reader of its own (``wandb.sdk.internal.datastore`` is gone with the Go core), so
this reads the documented layout: a 7-byte header (``:W&B``, 0xBEE1, version 0) then LevelDB's log format
(32 KiB blocks; each chunk a 4-byte checksum, 2-byte length, 1-byte type: full, first, middle, last), each
record a ``wandb.proto.wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

BLOCK, CHUNK_HEADER, FILE_HEADER = 32768, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B transaction log"
    out, pending, pos = [], b"", FILE_HEADER
    while pos + CHUNK_HEADER <= len(data):
        room = BLOCK - pos % BLOCK
        if room < CHUNK_HEADER:  # a block's tail too short for a chunk header is padding
            pos += room
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        if kind == 0:
            break
        chunk = data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def _key(item) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


@dataclass
class OfflineRun:
    """What W&B holds of one offline run: its run record, config, history rows, summary and metric definitions."""

    run: object = None
    config: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)  # name → MetricRecord
    globs: list = field(default_factory=list)
    exit_code: int | None = None  # the run's exit status (None: it never ended)

    @property
    def history_keys(self) -> set[str]:
        return {k for row in self.history for k in row if not k.startswith("_")}


def finished_records(path: Path, wait: float = 30.0) -> list:
    """The records of a finished run's file, once its ``exit`` record is written: wandb-core may flush the file
    a moment after ``wandb.finish()`` returns (read at once, it can hold the header alone). An unfinished run's
    records after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        found = records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def read_run(path: Path) -> OfflineRun:
    """The run in ``path`` (a ``.wandb`` file or an ``offline-run-*`` folder)."""
    path = Path(path)
    if path.is_dir():
        path = next(path.glob("run-*.wandb"))
    out = OfflineRun()
    for record in finished_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.run = record.run
            out.config.update({_key(u): json.loads(u.value_json) for u in record.run.config.update})
        elif kind == "config":
            out.config.update({_key(u): json.loads(u.value_json) for u in record.config.update})
        elif kind == "history":
            out.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            out.summary.update({_key(u): json.loads(u.value_json) for u in record.summary.update})
            for item in record.summary.remove:
                out.summary.pop(_key(item), None)
        elif kind == "exit":
            out.exit_code = record.exit.exit_code
        elif kind == "metric":
            if record.metric.name:
                out.metrics[record.metric.name] = record.metric
            else:
                out.globs.append(record.metric)
    out.config.pop("_wandb", None)
    return out


def offline_runs(run_dir: Path) -> list[Path]:
    """A run directory's offline W&B runs, oldest first."""
    return sorted((Path(run_dir) / "wandb").glob("offline-run-*"))


def run_tables(path: Path) -> dict[str, tuple[dict, dict[str, Path]]]:
    """The tables an offline run logged, as W&B uploads them (a ``run_table`` artifact each, its media beside it):
    artifact name → (the table's JSON, media path in the artifact → the staged local file). The files are the
    local copies W&B keeps until ``wandb sync`` uploads them."""
    path = Path(path)
    if path.is_dir():
        path = next(path.glob("run-*.wandb"))
    out = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "artifact" and record.artifact.type == "run_table":
            files = {entry.path: Path(entry.local_path) for entry in record.artifact.manifest.contents}
            (table,) = [local for name, local in files.items() if name.endswith(".table.json")]
            out[record.artifact.name] = (json.loads(table.read_text()), files)
    return out
