"""The suite-wide code tripwire (tests/conftest.py) can fail: a test that lets
code-running text reach a REPL fails unless it is marked `runs_user_code`,
and one that sends only proof text passes."""

from __future__ import annotations

import shutil
from pathlib import Path

pytest_plugins = ["pytester"]

PROBE = """
import pytest
from leanrpc import repl

def test_leaks():
    repl.encode(repl.command("theorem t : True := by\\n  run_tac pure ()"))

@pytest.mark.runs_user_code
def test_trusted_on_purpose():
    repl.encode(repl.command("#eval IO.println 1"))

def test_proof_text_and_the_identity_probe():
    repl.encode(repl.command("-- #eval in a comment\\ntheorem t : True := trivial"))
    repl.encode(repl.command(repl.probes.IDENTITY_PROBE))
    repl.encode(repl.tactic("norm_num", 0))

def test_a_tactic_leaks():
    repl.encode(repl.tactic("native_decide", 0))
"""


def test_the_tripwire_fires(pytester):
    shutil.copy(Path(__file__).resolve().parents[1] / "conftest.py", pytester.path / "conftest.py")
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    # Every call passes; the two leaking tests fail at teardown, where the tripwire looks.
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaks*",
            "*not marked runs_user_code (1 request(s)): *run_tac*",
            "*ERROR at teardown of test_a_tactic_leaks*",
            "*not marked runs_user_code (1 request(s)): 'native_decide'",
        ]
    )
