"""Header formats end to end on the stand-in: what Lean accepts is VALID,
what Lean rejects is never VALID (issue 15 item 5)."""

from __future__ import annotations

import pytest

from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

PROOF = "theorem t (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"

ACCEPTED = [
    ("plain", "import Mathlib\n\n" + PROOF),
    ("body on the import line", "import Mathlib " + PROOF),
    ("module name on the next line", "import\n  Mathlib\n" + PROOF),
    ("open continued on the next line", "import Mathlib\nopen Real\n  Nat\n" + PROOF),
    ("open hiding on the next line", "import Mathlib\nopen Nat\n  hiding add_comm\n" + PROOF),
    ("open ... in", "import Mathlib\nopen Real in\n" + PROOF),
    ("set_option ... in", "import Mathlib\nset_option maxHeartbeats 400000 in\n" + PROOF),
    ("cached preamble", "import Mathlib\nset_option maxHeartbeats 400000\nopen Real\n\n" + PROOF),
]

REFUSED = [
    ("two modules after one import", "import Mathlib Aesop\n" + PROOF),
    ("import after a command", "import Mathlib\nopen Real\nimport Aesop\n" + PROOF),
]


async def test_formats_lean_accepts_are_valid_and_positions_are_the_users():
    async with running_server() as (_app, client):
        results = await client.verify_batch([code for _label, code in ACCEPTED])
        for (label, _code), result in zip(ACCEPTED, results):
            assert result.status == "VALID", (label, result.status, result.error, result.messages)
        # A message in a body that starts mid-line is at the user's column.
        [late] = await client.verify_batch(["import Mathlib theorem bad : 1 = 2 := by\n  sorry\n"])
        assert late.status == "SORRY"
        assert [(m.line, m.column) for m in late.messages if "sorry" in m.text] == [
            (1, len("import Mathlib theorem "))
        ]


async def test_formats_lean_rejects_are_never_valid():
    async with running_server() as (_app, client):
        results = await client.verify_batch([code for _label, code in REFUSED])
        for (label, _code), result in zip(REFUSED, results):
            assert result.status == "INVALID", (label, result.status, result.error, result.messages)
            assert any(m.severity == "ERROR" for m in result.messages), label
