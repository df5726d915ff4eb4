"""Kimina's JSON shapes: request decoding and result rendering, no I/O.

The shapes are those of kimina-ast-server 2.1.3 / kimina-ast-client 0.2.x
(`kimina_client.models`): `CheckRequest` -> `CheckResponse` for
`POST /api/check`, `VerifyRequestBody` -> `VerifyResponse` for the older
`POST /verify`, and FastAPI's `{"detail": ...}` for refused requests.

A `VerifyResult` is rendered so that Kimina's own classification
(`ReplResponse.analyze()`) gives the same verdict as leanrpc's status: a
SORRY always carries a `sorries` entry, a REJECTED never looks valid, a
TIMEOUT says "timed out". leanrpc's full result rides along under the
extension key `leanrpc`, which Kimina's pydantic models ignore.

May import: errors, results, services.reference (to validate and screen a
snippet's `reference`), services.verify (VerifyOptions), msgspec.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ..errors import NotServingError, OverloadedError, RequestError
from ..repl.outcome import STANDARD_AXIOMS
from ..results import Message, SorryInfo, Status, TacticInfo, VerifyResult, checks_of
from ..services.reference import screened_reference
from ..services.verify import VerifyOptions

EXTENSION_KEY = "leanrpc"

Infotree = Literal["full", "tactics", "original", "substantive"]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]


class Snippet(msgspec.Struct):
    id: str
    code: str
    # leanrpc's extension (issue 25): the problem's statement to pin to.
    reference: str = ""


class CheckRequest(msgspec.Struct):
    """`POST /api/check` (kimina_client.models.CheckRequest)."""

    snippets: list[Snippet]
    timeout: NonNegativeInt = 30
    debug: bool = False
    reuse: bool = True
    infotree: Infotree | None = None
    # leanrpc extension: `#print axioms` check (REJECTED on native_decide and
    # axioms outside `[axioms] allowed`, SORRY on sorryAx). Absent or null:
    # the server default (`[axioms] check`, on); false turns it off.
    check_axioms: bool | None = None
    # leanrpc extension, spelled as LeanInteract's Command spells them: the
    # REPL's command options (VerifyOptions.all_tactics / root_goals / declarations).
    all_tactics: bool = False
    root_goals: bool = False
    declarations: bool = False


class Code(msgspec.Struct):
    custom_id: str | int
    proof: str | None = None
    code: str | None = None


class VerifyRequestBody(msgspec.Struct):
    """`POST /verify` and `/one_pass_verify_batch` (kimina_client.models.VerifyRequestBody)."""

    codes: list[Code]
    timeout: NonNegativeInt = 300
    infotree_type: Infotree | None = None
    disable_cache: bool = False
    # leanrpc extension, as in CheckRequest: None = `[axioms] check` (on).
    check_axioms: bool | None = None


class RequestInvalid(Exception):
    """A body Kimina's server answers with 422; `detail` is FastAPI's error list."""

    def __init__(self, detail: list[dict[str, Any]]) -> None:
        super().__init__(detail[0]["msg"] if detail else "invalid request")
        self.detail = detail


def _invalid(kind: str, loc: list, msg: str) -> RequestInvalid:
    return RequestInvalid([{"type": kind, "loc": ["body", *loc], "msg": msg}])


def _loc(path: str) -> list:
    """msgspec's `$.snippets[0].id` -> FastAPI's ["snippets", 0, "id"]."""
    loc: list = []
    for part in path.removeprefix("$").replace("[", ".[").split("."):
        if not part:
            continue
        loc.append(int(part[1:-1]) if part.startswith("[") and part[1:-1].isdigit() else part)
    return loc


def _decode(body: bytes, model: type):
    if not body or body.isspace():  # not strip(): a copy of the whole body
        raise _invalid("missing", [], "Field required")
    try:
        return msgspec.json.decode(body, type=model, strict=False)
    except msgspec.ValidationError as exc:
        text, _, path = str(exc).partition(" - at `")
        raise _invalid("value_error", _loc(path.rstrip("`")), text) from None
    except msgspec.DecodeError as exc:
        raise _invalid("json_invalid", [], f"JSON decode error: {exc}") from None
    except RecursionError:  # nesting deeper than the decoder goes (about 1,000)
        raise _invalid("json_invalid", [], "JSON decode error: nested too deeply") from None


def decode_check(body: bytes) -> CheckRequest:
    request = _decode(body, CheckRequest)
    if not request.snippets:
        raise _invalid("value_error", [], "Value error, `snippets` must be non empty")
    if len({s.id for s in request.snippets}) != len(request.snippets):
        raise _invalid("value_error", [], "Value error, `snippets` must have unique ids")
    for index, snippet in enumerate(request.snippets):
        if snippet.reference:
            try:
                screened_reference(snippet.reference)
            except RequestError as exc:
                raise _invalid(
                    "value_error", ["snippets", index, "reference"], f"Value error, {exc.message}"
                ) from None
    return request


def decode_verify(body: bytes) -> VerifyRequestBody:
    request = _decode(body, VerifyRequestBody)
    for index, code in enumerate(request.codes):
        if code.proof is None and code.code is None:
            raise _invalid(
                "value_error",
                ["codes", index],
                f"Value error, snippet {code.custom_id!r} has no proof/code content",
            )
    return request


def check_items(request: CheckRequest) -> list[tuple[str, str, str]]:
    return [(s.id, s.code, s.reference) for s in request.snippets]


def verify_items(request: VerifyRequestBody) -> list[tuple[str, str, str]]:
    return [
        (str(c.custom_id), c.proof if c.proof is not None else c.code, "") for c in request.codes
    ]


def check_options(request: CheckRequest) -> VerifyOptions:
    # Kimina's timeout 0 means "no time at all"; leanrpc's 0 means the server default.
    return VerifyOptions(
        timeout_s=float(request.timeout),
        infotree=request.infotree,
        reuse=request.reuse,
        check_axioms=request.check_axioms,
        all_tactics=request.all_tactics,
        root_goals=request.root_goals,
        declarations=request.declarations,
    )


def verify_options(request: VerifyRequestBody) -> VerifyOptions:
    # disable_cache: neither the REPL's header reuse nor leanrpc's result cache.
    return VerifyOptions(
        timeout_s=float(request.timeout),
        infotree=request.infotree_type,
        reuse=not request.disable_cache,
        cache=not request.disable_cache,
        check_axioms=request.check_axioms,
    )


# ---- rendering -------------------------------------------------------------


def body_line_offset(code: str) -> int:
    """Lines before Kimina's body: leading lines that are blank or `import ...`."""
    count = 0
    for line in code.split("\n"):
        stripped = line.strip()
        if stripped and not stripped.startswith("import "):
            break
        count += 1
    return count


def _pos(line: int, column: int, shift: int) -> dict:
    return {"line": max(1, line - shift) if shift else line, "column": column}


def _message(m: Message, shift: int) -> dict:
    out = {"severity": m.severity.name.lower(), "pos": _pos(m.start.line, m.start.column, shift)}
    if m.end is not None:
        out["endPos"] = _pos(m.end.line, m.end.column, shift)
    out["data"] = m.text
    return out


def _sorry(s: SorryInfo, shift: int) -> dict:
    start = _pos(s.start.line, s.start.column, shift) if s.start else {"line": 1, "column": 0}
    end = _pos(s.end.line, s.end.column, shift) if s.end else start
    return {"pos": start, "endPos": end, "goal": s.goal}


def extension(result: VerifyResult) -> dict:
    """leanrpc's own verdict and provenance, under `leanrpc` in each result."""
    t, reuse = result.timings, result.reuse
    out: dict[str, Any] = {
        "status": result.status.name,
        "timings": {
            "queue_s": t.queue_s,
            "header_s": t.header_s,
            "body_s": t.body_s,
            "total_s": t.total_s,
            "boot_s": t.boot_s,
        },
        "reuse": {
            "warm_header": reuse.warm_header,
            "reused_prefix_chars": reuse.reused_prefix_chars,
            "worker": reuse.worker,
            "attempts": reuse.attempts,
        },
    }
    if (
        reuse.cache_source
    ):  # answered by leanrpc's result cache: "memory", "disk", "redis", "in-flight"
        out["reuse"]["cache_source"] = reuse.cache_source
        out["reuse"]["original_run"] = reuse.original_run
    if result.error:
        out["error"] = result.error
    if result.axioms:
        out["axioms"] = list(result.axioms)
    if result.reference is not None:
        r = result.reference
        out["reference"] = {
            "passed": r.passed,
            "reason": r.reason.name if r.reason else "",
            "declaration": r.declaration,
            "detail": r.detail,
            "declarations": list(r.declarations),
        }
    if result.judge is not None:
        out["judge"] = {
            "level": result.judge.level.name,
            "judge": result.judge.judge,
            "detail": result.judge.detail,
        }
    checks = checks_of(result, STANDARD_AXIOMS)
    out["checks"] = {
        "policy": checks.policy,
        "axioms": checks.axioms.name,
        "statement": checks.statement.name,
        "judge": checks.judge.name,
    }
    if result.verifier is not None:
        v = result.verifier
        out["verifier"] = {
            "kind": v.kind,
            "lean_version": v.lean_version,
            "repl_revision": v.repl_revision,
            "project_revision": v.project_revision,
            "description": v.description,
        }
    return out


def _infotree(result: VerifyResult):
    return result.infotree


def command_response(result: VerifyResult, shift: int) -> dict:
    """The REPL-shaped `response` (messages, sorries, infotree), or `{message}`.

    Kimina's `analyze()` must agree with `result.status`: errors make
    lean_error, sorries make sorry, `{message}` makes repl_error.
    """
    messages = [_message(m, shift) for m in result.messages]
    sorries = [_sorry(s, shift) for s in result.sorries]
    status = result.status
    if status is Status.REJECTED and not any(m["severity"] == "error" for m in messages):
        return {"message": result.error or "rejected"}
    check = result.reference
    if check is not None and not check.passed and status is Status.INVALID:
        # Lean reported no error, the statement check did: Kimina's analyze()
        # must see one to agree with INVALID.
        messages.append(
            {
                "severity": "error",
                "pos": {"line": 1, "column": 0},
                "data": f"leanrpc reference check: {check.reason.name} {check.declaration}: {check.detail}",
            }
        )
    if status is Status.SORRY and not sorries:
        # A sorry leanrpc saw (warning text, sorryAx) but the REPL listed none.
        at = next((m for m in messages if "sorry" in m["data"]), None)
        start = at["pos"] if at else {"line": 1, "column": 0}
        sorries = [{"pos": start, "endPos": at.get("endPos", start) if at else start, "goal": ""}]
    out: dict[str, Any] = {}
    if messages:
        out["messages"] = messages
    if sorries:
        out["sorries"] = sorries
    tree = _infotree(result)
    if tree is not None:
        out["infotree"] = tree
    # The command options' answers, as the REPL writes them; root goals are
    # kept out of `sorries` (the REPL mixes them in), so analyze() agrees with the status.
    if result.tactics:
        out["tactics"] = [_tactic(t, shift) for t in result.tactics]
    if result.root_goals:
        out["rootGoals"] = [_sorry(g, shift) for g in result.root_goals]
    if result.declarations is not None:
        out["declarations"] = result.declarations
    return out


def _tactic(t: TacticInfo, shift: int) -> dict:
    """An `allTactics` entry as the REPL answers it (REPL-PROTOCOL.md 5.4): an
    answer's shape, not a request (those are repl.protocol's alone)."""
    start = _pos(t.start.line, t.start.column, shift) if t.start else {"line": 1, "column": 0}
    end = _pos(t.end.line, t.end.column, shift) if t.end else start
    return dict(tactic=t.text, goals=t.goals, pos=start, endPos=end, usedConstants=t.used_constants)


def failure_text(result: VerifyResult, timeout_s: float) -> str | None:
    """Kimina's server-side `error` string, or None when the REPL answered."""
    status = result.status
    if status is Status.TIMEOUT:
        return f"Lean REPL command timed out in {timeout_s} seconds"
    if status in (Status.CRASH, Status.OUT_OF_MEMORY):
        return f"Snippet execution failed: {result.error or status.name}"
    if status is Status.CANCELLED:
        return f"Snippet cancelled: {result.error or 'cancelled'}"
    return None


def repl_response(result: VerifyResult, *, timeout_s: float, shift: int, debug: bool) -> dict:
    """One `ReplResponse`: exactly one of `error` and `response`, null fields left out."""
    out: dict[str, Any] = {"id": result.id}
    error = failure_text(result, timeout_s)
    if error is not None:
        out["time"] = timeout_s if result.status is Status.TIMEOUT else result.timings.body_s
        out["error"] = error
    else:
        out["time"] = result.timings.body_s
        out["response"] = command_response(result, shift)
    if debug:
        out["diagnostics"] = {"repl_uuid": result.reuse.worker}
    out[EXTENSION_KEY] = extension(result)
    return out


def expected_refusal(exc: Exception) -> bool:
    """A refusal the server means (overload, bad input, not serving), not a failure."""
    return isinstance(exc, (OverloadedError, RequestError, NotServingError))


def refusal_text(exc) -> str:
    """Kimina's error text for a snippet leanrpc refused with `exc`."""
    if isinstance(exc, OverloadedError):
        return f"No available REPLs: {exc.message}"
    if isinstance(exc, RequestError):
        return f"Rejected by leanrpc: {exc.message}"
    if isinstance(exc, NotServingError):
        return f"Not serving: {exc.message}"
    return f"Snippet execution failed: {exc.message}"


def refused_response(snippet_id: str, reason: str) -> dict:
    """A snippet leanrpc would not run (empty, too long, queue full): a server error for Kimina."""
    return {
        "id": snippet_id,
        "time": 0.0,
        "error": reason,
        EXTENSION_KEY: {"status": Status.REJECTED.name, "error": reason},
    }


def backward_response(check_result: dict) -> dict:
    """`/verify`'s `{custom_id, error?, response?}` with `time` folded into the response."""
    out: dict[str, Any] = {"custom_id": check_result["id"]}
    if "error" in check_result:
        out["error"] = check_result["error"]
    if "response" in check_result:
        out["response"] = {**check_result["response"], "time": check_result["time"]}
    out[EXTENSION_KEY] = check_result[EXTENSION_KEY]
    return out


def encode(payload: Any) -> bytes:
    return msgspec.json.encode(payload)
