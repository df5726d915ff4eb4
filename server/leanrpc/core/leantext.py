"""Where a Lean block comment or string literal ends, for the readers that
skip over them (the extractor, the stand-in, the well-formedness check),
read by the one lexer (leanrpc.core.lexer's `comment_end`, Lean's
`finishCommentBlock`; leanrpc.core.literals' `plain_string_end`, Lean's
`strLitFnAux`). Where Lean would stop with an error, these read on as Lean's
error recovery leaves the text: an unterminated comment or string runs to the
end, and an invalid escape is read past.

No state, nothing but core's lexer: the stand-in imports it too.
May import: leanrpc.core.lexer, leanrpc.core.literals.
"""

from __future__ import annotations

from .lexer import comment_end
from .literals import LexError, plain_string_end

__all__ = ["block_comment_end", "find_block_comment_end", "string_literal_end"]


def find_block_comment_end(text: str, start: int) -> int:
    """Index just past the `-/` closing the `/-` at `start` (comments nest),
    or -1 if the comment is not closed."""
    try:
        return comment_end(text, start, start + 2)
    except LexError:
        return -1


def block_comment_end(text: str, start: int) -> int:
    """Like find_block_comment_end, but an unterminated comment runs to the
    end of the text, as in Lean's error recovery."""
    end = find_block_comment_end(text, start)
    return len(text) if end < 0 else end


def string_literal_end(text: str, start: int) -> int:
    """Index just past the `"` closing the string literal opened at `start`.

    An invalid escape (Lean's error) is read past, its backslash and the
    character after it; an unterminated string runs to the end of the text.
    """
    pos = start
    while True:
        try:
            return plain_string_end(text, pos)
        except LexError as error:
            if error.offset == pos:  # unterminated (reported at the opening quote)
                return len(text)
            # Resume as if the character before the next one to read opened
            # the string: past an invalid escape, or at a gap's extra newline.
            pos = error.offset + 1 if text[error.offset] == "\\" else error.offset - 1
