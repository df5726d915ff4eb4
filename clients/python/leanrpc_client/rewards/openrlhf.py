"""OpenRLHF's shape: the `.py` file form of `--remote_rm_url`, and its payload rules.

Owns `reward_func(queries, prompts, labels)` and the rules the gateway's
`POST /reward` shares: `response_of` (the response part of a query) and
`extra_logs` (numbers per query). OpenRLHF 0.11 (`openrlhf/utils/agent.py`,
SingleTurnAgentExecutor) loads this file with `spec_from_file_location` (no
package: the reward package is imported absolutely), calls `reward_func` in a
thread with one query, and reads `{"rewards", "scores", "extra_logs"}`; an
exception is logged and leaves that sample's reward None. `query` is the decoded
prompt plus response with the chat's special tokens; `labels` the formal statements.
The server is $LEANRPC_SERVER (token $LEANRPC_TOKEN).

An infrastructure failure raises `InfraFailure`: OpenRLHF makes a tensor of every
reward, so no None can ride in the answer, and a 0 would be a silent lie.
"""

from __future__ import annotations

import importlib
import re

try:  # the client's own distribution, else the server's install
    _pkg = importlib.import_module("leanrpc_client.rewards")
except ImportError:
    _pkg = importlib.import_module("leanrpc.client.rewards")

InfraFailure = importlib.import_module(_pkg.__name__ + ".core").InfraFailure

# Where a chat template starts the assistant's turn (ChatML/Qwen, DeepSeek, Llama 3, Mistral, Phi).
ASSISTANT = re.compile(
    r"<\|im_start\|>assistant\n?|<｜Assistant｜>|<\|start_header_id\|>assistant<\|end_header_id\|>\n*"
    r"|\[/INST\]|<\|assistant\|>\n?"
)
# extra_logs: numbers only (OpenRLHF makes a tensor of each value), one per query.
LOGGED = {
    "lean_valid": lambda d: float(d.status == "VALID" and d.reward == 1.0),
    "lean_no_code": lambda d: float(d.status == "NO_CODE"),
    "lean_pinned": lambda d: float(d.pinned),
    "lean_axioms_checked": lambda d: float(d.checks.get("axioms") in ("PASSED", "FAILED")),
    "lean_time_s": lambda d: float(d.time_s),
    "lean_cached": lambda d: float(bool(d.cache_source)),
    "lean_duplicate": lambda d: float(d.duplicate),
}


def response_of(query: str, prompt: str | None) -> str:
    """The response part of OpenRLHF's query: after its prompt, else after the
    last assistant marker, else the whole query."""
    if prompt and query.startswith(prompt):
        return query[len(prompt) :]
    markers = list(ASSISTANT.finditer(query))
    return query[markers[-1].end() :] if markers else query


def answer(details: list) -> dict:
    """OpenRLHF's answer for scored queries; InfraFailure when any has no reward."""
    missing = [d for d in details if d.reward is None]
    if missing:
        raise InfraFailure(missing[0].infra_error or missing[0].reason, details)
    rewards = [d.reward for d in details]
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {key: [f(d) for d in details] for key, f in LOGGED.items()},
        "details": [d.as_log() for d in details],
    }


_core = None


def reward_func(queries, prompts, labels) -> dict:
    """OpenRLHF's file form: `--remote_rm_url /path/to/this/openrlhf.py`."""
    global _core
    if _core is None:
        _core = _pkg.RewardCore()
    prompts = prompts if prompts is not None else [None] * len(queries)
    responses = [response_of(q, p) for q, p in zip(queries, prompts)]
    problems = [_pkg.Problem(label) for label in labels]
    return answer(_core.score_sync(responses, problems))
