"""BoundProgram.train: the training loop of `autobatch train`, checked
against closed forms (numpy's least squares, Adam's update written out)
and against the command line on the same data and seed (same bits)."""

import json
import os
import subprocess

import numpy as np
import pytest

import autobatch

LINEAR = """
extern "autobatch" { static w: [f64; 3]; static b: f64; }
fn loss(x: [f64; 3], y: f64) -> f64 { let r = dot(w, x) + b - y; r * r }
fn squared_error(x: [f64; 3], y: f64) -> f64 { loss(x, y) }
"""


def linear_data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.25 + 0.1 * rng.normal(size=n)
    return x, y


def bound_linear(w=(0.0, 0.0, 0.0), b=0.0):
    return autobatch.compile(LINEAR).bind(shared={"w": np.array(w), "b": b})


def test_least_squares_converges_to_lstsq():
    x, y = linear_data(64, seed=1)
    bound = bound_linear()
    # Full-batch gradient descent on the mean squared error.
    history = bound.train("loss", batch={"x": x, "y": y}, optimizer="sgd", lr=0.1,
                          batch_size=64, epochs=300, threads=1)
    design = np.hstack([x, np.ones((64, 1))])
    expected, *_ = np.linalg.lstsq(design, y, rcond=None)
    np.testing.assert_allclose(bound.statics["w"], expected[:3], rtol=0, atol=1e-10)
    assert abs(bound.statics["b"] - expected[3]) < 1e-10
    assert len(history["steps"]) == 300 and len(history["epochs"]) == 300
    residual = design @ expected - y
    assert history["epochs"][-1]["loss"] == pytest.approx(np.mean(residual**2), rel=1e-9)


def test_one_adam_step_is_the_written_out_update():
    bound = autobatch.compile(
        'extern "autobatch" { static w: f64; }\n'
        "fn loss(x: f64, y: f64) -> f64 { let e = w * x - y; e * e }"
    ).bind(shared={"w": 0.5})
    x, y, w, lr = np.array([2.0, -1.0]), np.array([3.0, 0.5]), 0.5, 0.01
    history = bound.train("loss", batch={"x": x, "y": y}, optimizer="adam", lr=lr,
                          batch_size=2, epochs=1)
    g = np.mean(2 * (w * x - y) * x)  # the gradient of the mean loss
    m = (1 - 0.9) * g
    v = (1 - 0.999) * g * g
    expected = w - lr / (1 - 0.9) * m / (np.sqrt(v) / np.sqrt(1 - 0.999) + 1e-8)
    assert bound.statics["w"] == pytest.approx(expected, rel=1e-15)
    (step,) = history["steps"]
    assert step["loss"] == pytest.approx(np.mean((w * x - y) ** 2), rel=1e-15)
    assert step["grad_norm"] == pytest.approx(abs(g), rel=1e-15)
    assert step["lr"] == lr and step["members"] == 2 and step["faulted"] == 0


def test_adamw_decays_the_weights_before_the_step():
    bound = autobatch.compile(
        'extern "autobatch" { static w: f64; }\n'
        "fn loss(x: f64) -> f64 { w * x }"
    ).bind(shared={"w": 2.0})
    bound.train("loss", batch={"x": [1.0]}, optimizer="adamw", lr=0.1, weight_decay=0.5,
                batch_size=1)
    # p *= 1 - lr*wd, then Adam's first step with the gradient g = x = 1.
    g, lr = 1.0, 0.1
    m, v = (1 - 0.9) * g, (1 - 0.999) * g * g
    decayed = 2.0 * (1 - lr * 0.5)
    expected = decayed - lr / (1 - 0.9) * m / (np.sqrt(v) / np.sqrt(1 - 0.999) + 1e-8)
    assert bound.statics["w"] == pytest.approx(expected, rel=1e-15)


def test_dev_metric_each_epoch_is_the_eval_entry_at_the_epochs_statics():
    x, y = linear_data(40, seed=2)
    xd, yd = linear_data(10, seed=3)
    bound = bound_linear()
    history = bound.train("loss", batch={"x": x, "y": y}, optimizer="sgd", lr=0.05,
                          momentum=0.9, nesterov=True, batch_size=8, epochs=3, seed=5,
                          eval="squared_error", dev={"x": xd, "y": yd})
    assert [e["epoch"] for e in history["epochs"]] == [1, 2, 3]
    assert [s["step"] for s in history["steps"]] == list(range(1, 16))
    w, b = bound.statics["w"], bound.statics["b"]
    dev = history["epochs"][-1]["dev"]
    assert dev["members"] == 10 and dev["faulted"] == 0
    assert dev["mean"] == pytest.approx(np.mean((xd @ w + b - yd) ** 2), rel=1e-12)


def test_resume_from_a_checkpoint_gives_the_bits_of_the_whole_run(tmp_path):
    x, y = linear_data(30, seed=4)
    # A constant rate after the warmup: a decaying schedule spans the epochs
    # asked for, so a run of two epochs is not the first half of four.
    options = dict(optimizer="adam", lr=0.05, batch_size=7, seed=11, warmup_steps=3,
                   clip_norm=1.0)
    whole = bound_linear()
    checkpoint = tmp_path / "ck.npz"
    whole_history = whole.train("loss", batch={"x": x, "y": y}, epochs=4,
                                checkpoint=str(checkpoint), **options)
    saved = np.load(checkpoint)
    assert int(saved["train/epoch"]) == 4 and saved["train/step"].dtype == np.uint64
    assert set(saved.files) >= {"w", "b", "optimizer/w/exp_avg", "optimizer/b/exp_avg_sq"}
    np.testing.assert_array_equal(saved["w"], whole.statics["w"])

    # Two epochs, then the other two resumed from the checkpoint of the second.
    half = bound_linear()
    half.train("loss", batch={"x": x, "y": y}, epochs=2, checkpoint=str(checkpoint), **options)
    resumed = bound_linear(w=(9.0, 9.0, 9.0), b=9.0)  # replaced by the checkpoint's
    rest = resumed.train("loss", batch={"x": x, "y": y}, epochs=4, resume=str(checkpoint),
                         **options)
    assert resumed.statics["w"].tobytes() == whole.statics["w"].tobytes()
    assert resumed.statics["b"] == whole.statics["b"]
    assert [s["loss"] for s in rest["steps"]] == [s["loss"] for s in whole_history["steps"][10:]]


def test_bad_options_raise_and_leave_the_statics():
    bound = bound_linear(w=(1.0, 2.0, 3.0))
    data = {"x": np.zeros((4, 3)), "y": np.zeros(4)}
    with pytest.raises(ValueError, match="unknown optimizer `rmsprop`"):
        bound.train("loss", batch=data, optimizer="rmsprop")
    with pytest.raises(ValueError, match="unknown schedule"):
        bound.train("loss", batch=data, schedule="step")
    with pytest.raises(ValueError, match="no static named `v` to train"):
        bound.train("loss", batch=data, train=["v"])
    with pytest.raises(ValueError, match="an evaluation entry needs a dev set"):
        bound.train("loss", batch=data, eval="squared_error")
    with pytest.raises(ValueError, match="not an .npz file"):
        bound.train("loss", batch=data, checkpoint="model.pt")
    with pytest.raises(ValueError, match="batch_size"):
        bound.train("loss", batch=data, batch_size=0)
    np.testing.assert_array_equal(bound.statics["w"], [1.0, 2.0, 3.0])


def cli():
    path = os.environ.get("AUTOBATCH_CLI")
    if not path:
        pytest.skip("AUTOBATCH_CLI names no `autobatch` binary (tools/test-python sets it)")
    return path


def test_the_python_loop_gives_the_bits_of_autobatch_train(tmp_path):
    x, y = linear_data(23, seed=6)
    (tmp_path / "linear.ab").write_text(LINEAR)
    np.savez(tmp_path / "data.npz", **{"batch/x": x, "batch/y": y})
    np.savez(tmp_path / "init.npz", w=np.array([0.1, 0.2, 0.3]), b=np.array(-0.1))
    np.savez(tmp_path / "dev.npz", **{"batch/x": x[:5], "batch/y": y[:5]})
    subprocess.run(
        [cli(), "train", str(tmp_path / "linear.ab"), "--entry", "loss",
         "--data", str(tmp_path / "data.npz"), "--statics", str(tmp_path / "init.npz"),
         "--optimizer", "adamw", "--lr", "0.03", "--weight-decay", "0.02",
         "--batch-size", "4", "--epochs", "3", "--seed", "9", "--schedule", "linear",
         "--warmup-steps", "2", "--clip-norm", "0.5", "--eval", "squared_error",
         "--dev", str(tmp_path / "dev.npz"), "--log", str(tmp_path / "log.json"),
         "--checkpoint", str(tmp_path / "cli.npz"), "--threads", "2"],
        check=True, capture_output=True,
    )
    bound = bound_linear(w=(0.1, 0.2, 0.3), b=-0.1)
    history = bound.train("loss", batch={"x": x, "y": y}, optimizer="adamw", lr=0.03,
                          weight_decay=0.02, batch_size=4, epochs=3, seed=9,
                          schedule="linear", warmup_steps=2, clip_norm=0.5,
                          eval="squared_error", dev={"x": x[:5], "y": y[:5]},
                          checkpoint=str(tmp_path / "py.npz"), threads=1)
    log = json.loads((tmp_path / "log.json").read_text())
    for key in ["loss", "grad_norm", "lr"]:
        assert [s[key] for s in history["steps"]] == [s[key] for s in log["steps"]]
    assert [e["dev"]["mean"] for e in history["epochs"]] == [e["dev"]["mean"] for e in log["epochs"]]
    ours, theirs = np.load(tmp_path / "py.npz"), np.load(tmp_path / "cli.npz")
    assert sorted(ours.files) == sorted(theirs.files)
    for name in ours.files:
        assert ours[name].dtype == theirs[name].dtype, name
        assert ours[name].tobytes() == theirs[name].tobytes(), name
