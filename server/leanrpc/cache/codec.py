"""One cache entry as bytes: a verdict, where it came from, lz4-compressed.

Owns the entry format; imports only the result types. Every store (memory,
disk, Redis) holds these bytes, so an entry moves between stores unchanged.

Layout: the 4-byte magic `LRC1`, then an lz4 frame (with content checksum) of
a msgpack array: key, run id, store time, body seconds, the verdict, and the
provenance (server boot, worker, its pid, code policy; absent in entries
written before it existed, which decode with `provenance` None). The key
inside is checked on read, so a file or Redis value under the wrong name is a
miss, never someone else's answer. Anything that does not decode raises
`CorruptEntry`; callers turn that into a miss with a warning.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import lz4.frame
import msgspec

from ..results import (
    Message,
    ReuseInfo,
    SorryInfo,
    Status,
    TacticInfo,
    Timings,
    VerifierIdentity,
    VerifyResult,
)

MAGIC = b"LRC1"


class CorruptEntry(ValueError):
    """Bytes that are not a whole, valid entry for the expected key."""


class _Verdict(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    status: Status
    messages: list[Message]
    sorries: list[SorryInfo]
    error: str
    infotree: Any  # the decoded infotree (dict or list), None when not asked for
    axioms: list[str]
    verifier: VerifierIdentity | None
    # The REPL command options' answers (issue 41); their options are in the
    # key. Defaults at the end: entries stored before them still decode.
    tactics: list[TacticInfo] = []
    root_goals: list[SorryInfo] = []
    declarations: Any = None


class Provenance(msgspec.Struct, array_like=True, forbid_unknown_fields=True, frozen=True):
    """Who produced an entry: the server (a random id per start), the worker
    (its name is unique within one server start) and that process's pid, and
    the code policy the snippet ran under ("proof" unless told otherwise)."""

    server: str
    worker: str
    pid: int = 0
    policy: str = "proof"


class _Entry(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    key: str
    run: str
    stored_at: float
    body_s: float
    verdict: _Verdict
    provenance: Provenance | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CachedVerdict:
    """A decoded entry: enough to answer any caller of the same key."""

    key: str
    run: str  # id of the elaboration that produced it
    stored_at: float  # Unix time
    body_s: float  # how long the original body took
    result: VerifyResult  # id "" and zero timings: the caller fills its own
    provenance: Provenance | None = None

    def answer(self, snippet_id: str, *, source: str, total_s: float) -> VerifyResult:
        """A fresh result for one caller: its id, its time, the cache's word on reuse."""
        return verdict_copy(self.result, snippet_id, source=source, run=self.run, total_s=total_s)


def verdict_copy(
    original: VerifyResult, snippet_id: str, *, source: str, run: str, total_s: float
) -> VerifyResult:
    """`original`'s verdict for another caller: its id and time, the cache's word on reuse."""
    return VerifyResult(
        id=snippet_id,
        status=original.status,
        messages=list(original.messages),
        sorries=list(original.sorries),
        timings=Timings(total_s=total_s),
        reuse=ReuseInfo(cache_source=source, original_run=run),
        verifier=original.verifier,
        error=original.error,
        infotree=original.infotree,
        axioms=list(original.axioms),
        tactics=list(original.tactics),
        root_goals=list(original.root_goals),
        declarations=original.declarations,
    )


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Entry)


def encode(
    key: str, run: str, stored_at: float, result: VerifyResult, provenance: Provenance | None = None
) -> bytes:
    verdict = _Verdict(
        status=result.status,
        messages=result.messages,
        sorries=result.sorries,
        error=result.error,
        infotree=result.infotree,
        axioms=result.axioms,
        verifier=result.verifier,
        tactics=result.tactics,
        root_goals=result.root_goals,
        declarations=result.declarations,
    )
    entry = _Entry(
        key=key,
        run=run,
        stored_at=stored_at,
        body_s=result.timings.body_s,
        verdict=verdict,
        provenance=provenance,
    )
    return MAGIC + lz4.frame.compress(_encoder.encode(entry), content_checksum=True)


def decode(data: bytes, expected_key: str) -> CachedVerdict:
    if not data.startswith(MAGIC):
        raise CorruptEntry("not a leanrpc cache entry (bad magic)")
    try:
        entry = _decoder.decode(lz4.frame.decompress(data[len(MAGIC) :]))
    except (RuntimeError, ValueError, msgspec.DecodeError) as exc:  # lz4 raises RuntimeError
        raise CorruptEntry(f"entry does not decode: {exc}") from exc
    if entry.key != expected_key:
        raise CorruptEntry("entry belongs to another key")
    verdict = entry.verdict
    result = VerifyResult(
        id="",
        status=verdict.status,
        messages=verdict.messages,
        sorries=verdict.sorries,
        error=verdict.error,
        infotree=verdict.infotree,
        axioms=verdict.axioms,
        verifier=verdict.verifier,
        tactics=verdict.tactics,
        root_goals=verdict.root_goals,
        declarations=verdict.declarations,
        timings=Timings(body_s=entry.body_s),
    )
    return CachedVerdict(
        key=entry.key,
        run=entry.run,
        stored_at=entry.stored_at,
        body_s=entry.body_s,
        result=result,
        provenance=entry.provenance,
    )
