"""`Program.bind`: statics bound once and read back, replaced, used by
every batch; numpy arrays read through their buffers, in any order and
element type of the declared family; results stacked."""

import numpy as np
import pytest

import autobatch

AFFINE = """
extern "autobatch" {
    static W: [[f64; D]; H];
    static B: [f64; H];
    static SCALE: f32;
}
fn affine(x: [f64; D]) -> [f64; H] { (matvec(W, x) + B) * (SCALE as f64) }
fn pick(x: [f64; D], i: usize) -> f64 { x[i] * W[0][0] }
fn count(ks: [i64; 3]) -> i64 { ks[0] + ks[1] + ks[2] }
fn scaled(k: f64) -> f64 { k * (SCALE as f64) }
"""

W = np.arange(6, dtype=np.float64).reshape(2, 3) / 4
B = np.array([0.5, -1.0])


def bound_affine():
    prog = autobatch.compile(AFFINE)
    return prog, prog.bind(shared={"W": W, "B": B, "SCALE": 2.0})


def expected(x, w=W, b=B, scale=2.0):
    return (x @ w.T + b) * scale


def test_a_bound_program_runs_batches_with_its_statics():
    prog, bound = bound_affine()
    x = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]])
    for strategy in ["reference", "program-counter", "local-static", "native", "native-batched"]:
        res = bound.run("affine", batch={"x": x}, strategy=strategy, seed=0, threads=1)
        np.testing.assert_array_equal(res.stacked(), expected(x))
        assert res.stats["strategy"] == strategy
    # The same results as Program.run with the statics given each time.
    again = prog.run("affine", batch={"x": x}, shared={"W": W, "B": B, "SCALE": 2.0})
    np.testing.assert_array_equal(again.stacked(), bound.run("affine", batch={"x": x}).stacked())
    assert "W" in repr(bound)


def test_statics_read_back_replace_one_and_keep_the_others():
    _, bound = bound_affine()
    assert list(bound.statics) == ["W", "B", "SCALE"]
    assert len(bound.statics) == 3 and "W" in bound.statics and "V" not in bound.statics
    np.testing.assert_array_equal(bound.statics["W"], W)
    assert bound.statics["W"].dtype == np.float64
    assert bound.statics["SCALE"].dtype == np.float32
    # A read is a copy: changing it changes nothing bound.
    bound.statics["W"][0, 0] = 99.0
    np.testing.assert_array_equal(bound.statics["W"], W)
    with pytest.raises(KeyError):
        bound.statics["V"]

    x = np.array([[1.0, 2.0, 3.0]])
    W2 = W * 10
    bound.set_static("W", W2)
    np.testing.assert_array_equal(bound.statics["W"], W2)
    np.testing.assert_array_equal(bound.statics["B"], B)
    np.testing.assert_array_equal(bound.run("affine", batch={"x": x}).stacked(), expected(x, w=W2))
    bound.set_static("SCALE", 0.5)
    np.testing.assert_array_equal(bound.run("affine", batch={"x": x}).stacked(),
                                  expected(x, w=W2, scale=0.5))


def test_set_static_checks_the_value_like_binding():
    _, bound = bound_affine()
    with pytest.raises(ValueError,
                       match=r"symbolic dimension `H` is 2 in static `B` but 3 in static `W`"):
        bound.set_static("W", np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"no static named `V` in <string> \(statics: W, B, SCALE\)"):
        bound.set_static("V", np.zeros(2))
    with pytest.raises(ValueError, match=r"static `W` must be an array of numbers \(f64\), found an array of bool"):
        bound.set_static("W", np.zeros((2, 3), dtype=bool))
    # Nothing changed.
    np.testing.assert_array_equal(bound.statics["W"], W)


def test_batches_may_not_name_a_bound_static():
    _, bound = bound_affine()
    with pytest.raises(ValueError, match="static `W` is bound already"):
        bound.run("affine", batch={"x": [[1.0, 2.0, 3.0]]}, shared={"W": W})
    with pytest.raises(ValueError, match="missing static `SCALE`: give it in `shared`"):
        autobatch.compile(AFFINE).bind(shared={"W": W, "B": B})


def test_shared_arguments_bound_with_the_statics():
    prog = autobatch.compile(AFFINE)
    bound = prog.bind(shared={"W": W, "B": B, "SCALE": 2.0, "i": 1})
    res = bound.run("pick", batch={"x": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])})
    assert res.values == [2.0 * W[0, 0], 5.0 * W[0, 0]]


def test_gradients_against_the_resident_statics():
    prog = autobatch.compile("""
extern "autobatch" { static W: [f64; 2]; }
fn loss(x: [f64; 2]) -> f64 { let d = W * x; 0.5 * sum(d * d) }
""")
    bound = prog.bind(shared={"W": np.array([0.5, -2.0])})
    xs = np.array([[1.0, 2.0], [3.0, -1.0]])
    for step in range(3):
        w = bound.statics["W"]
        res = bound.run("loss", batch={"x": xs}, grad_statics=["W"])
        np.testing.assert_allclose(res.static_gradients["W"], (w * xs * xs).sum(axis=0), rtol=1e-12)
        bound.set_static("W", w - 0.1 * res.static_gradients["W"])
    assert not np.array_equal(bound.statics["W"], [0.5, -2.0])


@pytest.mark.parametrize("order", ["C", "F"])
def test_arrays_in_either_order_and_strided(order):
    _, bound = bound_affine()
    x = np.asarray(np.arange(12, dtype=np.float64).reshape(4, 3) / 8, order=order)
    res = bound.run("affine", batch={"x": x})
    np.testing.assert_array_equal(res.stacked(), expected(np.ascontiguousarray(x)))
    # A strided view (every other row, reversed columns).
    view = np.arange(24, dtype=np.float64).reshape(8, 3)[::2, ::-1]
    res = bound.run("affine", batch={"x": view})
    np.testing.assert_array_equal(res.stacked(), expected(view.copy()))
    # Statics in Fortran order too.
    prog = autobatch.compile(AFFINE)
    fortran = prog.bind(shared={"W": np.asfortranarray(W), "B": B, "SCALE": 2.0})
    np.testing.assert_array_equal(fortran.statics["W"], W)


def test_element_types_convert_within_their_family():
    prog = autobatch.compile(AFFINE)
    # float32 for f64 statics and arguments, float64 for an f32 static.
    w32 = W.astype(np.float32)
    bound = prog.bind(shared={"W": w32, "B": B.astype(np.float32), "SCALE": np.array(2.0)})
    x32 = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    res = bound.run("affine", batch={"x": x32})
    np.testing.assert_array_equal(res.stacked(),
                                  expected(x32.astype(np.float64), w=w32.astype(np.float64)))
    assert bound.statics["W"].dtype == np.float64
    # int32, int16, uint8 for i64; integers for floats.
    for dtype in [np.int32, np.int16, np.uint8, np.int64, np.uint64]:
        res = bound.run("count", batch={"ks": np.array([[1, 2, 3], [4, 5, 6]], dtype=dtype)})
        assert res.values == [6, 15], dtype
    res = bound.run("scaled", batch={"k": np.array([1, 2], dtype=np.int32)})
    assert res.values == [2.0, 4.0]
    # Big-endian and half-precision arrays convert first.
    res = bound.run("affine", batch={"x": np.array([[1.0, 2.0, 3.0]], dtype=">f8")})
    np.testing.assert_array_equal(res.stacked(), expected(np.array([[1.0, 2.0, 3.0]])))
    res = bound.run("scaled", batch={"k": np.array([1.5], dtype=np.float16)})
    assert res.values == [3.0]


@pytest.mark.parametrize(
    "batch, error, message",
    [
        ({"ks": np.array([[1.0, 2.0, 3.0]])}, ValueError,
         "argument `ks` of member 0 must be an array of integers (i64), found an array of float64"),
        ({"ks": np.array([[1, 2, 3]], dtype=np.uint64) * (2**63)}, ValueError,
         "argument `ks` of member 0: `ks[0]` must fit i64, found 9223372036854775808 in an array of uint64"),
        ({"ks": np.array([[1, 2]])}, ValueError,
         "argument `ks` of member 0 is an array of int64 with shape [2], but its type `[i64; 3]` needs shape [3]"),
        ({"ks": np.array([[[1, 2, 3]]])}, ValueError,
         "argument `ks` of member 0 is an array of int64 with shape [1, 3], but its type `[i64; 3]` needs shape [3]"),
        ({"ks": np.array([[None, 1, 2]], dtype=object)}, TypeError,
         "batched argument `ks` is a numpy array of object, which cannot be an input"),
        ({"ks": np.array([["a", "b", "c"]])}, TypeError,
         "batched argument `ks` is a numpy array of <U1, which cannot be an input"),
        ({"ks": np.array(3)}, TypeError,
         "batched argument `ks` must be a list or array with one value per member"),
    ],
)
def test_array_errors_name_the_argument_and_the_shapes(batch, error, message):
    _, bound = bound_affine()
    with pytest.raises(error) as raised:
        bound.run("count", batch=batch)
    assert message in str(raised.value)


def test_a_static_of_the_wrong_shape_names_expected_and_found():
    prog = autobatch.compile(AFFINE)
    with pytest.raises(ValueError) as raised:
        prog.bind(shared={"W": np.zeros((2, 3, 1)), "B": B, "SCALE": 1.0})
    assert str(raised.value) == (
        "static `W` is an array of float64 with shape [2, 3, 1], "
        "but its type `[[f64; D]; H]` needs shape [H, D]")


def test_stacked_results():
    prog = autobatch.compile("""
fn pair(x: f64) -> (f64, [i64; 2]) { (x * 2.0, [1, 2]) }
fn pick(xs: [f64; 3], i: usize) -> f64 { xs[i] }
fn grow(xs: [f64; L]) -> [f64; L] { xs }
""")
    doubled, ints = prog.run("pair", batch={"x": np.array([1.0, 2.0, 3.0])}).stacked()
    assert doubled.dtype == np.float64 and doubled.tolist() == [2.0, 4.0, 6.0]
    assert ints.dtype == np.int64 and ints.shape == (3, 2)
    res = prog.run("pick", batch={"i": [0, 7]}, shared={"xs": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="member 1 failed \\(index_out_of_bounds"):
        res.stacked()
    ragged = prog.run("grow", batch={"xs": [np.ones(2), np.ones(3)]})
    with pytest.raises(ValueError, match="member 1's result has shape \\[3\\] but member 0's has \\[2\\]"):
        ragged.stacked()
    assert [v.tolist() for v in ragged.values] == [[1.0, 1.0], [1.0, 1.0, 1.0]]
