"""leanrpc.repl: requests encode as the REPL wants them, frames decode into
typed structs (with shape errors as FrameDecodeError), the fence and classify."""

from __future__ import annotations

import json

import pytest

from leanrpc import repl
from leanrpc.errors import FrameDecodeError, RequestError
from leanrpc.results import Severity, Status


def test_command_encodes_one_compact_line_and_one_blank_line():
    data = repl.encode(
        repl.command(
            "theorem t :\n  1 = 1 := rfl ⊢",
            3,
            infotree="full",
            incrementality=True,
            elab_async=True,
        )
    )
    assert data.endswith(b"\n\n") and b"\n" not in data[:-2]
    assert json.loads(data) == {
        "cmd": "theorem t :\n  1 = 1 := rfl ⊢",
        "env": 3,
        "infotree": "full",
        "incrementality": True,
        "setOptions": [[["Elab", "async"], True]],
    }
    assert "⊢".encode() in data  # raw UTF-8, no \\u escapes (REPL-PROTOCOL.md section 2)


def test_unset_fields_are_left_out_and_dicts_still_encode():
    assert repl.encode(repl.command("def f := 1")) == b'{"cmd":"def f := 1"}\n\n'
    assert repl.encode({"cmd": "x", "env": 0}) == b'{"cmd":"x","env":0}\n\n'
    with pytest.raises(RequestError):
        repl.encode(repl.command("bad \ud800 surrogate"))


def test_decode_reads_typed_fields_and_ignores_unknown_keys():
    frame = (
        b'{"sorries": [{"proofState": 0, "pos": {"line": 1, "column": 2}, "goal": "\xe2\x8a\xa2 p", "endPos": {"line": 1, "column": 7}}],\n'
        b' "messages": [{"severity": "warning", "pos": {"line": 1, "column": 8}, "endPos": null, "data": "declaration uses `sorry`"}],\n'
        b' "newField": [1, 2], "env": 4}'
    )
    response = repl.decode(frame)
    assert response.env == 4 and response.message is None
    assert response.sorries[0].goal == "⊢ p" and response.sorries[0].proof_state == 0
    assert response.messages[0].severity == "warning" and response.messages[0].end_pos is None
    # The deprecated dict-style reads the pool still uses.
    assert "env" in response and response["env"] == 4 and "message" not in response
    assert response.get("messages")[0]["data"] == "declaration uses `sorry`"


@pytest.mark.parametrize(
    "frame, words",
    [
        (b'{"env": "3"}', "wrong shape"),
        (b'{"messages": [{"severity": 1}]}', "wrong shape"),
        (b"[1, 2]", "wrong shape"),
        (b'{"env": ', "not valid JSON"),
        (b'{"message": "\xff"}', "not valid JSON"),
    ],
)
def test_bad_frames_are_protocol_errors(frame, words):
    with pytest.raises(FrameDecodeError, match=words):
        repl.decode(frame)


def test_fence_answer_must_name_this_nonce():
    nonce = repl.new_nonce()
    other = repl.new_nonce()
    assert nonce != other and len(nonce) == 32
    request = json.loads(repl.encode(repl.fence_request(nonce)))
    answer = repl.decode(
        json.dumps(
            {"message": f"no such file or directory (error code: 2)\n  file: {request['path']}"}
        ).encode()
    )
    assert repl.is_fence_answer(answer, nonce)
    assert not repl.is_fence_answer(answer, other)
    assert repl.mentions_fence(answer)
    assert not repl.is_fence_answer(repl.decode(b'{"env": 1}'), nonce)
    # A command answer that merely quotes the nonce is not the fence's answer.
    quoted = repl.decode(
        json.dumps({"messages": [{"severity": "info", "data": request["path"]}], "env": 2}).encode()
    )
    assert not repl.is_fence_answer(quoted, nonce)


class _Outcome:
    def __init__(self, response, after=None):
        self.response = response
        self.after_response = after
        self.queue_s = self.header_s = self.body_s = self.boot_s = 0.0
        self.warm_header = True
        self.reused_prefix_chars = 0
        self.worker = "w1"
        self.attempts = 1


@pytest.mark.parametrize(
    "frame, status",
    [
        (b'{"env": 1}', Status.VALID),
        (
            b'{"messages": [{"severity": "error", "pos": {"line": 1, "column": 0}, "data": "bad"}], "env": 1}',
            Status.INVALID,
        ),
        (
            b'{"messages": [{"severity": "warning", "pos": {"line": 1, "column": 0}, "data": "declaration uses \'sorry\'"}], "env": 1}',
            Status.SORRY,
        ),
        (b'{"message": "Unknown environment."}', Status.REJECTED),
    ],
)
def test_classify(frame, status):
    result = repl.classify("s", _Outcome(repl.decode(frame)), False)
    assert result.status is status
    # The same verdict from the wire dict (callers that still hold dicts).
    assert repl.classify("s", _Outcome(json.loads(frame)), False).status is status


def test_axiom_check_rejects_native_decide():
    after = repl.decode(
        b'{"messages": [{"severity": "info", "data": "\'t\' depends on axioms: [propext, Lean.ofReduceBool]"}], "env": 2}'
    )
    result = repl.classify("s", _Outcome(repl.decode(b'{"env": 1}'), after), True)
    assert result.status is Status.REJECTED and "native_decide" in result.error
    assert result.axioms == ["Lean.ofReduceBool", "propext"]


def test_message_from_repl_accepts_struct_and_dict():
    struct = repl.decode(
        b'{"messages": [{"severity": "error", "pos": {"line": 2, "column": 3}, "endPos": {"line": 2, "column": 5}, "data": "x"}]}'
    ).messages[0]
    as_dict = {
        "severity": "error",
        "pos": {"line": 2, "column": 3},
        "endPos": {"line": 2, "column": 5},
        "data": "x",
    }
    assert repl.message_from_repl(struct) == repl.message_from_repl(as_dict)
    assert repl.message_from_repl(struct).severity is Severity.ERROR


def test_root_goal_entries_are_not_sorries_when_classifying():
    """Issue 41: the REPL's own `rootGoals` transcript (v4.33.0-rc2,
    test/root_goals) lists two zero-width entries, the blocks' starting goals;
    the command has no sorry and is VALID, not SORRY. A real sorry still is."""
    from leanrpc.standin.fixtures import split_responses
    from testkit import shared_path

    text = shared_path("fixtures", "repl", "test", "root_goals.expected.out").read_text()
    answer = json.loads(split_responses(text)[0])
    assert len(answer["sorries"]) == 2
    assert all(s["pos"] == s["endPos"] for s in answer["sorries"])
    result = repl.classify("s", _Outcome(json.loads(json.dumps(answer))), False)
    assert result.status is Status.VALID and result.sorries == []
    wide = dict(answer, sorries=[dict(answer["sorries"][0], endPos={"line": 1, "column": 22})])
    assert repl.classify("s", _Outcome(wide), False).status is Status.SORRY
