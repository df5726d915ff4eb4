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
    # the CPU clock counts 10 ms ticks: the charges are burnt, not skipped or paid twice
    assert 0.18 <= result["standin_cpu_s"] < 0.2 + 4 * 0.03, result
