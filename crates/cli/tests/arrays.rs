//! `run` with arrays in binary files: `--shared` and `--inputs` files of
//! `.npz`, `.safetensors` and `NAME=FILE.npy`, mixed with JSON, and
//! `--output FILE.npz`. The files in `tests/arrays/` are written by numpy
//! and the safetensors package (`tools/array_fixtures.py`); the values they
//! hold are formulas, computed again here.

use std::io::Read;
use std::path::PathBuf;

mod common;
use common::{assert_one_line_error, autobatch, stdout, Scratch};

const PROGRAM: &str = "\
extern \"autobatch\" {
    static W: [[f64; D]; H];
    static B: [f64; H];
}
fn affine(x: [f64; D]) -> [f64; H] { matvec(W, x) + B }
fn count(ks: [i64; 3], offset: i64) -> i64 { ks[0] + ks[1] + ks[2] + offset }
fn pick(x: [f64; D], i: usize) -> (f64, bool) { (x[i], x[i] > 1.0) }
";

/// Member m's `x`: [m, m + 0.5, m + 1] (as the fixtures' `batch/x`).
const BATCH: &str = r#"{"batch": {"x": [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]]}}"#;

fn fixture(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "arrays", name]
        .iter()
        .collect();
    path.to_string_lossy().into_owned()
}

/// W[i][j] = i + j / 4, B[i] = -i: the results of `affine`, as the command
/// writes them (every product and sum is exact).
fn expected_affine() -> String {
    let members: Vec<String> = (0..4)
        .map(|m| {
            let x = [m as f64, m as f64 + 0.5, m as f64 + 1.0];
            let row = |i: usize| -> f64 {
                (0..3)
                    .map(|j| (i as f64 + j as f64 / 4.0) * x[j])
                    .sum::<f64>()
                    - i as f64
            };
            format!("{{\"ok\":[{},{}]}}", row(0), row(1))
        })
        .collect();
    format!("{{\"results\":[{}]}}\n", members.join(","))
}

fn run(scratch: &Scratch, entry: &str, args: &[&str]) -> std::process::Output {
    let program = scratch.file("p.ab", PROGRAM);
    let mut all = vec!["run", program.as_str(), "--entry", entry];
    all.extend(args);
    autobatch(&all)
}

#[test]
fn weights_from_every_kind_of_file_with_the_batch_in_json() {
    let scratch = Scratch::new("arrays-kinds");
    let batch = scratch.file("batch.json", BATCH);
    let b_json = scratch.file("b.json", r#"{"B": [0, -1]}"#);
    let weights = fixture("weights.npz");
    let safetensors = fixture("weights.safetensors");
    let fortran = fixture("weights_f32_fortran.npz");
    let big_endian = format!("W={}", fixture("W_big_endian.npy"));
    let cases: Vec<Vec<&str>> = vec![
        vec!["--shared", &weights, "--inputs", &batch],
        vec!["--inputs", &batch, "--shared", &safetensors],
        // float32 weights in Fortran order, deflated (np.savez_compressed).
        vec!["--shared", &fortran, "--inputs", &batch],
        // One big-endian array by name, the other static in JSON.
        vec![
            "--shared",
            &big_endian,
            "--shared",
            &b_json,
            "--inputs",
            &batch,
        ],
    ];
    for args in cases {
        let out = run(&scratch, "affine", &args);
        assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
        assert_eq!(stdout(&out), expected_affine(), "{args:?}");
    }
}

#[test]
fn an_inputs_file_of_arrays_by_section() {
    let scratch = Scratch::new("arrays-sections");
    let out = run(&scratch, "affine", &["--inputs", &fixture("inputs.npz")]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(stdout(&out), expected_affine());
    // int16 members and a uint8 shared value for i64 arguments.
    let counts = fixture("counts.npz");
    let out = run(
        &scratch,
        "count",
        &["--inputs", &counts, "--shared", &fixture("weights.npz")],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(stdout(&out), "{\"results\":[{\"ok\":13},{\"ok\":22}]}\n");
}

#[test]
fn errors_name_the_file_the_array_and_the_shapes() {
    let scratch = Scratch::new("arrays-errors");
    let batch = scratch.file("batch.json", BATCH);
    let offset = scratch.file("offset.json", r#"{"offset": 1}"#);
    let weights = fixture("weights.npz");
    let cases: Vec<(Vec<String>, &str, String)> = vec![
        (
            vec!["--inputs".into(), fixture("float_counts.npz"), "--shared".into(), weights.clone(), "--shared".into(), offset.clone()],
            "count",
            format!("{}: argument `ks` of member 0 must be an array of integers (i64), found an array of float64", fixture("float_counts.npz")),
        ),
        (
            vec!["--shared".into(), fixture("wrong_shape.npz"), "--inputs".into(), batch.clone()],
            "affine",
            format!("{}: static `W` is an array of float64 with shape [2, 3, 1], but its type `[[f64; D]; H]` needs shape [H, D]", fixture("wrong_shape.npz")),
        ),
        (
            vec!["--inputs".into(), fixture("no_section.npz")],
            "affine",
            format!("{}: array `x` is neither `batch/NAME` nor `shared/NAME`", fixture("no_section.npz")),
        ),
        (
            vec!["--inputs".into(), fixture("inputs.npz"), "--shared".into(), weights.clone()],
            "affine",
            format!("`W` is given both in {} and in {}; give it once", fixture("inputs.npz"), weights),
        ),
        (
            vec!["--inputs".into(), fixture("W_big_endian.npy")],
            "affine",
            format!("{}: a .npy file holds one unnamed array; give it as `--shared NAME=", fixture("W_big_endian.npy")),
        ),
        (
            vec!["--shared".into(), batch.clone(), "--inputs".into(), batch.clone()],
            "affine",
            "`batch` in `shared` is neither a parameter of `affine` nor a static".into(),
        ),
    ];
    for (args, entry, message) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&scratch, entry, &args);
        assert_one_line_error(&out, &message);
    }
}

/// The members of a `.npz` archive: name and bytes.
fn npz_members(path: &str) -> Vec<(String, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut file = archive.by_index(i).unwrap();
            let name = file.name().unwrap().into_owned();
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

/// A `.npy` member's header text and data bytes.
fn npy_parts(bytes: &[u8]) -> (String, &[u8]) {
    assert!(bytes.starts_with(b"\x93NUMPY\x01\x00"));
    let length = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8(bytes[10..10 + length].to_vec()).unwrap();
    (header, &bytes[10 + length..])
}

#[test]
fn results_as_npz_arrays_with_the_errors() {
    let scratch = Scratch::new("arrays-output");
    let indices = scratch.file("i.json", r#"{"batch": {"i": [0, 5, 2, 1]}}"#);
    let output = scratch.path("results.npz");
    let out = run(
        &scratch,
        "pick",
        &[
            "--inputs",
            &fixture("inputs.npz"),
            "--inputs",
            &indices,
            "--output",
            &output,
            "--stats",
        ],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(stdout(&out), "");
    let members = npz_members(&output);
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "result/0.npy",
            "result/1.npy",
            "ok.npy",
            "error/kind.npy",
            "error/message.npy",
            "error/line.npy",
            "error/column.npy",
            "stats.npy"
        ]
    );
    let array = |name: &str| {
        let (_, bytes) = members.iter().find(|(n, _)| n == name).unwrap();
        let (header, data) = npy_parts(bytes);
        (header, data.to_vec())
    };
    // x[i] of members 0, 2, 3: 0, 3, 3.5; member 1 failed (NaN).
    let (header, data) = array("result/0.npy");
    assert!(
        header.contains("'descr': '<f8'") && header.contains("'shape': (4,)"),
        "{header}"
    );
    let values: Vec<f64> = data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!((values[0], values[2], values[3]), (0.0, 3.0, 3.5));
    assert!(values[1].is_nan());
    let (header, data) = array("result/1.npy");
    assert!(header.contains("'descr': '|b1'"), "{header}");
    assert_eq!(data, [0, 0, 1, 1]);
    assert_eq!(array("ok.npy").1, [1, 0, 1, 1]);
    let (header, data) = array("error/kind.npy");
    assert!(
        header.contains("'descr': '<U19'") && header.contains("'shape': (4,)"),
        "{header}"
    );
    let text: String = data
        .chunks_exact(4)
        .filter_map(|c| char::from_u32(u32::from_le_bytes(c.try_into().unwrap())))
        .filter(|&c| c != '\0')
        .collect();
    assert_eq!(text, "index_out_of_bounds");
    let lines: Vec<i64> = array("error/line.npy")
        .1
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(lines, [0, 7, 0, 0]);
    assert!(array("stats.npy").0.contains("'shape': ()"));
}

#[test]
fn results_of_different_shapes_cannot_be_stacked() {
    let scratch = Scratch::new("arrays-ragged");
    let program = scratch.file("r.ab", "fn grow(xs: [f64; L]) -> [f64; L] { xs }\n");
    let inputs = scratch.file("in.json", r#"{"batch": {"xs": [[1.0, 2.0], [3.0]]}}"#);
    let output = scratch.path("r.npz");
    let out = autobatch(&[
        "run", &program, "--entry", "grow", "--inputs", &inputs, "--output", &output,
    ]);
    assert_one_line_error(
        &out,
        &format!(
            "cannot write `{output}`: member 1's `result` has shape [1] but another member's has [2], \
             and the arrays of a .npz stack the members; write the results as JSON"
        ),
    );
}
