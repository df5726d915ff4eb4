r"""Run the code policy over real Lean files and record every refusal (issue 43:
the policy refuses no real Lean file for a reason other than a construct
that really runs code).

Usage:
    python tools/scan_real_files.py --root REAL --commits REAL/.commits \
        [--out tests/policy/real_files.tsv]      # write the manifest
    python tools/scan_real_files.py --root REAL --check tests/policy/real_files.tsv

REAL holds the files as REAL/<owner>/<repo>/<path>; the commits file names
each repository's commit (`owner/repo commit` per line). Every `.lean` file is
one text; every REPL test input (`test/*.in`, JSON commands separated by blank
lines) gives one text per `cmd` or `tactic`, named `path#k`.

The policy names only its first refusal, so a text is read again with that
construct masked (a keyword or `#`-word blanked, an attribute renamed `simp`
and its arguments blanked, an option renamed `pp.…`, same length so lines and
columns stay) until it
passes; where the lexer cannot read the text for certain (or the masking
cannot apply) the reading stops there. The manifest records, per text, the
repository, commit, path, the first 16 hex digits of the file's SHA-256, and
every refusal as `construct@line:column`, so the test can check the list
exactly where the files are present (they are third-party sources and are
not committed) and check the classification everywhere.
Standard library plus leanrpc.policy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from leanrpc.policy import scan

STOP = "unreadable-stop"


def texts(path: Path, rel: str) -> list[tuple[str, str]]:
    """(name, text) pairs of one file."""
    if path.suffix == ".lean":
        return [(rel, path.read_text(encoding="utf-8", errors="replace"))]
    found = []
    for chunk in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
        try:
            command = json.loads(chunk)
        except ValueError:
            continue
        for key in ("cmd", "tactic"):
            if isinstance(command, dict) and isinstance(command.get(key), str):
                found.append((f"{rel}#{len(found)}", command[key]))
    return found


def _offset(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + column


def refusals(text: str, limit: int = 400) -> list[str]:
    """Every refusal, `construct@line:column`, masking each in turn."""
    found: list[str] = []
    for _ in range(limit):
        verdict = scan(text)
        if not verdict.refused:
            return found
        construct = verdict.refused
        found.append(f"{construct}@{verdict.line}:{verdict.column}")
        at = _offset(text, verdict.line, verdict.column)
        kind, _, name = construct.partition(" ")
        word = name if kind in ("attribute", "set_option") and name else kind
        if kind.startswith("("):  # `(add …)`: named at its word, after the `(`
            word = kind[1:]
        if not name and kind in ("attribute", "set_option", "notation"):
            return found + [STOP]
        if (
            kind == "notation"
            or not text.startswith(word, at)
            or verdict.reason.startswith(
                ("a string", "a char", "a comment", "a malformed", "an invalid", "an unterminated")
            )
        ):
            return found + [STOP]
        if kind == "attribute":
            # the refused instance's arguments go too (up to the list's `]`):
            # `@[norm_num _ + _, _ - _]` has commas of its own
            close = text.find("]", at)
            word = text[at:close] if close > at else word
            mask = ("simp".ljust(len(word)) if len(word) >= 4 else "").replace(",", " ")
            mask = "".join("\n" if c == "\n" else m for c, m in zip(word, mask))
        elif kind == "set_option":
            mask = ("pp." + "x" * (len(word) - 3)) if len(word) >= 4 else ""
        else:
            mask = " " * len(word)
        if not mask:
            return found + [STOP]
        text = text[:at] + mask + text[at + len(word) :]
    return found + [STOP]


def scan_tree(root: Path, commits: dict[str, str]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for repo, commit in sorted(commits.items()):
        base = root / repo
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(base).as_posix()
            if path.suffix == ".in" and not rel.startswith("test/"):
                continue
            if path.suffix not in (".lean", ".in") or not path.is_file():
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            for name, text in texts(path, rel):
                found = refusals(text)
                rows.append((repo, commit, name, digest, " ; ".join(found) or "-"))
    return rows


def read_commits(path: Path) -> dict[str, str]:
    pairs = (line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {repo: commit for repo, commit in pairs}


def read_manifest(path: Path) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        repo, commit, name, digest, found = line.split("\t")
        rows.append((repo, commit, name, digest, found))
    return rows


HEADER = (
    "# Real Lean files the code policy was run over (tools/scan_real_files.py):\n"
    "# repo, commit, path (`#k`: the k-th command of a REPL test input), the first\n"
    "# 16 hex digits of the file's SHA-256, and every refusal (`-`: none).\n"
    "# All Apache-2.0; the files are not committed, only this list.\n"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--commits", type=Path, help="`owner/repo commit` per line")
    parser.add_argument("--out", type=Path, default=Path("tests/policy/real_files.tsv"))
    parser.add_argument("--check", type=Path, help="compare with this manifest instead")
    args = parser.parse_args(argv)
    if args.check:
        expected = read_manifest(args.check)
        commits = {repo: commit for repo, commit, *_ in expected}
        actual = scan_tree(args.root, commits)
        if actual != expected:
            print("the scan differs from the manifest", file=sys.stderr)
            return 1
        return 0
    if args.commits is None:
        parser.error("--commits is needed to write a manifest")
    rows = scan_tree(args.root, read_commits(args.commits))
    body = "".join("\t".join(row) + "\n" for row in rows)
    args.out.write_text(HEADER + body, encoding="utf-8")
    refused = sum(row[4] != "-" for row in rows)
    print(f"{len(rows)} texts, {refused} with refusals -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
