"""leanrpc.core: the bottom layer, free of I/O, asyncio, grpc and logging.

    framing  REPL stdout bytes -> frames -> dicts; requests -> bytes
    headers  snippet -> imports / preamble / body
    trie     prefix trie over command texts (reuse of REPL work)
    leantext where Lean comments and string literals end (read by the lexer)
    lexer    Lean's tokenizer ported (Basic.lean): the code policy's reading
    literals its literal readers (numbers, strings, escapes, chars)

Each facade module loads its compiled twin from leanrpc._native and exposes
IMPLEMENTATION ("native" or "python"); the pure-Python twins (*_py) load
only under LEANRPC_NO_EXTENSIONS=1. Log IMPLEMENTATION at startup.

Owns: the pure building blocks every higher room shares (framing, header
split, prefix trie, Lean text scanning) and the choice of twin.
May import: leanrpc._native, leanrpc.errors and the standard library; never
asyncio, grpc or logging (STYLE.md lesson 1).
"""

from . import framing, headers, trie

NATIVE_ACTIVE = all(module.IMPLEMENTATION == "native" for module in (framing, headers, trie))

__all__ = ["NATIVE_ACTIVE", "framing", "headers", "trie"]
