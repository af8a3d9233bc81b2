"""`autobatch.compile` and `Program.run`: values and errors per member,
statics and shared arguments, every scalar type, arrays, tuples, and the
errors of bad input."""

import numpy as np
import pytest

import autobatch

FIB = "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }"

STRATEGIES = [
    "reference", "local-static", "program-counter", "native", "native-batched", "native-lockstep",
]


def test_fib_per_member_on_every_strategy():
    prog = autobatch.compile(FIB)
    for strategy in STRATEGIES:
        res = prog.run("fib", batch={"n": np.array([3, 7, 4, 5])}, shared={},
                       strategy=strategy, seed=0)
        assert res.values == [3, 21, 5, 8], strategy
        assert res.errors == [None] * 4
        assert all(type(v) is int for v in res.values)
        assert res.stats["strategy"] == strategy
        assert res.stats["batch_size"] == 4
        assert len(res) == 4


def test_auto_is_the_default_and_says_what_it_picked():
    prog = autobatch.compile(FIB)
    res = prog.run("fib", batch={"n": np.array([3, 7, 4, 5])}, threads=1)
    assert res.values == [3, 21, 5, 8]
    # Scalar control without products with a static matrix: native code,
    # or, where the process has not compiled it yet, program-counter for a
    # run this small (tried there first, it ends there).
    reason = res.stats["strategy_reason"]
    assert reason.startswith("picked by auto: no product with a static")
    tried = "but a small run, tried first on program-counter" in reason
    assert res.stats["strategy"] == ("program-counter" if tried else "native"), reason
    named = prog.run("fib", batch={"n": [3]}, strategy="program-counter")
    assert named.stats["strategy_reason"] == "asked for"
    bound = prog.bind()
    assert bound.run("fib", batch={"n": [3, 7]}, threads=1).stats["strategy"] in (
        "native", "program-counter")
    # A run longer than its trial is compiled: native code from then on.
    long = bound.run("fib", batch={"n": [3, 25]}, threads=1)
    assert long.values == [3, 121393]
    assert long.stats["strategy"] == "native"
    assert bound.run("fib", batch={"n": [3, 7]}, threads=1).stats["strategy"] == "native"


def test_operations_are_counted_when_asked():
    prog = autobatch.compile(FIB)
    batch = {"n": np.array([3, 4])}
    assert prog.run("fib", batch=batch, strategy="native").stats["op_counts"] == []
    for run in (prog.run, prog.bind().run):
        res = run("fib", batch=batch, strategy="native", count_operations=True)
        adds = [c for c in res.stats["op_counts"] if c["op"] == "add"]
        # One `+` per call with n > 1: I(n) = 1 + I(n-1) + I(n-2), I(0) = I(1) = 0,
        # so I(3) + I(4) = 2 + 4.
        assert sum(c["active_lanes"] for c in adds) == 6


def test_program_lists_its_entries():
    prog = autobatch.compile(FIB + "\nfn twice(x: f64) -> f64 { 2.0 * x }")
    assert prog.entries == ["fib", "twice"]


STATICS = """
extern "autobatch" {
    static SCALE: f64;
    static W: [f32; 3];
}

fn affine(x: [f32; 3], k: i32, offset: f64, on: bool) -> (f64, [f32; 3], bool) {
    let mut y = x;
    for i in 0..3 {
        y[i] = x[i] * W[i] + (k as f32);
    }
    (SCALE * offset, y, !on)
}
"""


def test_statics_shared_arguments_and_every_scalar_type():
    prog = autobatch.compile(STATICS)
    x = np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 0.125]], dtype=np.float32)
    res = prog.run("affine",
                   batch={"x": x, "on": np.array([True, False])},
                   shared={"k": 1, "offset": 0.5, "SCALE": 4.0,
                           "W": np.array([1.0, 10.0, 100.0], dtype=np.float32)},
                   strategy="program-counter")
    assert res.errors == [None, None]
    first, second = res.values
    assert isinstance(first, tuple) and len(first) == 3
    assert first[0] == 2.0
    assert first[1].dtype == np.float32 and first[1].shape == (3,)
    assert first[1].tolist() == [2.0, 21.0, 301.0]
    assert second[1].tolist() == [1.5, 3.5, 13.5]
    assert first[2] is False and second[2] is True
    # The arrays handed back are the caller's own.
    first[1][0] = 7.0
    assert first[1][0] == 7.0


def test_integer_arrays_and_usize():
    prog = autobatch.compile(
        "fn f(xs: [i64; 4], n: usize) -> ([i64; 4], usize) {\n"
        "    let mut ys = xs;\n"
        "    for i in 0..4 { ys[i] = xs[i] * 2; }\n"
        "    (ys, n + 1)\n"
        "}"
    )
    res = prog.run("f", batch={"xs": np.arange(8).reshape(2, 4), "n": [1, 2]})
    (ys0, n0), (ys1, n1) = res.values
    assert ys0.dtype == np.int64 and ys0.tolist() == [0, 2, 4, 6]
    assert ys1.tolist() == [8, 10, 12, 14]
    assert (n0, n1) == (2, 3)


def test_a_failing_member_keeps_the_others():
    prog = autobatch.compile(
        "fn pick(xs: [f64; 3], i: usize) -> f64 { xs[i] }"
    )
    res = prog.run("pick", batch={"i": [0, 5, 2]}, shared={"xs": [1.5, 2.5, 3.5]})
    assert res.values == [1.5, None, 3.5]
    assert res.errors[0] is None and res.errors[2] is None
    error = res.errors[1]
    assert error["kind"] == "index_out_of_bounds"
    assert "5" in error["message"]
    assert (error["line"], error["column"]) == (1, 42)


def test_seed_decides_random_draws():
    prog = autobatch.compile("fn draw(k: i64) -> f64 { normal() + (k as f64) }")
    a = prog.run("draw", batch={"k": [0, 0, 0]}, seed=5).values
    b = prog.run("draw", batch={"k": [0, 0, 0]}, seed=5).values
    c = prog.run("draw", batch={"k": [0, 0, 0]}, seed=6).values
    assert a == b
    assert a != c
    assert len(set(a)) == 3


def test_limits_are_member_errors():
    prog = autobatch.compile(FIB)
    res = prog.run("fib", batch={"n": [2, 30]}, max_steps=50)
    assert res.values[0] == 2
    assert res.errors[1]["kind"] == "step_limit"
    res = prog.run("fib", batch={"n": [2, 30]}, max_stack_depth=3)
    assert res.values[0] == 2
    assert res.errors[1]["kind"] == "stack_overflow"


def test_a_compile_error_carries_the_diagnostics():
    with pytest.raises(autobatch.CompileError) as raised:
        autobatch.compile("fn f(x: i64) -> i64 {\n    x + true\n}", path="bad.ab")
    text = str(raised.value)
    assert "bad.ab:2:" in text
    assert "x + true" in text


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(batch={"m": [1]}), ValueError,
         "`m` in `batch` is not a parameter of `fib` (the parameters of `fib` are: n)"),
        (dict(batch={}), ValueError, "missing argument `n` of `fib`"),
        (dict(batch={"n": []}), ValueError, "batched argument `n` is an empty list"),
        (dict(batch={"n": [1]}, shared={"n": 1}), ValueError,
         "argument `n` is given in both `batch` and `shared`"),
        (dict(batch={"n": [1.5]}), ValueError,
         "argument `n` of member 0 must be an integer (i64), found 1.5"),
        (dict(batch={"n": [True]}), ValueError,
         "argument `n` of member 0 must be an integer (i64), found true"),
        (dict(batch={"n": [2**64]}), ValueError, "out of range"),
        (dict(batch={"n": 3}), TypeError,
         "batched argument `n` must be a list or array with one value per member"),
        (dict(batch={"n": [{}]}), TypeError, "argument `n` of member 0 is a Python `dict`"),
        (dict(batch=[1]), TypeError, "`batch` must be a dict"),
        (dict(batch={1: [1]}), TypeError, "the names in `batch` must be strings"),
        (dict(batch={"n": [1]}, strategy="fast"), ValueError, "unknown strategy `fast`"),
        (dict(batch={"n": [1]}, lanes="some"), ValueError, "unknown lanes mode `some`"),
        (dict(batch={"n": [1]}, threads=0), ValueError, "the number of threads (0) must be between 1"),
        (dict(batch={"n": [1]}, seed=-1), ValueError, "`seed` must be between 0 and"),
        (dict(batch={"n": [1]}, seed="1"), TypeError, "`seed` must be an integer"),
        (dict(batch={"n": [1]}, max_stack_depth=0), ValueError, "`max_stack_depth` must be between 1"),
        (dict(batch={"n": [1]}, max_steps=0), ValueError, "`max_steps` must be between 1"),
    ],
)
def test_bad_input_raises_the_command_lines_message(kwargs, error, message):
    prog = autobatch.compile(FIB)
    with pytest.raises(error) as raised:
        prog.run("fib", **kwargs)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_unknown_entry_lists_the_functions():
    prog = autobatch.compile(FIB)
    with pytest.raises(ValueError, match=r"no function named `fob` in <string> \(available: fib\)"):
        prog.run("fob", batch={"n": [1]})


def test_batch_lengths_must_agree():
    prog = autobatch.compile("fn add(a: i64, b: i64) -> i64 { a + b }")
    with pytest.raises(ValueError, match="`a` has 2 values but `b` has 3"):
        prog.run("add", batch={"a": [1, 2], "b": [1, 2, 3]})


def test_array_shape_errors_name_the_place():
    prog = autobatch.compile("fn s(x: [f64; 2]) -> f64 { x[0] + x[1] }")
    with pytest.raises(ValueError, match=r"argument `x` of member 1 must have 2 elements"):
        prog.run("s", batch={"x": [[1.0, 2.0], [1.0, 2.0, 3.0]]})
    res = prog.run("s", batch={"x": np.ones((3, 2))})
    assert res.values == [2.0, 2.0, 2.0]


def test_array_dimension_errors_name_the_member_and_axis():
    # Each member's place is written out only for the message; it must be
    # the member's and the axis's own.
    prog = autobatch.compile("""
        extern "autobatch" { static W: [f64; N]; }
        fn f(m: [[f64; N]; K]) -> f64 { sum(m[0] * W) }
    """)
    bound = prog.bind(shared={"W": np.ones(2)})
    with pytest.raises(ValueError) as raised:
        bound.run("f", batch={"m": np.ones((3, 4, 3))})
    assert str(raised.value) == (
        "symbolic dimension `N` is 2 in static `W` but 3 in argument `m` of member 0 (at `m[0]`)")
    ragged = [np.ones((2, 2)), np.ones((3, 2)), np.ones((1, 3))]
    with pytest.raises(ValueError) as raised:
        bound.run("f", batch={"m": ragged})
    assert str(raised.value) == (
        "symbolic dimension `N` is 2 in static `W` but 3 in argument `m` of member 2 (at `m[0]`)")
    res = bound.run("f", batch={"m": ragged[:2]})
    assert res.values == [2.0, 2.0]


def test_non_finite_floats_pass_through():
    prog = autobatch.compile("fn id(x: f64) -> f64 { x }")
    res = prog.run("id", batch={"x": np.array([np.nan, np.inf, -np.inf, 1.0])})
    assert np.isnan(res.values[0])
    assert res.values[1:] == [np.inf, -np.inf, 1.0]


def test_numpy_integers_are_counts():
    prog = autobatch.compile("fn draw(k: i64) -> f64 { normal() + (k as f64) }")
    a = prog.run("draw", batch={"k": np.zeros(2, dtype=np.int64)}, seed=np.int64(3), threads=np.int32(1))
    b = prog.run("draw", batch={"k": [0, 0]}, seed=3, threads=1)
    assert a.values == b.values
    with pytest.raises(TypeError, match="`seed` must be an integer, found a Python `float`"):
        prog.run("draw", batch={"k": [0]}, seed=1.0)


def test_a_ragged_batch_gives_each_member_its_own_length():
    prog = autobatch.compile(
        "fn scaled(xs: [f64; L], k: f64) -> (f64, [f64; L]) { (sum(xs), xs * k) }")
    xs = [np.array([1.0, 2.0]), np.array([3.0]), np.array([4.0, 5.0, 6.0])]
    for strategy in STRATEGIES:
        res = prog.run("scaled", batch={"xs": xs}, shared={"k": 2.0}, strategy=strategy)
        assert [v[0] for v in res.values] == [3.0, 3.0, 15.0], strategy
        assert [v[1].tolist() for v in res.values] == [[2.0, 4.0], [6.0], [8.0, 10.0, 12.0]]
        assert res.stats["sizes"] == 3
    with pytest.raises(ValueError, match="symbolic dimension `L` is 1 in argument `xs` of member 1 but 2"):
        prog2 = autobatch.compile("fn both(xs: [f64; L], ys: [f64; L]) -> f64 { dot(xs, ys) }")
        prog2.run("both", batch={"xs": [[1.0, 2.0], [3.0]], "ys": [[1.0, 1.0], [2.0, 2.0]]})


HOSTS = """
extern "autobatch" {
    fn lgamma(x: f64) -> f64;
    fn swap(v: [f64; 2]) -> [f64; 2];
}
fn f(x: f64) -> f64 { lgamma(x) + 1.0 }
fn g(v: [f64; 2]) -> [f64; 2] { swap(v) * 2.0 }
"""


def test_host_functions_in_python():
    import math
    prog = autobatch.compile(HOSTS)
    with pytest.raises(ValueError, match="host primitive `lgamma` \\(called by `f`\\) has no host function"):
        prog.run("f", batch={"x": [1.0]})
    with pytest.raises(ValueError, match="`nope` is not a host primitive"):
        prog.with_host("nope", abs)

    def lgamma(x):
        if x <= 0:
            raise ValueError(f"lgamma of {x}")
        return math.lgamma(x)

    with_lgamma = prog.with_host("lgamma", lgamma)
    for strategy in STRATEGIES:
        res = with_lgamma.run("f", batch={"x": [1.0, 5.0, -1.0]}, strategy=strategy, threads=2)
        assert res.values[:2] == [1.0, math.lgamma(5.0) + 1.0], strategy
        assert res.errors[2]["kind"] == "host_error"
        assert "lgamma of -1.0" in res.errors[2]["message"]
    both = with_lgamma.with_host("swap", lambda v: v[::-1])   # a numpy array in and out
    res = both.run("g", batch={"v": [[1.0, 2.0], [3.0, 4.0]]})
    assert [v.tolist() for v in res.values] == [[4.0, 2.0], [8.0, 6.0]]
    wrong = with_lgamma.with_host("swap", lambda v: [1.0, 2.0, 3.0])
    res = wrong.run("g", batch={"v": [[1.0, 2.0]]})
    assert res.errors[0]["message"] == "host primitive `swap` returned [f64; 3], but is declared to return [f64; 2]"


def test_a_batched_host_function_takes_many_calls_at_once():
    import math
    prog = autobatch.compile(HOSTS)
    widths = []

    def lgamma(xs):                      # xs: the calls' operands, stacked
        widths.append(len(xs))
        if (xs <= 0).any():
            raise ValueError("lgamma of a non-positive number")
        return np.array([math.lgamma(x) for x in xs])

    batched = prog.with_host("lgamma", lgamma, batched=True)
    res = batched.run("f", batch={"x": [1.0, 5.0, -1.0, 3.0]}, strategy="program-counter")
    assert res.values[0] == 1.0 and res.values[1] == math.lgamma(5.0) + 1.0
    assert res.values[3] == math.lgamma(3.0) + 1.0
    assert res.errors[2]["kind"] == "host_error"
    assert "non-positive" in res.errors[2]["message"]
    assert widths[0] == 4                # one call for the four members, then each alone
    both = batched.with_host("swap", lambda vs: vs[:, ::-1], batched=True)
    res = both.run("g", batch={"v": [[1.0, 2.0], [3.0, 4.0]]})
    assert [v.tolist() for v in res.values] == [[4.0, 2.0], [8.0, 6.0]]


def test_gradients_with_respect_to_statics_summed_over_members():
    prog = autobatch.compile("""
extern "autobatch" { static W: [[f64; 2]; 2]; static B: [f64; 2]; }
fn loss(x: [f64; 2], y: [f64; 2]) -> f64 {
    let d = matvec(W, x) + B - y;
    0.5 * sum(d * d)
}
""")
    W = np.array([[0.5, -1.0], [2.0, 0.25]])
    B = np.array([0.1, -0.2])
    xs = np.array([[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]])
    ys = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])
    res = prog.run("loss", batch={"x": xs, "y": ys}, shared={"W": W, "B": B},
                   grad_statics=["W", "B"])
    residuals = xs @ W.T + B - ys
    np.testing.assert_allclose(res.values, 0.5 * (residuals ** 2).sum(axis=1))
    np.testing.assert_allclose(res.static_gradients["W"], residuals.T @ xs, rtol=1e-12)
    np.testing.assert_allclose(res.static_gradients["B"], residuals.sum(axis=0), rtol=1e-12)
    assert res.static_gradients["W"].dtype == np.float64
    # The same bits under every strategy.
    for strategy in ["reference", "local-static", "native"]:
        other = prog.run("loss", batch={"x": xs, "y": ys}, shared={"W": W, "B": B},
                         grad_statics=["W", "B"], strategy=strategy)
        assert (other.static_gradients["W"] == res.static_gradients["W"]).all()
    assert prog.run("loss", batch={"x": xs, "y": ys}, shared={"W": W, "B": B}).static_gradients == {}
    with pytest.raises(ValueError, match="no static named `V`"):
        prog.run("loss", batch={"x": xs, "y": ys}, shared={"W": W, "B": B}, grad_statics=["V"])
