"""What the server holds for a proof's recorded text: the bytes the Prover's
registry charges (registry.py), as measured, not the text's length.
May import: pool (`str_bytes`, the width CPython stores a str in).
"""

from __future__ import annotations

from ...pool import str_bytes

__all__ = ["proof_bytes", "tactic_bytes"]

# What the server holds for a proof's recorded text, measured (issue 44 item 2:
# peak RSS of a real server process, tests/memory/test_proof_memory.py). Each
# text is held in its str's width (1, 2 or 4 bytes a character, PEP 393) some
# times over, plus (a proof's text) about a byte a character whatever the width.
# A proof's command and code: once each, plus a byte a character (ASCII
# measured 4.2x the code's UTF-8 size, charged 4x; 4-byte characters measured
# 2.5x, charged 2.5x). A tactic: TACTIC_COPIES times, less half a byte a
# character (ASCII measured 2.1-2.8 bytes a character, charged 2.5; 4-byte
# characters about 11.6, charged 11.5). Until each finished pool job was freed
# at once (pool/pool.py `_settle`), an ASCII tactic measured 4.1 bytes a
# character and was charged 4: the extra was the job cycles' garbage. Goals (the REPL's text) are counted by their UTF-8 size,
# not measured here.
PROOF_BYTES_PER_CHAR = 1
TACTIC_COPIES = 3
TACTIC_CHARS_PER_BYTE_OFF = 2  # half a byte a character off


def proof_bytes(command: str, code: str) -> int:
    """Bytes the server holds for a proof before any state: its command and its code."""
    return sum(str_bytes(t) + PROOF_BYTES_PER_CHAR * len(t) for t in (command, code))


def tactic_bytes(tactic: str) -> int:
    """Bytes the server holds for a state's tactic."""
    return TACTIC_COPIES * str_bytes(tactic) - len(tactic) // TACTIC_CHARS_PER_BYTE_OFF
