"""Helpers for tests/native: both implementations, and the shared corpora.

Corpora come from the shared/ folder next to the repository clone
(a checkout at X/main reads X/shared; CI places a copy the same way). Missing shared
data fails the tests: a skip would hide that nothing was checked.
"""

import functools
import importlib
import json
import re
import zipfile
from pathlib import Path

import pytest

from testkit import SHARED, shared_path

IMPLEMENTATIONS = ["python", "native"]


def module(kind: str, name: str):
    if kind == "python":
        return importlib.import_module(f"leanrpc.core.{name}_py")
    return importlib.import_module(f"leanrpc._native.{name}")


def both(name: str):
    """(python module, native module), for tests that compare the two."""
    return module("python", name), module("native", name)


def shared_dir(*parts: str) -> Path:
    path = shared_path(*parts)
    assert path.is_dir(), path
    return path


@functools.cache
def transcripts() -> tuple[Path, ...]:
    """Every recorded REPL stdout in shared/fixtures (upstream REPL and LeanInteract)."""
    files = []
    for sub in ("repl", "leaninteract"):
        files += sorted(shared_dir("fixtures", sub).rglob("*.expected.out"))
    if len(files) < 100:
        pytest.fail(
            f"expected hundreds of REPL transcripts under {SHARED / 'fixtures'}, found {len(files)}"
        )
    return tuple(files)


_JSON_WS = re.compile(r"[ \t\r\n]*")


def reference_objects(data: bytes) -> list:
    """The JSON values in `data`, found by scanning with raw_decode.

    Independent of the blank-line rule the decoders implement: it just reads
    one JSON value after another.
    """
    text = data.decode("utf-8")
    decoder = json.JSONDecoder()
    objects = []
    pos = _JSON_WS.match(text, 0).end()
    while pos < len(text):
        obj, pos = decoder.raw_decode(text, pos)
        objects.append(obj)
        pos = _JSON_WS.match(text, pos).end()
    return objects


@functools.cache
def lean_corpus() -> tuple[tuple[str, str], ...]:
    """(label, code) for every Lean text in shared/: .lean files, every `cmd`
    of every REPL .in file, the dataset statements (header + statement as a
    prover would send them) and the proofs inside the dataset zips."""
    fixtures = shared_dir("fixtures")
    datasets = shared_dir("datasets")
    corpus = []
    for root in (fixtures, datasets):
        for path in sorted(root.rglob("*.lean")):
            corpus.append((str(path.relative_to(SHARED)), path.read_text(encoding="utf-8")))
    for path in sorted(fixtures.rglob("*.in")):
        text = path.read_text(encoding="utf-8")
        for i, part in enumerate(re.split(r"\n[ \t\r]*\n", text)):
            if not part.strip() or part.lstrip().startswith(("#", "--")):
                continue
            # strict=False: some fixtures hold raw line breaks inside strings on purpose.
            request = json.loads(part, strict=False)
            if isinstance(request.get("cmd"), str):
                corpus.append((f"{path.relative_to(SHARED)}#{i}", request["cmd"]))
    for path in sorted(datasets.rglob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                row = json.loads(line)
                label = f"{path.relative_to(SHARED)}:{i + 1}"
                for field in ("lean4_code", "formal_proof"):
                    if isinstance(row.get(field), str):
                        corpus.append((f"{label}:{field}", row[field]))
                header = row.get("header") or row.get("lean4_src_header") or ""
                statement = (
                    row.get("formal_statement")
                    or row.get("lean4_formalization")
                    or row.get("formal_stmt")
                    or ""
                )
                if header or statement:
                    corpus.append(
                        (
                            f"{label}:statement",
                            _join(header, row.get("informal_prefix") or "", statement),
                        )
                    )
    for path in sorted(datasets.rglob("*.zip")):
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if name.endswith(".lean"):
                    corpus.append(
                        (f"{path.relative_to(SHARED)}!{name}", archive.read(name).decode("utf-8"))
                    )
    if len(corpus) < 3000:
        pytest.fail(f"expected thousands of Lean texts under {SHARED}, found {len(corpus)}")
    return tuple(corpus)


@functools.cache
def dataset_statements() -> tuple[dict, ...]:
    """Dataset rows with a separate header, as (header, prefix, statement, code)."""
    rows = []
    for path in sorted(shared_dir("datasets").rglob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                header = row.get("header") or row.get("lean4_src_header")
                statement = (
                    row.get("formal_statement")
                    or row.get("lean4_formalization")
                    or row.get("formal_stmt")
                )
                if header and statement:
                    prefix = row.get("informal_prefix") or ""
                    rows.append(
                        {
                            "header": header,
                            "prefix": prefix,
                            "statement": statement,
                            "code": _join(header, prefix, statement),
                        }
                    )
    return tuple(rows)


def _join(header: str, prefix: str, statement: str) -> str:
    # Prover pipelines glue these with a newline when the header lacks one.
    text = header
    for part in (prefix, statement):
        if part:
            if text and not text.endswith("\n"):
                text += "\n"
            text += part
    return text
