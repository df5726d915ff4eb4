"""The REPL protocol in one place (STYLE.md lesson 16).

Owns: every REPL request the server builds (`protocol`: structs and
`encode`), every REPL answer it reads (`protocol.decode` into typed structs),
the probes and the fence (`probes`), and what an answer means for a snippet
(`outcome`: `classify`, messages, sorries, axioms).
May import: leanrpc.core (framing), leanrpc.errors, leanrpc.results, msgspec.
Used by: worker/, pool/, services/, formalize/. Never imports them.
"""

from .outcome import (
    STANDARD_AXIOMS,
    apply_axiom_check,
    as_response,
    check_axiom_answers,
    classify,
    message_from_repl,
    require_every_axiom_check,
    sorry_from_repl,
)
from .probes import (
    FENCE_DIR,
    FORK_PROBE,
    HEADER_PROBE,
    IDENTITY_PROBE,
    fence_request,
    fork_probe,
    header_failure,
    header_probe,
    identity_probe,
    is_fence_answer,
    is_fork,
    mentions_fence,
    new_nonce,
    version_from_probe,
)
from .protocol import (
    CommandRequest,
    FileRequest,
    PickleRequest,
    Pos,
    ReplMessage,
    ReplSorry,
    Request,
    Response,
    TacticRequest,
    UnpickleRequest,
    command,
    decode,
    encode,
    file_request,
    pickle_to,
    tactic,
    unpickle_from,
)

__all__ = [
    "FENCE_DIR",
    "FORK_PROBE",
    "HEADER_PROBE",
    "IDENTITY_PROBE",
    "CommandRequest",
    "FileRequest",
    "Pos",
    "ReplMessage",
    "ReplSorry",
    "Request",
    "Response",
    "TacticRequest",
    "STANDARD_AXIOMS",
    "apply_axiom_check",
    "as_response",
    "check_axiom_answers",
    "classify",
    "command",
    "decode",
    "encode",
    "fence_request",
    "fork_probe",
    "header_failure",
    "header_probe",
    "identity_probe",
    "is_fence_answer",
    "is_fork",
    "mentions_fence",
    "message_from_repl",
    "new_nonce",
    "require_every_axiom_check",
    "sorry_from_repl",
    "version_from_probe",
]
