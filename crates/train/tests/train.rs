//! The training loop against independent references: each optimizer's
//! first steps against the textbook update written out here, with the
//! gradient in closed form; linear regression against the least-squares
//! solution of the normal equations; schedules and clipping against their
//! closed forms; resumption and threads against an uninterrupted run.

use autobatch::{compile, BoundProgram, Inputs, Strategy};
use autobatch_train::trainer::values_f64;
use autobatch_train::{
    OptimizerConfig, OptimizerKind, Schedule, ScheduleKind, TrainConfig, TrainError, Trainer,
};

/// `loss(t) = sum((W - t)^2)`: the gradient of the mean loss over members
/// `t_1..t_n` is `2 (W - mean(t))`.
const QUADRATIC: &str = "extern \"autobatch\" { static W: [f64; 3]; static K: i64; }
fn loss(t: [f64; 3]) -> f64 { let d = W - t; sum(d * d) }
fn close(t: [f64; 3]) -> bool { let d = W - t; sum(d * d) < 1.0 }
fn picky(t: [f64; 3], i: i64) -> f64 { let d = W - t; let xs = [1.0, 2.0]; sum(d * d) * xs[i] }";

const TARGETS: [[f64; 3]; 4] = [
    [1.0, -2.0, 0.5],
    [0.0, 3.0, 1.5],
    [2.0, 1.0, -1.0],
    [-1.0, 0.5, 2.0],
];
const W0: [f64; 3] = [0.3, -0.7, 1.1];

fn quadratic() -> BoundProgram {
    let program = compile(QUADRATIC, "quadratic.ab").unwrap();
    let statics = Inputs::new().shared("W", W0.to_vec()).shared("K", 2_i64);
    program.with_statics(&statics).unwrap()
}

fn targets() -> Inputs {
    Inputs::new().batched("t", TARGETS.iter().map(|t| t.to_vec()))
}

fn config(kind: OptimizerKind, lr: f64) -> TrainConfig {
    let mut config = TrainConfig::new("loss");
    config.trained = vec!["W".to_owned()];
    config.optimizer = OptimizerConfig {
        lr,
        ..OptimizerConfig::new(kind)
    };
    config.batch_size = TARGETS.len();
    config.run.options.threads = 1;
    config
}

fn trained(trainer: &Trainer, name: &str) -> Vec<f64> {
    values_f64(trainer.bound().static_value(name).unwrap())
}

fn mean_target() -> [f64; 3] {
    let mut mean = [0.0; 3];
    for t in TARGETS {
        for k in 0..3 {
            mean[k] += t[k] / TARGETS.len() as f64;
        }
    }
    mean
}

/// The reference: `steps` full-batch updates of `W` by the textbook rule.
fn reference(config: &OptimizerConfig, steps: usize) -> Vec<f64> {
    let mean = mean_target();
    let mut w = W0.to_vec();
    let (mut m, mut v, mut b) = (vec![0.0; 3], vec![0.0; 3], vec![0.0; 3]);
    for t in 1..=steps {
        for k in 0..3 {
            let mut g = 2.0 * (w[k] - mean[k]);
            match config.kind {
                OptimizerKind::Sgd => {
                    g += config.weight_decay * w[k];
                    if config.momentum > 0.0 {
                        b[k] = if t == 1 {
                            g
                        } else {
                            config.momentum * b[k] + g
                        };
                        g = if config.nesterov {
                            g + config.momentum * b[k]
                        } else {
                            b[k]
                        };
                    }
                    w[k] -= config.lr * g;
                }
                OptimizerKind::Adam | OptimizerKind::AdamW => {
                    if config.kind == OptimizerKind::AdamW {
                        w[k] *= 1.0 - config.lr * config.weight_decay;
                    } else {
                        g += config.weight_decay * w[k];
                    }
                    m[k] = config.beta1 * m[k] + (1.0 - config.beta1) * g;
                    v[k] = config.beta2 * v[k] + (1.0 - config.beta2) * g * g;
                    let m_hat = m[k] / (1.0 - config.beta1.powi(t as i32));
                    let v_hat = v[k] / (1.0 - config.beta2.powi(t as i32));
                    w[k] -= config.lr * m_hat / (v_hat.sqrt() + config.eps);
                }
            }
        }
    }
    w
}

fn assert_close(got: &[f64], want: &[f64], tolerance: f64) {
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= tolerance * w.abs().max(1.0),
            "{got:?} != {want:?}"
        );
    }
}

#[test]
fn each_optimizer_first_steps_match_the_textbook_update() {
    let variants = [
        OptimizerConfig {
            lr: 0.1,
            ..OptimizerConfig::new(OptimizerKind::Sgd)
        },
        OptimizerConfig {
            lr: 0.1,
            weight_decay: 0.05,
            ..OptimizerConfig::new(OptimizerKind::Sgd)
        },
        OptimizerConfig {
            lr: 0.05,
            momentum: 0.9,
            ..OptimizerConfig::new(OptimizerKind::Sgd)
        },
        OptimizerConfig {
            lr: 0.05,
            momentum: 0.8,
            nesterov: true,
            weight_decay: 0.01,
            ..OptimizerConfig::new(OptimizerKind::Sgd)
        },
        OptimizerConfig {
            lr: 0.1,
            ..OptimizerConfig::new(OptimizerKind::Adam)
        },
        OptimizerConfig {
            lr: 0.1,
            weight_decay: 0.1,
            ..OptimizerConfig::new(OptimizerKind::Adam)
        },
        OptimizerConfig {
            lr: 0.1,
            ..OptimizerConfig::new(OptimizerKind::AdamW)
        },
        OptimizerConfig {
            lr: 0.02,
            weight_decay: 0.3,
            beta1: 0.5,
            beta2: 0.9,
            eps: 1e-3,
            ..OptimizerConfig::new(OptimizerKind::AdamW)
        },
    ];
    for optimizer in variants {
        let mut config = config(optimizer.kind, optimizer.lr);
        config.optimizer = optimizer;
        config.epochs = 5;
        let mut trainer = Trainer::new(quadratic(), config, targets()).unwrap();
        let history = trainer.fit(None, &mut |_, _| {}).unwrap();
        assert_eq!(history.steps.len(), 5);
        assert_close(&trained(&trainer, "W"), &reference(&optimizer, 5), 1e-12);
    }
}

#[test]
fn pytorch_defaults() {
    let adamw = OptimizerConfig::new(OptimizerKind::AdamW);
    assert_eq!(
        (
            adamw.lr,
            adamw.weight_decay,
            adamw.beta1,
            adamw.beta2,
            adamw.eps
        ),
        (1e-3, 1e-2, 0.9, 0.999, 1e-8)
    );
    let adam = OptimizerConfig::new(OptimizerKind::Adam);
    assert_eq!(adam.weight_decay, 0.0);
    let sgd = OptimizerConfig::new(OptimizerKind::Sgd);
    assert_eq!((sgd.lr, sgd.momentum, sgd.nesterov), (1e-3, 0.0, false));
}

/// The records of a step: the mean loss, the norm of the mean's gradient.
#[test]
fn step_records_hold_the_mean_loss_and_its_gradient_norm() {
    let mut trainer =
        Trainer::new(quadratic(), config(OptimizerKind::Sgd, 0.1), targets()).unwrap();
    let record = trainer.step().unwrap().unwrap();
    let mean = mean_target();
    let loss: f64 = TARGETS
        .iter()
        .map(|t| (0..3).map(|k| (W0[k] - t[k]).powi(2)).sum::<f64>())
        .sum::<f64>()
        / 4.0;
    let norm = (0..3)
        .map(|k| (2.0 * (W0[k] - mean[k])).powi(2))
        .sum::<f64>()
        .sqrt();
    assert_close(&[record.loss, record.grad_norm], &[loss, norm], 1e-12);
    assert_eq!(
        (record.epoch, record.step, record.members, record.faulted),
        (1, 1, 4, 0)
    );
    assert!(record.ends_epoch && record.lr == 0.1);
    assert!(trainer.step().unwrap().is_none(), "one epoch of one step");
}

/// Least squares: `y = w . x + b` fitted to noisy data reaches the solution
/// of the normal equations.
const REGRESSION: &str = "extern \"autobatch\" { static w: [f64; 2]; static b: f64; }
fn loss(x: [f64; 2], y: f64) -> f64 { let e = sum(w * x) + b - y; e * e }";

fn regression_data() -> (Vec<[f64; 2]>, Vec<f64>) {
    let xs: Vec<[f64; 2]> = (0..12)
        .map(|i| {
            let i = i as f64;
            [(i * 0.37).sin() * 2.0, (i * 1.3).cos()]
        })
        .collect();
    // A fixed, irregular "noise" keeps the fit from being exact.
    let ys = xs
        .iter()
        .enumerate()
        .map(|(i, x)| 1.5 * x[0] - 0.75 * x[1] + 0.25 + 0.1 * ((i * 7 % 5) as f64 - 2.0))
        .collect();
    (xs, ys)
}

/// The normal equations `(A^T A) p = A^T y` with rows `[x0, x1, 1]`,
/// solved by Cramer's rule.
fn least_squares(xs: &[[f64; 2]], ys: &[f64]) -> [f64; 3] {
    let mut m = [[0.0; 3]; 3];
    let mut r = [0.0; 3];
    for (x, y) in xs.iter().zip(ys) {
        let row = [x[0], x[1], 1.0];
        for i in 0..3 {
            r[i] += row[i] * y;
            for j in 0..3 {
                m[i][j] += row[i] * row[j];
            }
        }
    }
    let det = |m: &[[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(&m);
    let mut p = [0.0; 3];
    for (k, p) in p.iter_mut().enumerate() {
        let mut mk = m;
        for i in 0..3 {
            mk[i][k] = r[i];
        }
        *p = det(&mk) / d;
    }
    p
}

fn regression(
    kind: OptimizerKind,
    lr: f64,
    batch_size: usize,
    epochs: u64,
    schedule: ScheduleKind,
) -> Vec<f64> {
    let (xs, ys) = regression_data();
    let program = compile(REGRESSION, "regression.ab").unwrap();
    let bound = program
        .with_statics(&Inputs::new().shared("w", vec![0.0, 0.0]).shared("b", 0.0))
        .unwrap();
    let data = Inputs::new()
        .batched("x", xs.iter().map(|x| x.to_vec()))
        .batched("y", ys);
    let mut config = config(kind, lr);
    config.trained = Vec::new();
    config.batch_size = batch_size;
    config.epochs = epochs;
    config.schedule = schedule;
    let mut trainer = Trainer::new(bound, config, data).unwrap();
    trainer.fit(None, &mut |_, _| {}).unwrap();
    assert_eq!(
        trainer.trained(),
        ["w", "b"],
        "every float static, in order"
    );
    let mut fitted = trained(&trainer, "w");
    fitted.extend(trained(&trainer, "b"));
    fitted
}

#[test]
fn linear_regression_by_sgd_reaches_least_squares() {
    let (xs, ys) = regression_data();
    let want = least_squares(&xs, &ys);
    let got = regression(OptimizerKind::Sgd, 0.2, 12, 600, ScheduleKind::Constant);
    assert_close(&got, &want, 1e-9);
}

#[test]
fn linear_regression_by_adam_reaches_least_squares() {
    let (xs, ys) = regression_data();
    let want = least_squares(&xs, &ys);
    let got = regression(OptimizerKind::Adam, 0.05, 12, 1500, ScheduleKind::Cosine);
    assert_close(&got, &want, 1e-4);
}

#[test]
fn schedules_follow_their_closed_forms() {
    let at = |kind, warmup, step| {
        Schedule {
            kind,
            warmup,
            total: 110,
        }
        .factor(step)
    };
    use ScheduleKind::*;
    for kind in [Constant, Linear, Cosine] {
        assert_eq!(at(kind, 10, 0), 0.0, "{kind}: warmup starts at 0");
        assert_eq!(at(kind, 10, 5), 0.5, "{kind}: halfway through warmup");
        assert_eq!(at(kind, 10, 10), 1.0, "{kind}: warmup done");
    }
    assert_eq!(at(Constant, 0, 0), 1.0);
    assert_eq!(at(Constant, 10, 109), 1.0);
    assert_eq!(at(Linear, 10, 60), 0.5);
    assert_eq!(at(Linear, 10, 85), 0.25);
    assert_eq!(at(Linear, 10, 110), 0.0);
    assert_eq!(at(Linear, 0, 11), 0.9);
    assert!((at(Cosine, 10, 60) - 0.5).abs() < 1e-15);
    assert!((at(Cosine, 10, 35) - (2.0 + 2f64.sqrt()) / 4.0).abs() < 1e-15);
    assert!(at(Cosine, 10, 110).abs() < 1e-15);
}

#[test]
fn the_learning_rate_of_each_step_follows_the_schedule() {
    let mut config = config(OptimizerKind::Sgd, 0.1);
    config.batch_size = 1;
    config.epochs = 2;
    config.schedule = ScheduleKind::Linear;
    config.warmup_steps = 2;
    let mut trainer = Trainer::new(quadratic(), config, targets()).unwrap();
    let history = trainer.fit(None, &mut |_, _| {}).unwrap();
    let lrs: Vec<f64> = history.steps.iter().map(|s| s.lr).collect();
    // Warmup 0, 1/2; then (8 - s) / 6 for s = 2..7.
    let want: Vec<f64> = [
        0.0,
        0.5,
        1.0,
        5.0 / 6.0,
        4.0 / 6.0,
        0.5,
        2.0 / 6.0,
        1.0 / 6.0,
    ]
    .iter()
    .map(|f| 0.1 * f)
    .collect();
    assert_close(&lrs, &want, 1e-15);
    assert_eq!(history.epochs.len(), 2);
}

#[test]
fn clipping_scales_the_gradient_to_the_bound() {
    use autobatch_train::clip::{clip_to, global_norm};
    use autobatch_types::{Data, Tensor};
    let mut gradients = vec![
        Tensor::new(vec![1], Data::F64(vec![3.0])),
        Tensor::new(vec![1], Data::F32(vec![4.0])),
    ];
    let norm = global_norm(&gradients);
    assert_eq!(norm, 5.0);
    clip_to(&mut gradients, norm, 1.0);
    assert_eq!(gradients[0].data, Data::F64(vec![3.0 / 5.000001]));
    assert_eq!(
        gradients[1].data,
        Data::F32(vec![(4.0 * (1.0 / 5.000001)) as f32])
    );
    let before = gradients.clone();
    clip_to(&mut gradients, 0.5, 1.0);
    assert_eq!(gradients, before, "under the bound nothing changes");

    // In a step: SGD at lr 1 moves W by the clipped gradient.
    let mut config = config(OptimizerKind::Sgd, 1.0);
    config.clip_norm = Some(0.5);
    let mut trainer = Trainer::new(quadratic(), config, targets()).unwrap();
    let record = trainer.step().unwrap().unwrap();
    let mean = mean_target();
    let g: Vec<f64> = (0..3).map(|k| 2.0 * (W0[k] - mean[k])).collect();
    let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
    let want: Vec<f64> = (0..3).map(|k| W0[k] - g[k] * 0.5 / (norm + 1e-6)).collect();
    assert_close(&trained(&trainer, "W"), &want, 1e-12);
    assert_close(&[record.grad_norm], &[norm], 1e-12);
}

fn shuffled_config(kind: OptimizerKind) -> TrainConfig {
    let mut config = config(kind, 0.05);
    config.batch_size = 3;
    config.epochs = 3;
    config.seed = 7;
    config.clip_norm = Some(2.0);
    config.schedule = ScheduleKind::Cosine;
    config.warmup_steps = 2;
    if kind == OptimizerKind::Sgd {
        config.optimizer.momentum = 0.9;
    }
    config
}

fn bits(trainer: &Trainer) -> Vec<u64> {
    trained(trainer, "W").iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_resumed_run_continues_with_the_same_bits() {
    let data = Inputs::new().batched(
        "t",
        (0..7).map(|i| vec![i as f64, 1.0 - i as f64, 0.5 * i as f64]),
    );
    for kind in [
        OptimizerKind::Sgd,
        OptimizerKind::Adam,
        OptimizerKind::AdamW,
    ] {
        let mut whole = Trainer::new(quadratic(), shuffled_config(kind), data.clone()).unwrap();
        let history = whole.fit(None, &mut |_, _| {}).unwrap();
        assert_eq!(history.steps.len(), 9);
        // Stopped mid-epoch (after 4 of 3 + 3 + 3 steps) and at an epoch's end.
        for stop in [4, 6] {
            let mut first = Trainer::new(quadratic(), shuffled_config(kind), data.clone()).unwrap();
            for _ in 0..stop {
                first.step().unwrap().unwrap();
            }
            let state = first.state();
            let mut config = shuffled_config(kind);
            config.seed = 99;
            let mut resumed = Trainer::new(quadratic(), config, data.clone()).unwrap();
            resumed.restore(state).unwrap();
            let rest = resumed.fit(None, &mut |_, _| {}).unwrap();
            assert_eq!(rest.steps.len(), 9 - stop);
            assert_eq!(bits(&resumed), bits(&whole), "{kind} stopped after {stop}");
            let losses = |steps: &[autobatch_train::StepRecord]| -> Vec<u64> {
                steps.iter().map(|s| s.loss.to_bits()).collect()
            };
            assert_eq!(losses(&rest.steps), losses(&history.steps[stop..]));
        }
    }
}

#[test]
fn the_same_bits_on_any_threads_and_strategy() {
    let data = Inputs::new().batched(
        "t",
        (0..40).map(|i| vec![(i as f64).sin(), 1.0 / (1.0 + i as f64), 0.1 * i as f64]),
    );
    let run = |strategy, threads| {
        let mut config = shuffled_config(OptimizerKind::Adam);
        config.batch_size = 16;
        config.run.strategy = strategy;
        config.run.options.threads = threads;
        let mut trainer = Trainer::new(quadratic(), config, data.clone()).unwrap();
        trainer.fit(None, &mut |_, _| {}).unwrap();
        bits(&trainer)
    };
    let one = run(Strategy::ProgramCounter, 1);
    assert_eq!(run(Strategy::ProgramCounter, 2), one);
    assert_eq!(run(Strategy::Reference, 1), one);
    assert_eq!(run(Strategy::LocalStatic, 2), one);
}

#[test]
fn a_faulting_member_contributes_nothing_and_is_counted() {
    // `picky` faults (index 5 out of bounds) for the members given i = 5.
    let with_faults = Inputs::new()
        .batched("t", TARGETS.iter().map(|t| t.to_vec()))
        .batched("i", [0_i64, 5, 0, 5]);
    let without = Inputs::new()
        .batched("t", [TARGETS[0].to_vec(), TARGETS[2].to_vec()])
        .batched("i", [0_i64, 0]);
    let run = |data: Inputs, batch_size| {
        let mut config = config(OptimizerKind::Adam, 0.1);
        config.loss = "picky".to_owned();
        config.batch_size = batch_size;
        let mut trainer = Trainer::new(quadratic(), config, data).unwrap();
        let history = trainer.fit(None, &mut |_, _| {}).unwrap();
        (bits(&trainer), history)
    };
    let (faulted, history) = run(with_faults, 4);
    let (clean, clean_history) = run(without, 2);
    assert_eq!(faulted, clean);
    let step = &history.steps[0];
    assert_eq!((step.members, step.faulted), (4, 2));
    assert_eq!(step.loss.to_bits(), clean_history.steps[0].loss.to_bits());
    let (member, message) = step.first_fault.clone().unwrap();
    assert_eq!(member, 1);
    assert!(message.contains("out of bounds"), "{message}");
}

#[test]
fn evaluation_after_each_epoch_is_the_mean_of_the_dev_results() {
    let mut config = config(OptimizerKind::Sgd, 0.1);
    config.epochs = 3;
    config.eval = Some("close".to_owned());
    // Half of the dev set is within distance 1 of the targets' mean, to
    // which W moves; the other half is far.
    let mean = mean_target();
    let dev = Inputs::new().batched(
        "t",
        [
            mean.to_vec(),
            vec![mean[0] + 0.1, mean[1], mean[2]],
            vec![9.0, 9.0, 9.0],
            vec![-9.0, 0.0, 0.0],
        ],
    );
    let mut trainer = Trainer::new(quadratic(), config, targets()).unwrap();
    let mut epochs_seen = 0;
    let history = trainer
        .fit(Some(&dev), &mut |_, event| {
            if let autobatch_train::Event::Epoch(_) = event {
                epochs_seen += 1;
            }
        })
        .unwrap();
    assert_eq!(epochs_seen, 3);
    let last = history.epochs[2].eval.clone().unwrap();
    assert_eq!((last.mean, last.members, last.faulted), (0.5, 4, 0));
    // After the first epoch W is one SGD step from W0, computed here.
    let w1: Vec<f64> = (0..3)
        .map(|k| W0[k] - 0.1 * 2.0 * (W0[k] - mean[k]))
        .collect();
    let near = |t: &[f64]| (0..3).map(|k| (w1[k] - t[k]).powi(2)).sum::<f64>() < 1.0;
    let dev_points = [
        mean.to_vec(),
        vec![mean[0] + 0.1, mean[1], mean[2]],
        vec![9.0, 9.0, 9.0],
        vec![-9.0, 0.0, 0.0],
    ];
    let want = dev_points.iter().filter(|t| near(t)).count() as f64 / 4.0;
    assert_eq!(history.epochs[0].eval.clone().unwrap().mean, want);
}

fn error(result: Result<Trainer, TrainError>) -> String {
    result.expect_err("an error").to_string()
}

#[test]
fn bad_requests_are_one_clear_error_each() {
    let mut unknown = config(OptimizerKind::Sgd, 0.1);
    unknown.trained = vec!["V".to_owned()];
    assert_eq!(
        error(Trainer::new(quadratic(), unknown, targets())),
        "no static named `V` to train in quadratic.ab (statics: W, K)"
    );
    let mut integer = config(OptimizerKind::Sgd, 0.1);
    integer.trained = vec!["K".to_owned()];
    assert_eq!(
        error(Trainer::new(quadratic(), integer, targets())),
        "cannot train the static `K`: its elements are i64, not floats"
    );
    let mut empty = config(OptimizerKind::Sgd, 0.1);
    empty.batch_size = 0;
    assert_eq!(
        error(Trainer::new(quadratic(), empty, targets())),
        "the batch size must be at least 1"
    );
    let mut nesterov = config(OptimizerKind::Adam, 0.1);
    nesterov.optimizer.nesterov = true;
    assert!(error(Trainer::new(quadratic(), nesterov, targets())).contains("Nesterov"));
    let mut trainer =
        Trainer::new(quadratic(), config(OptimizerKind::Sgd, 0.1), targets()).unwrap();
    let error = trainer.fit(Some(&targets()), &mut |_, _| {}).err().unwrap();
    assert_eq!(
        error.to_string(),
        "a dev set needs an evaluation entry to run on it"
    );
    assert_eq!(trainer.steps_taken(), 0);
}

/// An embedding `E` read by rows and a matrix `W` read whole.
const EMBEDDING: &str = "extern \"autobatch\" { static E: [[f64; 3]; 5]; static W: [[f64; 3]; 2]; }
fn loss(w: usize, y: [f64; 2]) -> f64 { let d = matvec(W, E[w]) - y; sum(d * d) }";

/// `tests/data/lazy_adam.json`, written by `tests/data/lazy_adam.py`
/// (numpy).
fn lazy_adam_reference() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/lazy_adam.json");
    autobatch::parse_strict_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(value: &serde_json::Value) -> Vec<f64> {
    match value {
        serde_json::Value::Array(items) => items.iter().flat_map(floats).collect(),
        other => vec![other.as_f64().unwrap()],
    }
}

fn matrix(value: &serde_json::Value) -> Vec<Vec<f64>> {
    let rows = value.as_array().unwrap();
    rows.iter().map(floats).collect()
}

/// A trainer of the embedding model on the reference's examples.
fn embedding_trainer(reference: &serde_json::Value, config: TrainConfig) -> Trainer {
    let program = compile(EMBEDDING, "embedding.ab").unwrap();
    let statics = Inputs::new()
        .shared("E", reference["E0"].clone())
        .shared("W", reference["W0"].clone());
    let each = |key: &str| reference[key].as_array().unwrap().clone();
    let data = Inputs::new()
        .batched("w", each("words"))
        .batched("y", each("targets"));
    Trainer::new(program.with_statics(&statics).unwrap(), config, data).unwrap()
}

fn embedding_config(dense_updates: bool) -> TrainConfig {
    let mut config = TrainConfig::new("loss");
    config.optimizer.lr = 0.01;
    config.batch_size = 2;
    config.epochs = 2;
    config.dense_updates = dense_updates;
    config.run.options.threads = 1;
    config
}

/// Adam on a model with an embedding table, against numpy: by default the
/// rows a mini-batch did not read keep their values and moments (lazy, as
/// DyNet and PyTorch's SparseAdam); with `dense_updates` every row is
/// updated at every step, as any other static.
#[test]
fn lazy_and_dense_adam_steps_match_numpy() {
    let reference = lazy_adam_reference();
    let orders: Vec<Vec<usize>> = matrix(&reference["orders"])
        .iter()
        .map(|o| o.iter().map(|&k| k as usize).collect())
        .collect();
    let got: Vec<Vec<usize>> = (0..2)
        .map(|epoch| autobatch_train::batches::epoch_order(6, 0, epoch))
        .collect();
    assert_eq!(got, orders, "the epochs' orders the reference assumes");
    for (dense, key) in [(false, "lazy"), (true, "dense")] {
        let mut trainer = embedding_trainer(&reference, embedding_config(dense));
        let history = trainer.fit(None, &mut |_, _| {}).unwrap();
        assert_eq!(history.steps.len(), 6);
        assert_close(
            &trained(&trainer, "E"),
            &floats(&reference[key]["E"]),
            1e-12,
        );
        assert_close(
            &trained(&trainer, "W"),
            &floats(&reference[key]["W"]),
            1e-12,
        );
    }
    // The two differ: the test tells lazy from dense updates.
    assert_ne!(
        floats(&reference["lazy"]["E"]),
        floats(&reference["dense"]["E"])
    );
}

/// The rows summed alone have the bits of the whole sum: SGD (which moves
/// no element whose gradient is zero) gives the same bits lazily and
/// densely; and lazy Adam's bits do not depend on the strategy or threads.
#[test]
fn rows_summed_alone_have_the_bits_of_the_whole_sum() {
    let reference = lazy_adam_reference();
    let run = |config: TrainConfig| {
        let mut trainer = embedding_trainer(&reference, config);
        trainer.fit(None, &mut |_, _| {}).unwrap();
        let bits = |name| -> Vec<u64> {
            trained(&trainer, name)
                .iter()
                .map(|x| x.to_bits())
                .collect()
        };
        (bits("E"), bits("W"))
    };
    let sgd = |dense| TrainConfig {
        optimizer: OptimizerConfig {
            lr: 0.1,
            ..OptimizerConfig::new(OptimizerKind::Sgd)
        },
        ..embedding_config(dense)
    };
    assert_eq!(run(sgd(false)), run(sgd(true)));
    let one = run(embedding_config(false));
    for (strategy, threads) in [
        (Strategy::ProgramCounter, 2),
        (Strategy::Reference, 1),
        (Strategy::LocalStatic, 2),
        (Strategy::Native, 1),
        (Strategy::NativeBatched, 2),
    ] {
        let mut config = embedding_config(false);
        config.run.strategy = strategy;
        config.run.options.threads = threads;
        assert_eq!(run(config), one, "{strategy} on {threads} threads");
    }
}
