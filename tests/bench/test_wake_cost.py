"""benchmarks/wake_cost.py runs end to end: both paces are read, every line counted, and
each row has a CPU figure per line."""

from __future__ import annotations

from benchmarks import wake_cost


def test_wake_cost_reads_every_line_at_both_paces(capsys):
    argv = ["--frames", "20", "--rounds", "1", "--gap", "0.01", "--hot-gap", "0.001"]
    assert wake_cost.main(argv) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()[2:]]
    assert [float(r[1]) for r in rows] == [0.01, 0.001]
    for _round, _gap, reads, per_line in rows:
        # The pipe may join lines that come close together, never lose one.
        assert 1 <= int(reads) <= 20
        assert float(per_line) >= 0
