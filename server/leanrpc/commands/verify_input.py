"""`leanrpc verify`'s inputs: paths to snippets, references, the token.

Owns: turning paths into (path, text) snippets (a file that cannot be read is
reported, the others are still verified), the references a snippet is pinned
to (--reference, --reference-dir), and where the bearer token comes from
(--token, --token-file, $LEANRPC_TOKEN). May import: reference, errors,
commands.exits.
"""

from __future__ import annotations

import os
import re
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


def collect(paths: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """(snippets to send as (path, text), problems as (path, reason), every
    entry's path in output order: argument order, folders in natural order)."""
    snippets: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    order: list[str] = []

    def problem(path: str, reason: str) -> None:
        problems.append((path, reason))
        order.append(path)

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                (p for p in path.rglob("*.lean") if p.is_file() or p.is_symlink()), key=_natural
            )
            if not found:
                problem(raw, f"folder {raw} has no .lean files")
            files = found
        elif path.exists():
            files = [path]
        elif path.is_symlink():
            files = [path]
        else:
            problem(raw, f"{raw}: no such file or folder")
            continue
        for file in files:
            if file.is_symlink() and not file.exists():
                problem(str(file), f"{file}: broken symbolic link (to {os.readlink(file)})")
                continue
            try:
                text = file.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                problem(
                    str(file),
                    f"{file}: not UTF-8 text (byte 0x{file.read_bytes()[exc.start]:02x} at offset {exc.start})",
                )
                continue
            except OSError as exc:
                problem(str(file), f"{file}: cannot read: {exc.strerror}")
                continue
            if not text.strip():
                problem(str(file), f"{file}: the file is empty")
                continue
            snippets.append((str(file), text))
            order.append(str(file))
    return snippets, problems, order
