"""Tests of tools/bench/report: the marked sections are rewritten from
results documents and nothing else changes. Run by tools/test-python
(pytest); they read small documents made here, and the committed
docs/results against docs/benchmarks.md, and run no benchmark."""
import copy
import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_report():
    loader = importlib.machinery.SourceFileLoader("report", os.path.join(HERE, "report"))
    spec = importlib.util.spec_from_loader("report", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


report = load_report()

RUN = {
    "machine": {"cpu_model": "Test CPU 9000", "simd_flags": ["avx2", "avx512f", "fma"],
                "cores": 2, "os": "Linux"},
    "commit": "0123456789abcdef", "dirty": False, "date": "2026-01-02T03:04:05Z",
    "command": "tools/bench/run control", "threads": [{"ours": 1, "peer": 1},
                                                      {"ours": 2, "peer": 2}],
    "smoke_run": False, "peers": {},
}


def control_doc(smoke=False, ours_sum=55):
    doc = copy.deepcopy(RUN)
    doc.update(benchmark="control", smoke_run=smoke)
    doc["results"] = {"members": 4, "cells": [
        {"workload": "fib", "threads": 1, "side": "gcc -O1", "members_per_second": 800.0,
         "result_sum": 55},
        {"workload": "fib", "threads": 1, "side": "gcc -O2", "members_per_second": 1000.0,
         "result_sum": 55},
        {"workload": "fib", "threads": 1, "side": "ours", "strategy": "native",
         "members_per_second": 250.0, "result_sum": ours_sum},
        {"workload": "fib", "threads": 1, "side": "ours", "strategy": "program-counter",
         "error": "it failed"},
    ]}
    return doc


DOC = """# Title

Prose before, kept.

<!-- table:control -->
old table
<!-- /table:control -->

Prose between, kept.

<!-- table:stan -->
old
<!-- /table:stan -->
"""


def test_only_the_marked_sections_change():
    out = report.rewrite(DOC, {"control": control_doc()})
    assert out.startswith("# Title\n\nProse before, kept.\n\n<!-- table:control -->\n")
    assert "Prose between, kept." in out
    assert "old table" not in out
    assert out.endswith("<!-- table:stan -->\n_No results: run `tools/bench/run stan`._\n"
                        "<!-- /table:stan -->\n")
    assert report.rewrite(out, {"control": control_doc()}) == out


def test_control_cells_give_rates_ratios_to_gcc_O2_and_failures():
    out = report.rewrite(DOC, {"control": control_doc()})
    row = next(line for line in out.splitlines() if line.startswith("| fib |"))
    assert row == "| fib | 1 | 800 (0.80) | 1,000 | 250 (0.25) | failed |"
    assert "| workload | threads | gcc -O1 | gcc -O2 | native | program-counter |" in out


def test_a_cell_whose_results_differ_from_gcc_is_flagged():
    out = report.rewrite(DOC, {"control": control_doc(ours_sum=56)})
    assert "250 (0.25) **results differ**" in out


def test_every_table_names_its_cpu_threads_commit_and_command():
    out = report.rewrite(DOC, {"control": control_doc()})
    assert ("CPU: Test CPU 9000 (avx2, avx512f, fma), 2 cores. Threads, ours against the "
            "peer's: 1 against 1, 2 against 2. Commit 0123456789, 2026-01-02T03:04:05Z, "
            "`tools/bench/run control`.") in out
    assert "Smoke run" not in out


def test_a_smoke_run_is_labelled_as_one():
    out = report.rewrite(DOC, {"control": control_doc(smoke=True)})
    assert report.SMOKE in out


def test_stan_takes_medians_and_ess_per_second():
    doc = copy.deepcopy(RUN)
    doc.update(benchmark="stan")
    stan = [{"model": "m", "threads": 1, "side": "stan", "build_seconds": 50.0,
             "wall_seconds": w, "chain_seconds_sum": 1.0, "min_bulk_ess": 100.0}
            for w in (2.0, 4.0, 1.0)]
    ours = [{"model": "m", "threads": 1, "side": "ours", "strategy": "native",
             "wall_seconds": 1.0, "sampler_seconds": 0.5, "min_bulk_ess": 150.0}]
    doc["results"] = {"chains": 4, "warmup": 10, "draws": 10, "repeats": 3,
                      "cells": stan + ours}
    out = report.render("stan", {"stan": doc})
    row = next(line for line in out.splitlines() if line.startswith("| m |"))
    # Stan: median wall 2 s, ESS/s the median of 50, 25, 100; ours 300/s, 6x.
    assert row == "| m | 1 | 50 | 2 | 1 | 50 | 1 | 0.5 | 300 | 6.00 | – | – | – | – |"


def test_an_unknown_table_is_an_error():
    try:
        report.rewrite("<!-- table:nope -->\n<!-- /table:nope -->\n", {})
    except KeyError as e:
        assert "no table `nope`" in e.args[0]
    else:
        raise AssertionError("no error")


def test_the_committed_document_is_what_the_committed_results_give():
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        text = f.read()
    docs = report.load(os.path.join(ROOT, "docs", "results"))
    assert report.rewrite(text, docs) == text, "run tools/bench/report"
    assert report.MARKER.search(text), "docs/benchmarks.md has no generated table"
