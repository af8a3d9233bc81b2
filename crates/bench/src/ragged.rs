//! `ragged [--quick]`: a ragged batch (each member with its own length)
//! against the same batch padded to the longest member by hand,
//! as users write it in array languages without ragged batches.
//!
//! ```sh
//! cargo run --release -p autobatch-bench -- ragged [--quick]
//! ```
//!
//! Two programs, each in both forms:
//!
//! - `rnn`: a tanh RNN over the member's tokens (a shared-weight `matvec`
//!   and an embedding row per token, hidden 64). Padded: the tokens padded
//!   with 0 to the longest member and the member's own `len`, the loop
//!   stopping there. Both forms compute the same operations in the same
//!   order: the results must be equal to the bit.
//! - `softmax`: `dot(softmax(x), x) + max(x)` over the member's values.
//!   Padded: the values padded to the longest member and a mask (`0` or
//!   `-inf`) added before `softmax` and `max`, the usual way in array
//!   languages; the padding changes the order of the sums, so the results
//!   are compared to a relative 1e-12.
//!
//! Two length distributions: skewed (nine members in ten of length 1 to 5,
//! one in ten of 40 to 50) and uniform (1 to 50); batches of 256 and 1024;
//! program-counter, local-static, native and native-batched, one thread
//! (the native strategies' compile time is not in their seconds: it is
//! reported apart, `compile_seconds`). Reported: the median
//! execution seconds (`wall_seconds`) of each form over the repetitions,
//! their ratio, and the number of sizes (size classes) of the ragged
//! batch, which both strategies run as one batch (`docs/ragged.md`).
//!
//! A third form measures what the ragged storage itself costs: the same
//! program on a batch of one size, every member at the ragged batch's mean
//! length (about as many elements). `ragged_over_dense` is the ragged
//! batch's seconds per element over that batch's: what any other layout
//! of ragged columns (packed with offsets) could at best win back.
//! `--members N,M` runs other batch sizes (default 256 and 1024).

use autobatch::{compile, Compiled, Inputs, RunConfig, Strategy};
use serde_json::{json, Value};

const HIDDEN: usize = 64;
const VOCABULARY: usize = 500;

const RNN_RAGGED: &str = "
extern \"autobatch\" { static E: [[f64; H]; V]; static W: [[f64; H]; H]; }
fn run(tokens: [usize; L]) -> f64 {
    let mut h = [0.0; H];
    for t in 0..tokens.len() {
        h = (matvec(W, h) + E[tokens[t]]).tanh();
    }
    sum(h)
}
";

const RNN_PADDED: &str = "
extern \"autobatch\" { static E: [[f64; H]; V]; static W: [[f64; H]; H]; }
fn run(tokens: [usize; LMAX], len: usize) -> f64 {
    let mut h = [0.0; H];
    for t in 0..len {
        h = (matvec(W, h) + E[tokens[t]]).tanh();
    }
    sum(h)
}
";

const SOFTMAX_RAGGED: &str = "
fn run(x: [f64; L]) -> f64 { dot(softmax(x), x) + max(x) }
";

const SOFTMAX_PADDED: &str = "
fn run(x: [f64; LMAX], mask: [f64; LMAX]) -> f64 {
    let masked = x + mask;
    dot(softmax(masked), x) + max(masked)
}
";

/// A small deterministic generator (the inputs only need to be fixed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        self.below(1 << 20) as f64 / (1 << 19) as f64 - 1.0
    }
}

/// The members' lengths.
fn lengths(distribution: &str, members: usize, rng: &mut Lcg) -> Vec<usize> {
    (0..members)
        .map(|_| match distribution {
            "skewed" if rng.below(10) == 0 => 40 + rng.below(11) as usize,
            "skewed" => 1 + rng.below(5) as usize,
            _ => 1 + rng.below(50) as usize,
        })
        .collect()
}

/// Both forms of one program, compiled, and how to make their inputs.
struct Workload {
    name: &'static str,
    ragged: Compiled,
    padded: Compiled,
    /// Every member's values, of its length.
    values: fn(&[usize], &mut Lcg) -> Vec<Vec<Value>>,
    statics: Value,
    /// Whether the two forms compute the same bits.
    exact: bool,
}

fn workloads(rng: &mut Lcg) -> Vec<Workload> {
    let matrix = |rows: usize, cols: usize, scale: f64, rng: &mut Lcg| -> Value {
        (0..rows)
            .map(|_| (0..cols).map(|_| rng.unit() * scale).collect::<Vec<f64>>())
            .collect::<Vec<_>>()
            .into()
    };
    let e = matrix(VOCABULARY, HIDDEN, 0.5, rng);
    let w = matrix(HIDDEN, HIDDEN, 1.0 / (HIDDEN as f64).sqrt(), rng);
    let compiled = |source: &str| compile(source, "bench.ab").expect("the benchmark compiles");
    vec![
        Workload {
            name: "rnn",
            ragged: compiled(RNN_RAGGED),
            padded: compiled(RNN_PADDED),
            values: |lens, rng| {
                lens.iter()
                    .map(|&n| {
                        (0..n)
                            .map(|_| json!(rng.below(VOCABULARY as u64)))
                            .collect()
                    })
                    .collect()
            },
            statics: json!({"E": e, "W": w}),
            exact: true,
        },
        Workload {
            name: "softmax",
            ragged: compiled(SOFTMAX_RAGGED),
            padded: compiled(SOFTMAX_PADDED),
            values: |lens, rng| {
                lens.iter()
                    .map(|&n| (0..n).map(|_| json!(rng.unit() * 3.0)).collect())
                    .collect()
            },
            statics: json!({}),
            exact: false,
        },
    ]
}

/// The inputs of both forms: each member's own values; and the values
/// padded to the longest member with the member's length (`rnn`) or a mask
/// (`softmax`).
fn inputs(workload: &Workload, values: &[Vec<Value>]) -> (Inputs, Inputs) {
    let longest = values.iter().map(Vec::len).max().unwrap_or(0);
    let padded: Vec<Vec<Value>> = values
        .iter()
        .map(|v| {
            let mut p = v.clone();
            p.resize(longest, json!(0));
            p
        })
        .collect();
    let (ragged_batch, padded_batch) = if workload.name == "rnn" {
        let lens: Vec<usize> = values.iter().map(Vec::len).collect();
        (
            json!({"tokens": values}),
            json!({"tokens": padded, "len": lens}),
        )
    } else {
        let masks: Vec<Vec<Value>> = values
            .iter()
            .map(|v| {
                (0..longest)
                    .map(|i| {
                        if i < v.len() {
                            json!(0.0)
                        } else {
                            json!("-inf")
                        }
                    })
                    .collect()
            })
            .collect();
        (json!({"x": values}), json!({"x": padded, "mask": masks}))
    };
    let parse = |batch: Value| {
        let text = json!({"batch": batch, "shared": workload.statics}).to_string();
        Inputs::from_json_str(&text).expect("the benchmark's inputs parse")
    };
    (parse(ragged_batch), parse(padded_batch))
}

/// What [`measure`] gives.
struct Measured {
    /// The median execution seconds.
    seconds: f64,
    /// The last run's results.
    values: Vec<f64>,
    /// The sizes of the batch.
    sizes: u64,
    /// For the native strategies, the last run's compile seconds.
    compile_seconds: Option<f64>,
}

/// `repeats` runs of `compiled` on `inputs`.
fn measure(compiled: &Compiled, inputs: &Inputs, config: &RunConfig, repeats: usize) -> Measured {
    let bound = compiled
        .bind("run", inputs)
        .expect("the benchmark's inputs bind");
    let mut seconds = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats {
        let result = bound.run(config).expect("the benchmark runs");
        seconds.push(result.stats.wall_seconds);
        last = Some(result);
    }
    seconds.sort_by(f64::total_cmp);
    let result = last.expect("at least one repetition");
    let values = result
        .members
        .iter()
        .map(|m| match m {
            Ok(autobatch::Value::Tensor(t)) => match t.data.get(0) {
                autobatch::Scalar::F64(x) => x,
                other => panic!("the benchmark returns an f64, not {other:?}"),
            },
            other => panic!("a member of the benchmark failed: {other:?}"),
        })
        .collect();
    let compile_seconds = result.stats.report.iter().find_map(|f| match f.value {
        autobatch::ReportValue::Seconds(s) if f.name == "compile_seconds" => Some(s),
        _ => None,
    });
    Measured {
        seconds: seconds[seconds.len() / 2],
        values,
        sizes: result.stats.sizes,
        compile_seconds,
    }
}

/// Whether the two forms agree (to the bit, or to a relative 1e-12).
fn agree(a: &[f64], b: &[f64], exact: bool) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            if exact {
                x.to_bits() == y.to_bits()
            } else {
                (x - y).abs() <= 1e-12 * x.abs().max(1.0)
            }
        })
}

pub fn main(args: &[String]) {
    let quick = args.iter().any(|a| a == "--quick");
    let repeats = if quick { 1 } else { 5 };
    let given: Option<Vec<usize>> = args
        .iter()
        .position(|a| a == "--members")
        .and_then(|i| args.get(i + 1))
        .map(|list| {
            list.split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .expect("--members takes numbers, as 256,1024")
                })
                .collect()
        });
    let batches: Vec<usize> = match given {
        Some(list) => list,
        None if quick => vec![64],
        None => vec![256, 1024],
    };
    let mut rng = Lcg(2026);
    let mut rows = Vec::new();
    for workload in workloads(&mut rng) {
        for distribution in ["skewed", "uniform"] {
            for &members in &batches {
                let lens = lengths(distribution, members, &mut rng);
                let values = (workload.values)(&lens, &mut rng);
                let (ragged, padded) = inputs(&workload, &values);
                let elements: usize = lens.iter().sum();
                let mean = (elements as f64 / members as f64).round().max(1.0) as usize;
                let dense_values = (workload.values)(&vec![mean; members], &mut rng);
                let (dense, _) = inputs(&workload, &dense_values);
                for strategy in [
                    "program-counter",
                    "local-static",
                    "native",
                    "native-batched",
                ] {
                    let config = RunConfig {
                        strategy: Strategy::from_name(strategy).expect("a strategy"),
                        options: autobatch::RunOptions {
                            threads: 1,
                            ..RunConfig::default().options
                        },
                    };
                    let ragged_run = measure(&workload.ragged, &ragged, &config, repeats);
                    let padded_run = measure(&workload.padded, &padded, &config, repeats);
                    let dense_run = measure(&workload.ragged, &dense, &config, repeats);
                    let same = agree(&ragged_run.values, &padded_run.values, workload.exact);
                    let (ragged_s, padded_s) = (ragged_run.seconds, padded_run.seconds);
                    let per_element = |seconds: f64, count: usize| seconds / count as f64;
                    let ragged_over_dense = per_element(ragged_s, elements)
                        / per_element(dense_run.seconds, mean * members);
                    let row = json!({
                        "program": workload.name,
                        "lengths": distribution,
                        "members": members,
                        "elements": elements,
                        "longest": lens.iter().max(),
                        "strategy": strategy,
                        "ragged_seconds": ragged_s,
                        "padded_seconds": padded_s,
                        "padded_over_ragged": padded_s / ragged_s,
                        "dense_length": mean,
                        "dense_seconds": dense_run.seconds,
                        "ragged_over_dense": ragged_over_dense,
                        "sizes": ragged_run.sizes,
                        "ragged_compile_seconds": ragged_run.compile_seconds,
                        "padded_compile_seconds": padded_run.compile_seconds,
                        "results_agree": same,
                    });
                    eprintln!("{row}");
                    rows.push(row);
                }
            }
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"benchmark": "ragged", "rows": rows})).unwrap()
    );
}
