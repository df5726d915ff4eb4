r"""Generate leanrpc.policy.generated: the tactics, terms and commands whose
elaborators run code while Lean elaborates (issue 43 item 2: the list is
generated from Lean's and Mathlib's sources, not typed by hand).

Usage:
    python tools/gen_code_tactics.py --root SOURCES --manifest tools/code_tactics_sources.tsv \
        [--out server/leanrpc/policy/generated.py]

The manifest (committed: tools/code_tactics_sources.tsv) names every file
read, one per line: `repo<TAB>commit<TAB>path<TAB>form`, where `form` is
`whole` (the file as stored at that commit) or `excerpt` (its elaborator
declarations only, where the whole file could not be had). Each file lies at
SOURCES/<repo>/<path>; a listed file that is missing, or a `.lean` file under
SOURCES that is not listed, is an error, so the list is exactly what was
read. The generated file's header names each repository, its commits and how
many files were read from it. The third-party sources themselves are not
committed (only the manifest and the generated list).

How a name is found, file by file (Lean source text, comments removed):
- the file is cut into top-level declarations (a line starting at column 0);
- a declaration *evaluates code* when it calls Lean's evaluator or the outside
  world: `evalExpr`, `evalTerm`, `evalConst`, `evalConstCheck`, `evalDecl`,
  `ofReduceBool`/`reduceBool`, `IO.Process`, `IO.FS` (not `compileDecl`:
  compiling an auxiliary definition runs nothing, and every `def` is
  compiled; nor evaluating a `…Config` structure, the value of a
  `(config := …)` as core's tactics evaluate theirs); or when it names a
  declaration of the same file that evaluates code (to a fixed point: the
  `polyrith` elaborator calls `polyrith`, which calls `runSage`, which runs
  `curl`);
- an elaborator is `elab "tok"`, `elab_rules … | `(tactic| tok …)`,
  `macro "tok"`, or a def carrying `@[tactic n]`, `@[term_elab n]`,
  `@[command_elab n]` (and their `builtin_` forms); a syntax name `n` is read
  to its first token from `syntax (name := n) "tok"`, `elab (name := n) "tok"`,
  `macro (name := n) "tok"` or `def n := leading_parser "tok"` in any file read
  (the first string atom after the name, so `withPosition("#loogle" …)` reads
  `#loogle`); where the name is declared in no file read, the first atom of
  the elaborator's own quotation pattern (`` `(#eval%$tk $t) `` reads `#eval`);
- the first token of every evaluating elaborator is written out;
- then, to a fixed point over all the files read, a declaration whose
  quotations (after its first `` `( ``) name a token already found runs code
  too: a macro that expands into a code-running tactic (Mathlib's
  `macro "run_conv" e:doSeq : conv => `(conv| tactic' => run_tac $e)`), or an
  elaborator that builds `#eval …` syntax and elaborates it. A macro that
  expands into one with fixed code is found as well (failing closed: it is
  refused, not weighed).
A syntax name whose token is not in the files read is listed as unresolved.
Standard library only (runs wherever Python does, no install).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path

EVALUATES = re.compile(
    r"\b(?:evalExpr'?|evalTerm|evalConst|evalConstCheck|evalDecl|ofReduceBool|reduceBool)\b"
    r"|\bIO\.Process\b|\bIO\.FS\b"
)
_TOKEN = r'"([^"\s]+)\s*"'
SYNTAX_NAMED = re.compile(
    r"\b(?:syntax|elab|macro)\s*(?:\([^)]*\)\s*)*?\(name\s*:=\s*([\w.«»']+)\)[^\"]*?" + _TOKEN
)
LEADING_PARSER = re.compile(
    r"\bdef\s+([\w.«»']+)\s*(?::[^=]*)?:=\s*(?:leading_parser|trailing_parser)[^\"]*?" + _TOKEN
)
ELAB_TOKEN = re.compile(r"^(?:elab|macro)\b\s*(?:\([^)]*\)\s*)*" + _TOKEN)
RULES_TOKEN = re.compile(r"^(?:elab_rules|macro_rules)\b[^`]*`\((?:\w+\|\s*)?([^\s$()%]+)")
QUOTED_TOKEN = re.compile(r"`\((?:[\w.]+\|\s*)?([^\s$()%]+)")
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
            # a string's line breaks are not line starts (`declarations`)
            out.append(text[i : j + 1].replace("\n", " "))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


# `evalTerm ApplyConfig …`: a configuration structure's value (flags and
# bounds, as every `(config := …)` of core's tactics is evaluated), not code.
CONFIG_VALUE = re.compile(r"\s+\(?[\w.`]*Config\b")


def evaluates(chunk: str, code: re.Pattern[str] | None = None) -> bool:
    """Whether a declaration calls the evaluator or the outside world, other
    than to evaluate a configuration structure; with `code` (the tokens found
    so far, `code_pattern`), also whether a quotation in it names one of them."""
    if any(not CONFIG_VALUE.match(chunk, m.end()) for m in EVALUATES.finditer(chunk)):
        return True
    quoted = chunk.find("`(")
    return code is not None and quoted >= 0 and code.search(chunk, quoted) is not None


def code_pattern(tokens: Iterable[str]) -> re.Pattern[str] | None:
    """A token as Lean would read it in a quotation: not glued to a longer name."""
    words = sorted({t for t in tokens if t}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![\w.'#])(?:{alternatives})(?![\w'!?])")


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


Found = tuple[str | None, str | None, str | None]


def read_file(text: str, names: dict[str, str], code: re.Pattern[str] | None = None) -> list[Found]:
    """Record `name -> token` in `names`; return (token, syntax name, the
    first atom of its quotation pattern) per evaluating elaborator of this
    file (`code`: the tokens found so far, whose quotation makes a declaration
    evaluating too)."""
    chunks = declarations(strip_comments(text))
    for chunk in chunks:
        for pattern in (SYNTAX_NAMED, LEADING_PARSER):
            for name, token in pattern.findall(chunk):
                names.setdefault(_last(name), token)
    defined = {_last(m.group(1)): k for k, c in enumerate(chunks) if (m := DEF_NAME.search(c))}
    hot = {k for k, c in enumerate(chunks) if evaluates(c, code)}
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
    found: list[Found] = []
    for k in sorted(hot):
        chunk = chunks[k].lstrip()
        if m := ELAB_TOKEN.match(chunk):
            found.append((m.group(1), None, None))
        elif m := RULES_TOKEN.match(chunk):
            found.append((m.group(1), None, None))
        quoted = QUOTED_TOKEN.search(chunk)
        for name in ELAB_ATTR.findall(chunk):
            found.append((None, _last(name), quoted.group(1) if quoted else None))
    return found


def read_manifest(manifest: Path) -> list[tuple[str, str, str, str]]:
    """(repo, commit, path, form) per line; `#` lines are comments."""
    rows = []
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4 or fields[3] not in ("whole", "excerpt"):
            raise ValueError(f"{manifest}:{number}: expected repo, commit, path, whole|excerpt")
        if not re.fullmatch(r"[0-9a-f]{40}", fields[1]):
            raise ValueError(f"{manifest}:{number}: {fields[1]!r} is not a commit")
        rows.append((fields[0], fields[1], fields[2], fields[3]))
    return rows


def check_tree(root: Path, rows: list[tuple[str, str, str, str]]) -> list[str]:
    """What makes the tree differ from its manifest (empty when it matches)."""
    listed = {f"{repo}/{path}" for repo, _, path, _ in rows}
    present = {p.relative_to(root).as_posix() for p in root.rglob("*.lean")}
    return [f"missing: {m}" for m in sorted(listed - present)] + [
        f"not in the manifest: {m}" for m in sorted(present - listed)
    ]


def generate(root: Path, rows: list[tuple[str, str, str, str]]) -> tuple[dict[str, str], list[str]]:
    """`token -> "repo:path"` for every evaluating elaborator, and the
    unresolved syntax names. The files are read again while the last reading
    found a token the one before did not (a macro over a macro over a
    code-running tactic takes one reading per level)."""
    texts = [
        (f"{repo}:{path}", (root / repo / path).read_text(encoding="utf-8", errors="replace"))
        for repo, _, path, _ in rows
    ]
    tokens: dict[str, str] = {}
    while True:
        code = code_pattern(tokens)
        names: dict[str, str] = {}
        pending: list[tuple[str | None, str | None, str | None, str]] = []
        for where, text in texts:
            pending += [
                (tok, name, quoted, where) for tok, name, quoted in read_file(text, names, code)
            ]
        found: dict[str, str] = dict(tokens)
        unresolved: list[str] = []
        for tok, name, quoted, where in pending:
            tok = tok if tok is not None else names.get(name or "", quoted)
            if tok is None:
                unresolved.append(f"{name} ({where})")
            else:
                found.setdefault(tok.strip(), where)
        if found.keys() == tokens.keys():
            return dict(sorted(found.items())), sorted(set(unresolved))
        tokens = found


def render(
    manifest: str,
    rows: list[tuple[str, str, str, str]],
    tokens: dict[str, str],
    unresolved: list[str],
) -> str:
    head = ["Generated by tools/gen_code_tactics.py: do not edit by hand (data only).", ""]
    head.append("The first tokens of the tactics, terms and commands of Lean, Mathlib and")
    head.append("Mathlib's dependencies whose elaborators run code while Lean elaborates")
    head.append("(evalExpr, evalTerm, evalConst, ofReduceBool, IO.Process, IO.FS, …), read")
    head.append(f"from the files that {manifest} lists (repository, commit, files read):")
    per_repo: dict[str, dict[str, list[str]]] = {}
    for repo, commit, _, form in rows:
        per_repo.setdefault(repo, {}).setdefault(commit, []).append(form)
    for repo, commits in per_repo.items():
        head.append(f"- {repo}:")
        for commit, forms in commits.items():
            wholes, excerpts = forms.count("whole"), forms.count("excerpt")
            what = ", ".join(
                f"{n} {label}" for n, label in ((wholes, "whole"), (excerpts, "excerpt")) if n
            )
            head.append(f"    {commit} ({what})")
    if unresolved:
        head.append("Elaborators whose syntax is not in the files read (their tokens are missing):")
        head += [f"- {u}" for u in unresolved]
    head.append("May import: nothing.")
    body = "".join(f"        {tok!r},  # {where}\n" for tok, where in tokens.items())
    doc = "\n".join(line.rstrip() for line in head)
    return f'"""{doc}\n"""\n\nCODE_TACTICS = frozenset(\n    {{\n{body}    }}\n)\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="SOURCES/<repo>/<path> per file")
    parser.add_argument("--manifest", type=Path, required=True, help="the files read (TSV)")
    parser.add_argument("--out", type=Path, default=Path("server/leanrpc/policy/generated.py"))
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"source tree {args.root} is not a folder")
    try:
        rows = read_manifest(args.manifest)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    if problems := check_tree(args.root, rows):
        parser.error("the tree does not match the manifest: " + "; ".join(problems[:5]))
    tokens, unresolved = generate(args.root, rows)
    label = (
        args.manifest.name
        if args.manifest.parent.name != "tools"
        else f"tools/{args.manifest.name}"
    )
    args.out.write_text(render(label, rows, tokens, unresolved), encoding="utf-8")
    print(f"{len(tokens)} tokens, {len(unresolved)} unresolved -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
