"""Tests of how tools/bench/common.py restricts each side of a comparison
(no benchmark runs): the thread variables and taskset, JAX's flags at one
thread, and the environment of each SIMD path."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def test_one_thread_is_taskset_to_one_core_with_every_thread_variable():
    command, env = common.restricted(["peer", "--flag"], 1)
    first = str(min(os.sched_getaffinity(0)))
    assert command == ["taskset", "-c", first, "peer", "--flag"]
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        assert env[var] == "1"
    assert "XLA_FLAGS" not in env or env["XLA_FLAGS"] == os.environ.get("XLA_FLAGS")


def test_jax_at_one_thread_gets_xla_single_thread_flags_and_none_at_more():
    _, env = common.restricted(["python"], 1, jax=True)
    assert env["XLA_FLAGS"] == ("--xla_cpu_multi_thread_eigen=false "
                                "intra_op_parallelism_threads=1")
    _, env = common.restricted(["python"], 2, jax=True)
    assert "XLA_FLAGS" not in env


def test_extra_variables_are_set_and_none_removes_one():
    os.environ["AUTOBATCH_TEST_REMOVED"] = "x"
    try:
        _, env = common.restricted(["c"], 1, extra={"OMP_WAIT_POLICY": "passive",
                                                    "AUTOBATCH_TEST_REMOVED": None})
    finally:
        del os.environ["AUTOBATCH_TEST_REMOVED"]
    assert env["OMP_WAIT_POLICY"] == "passive"
    assert "AUTOBATCH_TEST_REMOVED" not in env


def test_the_avx2_path_pairs_with_openblas_haswell_and_avx512_with_its_own_choice():
    assert common.simd_environment("avx2") == {
        "AUTOBATCH_SIMD": "avx2", "OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": None}
    assert common.simd_environment("avx512") == {
        "AUTOBATCH_SIMD": "avx512", "OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None}


def test_settings_are_one_thread_then_all_cores():
    assert common.settings(1) == [1]
    assert common.settings(4) == [1, 4]
