"""The REPL wire protocol: typed requests out, typed responses in.

Owns: the request structs (`CommandRequest`, `FileRequest`, `TacticRequest`,
`PickleRequest`, `UnpickleRequest`) and the only functions that build them
(`command`, `tactic`, `file_request`, `pickle_to`, `unpickle_from`: no other
module builds a REPL request, tests/arch checks it),
`encode` (one request -> bytes ending in exactly one blank line), the response
structs (`Response`, `ReplMessage`, `ReplSorry`, `ReplTactic`) and `decode` (one frame cut by
`core.framing.FrameDecoder` -> `Response`, shape-checked by msgspec).
May import: msgspec, leanrpc.errors, leanrpc.core.framing. Nothing above
(worker, pool, services) and no asyncio.

Why msgspec structs and not `json.loads`: one pass decodes, validates the
shape (an `env` that is not a natural number, a message without text, a
top-level array are protocol errors, not KeyErrors later) and skips the dict
building; benchmarks/studies/fence_bench.py measures it against `json.loads` on
typical frames (see benchmarks/RESULTS.md). Unknown keys are ignored, as the
REPL itself ignores them (REPL-PROTOCOL.md section 4.1), so a newer REPL or the
fork's extra fields (`declarations`) do not break decoding.

Requests are encoded with msgspec too: compact, one line, raw UTF-8 (the REPL
garbles surrogate-pair escapes, REPL-PROTOCOL.md section 2), fields left out
when unset (`omit_defaults`), then exactly one blank line.
"""

from __future__ import annotations

import re
from typing import Any, Union

import msgspec

from ..core.framing import encode_request as _encode_dict
from ..errors import FrameDecodeError, InternalError, RequestError

__all__ = [
    "CommandRequest",
    "FileRequest",
    "PickleRequest",
    "Pos",
    "ReplMessage",
    "ReplSorry",
    "ReplTactic",
    "Request",
    "Response",
    "TacticRequest",
    "UnpickleRequest",
    "command",
    "decode",
    "encode",
    "file_request",
    "pickle_to",
    "tactic",
    "unpickle_from",
]

# -- requests ------------------------------------------------------------------


class CommandRequest(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """`{"cmd": …, "env"?: n, …}` (REPL-PROTOCOL.md section 4.2)."""

    cmd: str
    env: Union[int, None] = None
    infotree: Union[str, None] = None
    all_tactics: bool = False
    root_goals: bool = False
    # Fork-only fields (section 11); upstream ignores them.
    incrementality: bool = False
    declarations: bool = False
    set_options: Union[list, None] = None


class FileRequest(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """`{"path": …, "env"?: n}`: the fence uses it (an unreadable path is
    answered `{"message": "<IO error naming the path>"}` and allocates no id)."""

    path: str
    env: Union[int, None] = None


class TacticRequest(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """`{"tactic": …, "proofState": n}` (section 4.4)."""

    tactic: str
    proof_state: int


class PickleRequest(msgspec.Struct, rename="camel", kw_only=True):
    """`{"proofState": n, "pickleTo": path}` (section 9)."""

    proof_state: int
    pickle_to: str


class UnpickleRequest(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """`{"unpickleProofStateFrom": path, "env"?: n}` (section 9)."""

    unpickle_proof_state_from: str
    env: Union[int, None] = None


Request = Union[CommandRequest, FileRequest, TacticRequest, PickleRequest, UnpickleRequest]

_ENCODER = msgspec.json.Encoder()


def command(
    cmd: str,
    env: int | None = None,
    *,
    infotree: str | None = None,
    incrementality: bool = False,
    elab_async: bool = False,
    declarations: bool = False,
    all_tactics: bool = False,
    root_goals: bool = False,
) -> CommandRequest:
    """The one way to build a command request (pool, sessions, services)."""
    return CommandRequest(
        cmd=cmd,
        env=env,
        infotree=infotree or None,
        all_tactics=all_tactics,
        root_goals=root_goals,
        incrementality=incrementality,
        declarations=declarations,
        set_options=[[["Elab", "async"], True]] if elab_async else None,
    )


def tactic(text: str, proof_state: int) -> TacticRequest:
    """A tactic on a REPL proof state."""
    return TacticRequest(tactic=text, proof_state=proof_state)


def file_request(path: str, env: int | None = None) -> FileRequest:
    return FileRequest(path=path, env=env)


def pickle_to(proof_state: int, path: str) -> PickleRequest:
    """Pickles a proof state into `path` (a path the REPL sees)."""
    return PickleRequest(proof_state=proof_state, pickle_to=path)


def unpickle_from(path: str, env: int | None = None) -> UnpickleRequest:
    """Unpickles the proof state pickled into `path`, on `env`."""
    return UnpickleRequest(unpickle_proof_state_from=path, env=env)


def encode(request: Request | dict) -> bytes:
    """One request as compact JSON on one line plus exactly one blank line.

    A plain dict is still accepted (callers not yet moved to the structs) and
    goes through `core.framing.encode_request`, which applies the same rules.

    Raises:
        RequestError: text that is not valid Unicode (lone surrogates).
    """
    if isinstance(request, dict):
        return _encode_dict(request)
    try:
        data = _ENCODER.encode(request)
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError) as exc:
        raise RequestError(f"request cannot be encoded as JSON: {exc}") from None
    if b"\n" in data:  # pragma: no cover - msgspec escapes newlines in strings
        raise InternalError("encoded request contains a raw newline")
    return data + b"\n\n"


# -- responses -----------------------------------------------------------------


class Pos(msgspec.Struct):
    line: int
    column: int


class ReplMessage(msgspec.Struct, rename="camel", omit_defaults=True):
    """A Lean message (section 5.2). Positions are relative to the command."""

    severity: str = "info"
    pos: Union[Pos, None] = None
    end_pos: Union[Pos, None] = None
    data: str = ""


class ReplSorry(msgspec.Struct, rename="camel", omit_defaults=True):
    """A sorry (section 5.3); tactic-mode sorries have no position."""

    pos: Union[Pos, None] = None
    end_pos: Union[Pos, None] = None
    goal: str = ""
    proof_state: Union[int, None] = None


class ReplTactic(msgspec.Struct, rename="camel", omit_defaults=True):
    """An `allTactics` entry (section 5.4); `usedConstants` since v4.14."""

    tactic: str = ""
    goals: str = ""
    pos: Union[Pos, None] = None
    end_pos: Union[Pos, None] = None
    proof_state: Union[int, None] = None
    used_constants: list[str] = []


class Response(msgspec.Struct, rename="camel", omit_defaults=True):
    """Any REPL answer: a command/file response, a tactic response, or a
    request-level error `{"message": …}` (then `env` is None)."""

    env: Union[int, None] = None
    message: Union[str, None] = None
    messages: list[ReplMessage] = []
    sorries: list[ReplSorry] = []
    tactics: list[ReplTactic] = []
    infotree: Any = None
    declarations: Any = None
    proof_state: Union[int, None] = None
    proof_status: Union[str, None] = None
    goals: Union[list[str], None] = None
    traces: list[str] = []

    @property
    def errors(self) -> list[ReplMessage]:
        return [m for m in self.messages if m.severity == "error"]

    def to_dict(self) -> dict:
        """The wire shape (keys as the REPL writes them, empty fields left out)."""
        return msgspec.to_builtins(self)

    # Deprecated dict-style reads, kept only until the pool and sessions read
    # attributes (their owners are moving them); wire key names.
    def get(self, key: str, default: Any = None) -> Any:
        name = _FIELD_BY_WIRE_KEY.get(key)
        value = getattr(self, name) if name is not None else None
        if value is None or value == []:
            return default
        if isinstance(value, list) and value and isinstance(value[0], msgspec.Struct):
            return msgspec.to_builtins(value)
        return value

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value


_FIELD_BY_WIRE_KEY = dict(zip(Response.__struct_encode_fields__, Response.__struct_fields__))


_RESPONSE_DECODER = msgspec.json.Decoder(Response)


def decode(frame: bytes) -> Response:
    """Parses one frame into a `Response`.

    Raises:
        FrameDecodeError: invalid UTF-8 or JSON, a top level that is not an
            object, or a known field of the wrong type (e.g. `"env": "3"`).
    """
    try:
        return _RESPONSE_DECODER.decode(frame)
    except msgspec.ValidationError as exc:
        raise FrameDecodeError(
            f"REPL frame has the wrong shape: {exc}", detail=_excerpt(frame)
        ) from None
    except msgspec.DecodeError as exc:
        raise FrameDecodeError(
            f"REPL frame is not valid JSON: {exc}", detail=_excerpt(frame)
        ) from None
    except RecursionError:
        # msgspec stops near Python's recursion limit (issue 44 item 4): the
        # frame is unusable, and its depth is the one fact worth logging.
        raise FrameDecodeError(
            f"REPL frame nests {nesting_depth(frame)} levels deep, deeper than the decoder goes "
            "(an infotree that deep cannot be read)",
            detail=_excerpt(frame),
        ) from None


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def nesting_depth(frame: bytes, scan: int = 1 << 20) -> str:
    """How deep JSON arrays and objects nest in `frame` (strings skipped), as
    text: "N", or "at least N" when the frame is longer than `scan` bytes.

    Only on the error path, and bounded: a regex drops strings from the first
    `scan` bytes, `translate` keeps the brackets, one loop counts them.
    """
    head = _STRING.sub(b"", bytes(frame[:scan])).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in head:
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return f"at least {deepest}" if len(frame) > scan else str(deepest)


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _excerpt(frame: bytes, limit: int = 200) -> str:
    head = bytes(frame[:limit])
    more = f" ... ({len(frame)} bytes)" if len(frame) > limit else ""
    return f"frame starts: {head!r}{more}"
