"""The README's "What the stand-in answers" is the source: every ```lean verdict=X
block there runs through the real `leanrpc verify` on a real server with the
stand-in, and gets verdict X (issue 29 case 11)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_support import Served, leanrpc

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```lean verdict=([A-Z_]+)\n(.*?)^```$", re.M | re.S)


def _section() -> str:
    text = README.read_text()
    start = text.index("## What the stand-in answers")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_readme_stand_in_example_gets_its_verdict(tmp_path):
    examples = BLOCK.findall(_section())
    assert {verdict for verdict, _code in examples} == {
        "VALID",
        "INVALID",
        "SORRY",
        "TIMEOUT",
        "CRASH",
    }
    # The surprises the section names, as whole snippets.
    surprising = [
        "theorem e : 1 = 2 := by rfl\n",
        "theorem f : 1 = 1 := by frobnicate\n",
        "theorem e2 : := by simp\n",
    ]
    assert "theorem e2 : := by simp" in _section() and "by frobnicate" in _section()
    files = {}
    for n, (verdict, code) in enumerate([*examples, *(("VALID", c) for c in surprising)]):
        path = tmp_path / f"example{n:02d}.lean"
        path.write_text(code)
        files[path.name] = verdict
    server = Served("--workers", "2")
    try:
        done = leanrpc(
            "verify",
            "--server",
            server.address,
            "--timeout",
            "3",
            "--json",
            "--quiet",
            *sorted(str(tmp_path / name) for name in files),
            timeout=300,
        )
    finally:
        server.stop()
    assert done.returncode == 1, done.stderr  # not every file is VALID
    got = {Path(r["id"]).name: r["status"] for r in map(json.loads, done.stdout.splitlines())}
    assert got == files, done.stdout
