"""A second, independent reading of Lean text for the fuzzer's differential
check: a direct, character-by-character transliteration of the tokenizer in
Lean 4's `src/Lean/Parser/Basic.lean` (`whitespace`, `finishCommentBlock`,
`strLitFnAux`, `charLitFnAux`, `numberFnAux`, `identFnAux`, `nameLitAux`,
`rawStrLitFnAux`, `tokenFnAux` with the token table's longest match and
`isToken`) and `interpolatedStrFn` after `s!`/`m!`/`f!`/`throwError`.

It shares no code with leanrpc.core.lexer: no regexes, one function per Lean
function, a fixed token table (`TOKENS`) standing in for Lean's plus
Mathlib's. `read(text)` returns `(tokens, error_offset)`: tokens as
`(kind, start, end, value)`, kind one of atom/ident/num/str/char/name, and the
offset of the first lexing error (None when the whole text reads).
`code_running(text)` applies the policy's rules (its lists) to this reading:
the fuzzer and the hostile REPL (lean_forging_repl.py) judge by it.
"""

from __future__ import annotations

from leanrpc.policy import ALLOWED_ATTRIBUTES, ALLOWED_HASH, REFUSED_COMMANDS
from leanrpc.policy.lists import NATIVE_NAMES
from leanrpc.policy.reading import _option_allowed

TOKENS = frozenset(
    {
        *"()[]{},;:.+-*/<>=!?@$%^&|~\\⟨⟩→←↔∀∃∧∨¬≤≥≠∣•∘×·⁻¹√∑∏",
        ":=",
        "=>",
        "<-",
        "->",
        "''",
        "∑'",
        "⁻¹'",
        "]'",  # core's `xs[i]'h` (Init/GetElem.lean)
        "Σ'",
        "×'",
        "⊕'",
        "..",
        "@[",
        "#",
        "#[",
        "#eval",
        "#eval!",
        "#exit",
        "#check",
        "#print",
        "#reduce",
        "#synth",
        "s!",
        "m!",
        "f!",
        "throwError",
        "theorem",
        "def",
        "by",
        "fun",
        "run_cmd",
        "run_tac",
        "elab",
        "macro",
        "unsafe",
        "initialize",
        "set_option",
        "attribute",
        "notation",
        "in",
        "decide",
    }
)
INTERPOLATING = frozenset({"s!", "m!", "f!", "throwError"})


class _Error(Exception):
    def __init__(self, pos: int) -> None:
        self.pos = pos


def is_letter_like(c: str) -> bool:
    v = ord(c)
    return (
        (0x3B1 <= v <= 0x3C9 and v != 0x3BB)
        or (0x391 <= v <= 0x3A9 and v != 0x3A0 and v != 0x3A3)
        or (0x3CA <= v <= 0x3FB)
        or (0x1F00 <= v <= 0x1FFE)
        or (0x2100 <= v <= 0x214F)
        or (0x1D49C <= v <= 0x1D59F)
    )


def is_sub_script_alnum(c: str) -> bool:
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A


def is_alpha(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z"


def is_digit(c: str) -> bool:
    return "0" <= c <= "9"


def is_id_first(c: str) -> bool:
    return is_alpha(c) or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return is_alpha(c) or is_digit(c) or c in "_'!?" or is_letter_like(c) or is_sub_script_alnum(c)


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.out: list[tuple[str, int, int, str]] = []

    def get(self, i: int) -> str:
        return self.s[i] if i < self.n else "\0"

    # -- whitespace -------------------------------------------------------
    def finish_comment_block(self, i: int, nesting: int) -> int:
        while True:
            if i >= self.n:
                raise _Error(i)
            curr = self.s[i]
            i += 1
            if curr == "-":
                if i >= self.n:
                    raise _Error(i)
                if self.s[i] == "/":
                    if nesting == 1:
                        return i + 1
                    nesting -= 1
                    i += 1
            elif curr == "/":
                if i >= self.n:
                    raise _Error(i)
                if self.s[i] == "-":
                    nesting += 1
                    i += 1

    def whitespace(self, i: int) -> int:
        while i < self.n:
            curr = self.s[i]
            if curr == "\t" or curr == "\r":
                raise _Error(i)
            if curr in " \n":
                i += 1
            elif curr == "-":
                if self.get(i + 1) != "-":
                    return i
                while i < self.n and self.s[i] != "\n":
                    i += 1
            elif curr == "/":
                if self.get(i + 1) != "-":
                    return i
                if self.get(i + 2) in ("-", "!"):
                    return i
                i = self.finish_comment_block(i + 2, 1)
            else:
                return i
        return i

    # -- literals ---------------------------------------------------------
    def hex_digit(self, i: int) -> int:
        c = self.get(i)
        if is_digit(c) or "a" <= c <= "f" or "A" <= c <= "F":
            return i + 1
        raise _Error(i)

    def quoted_char_core(self, i: int, quotable: str, in_string: bool) -> int:
        if i >= self.n:
            raise _Error(i)
        curr = self.s[i]
        if curr in quotable:
            return i + 1
        if curr == "x":
            return self.hex_digit(self.hex_digit(i + 1))
        if curr == "u":
            return self.hex_digit(self.hex_digit(self.hex_digit(self.hex_digit(i + 1))))
        if in_string and curr == "\n":
            return self.string_gap(i, False)
        raise _Error(i)

    def string_gap(self, i: int, seen_newline: bool) -> int:
        while i < self.n:
            curr = self.s[i]
            if curr == "\n":
                if seen_newline:
                    raise _Error(i)
                seen_newline = True
                i += 1
            elif curr in " \t\r":
                i += 1
            elif seen_newline:
                return i
            else:
                raise _Error(i)
        return i

    def str_lit(self, start: int, i: int) -> int:
        while True:
            if i >= self.n:
                raise _Error(start)
            curr = self.s[i]
            i += 1
            if curr == '"':
                self.out.append(("str", start, i, self.s[start:i]))
                return i
            if curr == "\\":
                i = self.quoted_char_core(i, "\\\"'rnt", True)

    def interpolated_str(self, start: int, i: int) -> int:
        while True:
            if i >= self.n:
                raise _Error(start)
            curr = self.s[i]
            i += 1
            if curr == '"':
                self.out.append(("str", start, i, self.s[start:i]))
                return i
            if curr == "\\":
                i = self.quoted_char_core(i, "\\\"'rnt{", True)
            elif curr == "{":
                self.out.append(("str", start, i, self.s[start:i]))
                i = self.whitespace(i)
                depth = 0
                while True:
                    if i >= self.n:
                        raise _Error(i)
                    c = self.s[i]
                    if c == "}" and depth == 0:
                        break
                    if c == "{":
                        depth += 1
                    elif c == "}":
                        depth -= 1
                    i = self.whitespace(self.token(i))
                start = i
                i += 1

    def char_lit(self, start: int, i: int) -> int:
        if i >= self.n:
            raise _Error(i)
        curr = self.s[i]
        i += 1
        if curr == "\\":
            i = self.quoted_char_core(i, "\\\"'rnt", False)
        if self.get(i) != "'":
            raise _Error(i)
        self.out.append(("char", start, i + 1, self.s[start : i + 1]))
        return i + 1

    def take_digits(self, i: int, digit, need: bool) -> int:
        while True:
            c = self.get(i)
            if c == "_":
                need = True
            elif i < self.n and digit(c):
                need = False
            elif need:
                raise _Error(i)
            else:
                return i
            i += 1

    def number(self, start: int) -> int:
        i = start
        curr = self.s[i]
        nxt = self.get(i + 1)
        if curr == "0" and nxt in "bB":
            i = self.take_digits(i + 2, lambda c: c in "01", True)
        elif curr == "0" and nxt in "oO":
            i = self.take_digits(i + 2, lambda c: "0" <= c <= "7", True)
        elif curr == "0" and nxt in "xX":
            i = self.take_digits(i + 2, lambda c: c in "0123456789abcdefABCDEF", True)
        else:
            i = self.take_digits(i + 1, is_digit, False)
            if self.get(i) == ".":
                i += 1
                if is_digit(self.get(i)):
                    i = self.take_digits(i, is_digit, False)
            if self.get(i) in "eE" and i < self.n:
                i += 1
                if self.get(i) in "-+":
                    i += 1
                if not is_digit(self.get(i)):
                    raise _Error(i)
                i = self.take_digits(i, is_digit, False)
        self.out.append(("num", start, i, self.s[start:i]))
        return i

    def raw_str(self, start: int, i: int) -> int:
        num = 0
        while self.get(i) == "#":
            num += 1
            i += 1
        i += 1  # the opening quote
        while True:
            if i >= self.n:
                raise _Error(start)
            curr = self.s[i]
            i += 1
            if curr == '"':
                closing = 0
                while closing < num and self.get(i) == "#":
                    closing += 1
                    i += 1
                if closing == num:
                    self.out.append(("str", start, i, self.s[start:i]))
                    return i

    def is_raw_str_lit_start(self, i: int) -> bool:
        while self.get(i) == "#":
            i += 1
        return self.get(i) == '"'

    # -- identifiers and tokens -------------------------------------------
    def match_prefix(self, i: int) -> str | None:
        best = None
        for tk in TOKENS:
            if self.s.startswith(tk, i) and (best is None or len(tk) > len(best)):
                best = tk
        return best

    def ident(self, start: int, tk: str | None, kind: str = "ident") -> int:
        i = start if kind == "ident" else start + 1
        while True:
            curr = self.get(i)
            if i < self.n and curr == "«":
                close = self.s.find("»", i + 1)
                if close < 0:
                    raise _Error(i + 1)
                i = close + 1
            elif i < self.n and is_id_first(curr):
                i += 1
                while i < self.n and is_id_rest(self.s[i]):
                    i += 1
            else:
                return self.token_or_error(start, tk)
            if (
                self.get(i) == "."
                and i + 1 < self.n
                and (is_id_first(self.s[i + 1]) or self.s[i + 1] == "«")
            ):
                i += 1
                continue
            if kind == "ident" and tk is not None and len(tk) >= i - start:
                return self.token_or_error(start, tk)
            self.out.append((kind, start, i, self.s[start:i]))
            return i

    def token_or_error(self, start: int, tk: str | None) -> int:
        if tk is None:
            raise _Error(start)
        self.out.append(("atom", start, start + len(tk), tk))
        return start + len(tk)

    def token(self, i: int) -> int:
        curr = self.s[i]
        if curr == '"':
            prev = self.out[-1][3] if self.out else ""
            if self.out and self.out[-1][0] == "atom" and prev in INTERPOLATING:
                return self.interpolated_str(i, i + 1)
            return self.str_lit(i, i + 1)
        if curr == "'" and self.get(i + 1) != "'":
            return self.char_lit(i, i + 1)
        if is_digit(curr):
            return self.number(i)
        if curr == "`" and (is_id_first(self.get(i + 1)) or self.get(i + 1) == "«"):
            return self.ident(i, None, "name")
        if curr == "r" and self.is_raw_str_lit_start(i + 1):
            return self.raw_str(i, i + 1)
        if self.s.startswith("/--", i) or self.s.startswith("/-!", i):
            i = self.whitespace(i + 3)
            return self.finish_comment_block(i, 1)
        return self.ident(i, self.match_prefix(i))


def read(text: str) -> tuple[list[tuple[str, int, int, str]], int | None]:
    """The tokens Lean's tokenizer reads, and where it first fails (or None)."""
    reader = _Reader(text)
    i = 0
    try:
        while True:
            i = reader.whitespace(i)
            if i >= reader.n:
                return reader.out, None
            i = reader.token(i)
    except _Error as error:
        return reader.out, error.pos


def read_recovering(text: str) -> list[list[tuple[str, int, int, str]]]:
    """`read`, resumed one character past each lexing error, as Lean's
    `parseCommand` resumes past a failed token (`consumeInput`): the tokens
    Lean may read, one list per stretch between errors (a construct does not
    span an error: the command it began failed there)."""
    segments: list[list[tuple[str, int, int, str]]] = []
    start = 0
    while start < len(text):
        found, error = read(text[start:])
        segments.append([(kind, s + start, e + start, value) for kind, s, e, value in found])
        if error is None:
            break
        start = error + start + 1
    return segments


def dangers(tokens) -> list[str]:
    """What the reference reads as code that runs (the policy's rules, applied
    to the reference's tokens)."""
    found = []
    for k, (kind, _start, _end, value) in enumerate(tokens):
        nxt = tokens[k + 1] if k + 1 < len(tokens) else None
        if kind == "atom" and value in REFUSED_COMMANDS:
            found.append(value)
        elif kind == "atom" and value.startswith("#") and len(value) > 1 and value != "#[":
            if value not in ALLOWED_HASH:
                found.append(value)
        elif kind == "atom" and value == "set_option":
            name = nxt[3].replace("«", "").replace("»", "") if nxt else ""
            if nxt is None or nxt[0] != "ident" or not _option_allowed(name):
                found.append(f"set_option {name}")
        elif kind == "atom" and (value == "@[" or (value == "attribute" and nxt and nxt[3] == "[")):
            rest = tokens[k + 1 :] if value == "@[" else tokens[k + 2 :]
            expect_name = True  # each instance's name: after `[` or `,`, `local`/`scoped`
            for inner in rest:
                if inner[3] == "]":
                    break
                if inner[3] == ",":
                    expect_name = True
                elif expect_name and inner[3] not in ("local", "scoped", "-"):
                    if inner[3] not in ALLOWED_ATTRIBUTES:
                        found.append(f"attribute {inner[3]}")
                    expect_name = False
    return found


def native_names(tokens) -> bool:
    return any(
        kind in ("ident", "atom")
        and value.replace("«", "").replace("»", "").rsplit(".", 1)[-1] in NATIVE_NAMES
        for kind, _s, _e, value in tokens
    )


def code_running(text: str) -> list[str]:
    """What Lean would run (or take natively) in `text`, as this reading
    finds it, recovery included: the constructs, or [] when none."""
    found: list[str] = []
    for tokens in read_recovering(text):
        found += dangers(tokens) + (["native"] if native_names(tokens) else [])
    return found
