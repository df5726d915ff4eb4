"""`leanrpc verify --reference REF.lean` and `--reference-dir DIR` (issue 25)."""

from __future__ import annotations

import json

import pytest

from cli_support import GOOD, Served, leanrpc

REFERENCE = "theorem t (x : Nat) : x + 0 = x := by\n  sorry\n"
CHANGED = "theorem t (x : Nat) : x = x := by\n  rfl\n"


@pytest.fixture(scope="module")
def server():
    served = Served()
    yield served
    served.stop()


def test_one_reference_pins_every_file(server, tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    (tmp_path / "changed.lean").write_text(CHANGED)
    (tmp_path / "ref.lean").write_text(REFERENCE)
    files = [str(tmp_path / "good.lean"), str(tmp_path / "changed.lean")]
    done = leanrpc(
        "verify",
        *files,
        "--reference",
        str(tmp_path / "ref.lean"),
        "--json",
        "--server",
        server.address,
    )
    assert done.returncode == 1, done.stderr
    good, changed = [json.loads(line) for line in done.stdout.splitlines()]
    assert good["status"] == "VALID" and good["reference"]["passed"]
    assert changed["status"] == "INVALID" and changed["reference"]["reason"] == "STATEMENT_MISMATCH"
    # Unpinned, the changed statement passes: the flag is what catches it.
    assert leanrpc("verify", files[1], "--server", server.address).returncode == 0


def test_reference_dir_matches_by_file_name_and_refuses_a_file_without_one(server, tmp_path):
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "p1.lean").write_text(REFERENCE)
    (tmp_path / "p1.lean").write_text(GOOD)
    (tmp_path / "p2.lean").write_text(GOOD)
    done = leanrpc(
        "verify",
        str(tmp_path / "p1.lean"),
        str(tmp_path / "p2.lean"),
        "--reference-dir",
        str(tmp_path / "refs"),
        "--server",
        server.address,
    )
    assert done.returncode == 1, done.stderr
    assert "no reference" in done.stdout and "p2.lean" in done.stdout
    assert "1 of 2 valid" in done.stdout


def test_a_bad_reference_is_a_clear_error(server, tmp_path):
    (tmp_path / "a.lean").write_text(GOOD)
    (tmp_path / "ref.lean").write_text("-- declares nothing\n")
    done = leanrpc(
        "verify",
        str(tmp_path / "a.lean"),
        "--reference",
        str(tmp_path / "ref.lean"),
        "--server",
        server.address,
    )
    assert done.returncode == 2 and "declares no theorem" in done.stderr
    assert "Traceback" not in done.stderr
