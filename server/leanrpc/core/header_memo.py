"""Header splits reused across snippets that share their head (issue 38 item 6).

Owns: `HeaderMemo`, a few recent header splits, each kept with the leading
characters that decided it (`decided_by`, which lives beside the splitter in
core/headers_py.py because it follows the splitter's reads). A text that
starts with those characters, and is longer (and closes the doc comment
that follows its preamble, where that decided the split), gets the same
header and preamble with its own body, without being split again: a GRPO
group's completions of one problem, and a batch of problems under one
header, share their imports, options and opens, so the split (about 110 µs
per miniF2F snippet in the compiled splitter) runs once per header, not once
per snippet. Where `decided_by` is not certain (0),
nothing is kept and every such text is split afresh.

Not a cache of answers: the split it returns is the one `split_header` gives
(tests/headers/test_header_memo.py holds the two equal on the real proofs and
on fuzzed texts cut after the deciding characters). May import:
leanrpc.core.headers.
"""

from __future__ import annotations

import dataclasses

from .headers import HeaderSplit, decided_by, doc_closes, split_header

__all__ = ["HeaderMemo"]

# A split is kept only when the characters that decided it are at most this many.
_MAX_PREFIX = 8192


class HeaderMemo:
    """`split(code)` as `split_header(code)`, reusing one of the last `size` splits."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        # (the deciding characters, the split without its body, the body's offset in the
        # text, where a doc comment that must close opens or -1), most recent first: an
        # entry holds at most `_MAX_PREFIX` characters of a snippet, never its whole body.
        self._kept: list[tuple[str, HeaderSplit, int, int]] = []
        self.reused = 0

    def split(self, code: str) -> HeaderSplit:
        kept = self._kept
        for index, (prefix, split, start, doc) in enumerate(kept):
            if (
                len(code) > len(prefix)
                and code.startswith(prefix)
                and (doc < 0 or doc_closes(code, doc))
            ):
                self.reused += 1
                if index:
                    kept.insert(0, kept.pop(index))
                return HeaderSplit(
                    split.imports,
                    split.import_key,
                    split.modules,
                    split.preamble,
                    split.preamble_key,
                    code[start:],
                    split.body_start_line,
                    split.body_start_column,
                )
        split = split_header(code)
        decided, doc = decided_by(code, split)
        if 0 < decided <= _MAX_PREFIX:
            start = len(code) - len(split.body)
            kept.insert(0, (code[:decided], dataclasses.replace(split, body=""), start, doc))
            del kept[self._size :]
        return split
