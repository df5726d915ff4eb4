"""Finished one-off studies: each answered one question once, and RESULTS.md quotes its figures.

Kept runnable (`python -m benchmarks.studies.NAME`, from the checkout's root)
so a figure can be re-measured, but not part of the harness: nothing outside
this folder imports them, and a change to the service need not keep them
current. The harness (config, driver, measure, report, targets, workloads, cli,
plots, load) and the benches RESULTS.md re-runs (search_bench, server_cpu,
reuse_bench, memory_bench, ...) stay in benchmarks/.
"""
