"""docs/SECURITY.md's attack tables name, for each attack, the test that
shows it blocked (`file.py::test_name`, or `::test_name` in the file named
before it), and the code that stops it (`room/module.py::function`). Every
name must exist, so a renamed or removed test cannot leave the table lying."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_REFERENCE = re.compile(r"`([\w/.]*?\.py)?::(\w+)(?:\[[^\]]*\])?`")


def _named() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "SECURITY.md").read_text(encoding="utf-8")
    last = None
    named = []
    for match in _REFERENCE.finditer(text):
        path, name = match.groups()
        last = path or last
        assert last is not None, f"`::{name}` names no file before it"
        named.append((last, name))
    return named


def _resolve(path: str) -> list[Path]:
    if Path(path).name.startswith("test_"):
        return [p for p in (ROOT / "tests").rglob(Path(path).name) if str(p).endswith(path)]
    return [
        p for p in (ROOT / "server" / "leanrpc").rglob(Path(path).name) if str(p).endswith(path)
    ]


def test_every_test_and_function_the_security_page_names_exists():
    named = _named()
    assert len(named) > 60  # the tables are there
    problems = []
    for path, name in named:
        files = _resolve(path)
        if len(files) != 1:
            problems.append(f"{path}: {len(files)} files of that name")
        elif not re.search(
            rf"^\s*(async\s+)?def {name}\(", files[0].read_text(encoding="utf-8"), re.M
        ):
            problems.append(f"{path}::{name}: no such function")
    assert problems == []
