"""Malformed input: hypothesis over the public API's protobuf fields, raw
bytes as request messages, and random bytes on a REPL's stdout into the
worker's frame decoder. No crash, no hang, a clear status."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading

import grpc
from google.protobuf import duration_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanrpc.config import LimitsConfig
from leanrpc.errors import WorkerCrashed, WorkerTimeout
from leanrpc.repl import Response
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from leanrpc.worker.fence import FenceSettings
from leanrpc.worker.launcher import Launcher, LaunchSpec
from leanrpc.worker.worker import Worker, WorkerState
from reliability_support import start_app

# NOT_FOUND: an unknown `session` option (docs/REUSE.md).
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
CALL_TIMEOUT_S = 60

_FRAGMENTS = [
    "import Mathlib",
    "import Aesop",
    "import NoSuch.Module",
    "open Nat",
    "set_option maxHeartbeats 0",
    "theorem t : 1 + 1 = 2 := by norm_num",
    "theorem t : True := by\n  sorry",
    "example : False := by simp",
    "def f (n : Nat) : Nat := n",
    "#eval 1",
    "namespace X",
    "end X",
    "",
    "\n",
    "\u0000",
    "\ud7ff",
    "by",
    ":=",
]
# Never a directive: these tests are about input, not injected faults.
_code = (
    st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=40), max_size=8)
    .map("\n".join)
    .filter(lambda c: "--@" not in c)
)
# Any Duration on the wire, valid or not (nanos out of range, signs that disagree).
_duration = st.builds(
    duration_pb2.Duration,
    seconds=st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 1, 3600, 3601]),
    nanos=st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, 1, -1, 500_000_000]),
)
_options = st.builds(
    pb.VerifyOptions,
    timeout=_duration,
    infotree=st.integers(min_value=-3, max_value=9),
    reuse=st.booleans(),
    check_axioms=st.booleans(),
    session=st.sampled_from(["", "s"]) | st.text(max_size=5),
)
_snippet = st.builds(pb.Snippet, id=st.text(max_size=10), code=_code)


@contextlib.contextmanager
def threaded_server(workers: int = 2):
    """The server on its own loop in a thread, so hypothesis drives it with
    the blocking client."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    app = asyncio.run_coroutine_threadsafe(
        start_app(workers=workers, pool__default_timeout_s=10), loop
    ).result(120)
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        yield app, channel
    finally:
        channel.close()
        asyncio.run_coroutine_threadsafe(app.stop(2.0), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _status(call) -> grpc.StatusCode:
    try:
        call()
        return grpc.StatusCode.OK
    except grpc.RpcError as exc:
        assert exc.code() is not grpc.StatusCode.DEADLINE_EXCEEDED, (
            "the server hung on fuzzed input"
        )
        return exc.code()


def _still_serves(stub) -> None:
    ok = stub.Verify(
        pb.VerifyRequest(
            snippets=[pb.Snippet(id="ok", code="import Mathlib\n\ntheorem ok : True := trivial\n")]
        ),
        timeout=CALL_TIMEOUT_S,
    )
    assert [r.status for r in ok.results] == [pb.STATUS_VALID]


def test_fuzzed_verify_and_stream_requests():
    with threaded_server() as (app, channel):
        stub = pb_grpc.VerifierStub(channel)
        seen: set = set()

        @settings(
            max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        @given(
            snippets=st.lists(_snippet, max_size=4),
            options=st.none() | _options,
            stream_cancel=st.booleans(),
        )
        def check(snippets, options, stream_cancel):
            request = pb.VerifyRequest(snippets=snippets)
            if options is not None:
                request.options.CopyFrom(options)
            code = _status(lambda: stub.Verify(request, timeout=CALL_TIMEOUT_S))
            assert code in ALLOWED, code
            seen.add(code)

            messages = []
            if options is not None:
                messages.append(pb.VerifyStreamRequest(options=options))
            for snippet in snippets:
                messages.append(pb.VerifyStreamRequest(snippet=snippet))
                if stream_cancel:
                    messages.append(pb.VerifyStreamRequest(cancel_id=snippet.id))
            answers = []
            code = _status(
                lambda: answers.extend(stub.VerifyStream(iter(messages), timeout=CALL_TIMEOUT_S))
            )
            assert code in ALLOWED, code
            if code is grpc.StatusCode.OK:
                # One answer per snippet (duplicates and empty ids are
                # answered REJECTED, never dropped).
                assert len(answers) == len(snippets)

        check()
        assert grpc.StatusCode.INVALID_ARGUMENT in seen and grpc.StatusCode.OK in seen
        _still_serves(stub)
        assert app.pool.serving


def test_raw_bytes_as_request_messages():
    with threaded_server(workers=1) as (app, channel):
        raw_verify = channel.unary_unary("/leanrpc.v1.Verifier/Verify")
        raw_extract = channel.unary_unary("/leanrpc.v1.Verifier/Extract")

        @settings(
            max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        @given(data=st.binary(max_size=200))
        def check(data):
            for method in (raw_verify, raw_extract):
                code = _status(lambda: method(data, timeout=CALL_TIMEOUT_S))
                assert code in ALLOWED, code

        check()
        _still_serves(pb_grpc.VerifierStub(channel))


# A REPL that answers the identity probe, then writes the given bytes (hex in
# argv) instead of an answer, and either dies or stays silent.
_RANDOM_REPL = r"""
import sys, time
def read_request():
    lines = []
    for line in sys.stdin:
        if line.strip() == "" and lines:
            return
        lines.append(line)
    sys.exit(0)
read_request()
sys.stdout.write('{"messages": [{"severity": "info", "pos": {"line": 1, "column": 0}, "data": "\\"4.19.0\\""}], "env": 0}\n\n')
sys.stdout.flush()
read_request()
sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]) + (b"\n\n" if sys.argv[2] == "frame" else b""))
sys.stdout.flush()
if sys.argv[2] == "die":
    sys.exit(1)
time.sleep(600)
"""


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    data=st.binary(max_size=300)
    | st.sampled_from([b"{}", b'{"env": 1}', b"[1]", b'{"env":', b"\n\n\n"]),
    ending=st.sampled_from(["frame", "die"]),
)
def test_random_repl_output_never_hangs_the_worker(data, ending):
    async def run() -> None:
        spec = LaunchSpec(argv=[sys.executable, "-S", "-c", _RANDOM_REPL, data.hex(), ending])
        # Unfenced: this checks framing against raw garbage. Garbage under
        # fencing (idle bytes, forged and extra frames) is tests/hostile's.
        worker = Worker(
            "fuzz", spec, Launcher(), LimitsConfig(max_frame_mb=1), fence=FenceSettings(fence=False)
        )
        await worker.start(timeout=30)
        worker.reserve()
        try:
            response = await asyncio.wait_for(
                worker.request({"cmd": "example : True := trivial"}, timeout=2.0), 10
            )
            # A well-formed frame (by chance, or "{}") is an answer.
            assert isinstance(response, Response)
        except (WorkerCrashed, WorkerTimeout):
            pass  # garbage, a dead REPL, or an unfinished frame: the worker is killed
        await worker.stop(1.0)
        assert worker.state is WorkerState.DEAD

    asyncio.run(run())
