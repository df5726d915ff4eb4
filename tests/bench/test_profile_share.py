"""benchmarks.profile_share: rooms of py-spy samples, waiting threads dropped, a clear no-data exit."""

from __future__ import annotations

from benchmarks import profile_share

SERVER = 'process 7:"python -m leanrpc.cli serve --port 1"'
CLIENT = 'process 6:"python -m benchmarks.load run"'


def _line(frames: list[str], n: int, owner: str = SERVER) -> str:
    return ";".join([CLIENT, owner, *frames]) + f" {n}"


def test_rooms_leaf_first_and_waiting_threads_dropped():
    text = "\n".join(
        [
            _line(["run (asyncio/base_events.py:1)", "verify (leanrpc/services/verify.py:9)"], 6),
            _line(
                [
                    "run (asyncio/base_events.py:1)",
                    "verify (leanrpc/services/verify.py:9)",
                    "gc_collect_main (lib)",
                ],
                3,
            ),
            _line(["run (asyncio/base_events.py:1)", "audit (leanrpc/worker/audit.py:5)"], 1),
            _line(
                [
                    "Thread.run",
                    "ThreadedChildWatcher._do_waitpid (asyncio/unix_events.py:1)",
                    "wait4",
                ],
                50,
            ),
            _line(
                ["x (leanrpc/services/verify.py:1)"],
                40,
                owner='process 9:"python -m leanrpc.standin"',
            ),
        ]
    )
    counts, dropped = profile_share.shares(text)
    assert counts == {"edge and services": 6, "garbage collector": 3, "fence audit": 1}
    assert dropped == 50


def test_no_samples_is_one_clear_line(tmp_path, capsys):
    empty = tmp_path / "prof.txt"
    empty.write_text(_line(["x"], 3, owner='process 9:"python -m leanrpc.standin"') + "\n")
    assert profile_share.main([str(empty)]) == 2
    assert "no busy samples" in capsys.readouterr().err
    assert profile_share.main([str(tmp_path / "missing.txt")]) == 2
    assert "no profile at" in capsys.readouterr().err


def test_a_profile_of_the_server_alone_is_read_with_an_empty_process_name():
    """`py-spy record --pid` (benchmarks/server_cpu.py --py-spy) writes no process frames."""
    text = "\n".join(
        [
            "run (asyncio/base_events.py:1);check (leanrpc/worker/audit.py:5) 4",
            "run (asyncio/base_events.py:1);sample (leanrpc/worker/memory.py:2) 2",
            "Thread.run;ThreadedChildWatcher._do_waitpid (asyncio/unix_events.py:1);wait4 9",
        ]
    )
    assert profile_share.shares(text)[0] == {}  # the default looks for the serve process
    counts, dropped = profile_share.shares(text, process="")
    assert counts == {"fence audit": 4, "memory watch": 2} and dropped == 9
