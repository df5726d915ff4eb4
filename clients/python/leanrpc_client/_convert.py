"""Conversions between the protobuf messages and the client's types.

Owns: pb <-> dataclass conversion (the contract's prefixed enum names,
`STATUS_VALID`, become the client's own, "VALID"; Durations become float
seconds), option building, snippet normalisation, and the header hash sent as
routing metadata. May import: _proto, _types, protobuf.
"""

from __future__ import annotations

import collections
import difflib
import functools
import hashlib
import inspect
from typing import Iterable

from google.protobuf import duration_pb2

from ._proto import pb
from ._types import (
    Checks,
    Declaration,
    Message,
    ReferenceCheck,
    Result,
    SessionResult,
    Tactic,
    TacticStep,
)

# pb.STATUS_VALID -> "VALID", pb.SEVERITY_ERROR -> "ERROR" (the client's names).
_STATUS_NAMES = {v: k.removeprefix("STATUS_") for k, v in pb.Status.items()}
_SEVERITY_NAMES = {v: k.removeprefix("SEVERITY_") for k, v in pb.Severity.items()}
_INFOTREE = {
    None: pb.INFOTREE_MODE_UNSPECIFIED,
    "original": pb.INFOTREE_MODE_ORIGINAL,
    "substantive": pb.INFOTREE_MODE_SUBSTANTIVE,
    "tactics": pb.INFOTREE_MODE_TACTICS,
    "full": pb.INFOTREE_MODE_FULL,
}
# Request metadata a header-hash balancer (Envoy ring hash) routes on, so one
# import header keeps reaching the replicas that hold it warm (docs/DEPLOY.md).
HEADER_HASH_KEY = "x-leanrpc-header-hash"


def header_hash(code: str) -> str:
    """sha256 of the leading `import` lines (stripped, joined by newlines), 16 hex digits.

    The rule is defined in proto/leanrpc/v1/verifier.proto (header comment);
    proto/leanrpc/v1/header_hash_vectors.json holds the test vectors that this
    function, the Node client and the server are tested against.
    """
    imports = []
    for raw in code.split("\n"):
        line = raw.strip()
        if not line or line.startswith("--"):
            continue
        if not line.startswith("import "):
            break
        imports.append(line)
    return hashlib.sha256("\n".join(imports).encode()).hexdigest()[:16]


def _header_metadata(codes: Iterable[str]) -> tuple[tuple[str, str], ...]:
    # A call carries one key: the batch's most common header decides.
    counts = collections.Counter(header_hash(code) for code in codes)
    return ((HEADER_HASH_KEY, counts.most_common(1)[0][0]),) if counts else ()


def seconds(duration: duration_pb2.Duration) -> float:
    return duration.ToNanoseconds() / 1e9


def duration(seconds_: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds_ * 1e9))
    return out


def result_from_pb(r: pb.Result) -> Result:
    return Result(
        id=r.id,
        status=_STATUS_NAMES.get(r.status, str(r.status)),
        messages=[
            Message(
                severity=_SEVERITY_NAMES.get(m.severity, str(m.severity)),
                line=m.start.line,
                column=m.start.column,
                end_line=m.end.line if m.HasField("end") else None,
                end_column=m.end.column if m.HasField("end") else None,
                text=m.text,
            )
            for m in r.messages
        ],
        sorries=[
            {"line": s.start.line, "column": s.start.column, "goal": s.goal} for s in r.sorries
        ],
        error=r.error,
        time_total_s=seconds(r.timings.total),
        time_queue_s=seconds(r.timings.queue),
        time_header_s=seconds(r.timings.header),
        time_body_s=seconds(r.timings.body),
        time_boot_s=seconds(r.timings.boot),
        warm_header=r.reuse.warm_header,
        reused_prefix_chars=r.reuse.reused_prefix_chars,
        attempts=r.reuse.attempts,
        verifier=r.verifier.kind,
        verifier_description=r.verifier.description,
        infotree_json=r.infotree_json,
        axioms=list(r.axioms),
        worker=r.reuse.worker,
        cache_source=r.reuse.cache_source,
        original_run=r.reuse.original_run,
        retry_after_s=seconds(r.retry_after) if r.HasField("retry_after") else None,
        reference=_reference_from_pb(r.reference) if r.HasField("reference") else None,
        judge=_JUDGE_NAMES.get(r.judge.level, str(r.judge.level)) if r.HasField("judge") else "",
        checks=_checks_from_pb(r.checks) if r.HasField("checks") else None,
        tactics=[
            Tactic(
                text=t.text,
                line=t.start.line,
                column=t.start.column,
                end_line=t.end.line if t.HasField("end") else None,
                end_column=t.end.column if t.HasField("end") else None,
                goals=t.goals,
                used_constants=list(t.used_constants),
            )
            for t in r.tactics
        ],
        root_goals=[
            {"line": s.start.line, "column": s.start.column, "goal": s.goal} for s in r.root_goals
        ],
        declarations_json=r.declarations_json,
    )


def _checks_from_pb(checks) -> Checks:
    def level(value: int) -> str:
        return pb.CheckLevel.Name(value).removeprefix("CHECK_LEVEL_")

    return Checks(
        policy=checks.policy,
        axioms=level(checks.axioms),
        statement=level(checks.statement),
        judge=level(checks.judge),
    )


_JUDGE_NAMES = {0: "NOT_RUN", 1: "ACCEPTED", 2: "REFUSED", 3: "TIMEOUT", 4: "FAILED"}


def _reference_from_pb(check) -> ReferenceCheck:
    name = pb.ReferenceReason.Name(check.reason).removeprefix("REFERENCE_REASON_")
    return ReferenceCheck(
        passed=check.passed,
        reason="" if name == "UNSPECIFIED" else name,
        declaration=check.declaration,
        detail=check.detail,
        declarations=list(check.declarations),
        cached_reference=check.cached_reference,
    )


def session_result_from_pb(r: pb.OpenSessionResponse | pb.RunInSessionResponse) -> SessionResult:
    return SessionResult(
        session=r.session,
        env=r.env if r.HasField("env") else None,
        result=result_from_pb(r.result),
        replayed_commands=r.replayed_commands,
        profile=r.profile,
    )


def _options(
    timeout_s: float,
    infotree: str | None,
    reuse: bool,
    check_axioms: bool | None,
    session: str = "",
    profile: str = "",
    cache: bool | None = None,
    *,
    all_tactics: bool = False,
    root_goals: bool = False,
    declarations: bool = False,
) -> pb.VerifyOptions:
    if infotree not in _INFOTREE:
        raise ValueError(f"infotree must be one of {sorted(k for k in _INFOTREE if k)}")
    options = pb.VerifyOptions(
        infotree=_INFOTREE[infotree],
        reuse=reuse,
        session=session,
        profile=profile,
        all_tactics=all_tactics,
        root_goals=root_goals,
        declarations=declarations,
    )
    if check_axioms is not None:  # unset = the server's default ([axioms] check, on)
        options.check_axioms = check_axioms
    if cache is not None:  # unset = the server's result cache if it has one
        options.cache = cache
    if timeout_s:
        options.timeout.CopyFrom(duration(timeout_s))
    return options


def _as_snippets(snippets: Iterable) -> list[tuple[str, str]]:
    out = []
    for index, item in enumerate(snippets):
        if isinstance(item, str):
            out.append((str(index), item))
        elif isinstance(item, dict):
            out.append((str(item.get("id", index)), _dict_code(index, item)))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            snippet_id, code = item
            out.append((str(snippet_id), _text(f"snippet {index}'s code", code)))
        else:
            raise TypeError(
                f"snippet {index} is a {type(item).__name__}; give a str, an (id, code) pair "
                'or a {"id": ..., "code": ...} dict'
            )
    return out


# Keys other Lean servers use for the code (Kimina's REST body `proof`,
# LeanInteract's `cmd`): named in the error so the slip is fixed at once.
_CODE_ALIASES = ("proof", "cmd", "snippet", "text", "lean")


def _dict_code(index: int, item: dict) -> str:
    if "code" in item:
        return _text(f'snippet {index}\'s "code"', item["code"])
    alias = next((key for key in _CODE_ALIASES if key in item), None)
    hint = f' (its "{alias}" is the code? name it "code")' if alias else ""
    raise TypeError(
        f'snippet {index} is a dict without a "code" key{hint}; a dict snippet is '
        f'{{"id": ..., "code": ...}}, got the keys {sorted(map(str, item))}'
    )


def _text(what: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    return value


def snippet_list(snippets, method: str) -> list:
    """The snippets as a list; a bare str (or bytes) is refused, since
    iterating it would send each character as its own snippet (issue 38)."""
    if isinstance(snippets, (str, bytes, bytearray)):
        raise TypeError(
            f"{method}() takes a list of snippets, not one {type(snippets).__name__}: "
            f"write {method}([code]) to verify a single snippet"
        )
    if isinstance(snippets, dict):
        raise TypeError(
            f"{method}() takes a list of snippets, not one dict: write {method}([snippet])"
        )
    try:
        return list(snippets)
    except TypeError:
        raise TypeError(
            f"{method}() takes a list of snippets, not {type(snippets).__name__}"
        ) from None


def keywords_checked(method):
    """Decorates a client coroutine method: a keyword it does not take is a
    TypeError that names the one meant, before anything is sent."""
    allowed = [
        name
        for name, param in inspect.signature(method).parameters.items()
        if param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD) and name != "self"
    ]

    @functools.wraps(method)
    async def checked(self, *args, **kwargs):
        check_keywords(method.__name__, allowed, kwargs)
        return await method(self, *args, **kwargs)

    return checked


def check_keywords(method, allowed: Iterable[str], given: Iterable[str]) -> None:
    """A TypeError naming the keyword meant (`timeout=` -> `timeout_s=`),
    instead of Python's bare "unexpected keyword argument"."""
    allowed = list(allowed)
    for key in given:
        if key in allowed:
            continue
        meant = _MEANT.get(key) or next(iter(difflib.get_close_matches(key, allowed, 1)), None)
        hint = f"; did you mean {meant}=?" if meant in allowed else ""
        raise TypeError(f"{method}() got an unexpected keyword argument {key!r}{hint}")


# Slips the spelling distance does not find: other clients' names.
_MEANT = {
    "timeout": "timeout_s",
    "deadline": "deadline_s",
    "max_workers": "window",
    "batch_size": "window",
    "reference": "references",
    "show_progress": "progress",
    "use_cache": "cache",
}


def _as_pinned(
    snippets: Iterable, references, method: str = "verify"
) -> tuple[list[tuple[str, str]], list[str]]:
    """(id, code) pairs and each snippet's reference ("" = not pinned).

    A dict snippet may carry its own "reference"; `references`, when given,
    is one reference text per snippet, in order ("" or None: not pinned).
    """
    snippets = snippet_list(snippets, method)
    items = _as_snippets(snippets)
    refs = [(item.get("reference") or "") if isinstance(item, dict) else "" for item in snippets]
    if references is not None:
        if isinstance(references, str):
            raise TypeError(
                "references takes one reference per snippet, not one str: "
                "write references=[reference] * len(snippets) to pin them all to it"
            )
        references = list(references)
        if len(references) != len(items):
            raise ValueError(
                f"{len(references)} references for {len(items)} snippets: give one per snippet"
            )
        refs = [r or "" for r in references]
    return items, refs


def declarations_from_pb(declarations) -> list[Declaration]:
    return [
        Declaration(
            name=d.name,
            steps=[
                TacticStep(
                    text=s.text,
                    start=(s.start.line, s.start.column),
                    end=(s.end.line, s.end.column),
                    goals_before=list(s.goals_before),
                    goals_after=list(s.goals_after),
                    kind=s.kind,
                )
                for s in d.steps
            ],
        )
        for d in declarations
    ]
