//! `autobatch train`: a resumed run and runs on other thread counts write
//! the same checkpoint bytes as one uninterrupted run; bad requests are one
//! `error:` line each.

mod common;

use common::{assert_one_line_error, autobatch, stderr, Scratch};

const PROGRAM: &str = "extern \"autobatch\" { static w: [f64; 2]; static b: f64; static K: i64; }
fn loss(x: [f64; 2], y: f64) -> f64 { let e = sum(w * x) + b - y; e * e }
fn near(x: [f64; 2], y: f64) -> bool { let e = sum(w * x) + b - y; e * e < 0.25 }";

const DATA: &str = r#"{"batch": {"x": [[1, 0], [0, 1], [1, 1], [2, 1], [1, 3], [-1, 2], [0.5, 0.5]],
                                  "y": [1.5, -0.5, 1.2, 2.8, 0.1, -2.0, 0.4]}}"#;
const INIT: &str = r#"{"w": [0.1, -0.2], "b": 0.0, "K": 3}"#;

fn files(scratch: &Scratch) -> (String, String, String) {
    (
        scratch.file("model.ab", PROGRAM),
        scratch.file("train.json", DATA),
        scratch.file("init.json", INIT),
    )
}

fn train(program: &str, data: &str, init: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "train",
        program,
        "--entry",
        "loss",
        "--data",
        data,
        "--statics",
        init,
        "--optimizer",
        "adam",
        "--lr",
        "0.05",
        "--seed",
        "5",
        "--warmup-steps",
        "2",
        "--clip-norm",
        "1.5",
    ];
    args.extend_from_slice(extra);
    autobatch(&args)
}

#[test]
fn resumed_and_threaded_runs_write_the_same_checkpoint() {
    let scratch = Scratch::new("train-resume");
    let (program, data, init) = files(&scratch);
    let whole = scratch.path("whole.npz");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "4",
            "--batch-size",
            "3",
            "--threads",
            "1",
            "--checkpoint",
            &whole,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // Two epochs, then two more resumed from the checkpoint (a constant
    // schedule after the warmup: a decaying one depends on the epochs asked for).
    let first = scratch.path("first.npz");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "4",
            "--batch-size",
            "3",
            "--threads",
            "1",
            "--checkpoint",
            &first,
            "--log",
            &scratch.path("first.csv"),
        ],
    );
    assert!(out.status.success());
    let two = scratch.path("two.safetensors");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "2",
            "--batch-size",
            "3",
            "--threads",
            "1",
            "--checkpoint",
            &two,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let resumed = scratch.path("resumed.npz");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "4",
            "--batch-size",
            "3",
            "--threads",
            "2",
            "--resume",
            &two,
            "--checkpoint",
            &resumed,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = |p: &str| std::fs::read(p).unwrap();
    assert_eq!(bytes(&whole), bytes(&first), "the same run twice");
    let threaded = scratch.path("threaded.npz");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "4",
            "--batch-size",
            "3",
            "--threads",
            "2",
            "--strategy",
            "reference",
            "--checkpoint",
            &threaded,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        bytes(&whole),
        bytes(&threaded),
        "threads and strategy change no bit"
    );
    assert_eq!(bytes(&whole), bytes(&resumed), "resumed after two epochs");
    // 7 examples in mini-batches of 3: 3 steps per epoch, 12 in all.
    let log = std::fs::read_to_string(scratch.path("first.csv")).unwrap();
    assert_eq!(log.lines().count(), 13);
    assert!(log.starts_with("epoch,step,loss,grad_norm,lr,items_per_second,members,faulted,dev\n"));
}

#[test]
fn dev_evaluation_and_json_log() {
    let scratch = Scratch::new("train-dev");
    let (program, data, init) = files(&scratch);
    let log = scratch.path("log.json");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "2",
            "--batch-size",
            "3",
            "--eval",
            "near",
            "--dev",
            &data,
            "--log",
            &log,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&log).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["steps"].as_array().unwrap().len(), 6);
    assert_eq!(json["epochs"][1]["dev"]["members"], 7);
    assert!(stderr(&out).contains("epoch 2: loss"));
}

/// `--plots` draws the loss curve: the loss against the step and, with
/// `--eval`, the dev mean below it (not a sampler's trace plot).
#[test]
fn plots_draw_the_loss_curve_with_the_dev_metric() {
    let scratch = Scratch::new("train-plots");
    let (program, data, init) = files(&scratch);
    let plots = scratch.path("plots");
    let out = train(
        &program,
        &data,
        &init,
        &[
            "--epochs",
            "2",
            "--batch-size",
            "3",
            "--eval",
            "near",
            "--dev",
            &data,
            "--plots",
            &plots,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(format!("{plots}/loss.svg")).unwrap();
    assert!(
        svg.contains("training loss") && svg.contains("dev near"),
        "{svg}"
    );
    assert!(svg.contains("\nstep\n") && !svg.contains("trace"), "{svg}");
    let png = std::fs::read(format!("{plots}/loss.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn bad_requests_are_one_error_line_each() {
    let scratch = Scratch::new("train-errors");
    let (program, data, init) = files(&scratch);
    let out = train(&program, &data, &init, &["--train", "w,V"]);
    assert_one_line_error(&out, "no static named `V` to train in");
    let out = train(&program, &data, &init, &["--train", "K"]);
    assert_one_line_error(
        &out,
        "cannot train the static `K`: its elements are i64, not floats",
    );
    let out = train(&program, &data, &init, &["--batch-size", "0"]);
    assert_one_line_error(&out, "the batch size must be at least 1");
    let out = train(&program, &data, &init, &["--dev", &data]);
    assert_one_line_error(&out, "--eval");
    let out = train(
        &program,
        &data,
        &init,
        &["--checkpoint", &scratch.path("c.json")],
    );
    assert_one_line_error(&out, "a checkpoint is written as .npz or .safetensors");
}
