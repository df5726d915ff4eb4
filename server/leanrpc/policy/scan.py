"""The `proof` code policy: what a snippet may not contain before any REPL
sees it (issue 25 item 1).

Owns: `scan(text) -> Scan`, the first refused construct (named, with its
line and column) and whether the text asks for native evaluation. Refused:
commands and tactics that run the snippet's own code while Lean elaborates
(`#eval`, `run_tac`, `elab`, `macro`, `initialize`, `unsafe`, …), attributes
that install code (`implemented_by`, `extern`, `tactic`, `simproc`, every
`builtin_*`, …, in `@[…]` and `attribute […]`), and `set_option` outside an
allow-list (`debug.*`, `compiler.*`, `interpreter.*` and any unknown option
are refused). `notation`, `instance`, `open … in` and `set_option
maxHeartbeats … in` are the proofs' own and pass: what they can change about
a statement is the reference check's to catch.

Native evaluation (`native_decide`, `decide +native`, `Lean.reduceBool`,
`Lean.ofReduceBool`, `…Nat`) is not refused here but reported: it runs the
compiled code of the snippet's own definitions inside the REPL, so the
verify service answers it from the axiom allow-list without running it
(services.verify) unless the caller's policy is `trusted`.

Keywords are matched as whole tokens by leanrpc.policy.lexer, so a mention in
a comment, a string or a `«»` name is not refused. Text in, verdict out.
May import: leanrpc.policy.lexer.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

from .lexer import hidden_spans, line_col, positions

__all__ = ["Scan", "scan", "REFUSED_COMMANDS", "REFUSED_ATTRIBUTES", "ALLOWED_OPTIONS"]

# Commands and tactics that run the snippet's own code (or define syntax whose
# expansion is code), as whole identifier tokens.
REFUSED_COMMANDS = frozenset(
    {
        "run_cmd",
        "run_elab",
        "run_meta",
        "run_tac",
        "elab",
        "elab_rules",
        "macro",
        "macro_rules",
        "syntax",
        "declare_syntax_cat",
        "initialize",
        "builtin_initialize",
        "unsafe",
        "by_elab",
        "dsimproc",
        "simproc",
        "simproc_decl",
        "dsimproc_decl",
        "builtin_simproc",
        "builtin_dsimproc",
        "declare_config_elab",
        "register_option",
        "register_builtin_option",
    }
)
# `#` commands that evaluate code (the rest, #check, #print, #reduce, …, only read).
REFUSED_HASH = frozenset(
    {"#eval", "#eval!", "#exit", "#guard", "#test", "#sample", "#run", "#html", "#widget"}
)
# Attribute names that install code; any name starting with `builtin_` too.
REFUSED_ATTRIBUTES = frozenset(
    {
        "implemented_by",
        "extern",
        "export",
        "init",
        "command_elab",
        "term_elab",
        "tactic",
        "macro",
        "delab",
        "app_unexpander",
        "simproc",
        "dsimproc",
        "csimp",
        "tactic_alt",
        "command_parser",
        "term_parser",
        "tactic_parser",
        "combinator_formatter",
        "combinator_parenthesizer",
        "formatter",
        "parenthesizer",
        "code_action_provider",
        "command_code_action",
        "hole_code_action",
        "widget_module",
        "server_rpc_method",
        "env_linter",
        "positivity",
        "norm_num",
        "aesop",
        "eval_formatter",
        "deriving_handler",
        "cpass",
        "never_extract",
        "run_builtin_parser_attribute_hooks",
        "key_parser",
        "category_parenthesizer",
        "mvcgen_simp",
    }
)
_REFUSED_ATTRIBUTE_SUFFIXES = (
    "_elab",
    "_parser",
    "_formatter",
    "_parenthesizer",
    "_delab",
    "_unexpander",
)
# set_option names a proof may use; a prefix ends with ".".
ALLOWED_OPTIONS = frozenset(
    {
        "maxHeartbeats",
        "maxRecDepth",
        "synthInstance.maxHeartbeats",
        "synthInstance.maxSize",
        "maxSynthPendingDepth",
        "checkBinderAnnotations",
        "autoImplicit",
        "relaxedAutoImplicit",
        "linter.",
        "pp.",
        "trace.",
        "profiler",
        "profiler.threshold",
        "diagnostics",
        "diagnostics.threshold",
        "maxErrors",
        "exponentiation.threshold",
        "push_neg.use_distrib",
        "simprocs",
        "tactic.hygienic",
        "tactic.simp.trace",
        "backward.",
        "allowUnsafeReducibility",
        "warningAsError",
        "hygiene",
        "structureDiamondWarning",
    }
)
_REFUSED_OPTION_PREFIXES = ("debug.", "compiler.", "interpreter.", "allowUnsafeReducibility")
# Native evaluation: the compiled code of the snippet's definitions runs in the REPL.
NATIVE_NAMES = frozenset(
    {"native_decide", "reduceBool", "reduceNat", "ofReduceBool", "ofReduceNat", "native"}
)


@dataclasses.dataclass(frozen=True, slots=True)
class Scan:
    """What the policy found: `refused` ("" when allowed) names the first
    construct, `line`/`column` where it starts; `native` the first native
    evaluation ("" when none)."""

    refused: str = ""
    line: int = 0
    column: int = 0
    native: str = ""
    native_line: int = 0

    @property
    def message(self) -> str:
        if not self.refused:
            return ""
        if self.refused == AMBIGUOUS_STRING:
            return (
                f"refused by the code policy `proof`: {self.refused} at line {self.line}, "
                f"column {self.column}: its `{{…}}` holds a quote, so where it ends depends on "
                "whether it is interpolated, and the code after it cannot be read for certain; "
                "see docs/SECURITY.md"
            )
        return (
            f"refused by the code policy `proof`: {self.refused} at line {self.line}, column {self.column} "
            "runs the snippet's own code while Lean elaborates (or weakens checking); see docs/SECURITY.md"
        )


ALLOWED = Scan()
AMBIGUOUS_STRING = "a string literal"


def _option_allowed(name: str) -> bool:
    if name.startswith(_REFUSED_OPTION_PREFIXES):
        return False
    return name in ALLOWED_OPTIONS or any(
        p.endswith(".") and name.startswith(p) for p in ALLOWED_OPTIONS
    )


def _attribute_refused(word: str) -> bool:
    return (
        word in REFUSED_ATTRIBUTES
        or word.startswith("builtin_")
        or word.endswith(_REFUSED_ATTRIBUTE_SUFFIXES)
    )


def _bracket_end(text: str, start: int) -> int:
    """Offset of the `]` closing the `[` just before `start` (depth counted)."""
    depth = 1
    for m in _BRACKET.finditer(text, start):
        depth += 1 if m.group() == "[" else -1
        if depth == 0:
            return m.start()
    return len(text)


_BRACKET = re.compile(r"[\[\]]")
# Every construct the policy looks at contains one of these: one C-speed
# pass finds the candidates, and only those are read as tokens.
_CANDIDATES = (
    "#",
    "run_",
    "elab",
    "macro",
    "syntax",
    "initialize",
    "unsafe",
    "@[",
    "attribute",
    "set_option",
    "native",
    "reduce",
    "Reduce",
    "simproc",
    "register_",
)
_NAME_CHAR = re.compile(r"[\w'!?.»]")
_WORD = re.compile(r"[\w'!?.«»]+")
_HASH_WORD = re.compile(r"#[A-Za-z_][\w!?]*")
_OPTION = re.compile(r"\s+([\w.«»']+)")
_ATTRIBUTE_OPEN = re.compile(r"\s*\[")
_ATTRIBUTE_WORD = re.compile(r"[\w'!?]+")


def _hidden(spans: list, at: int) -> tuple | None:
    k = bisect.bisect_right(spans, (at, float("inf"))) - 1
    if k >= 0 and spans[k][0] <= at < spans[k][1]:
        return spans[k]
    return None


def scan(text: str) -> Scan:
    """The policy's verdict on one snippet (or tactic, or reference)."""
    candidates = positions(text, _CANDIDATES)
    # A string with a `{` in it may read two ways (lexer.py): then it is
    # refused wherever it is, since what it hides could also be a declaration
    # the axiom check must see (core/declarations.py reads the text after it).
    two_ways = '"' in text and "{" in text
    if not candidates and not two_ways:
        return ALLOWED
    spans = hidden_spans(
        text, None if two_ways else candidates[-1] + 1
    )  # only what can hide a candidate
    for start, _end, kind in spans:
        if kind == "ambiguous":  # the two readings of the text after it differ: fail closed
            return _refused(text, AMBIGUOUS_STRING, start, "", 0)
    native, native_at = "", 0
    seen = -1  # the end of the last word read
    for at in candidates:
        if at < seen:
            continue
        span = _hidden(spans, at)
        if span is not None:
            if (
                span[2] == "quoted"
                and not native
                and text[span[0] + 1 : span[1] - 1] in _QUOTED_NATIVE
            ):
                native, native_at = text[span[0] : span[1]], span[0]
            continue
        if text[at] == "#":
            word = _HASH_WORD.match(text, at)
            seen = at + 1 if word is None else word.end()
            if (
                word is not None
                and word.group() in REFUSED_HASH
                and not (at and _NAME_CHAR.match(text, at - 1))
            ):
                return _refused(text, word.group(), at, native, native_at)
            continue
        if text.startswith("@[", at):
            start = at + 2
            end = _bracket_end(text, start)
            seen = end
            refused = _refused_attribute(text, start, end)
            if refused is not None:
                return _refused(text, f"attribute {refused[0]}", refused[1], native, native_at)
            continue
        start = at
        while start and _NAME_CHAR.match(text, start - 1):
            start -= 1
        word = _WORD.match(text, start)
        token = word.group()
        seen = word.end()
        if token in REFUSED_COMMANDS:
            return _refused(text, token, start, native, native_at)
        if token == "set_option":
            option = _OPTION.match(text, seen)
            if option is not None:
                name = option.group(1).replace("«", "").replace("»", "")
                if not _option_allowed(name):
                    return _refused(text, f"set_option {name}", option.start(1), native, native_at)
        elif token == "attribute":
            opener = _ATTRIBUTE_OPEN.match(text, seen)
            if opener is not None:
                end = _bracket_end(text, opener.end())
                refused = _refused_attribute(text, opener.end(), end)
                if refused is not None:
                    return _refused(text, f"attribute {refused[0]}", refused[1], native, native_at)
        elif not native and token.rsplit(".", 1)[-1] in NATIVE_NAMES:
            native, native_at = token, start
    if native:
        return Scan(native=native, native_line=line_col(text, native_at)[0])
    return ALLOWED


_QUOTED_NATIVE = NATIVE_NAMES - {"native"}


def _refused_attribute(text: str, start: int, end: int) -> tuple[str, int] | None:
    """The first code-installing attribute name in text[start:end], with its offset."""
    for word in _ATTRIBUTE_WORD.finditer(text, start, end):
        if _attribute_refused(word.group()):
            return word.group(), word.start()
    return None


def _refused(text: str, construct: str, at: int, native: str, native_at: int) -> Scan:
    line, column = line_col(text, at)
    return Scan(
        refused=construct,
        line=line,
        column=column,
        native=native,
        native_line=line_col(text, native_at)[0] if native else 0,
    )
