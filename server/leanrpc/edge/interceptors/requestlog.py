"""The request log: one line per finished gRPC call a person can read.

    Verify from peer:ipv4:127.0.0.1: 3 snippets (VALID 2, INVALID 1) OK in 41 ms

The line names the RPC, the client identity (edge/identity.py: the
hashed token when tokens are checked, else the peer host), the number of
snippet results sent with their counts per status, the final code and the
milliseconds. Health checks log at DEBUG (probes would drown the rest). The
fields also go out as `extra=`, so `--log-json` lines carry them as keys.

May import: grpc, protobuf descriptors, leanrpc.edge.identity,
leanrpc.edge.interceptors.{wrap,metrics}.
"""

from __future__ import annotations

import collections
import logging
import time

from ..identity import CallerIdentity
from .metrics import final_code
from .wrap import CallWrapper

log = logging.getLogger("leanrpc.requests")

_RESULT_FIELDS = {
    "leanrpc.v1.VerifyResponse": "results",
    "leanrpc.v1.VerifyStreamResponse": "result",
    "leanrpc.v1.ExtractResponse": "result",
}


def status_name(result) -> str:
    enum = result.DESCRIPTOR.fields_by_name["status"].enum_type
    value = enum.values_by_number.get(result.status)
    return value.name.removeprefix("STATUS_") if value is not None else str(result.status)


def describe_counts(counts: collections.Counter) -> str:
    total = sum(counts.values())
    if not counts:
        return ""
    parts = ", ".join(
        f"{status} {n}" for status, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return f"{total} snippet{'s' if total != 1 else ''} ({parts}) "


class RequestLogInterceptor(CallWrapper):
    """Logs each finished call: RPC, identity, snippet counts by status, code, ms."""

    def __init__(self, tokens_checked: bool) -> None:
        self._identity = CallerIdentity(tokens_checked=tokens_checked)

    async def enter(self, details, context):
        # The identity is read now: after a streaming call has finished, grpc's
        # context.peer()/invocation_metadata() may touch freed call state (a
        # SIGSEGV was seen in exit(), after an UNAUTHENTICATED call).
        try:
            who = self._identity.of_call(context)
        except Exception:  # a context without a peer (cancelled early)
            who = "unknown"
        return details.method, time.perf_counter(), collections.Counter(), who

    def sent(self, token, response) -> None:
        field = _RESULT_FIELDS.get(response.DESCRIPTOR.full_name)
        if field is None:
            return
        counts = token[2]
        if field == "results":
            for result in response.results:
                counts[status_name(result)] += 1
        elif response.HasField(field):
            counts[status_name(getattr(response, field))] += 1

    def exit(self, token, context, error) -> None:
        method, started, counts, who = token
        level = logging.DEBUG if method.startswith("/grpc.health.") else logging.INFO
        if not log.isEnabledFor(level):
            return
        rpc = method.rpartition("/")[2] or method
        code = final_code(context, error)
        ms = (time.perf_counter() - started) * 1000
        log.log(
            level,
            "%s from %s: %s%s in %.0f ms",
            rpc,
            who,
            describe_counts(counts),
            code,
            ms,
            extra={
                "rpc": rpc,
                "door": "grpc",
                "client": who,
                "snippets": sum(counts.values()),
                "outcomes": dict(counts),
                "code": code,
                "ms": round(ms, 1),
            },
        )
