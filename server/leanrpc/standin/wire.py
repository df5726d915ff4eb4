"""Input side of the protocol: the REPL's line reader and request decoding.

The reader is a faithful copy of the REPL's ``getLines``: it collects lines
until one that is blank after trimming ASCII whitespace, strips trailing
whitespace from every other line and glues them with no separator. The blank
line itself ends the text (so a stray blank line is the request ``"\\n"``);
at end of input the text collected so far is returned, ``""`` meaning EOF.
"""

from __future__ import annotations

import json
import re

from .jsonfmt import pretty

__all__ = ["Fatal", "read_request", "decode", "classify", "KINDS"]

_WS = b" \t\r\n"


class Fatal(Exception):
    """An uncaught exception: the process prints it on stderr and exits 1."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


def read_request(readline) -> bytes:
    parts = []
    while True:
        line = readline()
        if not line:
            return b"".join(parts)
        if not line.strip(_WS):
            parts.append(line)
            return b"".join(parts)
        parts.append(line.rstrip(_WS))


# Lean decodes each \uXXXX on its own and turns an unpaired surrogate into an
# invalid Char, i.e. U+0000; Python would combine pairs, so neutralise them
# first (only escapes preceded by an even number of backslashes are real).
_SURROGATE = re.compile(r"(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _reject_constant(name):
    raise ValueError(name)


def _json_error(text: str, e: json.JSONDecodeError) -> str:
    off = len(text[: e.pos].encode("utf-8"))
    msg = e.msg
    if e.pos >= len(text) or msg.startswith("Unterminated"):
        what = "unexpected end of input"
    elif msg.startswith("Extra data"):
        what = "expected end of input"
    elif msg.startswith("Invalid control character"):
        what = "unexpected control character"
    elif msg.startswith("Invalid \\escape") or msg.startswith("Invalid \\u"):
        what = "illegal escape sequence"
    else:
        what = "unexpected input"
    return f"offset {off}: {what}"


def _error_json(message: str) -> str:
    return pretty({"message": message})


def decode(text: str):
    """Parses the request text as Lean's JSON parser would, or raises Fatal."""
    if "\\u" in text or "\\U" in text:
        text2 = _SURROGATE.sub(lambda m: m.group(1) + "\\u0000", text)
    else:
        text2 = text
    try:
        return json.loads(text2, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise Fatal(_error_json("Could not parse JSON:\n" + _json_error(text2, e))) from None
    except (ValueError, RecursionError):
        raise Fatal(_error_json("Could not parse JSON:\noffset 0: unexpected input")) from None


def _nat(v) -> bool:
    return type(v) is int and v >= 0


def _opt(obj: dict, key: str, check) -> bool:
    v = obj.get(key)
    return v is None or check(v)


def _bool(v) -> bool:
    return type(v) is bool


def _str(v) -> bool:
    return type(v) is str


def _set_options(v) -> bool:
    if type(v) is not list:
        return False
    for item in v:
        if type(item) is not list or len(item) != 2:
            return False
        name, value = item
        if type(name) is not list or not all(type(x) is str for x in name):
            return False
        if type(value) not in (bool, int, str):
            return False
    return True


KINDS = ("tactic", "pickle_env", "unpickle_env", "pickle_ps", "unpickle_ps", "command", "file")


def _options_ok(obj: dict, fork: bool) -> str | None:
    if not _opt(obj, "env", _nat):
        return "env: expected a natural number"
    if not _opt(obj, "allTactics", _bool):
        return "allTactics: expected a boolean"
    if not _opt(obj, "rootGoals", _bool):
        return "rootGoals: expected a boolean"
    if not _opt(obj, "infotree", _str):
        return "infotree: expected a string"
    if fork:
        if not _opt(obj, "incrementality", _bool):
            return "incrementality: expected a boolean"
        if not _opt(obj, "declarations", _bool):
            return "declarations: expected a boolean"
        if not _opt(obj, "setOptions", _set_options):
            return "setOptions: expected an array of [name, value] pairs"
    return None


def classify(obj, fork: bool) -> str:
    """Tries the request shapes in the REPL's order; returns the kind name."""
    if type(obj) is not dict:
        raise Fatal(_error_json("Could not parse as a valid JSON command:\nexpected a JSON object"))
    g = obj.get
    ps = g("proofState")
    if _nat(ps) and _str(g("tactic")):
        return "tactic"
    pickle_to = g("pickleTo")
    if _nat(g("env")) and _str(pickle_to):
        return "pickle_env"
    if _str(g("unpickleEnvFrom")):
        return "unpickle_env"
    if _nat(ps) and _str(pickle_to):
        return "pickle_ps"
    if _str(g("unpickleProofStateFrom")) and _opt(obj, "env", _nat):
        return "unpickle_ps"
    reason = _options_ok(obj, fork)
    if _str(g("cmd")) and reason is None:
        return "command"
    if _str(g("path")) and reason is None:
        return "file"
    if reason is None:
        reason = "property not found: path"
    raise Fatal(_error_json("Could not parse as a valid JSON command:\n" + reason))
