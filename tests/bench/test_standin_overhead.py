"""benchmarks/standin_overhead.py: drives one stand-in over its pipes and reads what it cost."""

from __future__ import annotations

from benchmarks import standin_overhead, workloads


def test_the_charges_are_burnt_and_counted_once():
    items = [
        workloads.Item(
            f"t{i}",
            f"import Mathlib\ntheorem t{i} : True := trivial\n--@standin: burn=0.05\n",
            0.05,
            "test",
        )
        for i in range(4)
    ]
    result = standin_overhead.measure(items, scale=0.001)
    assert result["requests"] == 4 and result["charged_s"] == 0.2
    # The charges are burnt, not skipped or paid twice: the CPU the stand-in spent over
    # what it was charged, a ratio (CPU time, so foreign load does not inflate it; the
    # clock counts 10 ms ticks). Skipped reads near 0, paid twice 2 or more.
    ratio = result["standin_cpu_s"] / result["charged_s"]
    assert 0.9 <= ratio < 1.9, result
