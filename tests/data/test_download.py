"""fetch() against a real HTTP server on 127.0.0.1: caching, checksums, truncation, errors."""

from __future__ import annotations

import hashlib
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from attn_study.data.download import fetch
from attn_study.data.sst import SSTSource
from attn_study.errors import DataError


@dataclass
class Server:
    """A local HTTP server: ``files`` maps URL paths to bodies; ``requests`` logs each GET path."""

    base: str
    files: dict[str, bytes]
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def server(sst_zip: Path) -> Iterator[Server]:
    """Serve ``/sst.zip`` (the SST zip fixture) and ``/truncated`` (short body, then hang up)."""
    state = Server(base="", files={"/sst.zip": sst_zip.read_bytes()})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            state.requests.append(self.path)
            if self.path == "/truncated":
                body = state.files["/sst.zip"]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + 1000))
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path not in state.files:
                self.send_error(404)
                return
            body = state.files[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_fetch_downloads_verifies_and_caches(server: Server, tmp_path: Path) -> None:
    body = server.files["/sst.zip"]
    digest = hashlib.sha256(body).hexdigest()
    cache = tmp_path / "cache"
    path = fetch(f"{server.base}/sst.zip", cache, "sst.zip", digest, "dataset.path")
    assert path == cache / "sst.zip" and path.read_bytes() == body
    assert _leftovers(cache) == ["sst.zip", "sst.zip.sha256"]
    assert digest in (cache / "sst.zip.sha256").read_text()
    assert fetch(f"{server.base}/sst.zip", cache, "sst.zip", digest, "dataset.path") == path
    assert server.requests == ["/sst.zip"]


def test_incomplete_cached_file_is_downloaded_again(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/sst.zip"
    path = fetch(url, tmp_path / "cache", "sst.zip", None, "dataset.path")
    path.write_bytes(b"half")
    fetch(url, tmp_path / "cache", "sst.zip", None, "dataset.path")
    (tmp_path / "cache" / "sst.zip.sha256").unlink()
    fetch(url, tmp_path / "cache", "sst.zip", None, "dataset.path")
    assert server.requests == ["/sst.zip"] * 3
    assert path.read_bytes() == server.files["/sst.zip"]


def test_unpinned_download_logs_its_digest(server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="attn_study.data.download"):
        fetch(f"{server.base}/sst.zip", tmp_path / "cache", "sst.zip", None, "dataset.path")
    assert hashlib.sha256(server.files["/sst.zip"]).hexdigest() in caplog.text
    assert "dataset.source.sha256" in caplog.text


def test_sha256_mismatch_leaves_nothing(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/sst.zip"
    with pytest.raises(DataError, match="sha256 mismatch") as error:
        fetch(url, tmp_path / "cache", "sst.zip", "0" * 64, "dataset.path")
    message = str(error.value)
    assert url in message and "dataset.source.sha256=null" in message and "dataset.path" in message
    assert "\n" not in message
    assert _leftovers(tmp_path / "cache") == []


def test_changed_pin_triggers_a_new_download(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/sst.zip"
    fetch(url, tmp_path / "cache", "sst.zip", None, "dataset.path")
    with pytest.raises(DataError, match="sha256 mismatch"):
        fetch(url, tmp_path / "cache", "sst.zip", "f" * 64, "dataset.path")
    assert server.requests == ["/sst.zip"] * 2
    assert _leftovers(tmp_path / "cache") == []


def test_truncated_download_leaves_nothing(server: Server, tmp_path: Path) -> None:
    url = f"{server.base}/truncated"
    with pytest.raises(DataError, match=r"truncated: got \d+ of \d+ bytes") as error:
        fetch(url, tmp_path / "cache", "sst.zip", None, "dataset.path")
    assert url in str(error.value) and "\n" not in str(error.value)
    assert _leftovers(tmp_path / "cache") == []


def test_http_error_is_reported(server: Server, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="HTTP 404"):
        fetch(f"{server.base}/missing.zip", tmp_path / "cache", "sst.zip", None, "dataset.path")
    assert _leftovers(tmp_path / "cache") == []


def test_unreachable_url_is_one_line_with_the_fix(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/trainDevTestTrees_PTB.zip"
    with pytest.raises(DataError) as error:
        fetch(url, tmp_path / "cache", "trainDevTestTrees_PTB.zip", None, "dataset.path")
    message = str(error.value)
    assert message.startswith(f"could not download {url} (")
    assert "set dataset.path=" in message and "\n" not in message
    assert _leftovers(tmp_path / "cache") == []


def test_sst_source_downloads_end_to_end(server: Server, sst_zip: Path, tmp_path: Path) -> None:
    cache = tmp_path / "downloads"
    digest = hashlib.sha256(server.files["/sst.zip"]).hexdigest()
    source = SSTSource(path=None, url=f"{server.base}/sst.zip", sha256=digest, cache_dir=str(cache))
    splits = source.load()
    assert splits == SSTSource(str(sst_zip)).load()
    assert {k: len(v) for k, v in splits.items()} == {"train": 4, "dev": 2, "test": 2}
    assert source.fingerprint()["files"][0]["path"] == str((cache / "trainDevTestTrees_PTB.zip").resolve())
    assert server.requests == ["/sst.zip"]
