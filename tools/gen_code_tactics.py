r"""Generate leanrpc.policy.generated: the tactics, terms and commands whose
elaborators run code while Lean elaborates (issue 43 item 2: the list is
generated from Lean's and Mathlib's sources, not typed by hand).

Usage:
    python tools/gen_code_tactics.py --lean LEAN4_SRC --mathlib MATHLIB4_SRC \
        [--out server/leanrpc/policy/generated.py]

Each folder is a source tree (a checkout, or the files of one); its revision
is `git rev-parse HEAD` where it is a git checkout, else the text of a
`.revision` file at its root, else "unknown"; both are written into the
generated file's header.

How a name is found, file by file (Lean source text, comments removed):
- the file is cut into top-level declarations (a line starting at column 0);
- a declaration *evaluates code* when it calls Lean's evaluator or the outside
  world: `evalExpr`, `evalTerm`, `evalConst`, `evalDecl`, `compileDecl`,
  `ofReduceBool`/`reduceBool`, `IO.Process`, `IO.FS`; or when it names a
  declaration of the same file that evaluates code (to a fixed point: the
  `polyrith` elaborator calls `polyrith`, which calls `runSage`, which runs
  `curl`);
- an elaborator is `elab "tok"`, `elab_rules … | `(tactic| tok …)`,
  `macro "tok"`, or a def carrying `@[tactic n]`, `@[term_elab n]`,
  `@[command_elab n]` (and their `builtin_` forms); a syntax name `n` is read
  to its first token from `syntax (name := n) "tok"`, `elab (name := n) "tok"`,
  `macro (name := n) "tok"` or `def n := leading_parser "tok"` in any file read;
- the first token of every evaluating elaborator is written out.
A syntax name whose token is not in the files read is listed as unresolved.
Standard library only (runs wherever Python does, no install).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

EVALUATES = re.compile(
    r"\b(?:evalExpr|evalTerm|evalConst|evalDecl|compileDecl|ofReduceBool|reduceBool)\b"
    r"|\bIO\.Process\b|\bIO\.FS\b"
)
_TOKEN = r'"([^"\s]+)\s*"'
SYNTAX_NAMED = re.compile(
    r"\b(?:syntax|elab|macro)\s*(?:\([^)]*\)\s*)*?\(name\s*:=\s*([\w.«»']+)\)\s*(?:\([^)]*\)\s*)*"
    + _TOKEN
)
LEADING_PARSER = re.compile(
    r"\bdef\s+([\w.«»']+)\s*(?::[^=]*)?:=\s*(?:leading_parser|trailing_parser)[^\"]*?" + _TOKEN
)
ELAB_TOKEN = re.compile(r"^(?:elab|macro)\b\s*(?:\([^)]*\)\s*)*" + _TOKEN)
RULES_TOKEN = re.compile(r"^(?:elab_rules|macro_rules)\b[^`]*`\((?:\w+\|\s*)?([^\s$()%]+)")
ELAB_ATTR = re.compile(r"@\[[^\]]*?\b(?:builtin_)?(?:tactic|term_elab|command_elab)\s+([\w.«»']+)")
DEF_NAME = re.compile(r"\b(?:def|abbrev|opaque|theorem|instance)\s+([\w.«»']+)")


def strip_comments(text: str) -> str:
    """Lean text with `--` and (nested) `/- -/` comments blanked, strings kept."""
    out: list[str] = []
    i, n, depth = 0, len(text), 0
    while i < n:
        if depth:
            if text.startswith("/-", i):
                depth, i = depth + 1, i + 2
            elif text.startswith("-/", i):
                depth, i = depth - 1, i + 2
            else:
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
        elif text.startswith("/-", i):
            depth, i = 1, i + 2
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def declarations(text: str) -> list[str]:
    """Top-level chunks: each starts at a non-blank line at column 0 (not a
    `|` alternative, and not right after a line holding only attributes)."""
    chunks: list[list[str]] = []
    for line in text.splitlines():
        head = line[:1]
        glued = (
            chunks
            and chunks[-1][-1].strip().startswith("@[")
            and chunks[-1][-1].rstrip().endswith("]")
        )
        if head.strip() and head != "|" and not glued or not chunks:
            chunks.append([line])
        else:
            chunks[-1].append(line)
    return ["\n".join(c) for c in chunks if "".join(c).strip()]


def _last(name: str) -> str:
    return name.strip("«»").rsplit(".", 1)[-1]


def read_file(text: str, names: dict[str, str]) -> list[tuple[str | None, str | None]]:
    """Record `name -> token` in `names`; return (token, syntax name) per
    evaluating elaborator of this file."""
    chunks = declarations(strip_comments(text))
    for chunk in chunks:
        for pattern in (SYNTAX_NAMED, LEADING_PARSER):
            for name, token in pattern.findall(chunk):
                names.setdefault(_last(name), token)
    defined = {_last(m.group(1)): k for k, c in enumerate(chunks) if (m := DEF_NAME.search(c))}
    hot = {k for k, c in enumerate(chunks) if EVALUATES.search(c)}
    changed = True
    while changed:  # a declaration naming an evaluating one of this file evaluates too
        changed = False
        hot_names = [n for n, k in defined.items() if k in hot]
        if not hot_names:
            break
        calls = re.compile(r"\b(?:" + "|".join(map(re.escape, hot_names)) + r")\b")
        for k, chunk in enumerate(chunks):
            body = chunk.split(":=", 1)[-1] if k in defined.values() else chunk
            if k not in hot and calls.search(body):
                hot.add(k)
                changed = True
    found: list[tuple[str | None, str | None]] = []
    for k in sorted(hot):
        chunk = chunks[k].lstrip()
        if m := ELAB_TOKEN.match(chunk):
            found.append((m.group(1), None))
        elif m := RULES_TOKEN.match(chunk):
            found.append((m.group(1), None))
        for name in ELAB_ATTR.findall(chunk):
            found.append((None, _last(name)))
    return found


def revision(root: Path) -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if head:
            return f"git {head}"
    except (OSError, subprocess.CalledProcessError):
        pass
    marker = root / ".revision"
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else "unknown"


def generate(trees: dict[str, Path]) -> tuple[dict[str, str], list[str]]:
    """`token -> "tree:path"` for every evaluating elaborator, and the
    unresolved syntax names."""
    names: dict[str, str] = {}
    pending: list[tuple[str | None, str | None, str]] = []
    for label, root in trees.items():
        for path in sorted(root.rglob("*.lean")):
            text = path.read_text(encoding="utf-8", errors="replace")
            where = f"{label}:{path.relative_to(root).as_posix()}"
            pending += [(tok, name, where) for tok, name in read_file(text, names)]
    tokens: dict[str, str] = {}
    unresolved: list[str] = []
    for tok, name, where in pending:
        tok = tok if tok is not None else names.get(name or "")
        if tok is None:
            unresolved.append(f"{name} ({where})")
        else:
            tokens.setdefault(tok, where)
    return dict(sorted(tokens.items())), sorted(set(unresolved))


def render(trees: dict[str, Path], tokens: dict[str, str], unresolved: list[str]) -> str:
    head = ["Generated by tools/gen_code_tactics.py: do not edit by hand (data only).", ""]
    head.append("The first tokens of Lean's and Mathlib's tactics, terms and commands whose")
    head.append("elaborators run code while Lean elaborates (evalExpr, evalTerm, evalConst,")
    head.append("ofReduceBool, IO.Process, IO.FS, …), read from these source trees:")
    for label, root in trees.items():
        head.append(f"- {label}:")
        head += ["    " + line for line in revision(root).splitlines()]
    if unresolved:
        head.append("Elaborators whose syntax is not in the files read (their tokens are missing):")
        head += [f"- {u}" for u in unresolved]
    head.append("May import: nothing.")
    body = "".join(f"        {tok!r},  # {where}\n" for tok, where in tokens.items())
    doc = "\n".join(line.rstrip() for line in head)
    return f'"""{doc}\n"""\n\nCODE_TACTICS = frozenset(\n    {{\n{body}    }}\n)\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lean", type=Path, required=True, help="a Lean 4 source tree")
    parser.add_argument("--mathlib", type=Path, required=True, help="a Mathlib source tree")
    parser.add_argument("--out", type=Path, default=Path("server/leanrpc/policy/generated.py"))
    args = parser.parse_args(argv)
    trees = {"lean4": args.lean, "mathlib4": args.mathlib}
    for label, root in trees.items():
        if not root.is_dir():
            parser.error(f"{label} source tree {root} is not a folder")
    tokens, unresolved = generate(trees)
    args.out.write_text(render(trees, tokens, unresolved), encoding="utf-8")
    print(f"{len(tokens)} tokens, {len(unresolved)} unresolved -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(os.sys.argv[1:]))
