"""benchmarks/group_hang: one real round on this checkout, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import group_hang

REPO = Path(__file__).resolve().parents[2]


def test_one_round_answers_the_hanging_snippet_timeout_and_the_rest_their_verdicts(
    tmp_path, capsys
):
    out = tmp_path / "rows.json"
    argv = ["--checkout", f"self={REPO}", "--rounds", "1", "--group", "4", "--hang-at", "2"]
    argv += ["--timeout", "1.5", "--workers", "1", "--json", str(out)]
    assert group_hang.main(argv) == 0
    [row] = json.loads(out.read_text())
    assert row["variant"] == "self" and row["hanging"] == "TIMEOUT"
    assert row["statuses"] == {"VALID": 3, "TIMEOUT": 1}
    assert row["wall_s"] >= 1.5  # the hang was waited out
    assert "| 1 | self |" in capsys.readouterr().out


@pytest.mark.parametrize("hang_at", ["-1", "4"])
def test_a_hanging_place_outside_the_group_is_refused(tmp_path, hang_at):
    with pytest.raises(SystemExit):
        group_hang.main(["--checkout", f"a={tmp_path}", "--group", "4", "--hang-at", hang_at])


def test_a_checkout_without_a_name_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        group_hang.main(["--checkout", str(tmp_path)])
