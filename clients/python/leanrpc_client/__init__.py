"""Python client for the leanrpc Verifier service.

    from leanrpc.client import Client          # inside the server's install
    from leanrpc_client import Client          # the client's own distribution
    with Client("127.0.0.1:50051") as client:
        results = client.verify(["import Mathlib\\ntheorem t : 1 + 1 = 2 := by norm_num"])
        print(results[0].status)            # "VALID"

`AsyncClient` has the same methods as coroutines. `verify` sends large lists
over one VerifyStream (bounded in-flight window), retries UNAVAILABLE and
RESOURCE_EXHAUSTED with exponential backoff, re-sends snippets the server
refused unrun (queue full, shutting down), and shows a progress bar when
asked (tqdm). `Client` is the blocking form: its own event loop on a private
thread, safe from several threads and inside a running loop.

Rooms: _types (results, ClientError), _convert (protobuf <-> types, header
hash), _retry (what is retried and when), prover (proof-state calls and a
best-first search helper, docs/PROVER.md), formalizer (formalize(): the
repair loop's events and result, docs/FORMALIZE.md), sessions (session calls),
aio (AsyncClient), sync (Client).
"""

from ._convert import HEADER_HASH_KEY, header_hash, result_from_pb, session_result_from_pb
from ._retry import MAX_BACKOFF_S, backoff_s, resend_hint_s
from ._types import (
    BatchSummary,
    Checks,
    ClientError,
    Declaration,
    Interrupted,
    Message,
    Result,
    SessionResult,
    Tactic,
    TacticStep,
    summarize,
)
from .aio import AsyncClient
from .formalizer import CandidateEvent, FormalizeResult, TokenEvent
from .prover import ProofStart, ProofState, SearchResult, TacticResult, best_first_search
from .sync import Client

__all__ = [
    "AsyncClient",
    "BatchSummary",
    "CandidateEvent",
    "FormalizeResult",
    "TokenEvent",
    "Checks",
    "Client",
    "ClientError",
    "Declaration",
    "HEADER_HASH_KEY",
    "Interrupted",
    "Message",
    "ProofStart",
    "ProofState",
    "Result",
    "SearchResult",
    "SessionResult",
    "Tactic",
    "TacticResult",
    "TacticStep",
    "best_first_search",
    "summarize",
    "header_hash",
    "resend_hint_s",
    "backoff_s",
    "MAX_BACKOFF_S",
    "result_from_pb",
    "session_result_from_pb",
]
