"""`leanrpc verify`'s inputs: paths to snippets, references, the token.

Owns: turning paths into (id, text) snippets (a file that cannot be read is
reported, the others are still verified): .lean files, folders, `-` (stdin),
and JSON records (.jsonl, or a .json list or lines, as `datasets`' to_json
writes them) whose `--field` holds the code, `--id-field` the id and
`--reference-field` the statement to pin to. A records file without
`--field` is refused, never sent to Lean as code. Also the references a
snippet is pinned to (--reference, --reference-dir), and where the bearer
token comes from (--token, --token-file, $LEANRPC_TOKEN). The standard
library's json reads the records (no new dependency for a line format).
May import: reference, errors, commands.exits.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

from .exits import UserError

# The token's environment variable, shared with the client's adapters (issue 38).
TOKEN_ENV = "LEANRPC_TOKEN"


def token_of(args) -> tuple[str | None, str]:
    """(the bearer token, where it came from): --token, --token-file, then $LEANRPC_TOKEN."""
    if args.token:
        return args.token, "--token"
    if args.token_file:
        try:
            lines = Path(args.token_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--token-file {args.token_file}: cannot read it ({exc})") from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise UserError(f"--token-file {args.token_file}: its first line is empty")
        return token, f"--token-file {args.token_file}"
    token = os.environ.get(TOKEN_ENV, "").strip()
    return (token, f"${TOKEN_ENV}") if token else (None, "")


def references_for(
    snippets: list[tuple[str, str]], args
) -> tuple[list[str] | None, list[tuple[str, str]]]:
    """One reference per snippet (None: not pinned), and files refused for a missing one."""
    if getattr(args, "reference", None):
        try:
            text = Path(args.reference).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--reference {args.reference}: cannot read it ({exc})") from None
        problem = _reference_problem(text)
        if problem:
            raise UserError(f"--reference {args.reference}: {problem}")
        return [text] * len(snippets), []
    folder = getattr(args, "reference_dir", None)
    if not folder:
        return None, []
    if not Path(folder).is_dir():
        raise UserError(f"--reference-dir {folder}: no such folder")
    refs, missing = [], []
    for path, _text in snippets:
        candidate = Path(folder) / Path(path).name
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            refs.append("")
            missing.append((path, f"no reference {candidate} for it in --reference-dir"))
            continue
        problem = _reference_problem(text)
        refs.append(text)
        if problem:
            missing.append((path, f"reference {candidate}: {problem}"))
    return refs, missing


def _reference_problem(text: str) -> str:
    """Why a reference cannot pin anything ("" when it can), before anything is sent."""
    from ..errors import RequestError
    from ..reference import parse_reference

    try:
        parse_reference(text)
    except RequestError as exc:
        return exc.message
    return ""


def _natural(path: Path) -> list:
    """Sort key: `l2` before `l10` (digit runs compare as numbers)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


RECORD_SUFFIXES = (".jsonl", ".ndjson", ".json")
STDIN = "-"


@dataclasses.dataclass
class Collected:
    """What the paths gave: snippets as (id, text), problems as (id, reason),
    every entry's id in output order, and each snippet's reference from its
    record (None: no --reference-field)."""

    snippets: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    problems: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    order: list[str] = dataclasses.field(default_factory=list)
    references: list[str] | None = None

    def problem(self, entry: str, reason: str) -> None:
        self.problems.append((entry, reason))
        self.order.append(entry)

    def snippet(self, entry: str, text: str, reference: str | None = None) -> None:
        self.snippets.append((entry, text))
        self.order.append(entry)
        if self.references is not None:
            self.references.append(reference or "")


def collect(paths: list[str], args=None) -> Collected:
    """Every path's snippets in output order: argument order, folders in
    natural order, records in file order."""
    fields = _fields(args)
    out = Collected(references=[] if fields and fields[2] else None)
    for raw in paths:
        if raw == STDIN:
            _from_stdin(out, fields)
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                (p for p in path.rglob("*.lean") if p.is_file() or p.is_symlink()), key=_natural
            )
            if not found:
                out.problem(raw, f"folder {raw} has no .lean files")
            files = found
        elif path.exists() or path.is_symlink():
            files = [path]
        else:
            out.problem(raw, f"{raw}: no such file or folder")
            continue
        for file in files:
            text = _read(out, file)
            if text is None:
                continue
            if file.suffix.lower() in RECORD_SUFFIXES:
                _records(out, str(file), text, fields)
            elif out.references is not None:
                out.problem(str(file), f"{file}: --reference-field needs records, not a .lean file")
            else:
                out.snippet(str(file), text)
    return out


def _fields(args) -> tuple[str, str, str] | None:
    field = getattr(args, "field", None)
    if not field:
        for flag in ("id_field", "reference_field"):
            if getattr(args, flag, None):
                raise UserError(f"--{flag.replace('_', '-')} needs --field (the code's column)")
        return None
    return (
        field,
        getattr(args, "id_field", None) or "",
        getattr(args, "reference_field", None) or "",
    )


def _read(out: Collected, file: Path) -> str | None:
    if file.is_symlink() and not file.exists():
        out.problem(str(file), f"{file}: broken symbolic link (to {os.readlink(file)})")
        return None
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = file.read_bytes()[exc.start]
        out.problem(str(file), f"{file}: not UTF-8 text (byte 0x{byte:02x} at offset {exc.start})")
        return None
    except OSError as exc:
        out.problem(str(file), f"{file}: cannot read: {exc.strerror}")
        return None
    if not text.strip():
        out.problem(str(file), f"{file}: the file is empty")
        return None
    return text


def _from_stdin(out: Collected, fields) -> None:
    try:
        text = sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        out.problem(STDIN, f"stdin: not UTF-8 text (at offset {exc.start})")
        return
    if not text.strip():
        out.problem(STDIN, "stdin: nothing was read")
    elif fields is not None:
        _records(out, "stdin", text, fields)
    else:
        out.snippet(STDIN, text)


def _records(out: Collected, name: str, text: str, fields) -> None:
    """One snippet per record; a record without the code field is a problem of its own."""
    records = _parse_records(out, name, text)
    if records is None:
        return
    if fields is None:
        keys = sorted({k for _n, r in records[:50] if isinstance(r, dict) for k in r})
        out.problem(
            name,
            f"{name} holds JSON records, not Lean code: pass --field NAME, the key that "
            f"holds the code (its records have the keys {', '.join(keys) or 'none'})",
        )
        return
    field, id_field, reference_field = fields
    for line, record in records:
        entry = f"{name}:{line}"
        if not isinstance(record, dict):
            out.problem(entry, f"{entry}: the record is not a JSON object")
            continue
        if id_field and record.get(id_field) not in (None, ""):
            entry = str(record[id_field])
        code = record.get(field)
        if not isinstance(code, str) or not code.strip():
            why = "has no" if field not in record else "has an empty or non-text"
            out.problem(entry, f"{name}:{line}: the record {why} field {field!r} (--field)")
            continue
        reference = record.get(reference_field) if reference_field else None
        if reference_field and (not isinstance(reference, str) or not reference.strip()):
            out.problem(
                entry,
                f"{name}:{line}: the record has no field {reference_field!r} (--reference-field)",
            )
            continue
        out.snippet(entry, code, reference)


def _parse_records(out: Collected, name: str, text: str) -> list[tuple[int, object]] | None:
    """(line number, record) pairs: a JSON list, or one JSON value per line."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            whole = json.loads(text)
        except ValueError as exc:
            out.problem(name, f"{name}: not valid JSON ({exc})")
            return None
        return [(n + 1, record) for n, record in enumerate(whole)]
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((n, json.loads(line)))
        except ValueError as exc:
            out.problem(f"{name}:{n}", f"{name}:{n}: not a JSON record ({exc.msg})")
    return records
