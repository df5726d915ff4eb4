"""The fixed commands the server sends on its own: handshake, header check,
fork detection, and the fence that proves which command a frame answers.

Owns: the probe texts and requests, reading their answers
(`version_from_probe`, `header_failure`), the fence (`fence_request`,
`is_fence_answer`, `mentions_fence`) and nonce generation.
May import: leanrpc.repl.protocol, the standard library.

The fence (issue 15 item 1, docs/SECURITY.md "Threat model: forged and stolen
verdicts") is a File request for a path that cannot exist, named by a fresh
random nonce: `{"path": "/nonexistent/leanrpc-fence/<nonce>.lean"}`. The REPL
answers `{"message": "<IO error naming the path>"}` (REPL-PROTOCOL.md section
4.3): the nonce comes back, no Lean code runs, and no env or proof-state id is
allocated, so the REPL's env counter stays equal to the number of commands the
server really sent. It is cheaper than an `#eval "<nonce>"`, which elaborates
and allocates an env on every exchange.
"""

from __future__ import annotations

import re
import secrets

from .protocol import CommandRequest, FileRequest, Response, command, file_request

__all__ = [
    "FENCE_DIR",
    "FORK_PROBE",
    "HEADER_PROBE",
    "IDENTITY_PROBE",
    "fence_request",
    "fork_probe",
    "header_failure",
    "header_probe",
    "identity_probe",
    "is_fence_answer",
    "is_fork",
    "mentions_fence",
    "new_nonce",
    "soundness_warning",
    "version_from_probe",
]

# A command that must elaborate cleanly on any env whose header loaded; the
# real REPL answers a failed import with an empty env and no error (PR #73).
HEADER_PROBE = "example : True := trivial"
IDENTITY_PROBE = "#eval Lean.versionString"
FORK_PROBE = "def leanrpcForkProbe : Nat := 0"
FENCE_DIR = "/nonexistent/leanrpc-fence"


def identity_probe() -> CommandRequest:
    """Our handshake: the first command every worker answers."""
    return command(IDENTITY_PROBE)


def header_probe(env: int) -> CommandRequest:
    return command(HEADER_PROBE, env)


def fork_probe() -> CommandRequest:
    """Only the augustepoiroux fork knows `declarations`; upstream ignores it."""
    return command(FORK_PROBE, declarations=True)


def is_fork(response: Response) -> bool:
    return response.declarations is not None


def version_from_probe(response: Response) -> str:
    for message in response.messages:
        if message.severity == "info":
            return message.data.strip().strip('"')
    return ""


# Published kernel soundness fixes (issue 25 item 6), one per release line:
# a version on a line before its fix, or on an older line, misses it.
SOUNDNESS_FIXES = ((4, 32, 1), (4, 33, 1), (4, 34, 0))
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(-\S+)?")


def soundness_warning(version: str) -> str:
    """A warning naming the kernel soundness fix `version` lacks, "" if none
    is missing (or the version cannot be read)."""
    match = _VERSION.match(version.strip())
    if match is None:
        return ""
    have = tuple(int(part) for part in match.groups()[:3])
    prerelease = match.group(4) is not None
    for fix in SOUNDNESS_FIXES:
        if have[:2] == fix[:2] and (have[2] > fix[2] or have[2] == fix[2] and not prerelease):
            return ""  # this line has its fix
    if have > SOUNDNESS_FIXES[-1] or (have == SOUNDNESS_FIXES[-1] and not prerelease):
        return ""
    line = next((fix for fix in SOUNDNESS_FIXES if fix[:2] == have[:2]), SOUNDNESS_FIXES[0])
    wanted = "v" + ".".join(map(str, line))
    return (
        f"Lean {version.strip()} predates a published kernel soundness fix (in {wanted}; also "
        f"{', '.join('v' + '.'.join(map(str, f)) for f in SOUNDNESS_FIXES if f != line)}): "
        f"its VALID can rest on a kernel bug; upgrade to {wanted} or later"
    )


def header_failure(response: Response) -> str | None:
    """Why a header (or preamble) answer shows a failed load, or None."""
    if response.env is None:
        return f"header failed to load: {response.message or response.to_dict()!r}"
    if response.errors:
        return "header failed to load"
    return None


def new_nonce() -> str:
    """128 random bits, hex: no snippet can guess the next fence."""
    return secrets.token_hex(16)


def fence_request(nonce: str) -> FileRequest:
    return file_request(f"{FENCE_DIR}/{nonce}.lean")


def is_fence_answer(response: Response, nonce: str) -> bool:
    """The REPL's answer to `fence_request(nonce)`: an IO error naming it."""
    return (
        response.env is None
        and response.message is not None
        and f"{FENCE_DIR}/{nonce}.lean" in response.message
        and not response.messages
        and response.proof_state is None
    )


def mentions_fence(response: Response) -> bool:
    """Whether a frame looks like some fence's answer (then it is not the
    command's answer, whatever else it holds)."""
    return response.message is not None and FENCE_DIR in response.message
