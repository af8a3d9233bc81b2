//! `AUTOBATCH_SIMD` caps the kernels' path: each value makes
//! `Path::detected()` the slower of it and what this CPU runs, and the
//! products and elementwise functions reached through the default (not
//! forced) entry points give the same bits on every path. The variable is
//! read once per process, so each setting runs in a child process: this
//! test binary again, on its ignored test `child_reports_path_and_bits`
//! (through the command in `AUTOBATCH_TEST_RUNNER`, split at spaces, when
//! it is set: an emulator such as `qemu-aarch64 -L /usr/aarch64-linux-gnu`
//! for a cross-compiled test, as `tools/test-arm` runs it).

use std::process::Command;

use autobatch_ir::UnaryOp;
use autobatch_kernels::gemm::{self, Path, SIMD_VARIABLE};
use autobatch_kernels::vmath;

/// What a child process prints: the path it detected, and the bits of
/// every result it computed, folded into one number.
#[derive(Debug, PartialEq)]
struct Report {
    path: String,
    digest: u64,
    requested: String,
}

/// Runs the child test with `AUTOBATCH_SIMD` set to `value` (unset for `None`).
fn child(value: Option<&str>) -> Report {
    let exe = std::env::current_exe().expect("the test binary's path");
    let runner = std::env::var("AUTOBATCH_TEST_RUNNER").unwrap_or_default();
    let mut command = match runner.split_whitespace().collect::<Vec<_>>()[..] {
        [] => Command::new(exe),
        [program, ref arguments @ ..] => {
            let mut c = Command::new(program);
            c.args(arguments).arg(exe);
            c
        }
    };
    command.args([
        "--ignored",
        "--exact",
        "child_reports_path_and_bits",
        "--nocapture",
        "--test-threads=1",
    ]);
    match value {
        Some(v) => command.env(SIMD_VARIABLE, v),
        None => command.env_remove(SIMD_VARIABLE),
    };
    let output = command.output().expect("the child test runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}");
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.split_once(name).map(|(_, value)| value))
            .unwrap_or_else(|| panic!("the child printed no `{name}`: {stdout}"))
            .to_string()
    };
    Report {
        path: field("path="),
        digest: field("digest=").parse().expect("a number"),
        requested: field("requested="),
    }
}

#[test]
fn each_forced_path_is_taken_and_gives_the_same_bits() {
    let unset = child(None);
    let best = Path::from_name(&unset.path).expect("a path name");
    assert_eq!(unset.requested, "none");
    for path in Path::ALL {
        let forced = child(Some(path.name()));
        let expected = path.min(best);
        assert_eq!(
            forced.path,
            expected.name(),
            "{SIMD_VARIABLE}={}",
            path.name()
        );
        assert_eq!(forced.requested, path.name());
        assert_eq!(
            forced.digest,
            unset.digest,
            "{SIMD_VARIABLE}={} changed a bit",
            path.name()
        );
    }
}

#[test]
fn a_value_that_names_no_path_is_reported_and_changes_nothing() {
    let unset = child(None);
    let wrong = child(Some("avx3"));
    assert_eq!(wrong.path, unset.path);
    assert_eq!(wrong.digest, unset.digest);
    let names = if cfg!(target_arch = "aarch64") {
        "portable, neon"
    } else {
        "portable, avx2, avx512"
    };
    assert_eq!(
        wrong.requested,
        format!("error: AUTOBATCH_SIMD is `avx3`; it takes one of {names}")
    );
}

/// Values in [-4, 4) from a xorshift stream.
fn values(seed: u64, len: usize) -> Vec<f64> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0
        })
        .collect()
}

/// Folds bits into a digest (FNV-1a over the 64-bit words).
fn fold(digest: &mut u64, bits: impl IntoIterator<Item = u64>) {
    for b in bits {
        *digest = (*digest ^ b).wrapping_mul(0x0100_0000_01b3);
    }
}

/// Products and elementwise functions through their default entry points,
/// on sizes around the tile and vector widths.
fn digest() -> u64 {
    let mut digest = 0xcbf2_9ce4_8422_2325;
    for (rows, k, n) in [(37, 29, 5), (64, 100, 17), (3, 7, 1), (130, 33, 9)] {
        let m = values(1 + rows as u64, rows * k);
        let vs = values(2 + k as u64, n * k);
        let mut out = vec![0.0; n * rows];
        gemm::matvec_into(&m, rows, k, &vs, n, &mut out);
        fold(&mut digest, out.iter().map(|x| x.to_bits()));
        let ws = values(3 + n as u64, n * rows);
        let mut back = vec![0.0; n * k];
        gemm::vecmat_into(&ws, &m, n, rows, k, &mut back);
        fold(&mut digest, back.iter().map(|x| x.to_bits()));

        let m32: Vec<f32> = m.iter().map(|x| *x as f32).collect();
        let vs32: Vec<f32> = vs.iter().map(|x| *x as f32).collect();
        let mut out32 = vec![0.0f32; n * rows];
        gemm::matvec_into(&m32, rows, k, &vs32, n, &mut out32);
        fold(&mut digest, out32.iter().map(|x| x.to_bits() as u64));
    }
    let xs = values(99, 1031);
    let xs32: Vec<f32> = xs.iter().map(|x| *x as f32).collect();
    for op in [
        UnaryOp::Exp,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Softplus,
    ] {
        let mut out = vec![0.0; xs.len()];
        assert!(vmath::apply_f64(op, &xs, &mut out));
        fold(&mut digest, out.iter().map(|x| x.to_bits()));
        let mut out32 = vec![0.0f32; xs.len()];
        assert!(vmath::apply_f32(op, &xs32, &mut out32));
        fold(&mut digest, out32.iter().map(|x| x.to_bits() as u64));
    }
    fold(&mut digest, [gemm::dot(&xs, &xs).to_bits()]);
    digest
}

#[test]
#[ignore = "run by the tests above, in a child process with AUTOBATCH_SIMD set"]
fn child_reports_path_and_bits() {
    println!("path={}", Path::detected().name());
    println!("digest={}", digest());
    match gemm::requested_path() {
        Ok(None) => println!("requested=none"),
        Ok(Some(p)) => println!("requested={}", p.name()),
        Err(e) => println!("requested=error: {e}"),
    }
}
