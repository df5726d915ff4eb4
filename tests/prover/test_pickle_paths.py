"""The server opens pickles below a worker's scratch without following any
symlink the worker may have planted there (it runs as root; the worker owns
everything in its own root)."""

from __future__ import annotations

import os

import pytest

from leanrpc.services.prover.pickles import _open_beneath, _unlink_beneath


def _read(base, relative) -> bytes:
    with os.fdopen(_open_beneath(str(base), relative, os.O_RDONLY), "rb") as f:
        return f.read()


def test_a_plain_path_below_the_base_opens(tmp_path):
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "state.olean").write_bytes(b"pickle")
    assert _read(tmp_path, "scratch/state.olean") == b"pickle"
    _unlink_beneath(str(tmp_path), "scratch/state.olean")
    assert not (tmp_path / "scratch" / "state.olean").exists()


def test_a_symlinked_folder_or_file_is_refused(tmp_path):
    secret = tmp_path / "server-only"
    secret.mkdir()
    (secret / "state.olean").write_bytes(b"server secret")
    root = tmp_path / "worker-root"
    root.mkdir()
    (root / "scratch").symlink_to(secret)  # a folder swapped for a symlink
    with pytest.raises(OSError):
        _read(root, "scratch/state.olean")
    with pytest.raises(OSError):  # nor may the server create a file through it
        _open_beneath(str(root), "scratch/new.olean", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    assert sorted(p.name for p in secret.iterdir()) == ["state.olean"]
    (root / "real").mkdir()
    (root / "real" / "state.olean").symlink_to(secret / "state.olean")  # the file itself
    with pytest.raises(OSError):
        _read(root, "real/state.olean")
    _unlink_beneath(str(root), "scratch/state.olean")  # never through the symlink either
    assert (secret / "state.olean").read_bytes() == b"server secret"
    with pytest.raises(OSError):
        _open_beneath(str(root), "real/../scratch/state.olean", os.O_RDONLY)
