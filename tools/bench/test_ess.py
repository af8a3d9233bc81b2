"""Tests of the effective-samples comparison's pure parts: which columns of
our draws count (tools/peers/ess.py), that our CSV reaches ArviZ chain by
chain, the NumPyro peer's check against a reference posterior
(tools/peers/numpyro_peer.py), the posteriors' table (tools/stan_bench.py)
and the table tools/bench/report renders (run by tools/test-python; no
sampler runs)."""
import copy
import os
import sys

import arviz
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "peers"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ess  # noqa: E402
import numpyro_peer  # noqa: E402
import stan_bench  # noqa: E402
from test_report import RUN, report  # noqa: E402

HEADER = ["chain", "draw", "mu", "tau", "theta_tilde.0", "theta_tilde.1", "theta.0",
          "theta.1", "lp__", "accept_stat__"]


def test_columns_are_the_named_quantities_only():
    assert ess.columns(HEADER) == [2, 3, 4, 5, 6, 7]
    assert ess.columns(HEADER, {"mu", "tau", "theta_tilde"}) == [2, 3, 4, 5]
    # `theta` is not `theta_tilde`'s prefix match.
    assert ess.columns(HEADER, {"theta"}) == [6, 7]


def test_csv_reaches_arviz_by_chain(tmp_path):
    """An autocorrelated chain next to an independent one: a reader that
    interleaved the chains' rows would see neither."""
    rng = np.random.default_rng(5)
    chains, draws = 3, 200
    walk = np.cumsum(rng.normal(size=(chains, draws)), axis=1)
    noise = rng.normal(size=(chains, draws))
    path = tmp_path / "draws.csv"
    with open(path, "w") as f:
        f.write("chain,draw,a,b,lp__\n")
        for c in range(chains):
            for d in range(draws):
                f.write(f"{c},{d},{float(walk[c, d])!r},{float(noise[c, d])!r},0\n")
    got = ess.bulk_ess(ess.read_csv(str(path)))
    assert got == pytest.approx([float(arviz.ess(walk, method="bulk")),
                                 float(arviz.ess(noise, method="bulk"))], rel=1e-12)
    assert got[0] < 0.1 * chains * draws < got[1]
    assert ess.bulk_ess(ess.read_csv(str(path), {"b"})) == pytest.approx(got[1:], rel=1e-12)


def test_stan_columns_name_elements_from_one():
    values = np.arange(2 * 3 * 2).reshape(2, 3, 2)
    columns = numpyro_peer.stan_columns("beta", values)
    assert list(columns) == ["beta[1]", "beta[2]"]
    assert (columns["beta[2]"] == values[:, :, 1]).all()
    assert list(numpyro_peer.stan_columns("sigma", values[:, :, 0])) == ["sigma"]


def test_check_means_against_a_reference():
    rng = np.random.default_rng(7)
    draws = rng.normal(3.0, 2.0, size=(4, 1000))
    reference = [{"name": "mu", "mean": 3.0, "sd": 2.0},
                 {"name": "far", "mean": 4.0, "sd": 2.0},
                 {"name": "absent", "mean": 0.0, "sd": 1.0}]
    check = {c["name"]: c for c in numpyro_peer.check_means({"mu": draws, "far": draws},
                                                            reference)}
    assert set(check) == {"mu", "far"}
    # The bound is 0.1 sd + 3 MCSE = 0.2 + 3 * 2 / sqrt(4000), about 0.29.
    assert check["mu"]["error"] < 0.5
    assert check["far"]["error"] == pytest.approx(abs(draws.mean() - 4.0) / (
        0.2 + 3 * draws.std(ddof=1) / np.sqrt(float(arviz.ess(draws, method="mean")))))
    assert check["far"]["error"] > 1.0


def test_posteriors_exist_and_cover_the_families():
    for name, p in stan_bench.POSTERIORS.items():
        for path in (p.ours, p.ours_data, p.stan, p.data, p.reference):
            assert os.path.exists(p.path(path)), (name, path)
    assert {"eight_schools", "kidiq", "arK"} <= set(stan_bench.POSTERIORS)
    assert len(stan_bench.POSTERIORS) >= 13
    assert {"GLM", "hierarchical", "GP", "time series"} <= {
        p.family for p in stan_bench.POSTERIORS.values()}
    assert stan_bench.POSTERIORS["eight_schools"].ours_parameters() is None
    assert stan_bench.POSTERIORS["gp_pois_regr-gp_pois_regr"].ours_parameters() == (
        "rho", "alpha", "f_tilde")


def ess_doc():
    doc = copy.deepcopy(RUN)
    doc.update(benchmark="ess", smoke_run=False, threads=[{"ours": 2, "peer": 2}])

    def ours(chains, wall, compile_seconds, ess_value, model="m"):
        return {"model": model, "family": "GLM", "threads": 2, "side": "ours",
                "strategy": "default", "chains": chains, "wall_seconds": wall,
                "compile_seconds": compile_seconds, "min_bulk_ess": ess_value}

    cells = [
        {"model": "m", "family": "GLM", "threads": 2, "side": "stan", "chains": 4,
         "build_seconds": 30.0, "wall_seconds": 2.0, "chain_seconds_sum": 3.0,
         "min_bulk_ess": 1000.0},
        {"model": "m", "family": "GLM", "threads": 2, "side": "numpyro", "chains": 4,
         "first_seconds": 40.0, "seconds": 10.0, "min_bulk_ess": 1000.0},
        ours(4, 1.5, 0.5, 1000.0),
        # 256 chains: 64,000 ESS in 4 s less 1 s of compiling.
        ours(256, 4.0, 1.0, 60000.0),
        {"model": "slow", "family": "mixture", "threads": 2, "side": "stan", "chains": 4,
         "build_seconds": 30.0, "wall_seconds": 1.0, "min_bulk_ess": 1000.0},
        {"model": "slow", "family": "mixture", "threads": 2, "side": "numpyro", "chains": 4,
         "error": "it failed"},
        ours(4, 10.0, 0.0, 1000.0, "slow"),
        ours(256, 100.0, 0.0, 50000.0, "slow"),
    ]
    doc["results"] = {"chains": 4, "many": 256, "warmup": 10, "draws": 10, "repeats": 1,
                      "threads": 2, "cells": cells}
    return doc


def test_ess_table_ratios_and_targets():
    text = report.render("ess", {"ess": ess_doc()})
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")
            for line in text.splitlines() if line.startswith("| m |")
            or line.startswith("| slow |")}
    m = rows["m"]
    # Stan 500 ESS/s, NumPyro 100; ours 1000 at 4 chains, 20,000 at 256.
    assert m[5] == "500" and m[9] == "100" and m[10] == "1,000" and m[13] == "20,000"
    assert m[14:17] == ["2.00", "40.00", "200.00"]
    assert m[17].startswith("meets both")
    slow = rows["slow"]
    # NumPyro failed: no ratio, no verdict.
    assert slow[9] == "failed" and slow[16] == "–" and slow[17].startswith("–")
    assert slow[15] == "0.50"
    assert "met on 1 of 2" in text
    assert "AMD" not in text and "Test CPU 9000" in text and "2 cores" in text


def test_numpyro_is_rated_on_its_sampling_alone_where_measured():
    doc = ess_doc()
    # The second run's 10 s less 8 s of tracing the sampler again: 500 ESS/s.
    doc["results"]["cells"][1].update(fixed_seconds=8.0, sampling_seconds=2.0)
    text = report.render("ess", {"ess": doc})
    m = next(line.split(" | ") for line in text.splitlines() if line.startswith("| m |"))
    assert m[8] == "2" and m[9] == "500" and m[16] == "40.00"


def test_ess_table_names_a_miss():
    doc = ess_doc()
    doc["results"]["cells"][3]["min_bulk_ess"] = 6000.0  # 2,000 ESS/s: 4x Stan, 20x NumPyro
    text = report.render("ess", {"ess": doc})
    assert "misses Stan 4x" in text and "NumPyro" not in text.split("misses")[1].split("|")[0]


def test_loaded_results_stand_in_and_are_marked(tmp_path):
    import json

    (tmp_path / "loaded").mkdir()
    doc = ess_doc()
    doc["smoke_run"] = True
    with open(tmp_path / "loaded" / "ess.json", "w") as f:
        json.dump(doc, f)
    with open(tmp_path / "loaded" / "other.json", "w") as f:
        json.dump({"not": "a comparison"}, f)
    docs = report.load(str(tmp_path))
    assert list(docs) == ["ess"] and docs["ess"]["loaded"]
    text = report.render("ess", docs)
    assert text.startswith(report.SMOKE) and report.LOADED in text
    assert "smoke, loaded" in report.render("runs", docs)


def test_ess_per_cpu_second_is_the_product_of_its_three_ratios():
    import types

    import ess_cpu

    def run(cpu, warmup, sampling, ess):
        return {"cpu_seconds": cpu, "gradients_warmup": warmup, "gradients_sampling": sampling,
                "mean_leapfrog": [7.0, 8.0, 9.0], "step_size": [0.1, 0.3, 0.2],
                "mean_tree_depth": [3.0, 2.0, 4.0], "min_bulk_ess": ess}

    args = types.SimpleNamespace(chains=3, draws=100)
    # Ours: 600 gradients in 0.006 s (10 us each), 4 per draw, 150 ESS;
    # Stan: 1500 gradients in 0.03 s (20 us each), 5 per draw, 100 ESS.
    row = ess_cpu.row_of("m", {"ours": run(0.006, 200, 1000, 150.0),
                               "stan": run(0.03, 500, 1000, 100.0)}, args)
    ours, stan, ratios = row["ours"], row["stan"], row["ratios"]
    assert ours["us_per_gradient"] == pytest.approx(5.0)
    assert ours["gradients_per_draw"] == pytest.approx(4.0)
    assert stan["warmup_share"] == pytest.approx(1 / 3)
    assert (ours["step_size"], ours["tree_depth"], ours["leapfrog_per_draw"]) == (0.2, 3.0, 8.0)
    assert ours["ess_per_draw"] == pytest.approx(0.5)
    assert ratios["ess_per_cpu_second"] == pytest.approx((150 / 0.006) / (100 / 0.03))
    assert ratios["ess_per_cpu_second"] == pytest.approx(
        ratios["ess_per_draw"] * ratios["gradients_per_draw"] * ratios["cpu_per_gradient"])
    failed = ess_cpu.row_of("m", {"ours": run(0.006, 200, 1000, 150.0),
                                  "stan": {"error": "no"}}, args)
    assert "ratios" not in failed and failed["stan"] == {"error": "no"}
