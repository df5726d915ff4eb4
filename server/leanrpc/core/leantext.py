"""Lean 4 lexical scanning shared by the extractor, the stand-in and the
well-formedness check: where a nested block comment or a string literal ends.

Stdlib only, no state: the stand-in imports it too.
"""

from __future__ import annotations


def find_block_comment_end(text: str, start: int) -> int:
    """Index just past the `-/` closing the `/-` at `start` (comments nest),
    or -1 if the comment is not closed."""
    depth = 0
    i, n = start, len(text)
    while i < n:
        if text.startswith("/-", i):
            depth += 1
            i += 2
        elif text.startswith("-/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return -1


def block_comment_end(text: str, start: int) -> int:
    """Like find_block_comment_end, but an unterminated comment runs to the
    end of the text, as in Lean's error recovery."""
    end = find_block_comment_end(text, start)
    return len(text) if end < 0 else end


def string_literal_end(text: str, start: int) -> int:
    """Index just past the `"` closing the string literal opened at `start`.

    Backslash escapes skip the next character; an unterminated string runs to
    the end of the text.
    """
    i, n = start + 1, len(text)
    while i < n and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return min(i + 1, n)
