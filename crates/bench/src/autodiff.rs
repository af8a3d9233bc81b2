//! `autobatch-bench autodiff [--quick] [--threads N]`: gradients per second
//! of a logistic regression (N = 10,000 data points, D = 100 regressors,
//! X and y shared, one theta per member) through the library's normal run
//! path (program-counter), next to what the gradient's two matrix products
//! alone allow (`gemm::matvec_into` + `gemm::vecmat_into` timed directly at
//! the same batch sizes, on one thread), the memory bandwidth, and the
//! per-operation overhead of a tiny program of elementwise operations on
//! length-4 vectors.
//!
//! The yardstick: with `AUTOBATCH_BENCH_PYTHON` naming a Python that has
//! numpy (`.peers/numpy/bin/python`, `tools/peers/install numpy`), the same two products through
//! numpy's BLAS (OpenBLAS) on as many threads, by
//! `tools/logreg_openblas.py`, run for each setting right after ours; the
//! report gives GFLOP/s of the products alone (ours and OpenBLAS's) and of
//! the whole gradient (counting only the products' 4 N D flops), and the
//! ratios to OpenBLAS. Beside the wall-clock rates, the steady rates per
//! second of CPU time (ours: the process's, summed over its threads;
//! OpenBLAS's: its calling thread's), the figures that mean something on
//! a machine shared with other work.

use std::time::Instant;

use autobatch::{compile, Inputs, RunConfig, Strategy, Tensor, Value};
use autobatch_kernels::gemm;
use autobatch_types::Data;
use serde_json::{json, Value as Json};

use crate::measure;

const N: usize = 10_000;
const D: usize = 100;

/// The programs measured: the gradient written by hand, and through
/// `value_and_grad`.
const PROGRAMS: [(&str, &str); 2] = [
    (
        "hand_written_gradient",
        include_str!("../programs/logreg_grad.ab"),
    ),
    (
        "value_and_grad",
        include_str!("../programs/logreg_value_and_grad.ab"),
    ),
];

/// A deterministic stream of numbers in [0, 1) (splitmix64).
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The logistic regression's data: `x` (N x D, row-major) and `y`.
struct Regression {
    x: Vec<f64>,
    y: Vec<f64>,
}

/// X (N x D) with entries in [-1, 1), y in {0, 1} from a hidden theta.
fn synthetic_data() -> Regression {
    let mut s = Stream(2026);
    let x: Vec<f64> = (0..N * D).map(|_| 2.0 * s.next() - 1.0).collect();
    let hidden: Vec<f64> = (0..D).map(|_| s.next() - 0.5).collect();
    let y = (0..N)
        .map(|i| {
            let z: f64 = (0..D).map(|j| x[i * D + j] * hidden[j]).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            if s.next() < p {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    Regression { x, y }
}

fn tensor(shape: Vec<usize>, values: &[f64], f32: bool) -> Value {
    let data = if f32 {
        Data::F32(values.iter().map(|v| *v as f32).collect())
    } else {
        Data::F64(values.to_vec())
    };
    Value::Tensor(Tensor::new(shape, data))
}

/// One program measured through the library: at `batch` members, each
/// taking `count` gradient steps, in f32 or f64.
struct Setting<'a> {
    source: &'a str,
    data: &'a Regression,
    f32: bool,
    batch: usize,
    count: i64,
    /// Seconds to spend on repetitions.
    budget: f64,
}

/// Gradients per second through compile, bind and run.
struct Rates {
    /// The rate of a run of `count` gradient steps per member, its setup
    /// included (columns allocated and first touched).
    whole: f64,
    /// The marginal rate of the steps alone, from runs of `count` and
    /// `3 count` steps.
    steady: f64,
    /// `steady` per second of the process's CPU time (summed over its
    /// threads): on a machine shared with other work, the time the run
    /// computed, not the time it waited for a core.
    steady_cpu: f64,
}

fn library_rates(setting: &Setting, threads: usize) -> Rates {
    let (batch, count) = (setting.batch, setting.count);
    let short = library_seconds(setting, count, threads);
    let long = library_seconds(setting, 3 * count, threads);
    let marginal = batch as f64 * 2.0 * count as f64;
    Rates {
        whole: (batch as f64 * count as f64) / short.wall,
        steady: marginal / (long.wall - short.wall).max(1e-9),
        steady_cpu: marginal / (long.cpu - short.cpu).max(1e-9),
    }
}

/// The medians of a run's wall-clock seconds and the process's CPU seconds.
struct Seconds {
    wall: f64,
    cpu: f64,
}

/// The CPU time of this process in seconds, summed over its threads
/// (Linux `CLOCK_PROCESS_CPUTIME_ID`).
fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Median seconds of a run of `setting` with `count` gradient steps per member.
fn library_seconds(setting: &Setting, count: i64, threads: usize) -> Seconds {
    let Setting {
        source,
        data,
        f32,
        batch,
        budget,
        ..
    } = *setting;
    let compiled = compile(source, "logreg.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut s = Stream(7);
    let thetas: Vec<Value> = (0..batch)
        .map(|_| {
            let theta: Vec<f64> = (0..D).map(|_| 0.1 * (s.next() - 0.5)).collect();
            tensor(vec![D], &theta, f32)
        })
        .collect();
    let inputs = Inputs::new()
        .shared("X", tensor(vec![N, D], &data.x, f32))
        .shared("Y", tensor(vec![N], &data.y, f32))
        .batched("theta", thetas)
        .batched("count", vec![count; batch]);
    let bound = compiled
        .bind("gradients", &inputs)
        .unwrap_or_else(|e| panic!("binding the benchmark inputs: {e}"));
    let config = RunConfig {
        strategy: Strategy::ProgramCounter,
        options: autobatch::RunOptions {
            threads,
            ..RunConfig::default().options
        },
    };
    let mut cpu = Vec::new();
    let wall = measure(budget, 20, || {
        let before = process_cpu_seconds();
        let result = bound.run(&config).unwrap_or_else(|e| panic!("{e}"));
        cpu.push(process_cpu_seconds() - before);
        if let Some(Err(e)) = result.members.first() {
            panic!("a benchmark member failed: {e}");
        }
        result.stats.wall_seconds
    });
    Seconds {
        wall,
        cpu: crate::median(cpu),
    }
}

/// Gradients per second that the two products alone allow at `batch`
/// members: `z = X theta` for every member, then `g = r X`.
fn products_rate<T: gemm::GemmFloat + FromF64>(x: &[f64], batch: usize, budget: f64) -> f64 {
    let xs: Vec<T> = x.iter().map(|v| T::from_f64(*v)).collect();
    let mut s = Stream(11);
    let thetas: Vec<T> = (0..batch * D)
        .map(|_| T::from_f64(0.1 * (s.next() - 0.5)))
        .collect();
    let mut z: Vec<T> = vec![T::from_f64(0.0); batch * N];
    let mut g: Vec<T> = vec![T::from_f64(0.0); batch * D];
    let repeats = (64 / batch).max(1);
    let seconds = measure(budget, 50, || {
        let t = Instant::now();
        for _ in 0..repeats {
            gemm::matvec_into(&xs, N, D, &thetas, batch, &mut z);
            gemm::vecmat_into(&z, &xs, batch, N, D, &mut g);
        }
        std::hint::black_box(&g);
        t.elapsed().as_secs_f64() / repeats as f64
    });
    batch as f64 / seconds
}

/// Flops of the two products of one gradient.
const FLOPS_PER_GRADIENT: f64 = 4.0 * (N * D) as f64;

/// The environment variable naming the Python (with numpy) of the yardstick.
const PYTHON_VARIABLE: &str = "AUTOBATCH_BENCH_PYTHON";

/// The two products through numpy's BLAS at `batch` members, on `threads`
/// threads: the script's JSON report, or why there is none.
fn openblas_products(f32: bool, batch: usize, threads: usize, budget: f64) -> Result<Json, String> {
    let python = std::env::var(PYTHON_VARIABLE)
        .map_err(|_| format!("not measured: set {PYTHON_VARIABLE} to a Python with numpy"))?;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/logreg_openblas.py"
    );
    let output = std::process::Command::new(&python)
        .arg(script)
        .args(["--precision", if f32 { "f32" } else { "f64" }])
        .args(["--batch", &batch.to_string()])
        .args(["--threads", &threads.to_string()])
        .args(["--n", &N.to_string(), "--d", &D.to_string()])
        .args(["--budget", &budget.to_string()])
        .output()
        .map_err(|e| format!("running {python} {script}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{python} {script} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("reading {script}'s report: {e}"))
}

/// Conversion of the synthetic data to the measured precision.
trait FromF64 {
    fn from_f64(v: f64) -> Self;
}

impl FromF64 for f32 {
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl FromF64 for f64 {
    fn from_f64(v: f64) -> f64 {
        v
    }
}

/// Bytes per second of a streaming read of a buffer much larger than the caches.
fn memory_bandwidth(budget: f64) -> f64 {
    let values = vec![1.0f64; 32 << 20];
    let seconds = measure(budget, 20, || {
        let t = Instant::now();
        let total: f64 = values.chunks(8).map(|c| c.iter().sum::<f64>()).sum();
        std::hint::black_box(total);
        t.elapsed().as_secs_f64()
    });
    (values.len() * 8) as f64 / seconds
}

/// Nanoseconds per block execution and per operation of `tiny.ab` at `batch`.
fn overhead(batch: usize, threads: usize, budget: f64) -> Json {
    let source = include_str!("../programs/tiny.ab");
    let compiled = compile(source, "tiny.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let iterations = 2000i64;
    let xs: Vec<Value> = (0..batch)
        .map(|i| tensor(vec![4], &[i as f64, 1.0, 2.0, 3.0], false))
        .collect();
    let inputs = Inputs::new()
        .batched("x", xs)
        .batched("n", vec![iterations; batch]);
    let bound = compiled.bind("tiny", &inputs).expect("tiny binds");
    let config = RunConfig {
        strategy: Strategy::ProgramCounter,
        options: autobatch::RunOptions {
            threads,
            ..RunConfig::default().options
        },
    };
    let mut steps = 0u64;
    let mut ops = 0u64;
    let seconds = measure(budget, 50, || {
        let result = bound.run(&config).unwrap_or_else(|e| panic!("{e}"));
        steps = result.stats.steps;
        ops = result.stats.op_counts.iter().map(|c| c.executions).sum();
        result.stats.wall_seconds
    });
    json!({
        "batch_size": batch,
        "blocks_executed": steps,
        "operations_executed": ops,
        "ns_per_block": seconds * 1e9 / steps as f64,
        "ns_per_operation": seconds * 1e9 / ops as f64,
        "ns_per_operation_per_member": seconds * 1e9 / (ops as f64 * batch as f64),
    })
}

/// What a program's gradients per second are compared with, at one
/// setting: our two products alone, OpenBLAS's on one thread and on the
/// run's threads, and (at one member) the memory's bound.
struct Yardsticks {
    products: f64,
    openblas: Option<f64>,
    /// OpenBLAS's gradients per second of its thread's CPU time.
    openblas_cpu: Option<f64>,
    openblas_all: Option<f64>,
    bandwidth_bound: f64,
}

/// One program's figures at `setting`: its rates on one thread (and on
/// `threads`), and their ratios to the yardsticks.
fn program_entry(setting: &Setting, yardsticks: &Yardsticks, threads: usize) -> Json {
    let products = yardsticks.products;
    let Rates {
        whole: one,
        steady,
        steady_cpu,
    } = library_rates(setting, 1);
    let mut entry = json!({
        "gradients_per_second_1_thread": one,
        "gflops_1_thread": one * FLOPS_PER_GRADIENT / 1e9,
        "ratio_to_products_alone": one / products,
        "steady_state_gradients_per_second_1_thread": steady,
        "steady_state_gflops_1_thread": steady * FLOPS_PER_GRADIENT / 1e9,
        "steady_state_ratio_to_products_alone": steady / products,
        "steady_state_gradients_per_cpu_second_1_thread": steady_cpu,
    });
    if let Some(theirs) = yardsticks.openblas_cpu {
        entry["steady_state_cpu_ratio_to_openblas_products"] = json!(steady_cpu / theirs);
    }
    if let Some(theirs) = yardsticks.openblas {
        entry["ratio_to_openblas_products"] = json!(one / theirs);
        entry["steady_state_ratio_to_openblas_products"] = json!(steady / theirs);
    }
    if setting.batch == 1 {
        let bound = yardsticks.bandwidth_bound;
        entry["fraction_of_bandwidth_bound"] = json!(one / bound);
        entry["steady_state_fraction_of_bandwidth_bound"] = json!(steady / bound);
    }
    if threads > 1 {
        let Rates {
            whole: all,
            steady: all_steady,
            steady_cpu: all_cpu,
        } = library_rates(setting, threads);
        entry[format!("steady_state_gradients_per_cpu_second_{threads}_threads")] = json!(all_cpu);
        entry[format!("gradients_per_second_{threads}_threads")] = json!(all);
        entry[format!("steady_state_gradients_per_second_{threads}_threads")] = json!(all_steady);
        if let Some(theirs) = yardsticks.openblas_all {
            entry[format!("ratio_to_openblas_products_{threads}_threads")] = json!(all / theirs);
            entry[format!("steady_state_ratio_to_openblas_products_{threads}_threads")] =
                json!(all_steady / theirs);
        }
    }
    entry
}

/// What every row of one precision shares.
struct Precision<'a> {
    f32: bool,
    name: &'static str,
    data: &'a Regression,
    quick: bool,
    /// Seconds to spend on repetitions.
    budget: f64,
    threads: usize,
    /// Gradients per second that the memory bandwidth allows one member.
    bandwidth_bound: f64,
}

/// The figures at one batch size: the products alone, OpenBLAS's, and each
/// program's.
fn batch_row(p: &Precision<'_>, batch: usize) -> Json {
    // Enough gradient steps per member that the run's setup (its
    // columns, first touched) does not dominate.
    let count = ((if p.quick { 64 } else { 256 }) / batch).max(if p.quick { 4 } else { 8 }) as i64;
    let products = if p.f32 {
        products_rate::<f32>(&p.data.x, batch, p.budget)
    } else {
        products_rate::<f64>(&p.data.x, batch, p.budget)
    };
    let openblas = openblas_products(p.f32, batch, 1, p.budget);
    let openblas_rate = openblas
        .as_ref()
        .ok()
        .and_then(|o| o["gradients_per_second"].as_f64());
    let openblas_cpu = openblas
        .as_ref()
        .ok()
        .and_then(|o| o["thread_cpu_seconds_per_pair_median"].as_f64())
        .map(|seconds| batch as f64 / seconds);
    // The same products on as many threads as ours run with.
    let openblas_all =
        (p.threads > 1).then(|| openblas_products(p.f32, batch, p.threads, p.budget));
    let openblas_all_rate = openblas_all
        .as_ref()
        .and_then(|o| o.as_ref().ok())
        .and_then(|o| o["gradients_per_second"].as_f64());
    let mut row = serde_json::Map::new();
    row.insert("batch_size".into(), json!(batch));
    row.insert("gradient_steps_per_member".into(), json!(count));
    row.insert(
        "products_alone_gradients_per_second".into(),
        json!(products),
    );
    row.insert(
        "products_alone_gflops".into(),
        json!(products * FLOPS_PER_GRADIENT / 1e9),
    );
    row.insert("products_path".into(), json!(gemm::Path::detected().name()));
    match &openblas {
        Ok(report) => {
            row.insert("openblas_products_1_thread".into(), report.clone());
        }
        Err(why) => {
            row.insert("openblas_products_1_thread".into(), json!(why));
        }
    }
    if let Some(theirs) = openblas_rate {
        row.insert(
            "products_alone_ratio_to_openblas".into(),
            json!(products / theirs),
        );
    }
    if let Some(report) = &openblas_all {
        let report = report.clone().unwrap_or_else(|why| json!(why));
        row.insert(format!("openblas_products_{}_threads", p.threads), report);
    }
    for (program, source) in PROGRAMS {
        let source = if p.f32 {
            source.replace("f64", "f32")
        } else {
            source.to_string()
        };
        let setting = Setting {
            source: &source,
            data: p.data,
            f32: p.f32,
            batch,
            count,
            budget: p.budget,
        };
        let yardsticks = Yardsticks {
            products,
            openblas: openblas_rate,
            openblas_cpu,
            openblas_all: openblas_all_rate,
            bandwidth_bound: p.bandwidth_bound,
        };
        let entry = program_entry(&setting, &yardsticks, p.threads);
        row.insert(program.into(), entry);
    }
    let theirs = openblas_rate.map_or("not measured".to_string(), |r| format!("{r:.0}/s"));
    eprintln!(
        "autodiff {} batch {batch}: products alone {products:.0}/s ({:.1} GFLOP/s), OpenBLAS's {theirs}",
        p.name,
        products * FLOPS_PER_GRADIENT / 1e9
    );
    Json::Object(row)
}

/// `only_batch` / `only_precision` restrict the run (for profiling).
pub fn run(
    quick: bool,
    threads: usize,
    only_batch: Option<usize>,
    only_precision: Option<&str>,
) -> Json {
    let sizes: Vec<usize> = [1usize, 16, 64, 256, 1024]
        .into_iter()
        .filter(|b| only_batch.is_none_or(|o| o == *b))
        .collect();
    let budget = if quick { 0.3 } else { 1.5 };
    let data = synthetic_data();
    let bandwidth = memory_bandwidth(budget);
    let mut precisions = Vec::new();
    for f32 in [true, false] {
        let name = if f32 { "f32" } else { "f64" };
        if only_precision.is_some_and(|p| p != name) {
            continue;
        }
        let bytes_per_element = if f32 { 4.0 } else { 8.0 };
        // One gradient reads X twice (once per matrix-vector product).
        let bandwidth_bound = bandwidth / (2.0 * (N * D) as f64 * bytes_per_element);
        let precision = Precision {
            f32,
            name,
            data: &data,
            quick,
            budget,
            threads,
            bandwidth_bound,
        };
        let rows: Vec<Json> = sizes.iter().map(|&b| batch_row(&precision, b)).collect();
        precisions.push(json!({
            "precision": name,
            "bandwidth_bound_gradients_per_second_1_member": bandwidth_bound,
            "rows": rows,
        }));
    }
    let overheads: Vec<Json> = [1usize, 1024]
        .iter()
        .map(|b| overhead(*b, 1, budget))
        .collect();
    json!({
        "benchmark": "autodiff",
        "n": N,
        "d": D,
        "threads": threads,
        "simd_path": gemm::Path::detected().name(),
        "memory_bandwidth_bytes_per_second": bandwidth,
        "logistic_regression": precisions,
        "per_operation_overhead": overheads,
    })
}
