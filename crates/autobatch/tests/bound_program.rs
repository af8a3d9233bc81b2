//! [`BoundProgram`]: the statics bound once give every batch the results
//! that binding them with the batch gives, on every strategy; they are
//! shared, not copied; they can be read, replaced and updated in place;
//! gradients run against them; arrays of another element type of the
//! family are converted, and the rest refused with messages that name the
//! value and the shapes; owned inputs give the statics their arrays'
//! elements without a copy.

use std::sync::Arc;

use autobatch::typed::IntoValue;
use autobatch::{compile, ArrayInput, Data, InputErrorKind, Inputs, RunConfig, Strategy, Tensor};

const SOURCE: &str = "
extern \"autobatch\" {
    static W: [[f64; D]; H];
    static B: [f64; H];
}
fn affine(x: [f64; D]) -> [f64; H] { matvec(W, x) + B }
fn loss(x: [f64; D]) -> f64 { let y = matvec(W, x) + B; 0.5 * sum(y * y) }
fn count(ks: [i64; 3]) -> i64 { ks[0] + ks[1] + ks[2] }
fn offset(x: [f64; D], k: f64) -> f64 { x[0] + k }
";

fn w() -> Vec<Vec<f64>> {
    vec![vec![0.5, -1.0, 0.25], vec![2.0, 0.125, -0.5]]
}

fn statics() -> Inputs {
    Inputs::new()
        .shared("W", serde_json::json!(w()))
        .shared("B", vec![0.1, -0.2])
}

fn batch() -> Inputs {
    Inputs::new().batched("x", [vec![1.0, 2.0, 3.0], vec![-1.0, 0.5, 4.0]])
}

fn config(strategy: Strategy) -> RunConfig {
    let mut config = RunConfig {
        strategy,
        ..RunConfig::default()
    };
    config.options.threads = 1;
    config
}

/// W x + B in the program's order of terms.
fn affine(w: &[Vec<f64>], b: &[f64], x: &[f64]) -> Vec<f64> {
    w.iter()
        .zip(b)
        .map(|(row, b)| row.iter().zip(x).map(|(w, x)| w * x).sum::<f64>() + b)
        .collect()
}

#[test]
fn a_bound_program_gives_what_binding_with_the_batch_gives() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let bound = program.with_statics(&statics()).unwrap();
    let together = statics().merge(batch());
    for strategy in Strategy::ALL {
        let once = bound.bind("affine", &batch()).unwrap();
        let each = program.bind("affine", &together).unwrap();
        let (once, each) = (
            once.run(&config(strategy)).unwrap(),
            each.run(&config(strategy)).unwrap(),
        );
        assert_eq!(once.members, each.members, "{strategy}");
        let expected = affine(&w(), &[0.1, -0.2], &[1.0, 2.0, 3.0]);
        assert_eq!(once.members[0], Ok(expected.into_value()), "{strategy}");
    }
}

#[test]
fn batches_share_the_statics_without_copying_them() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let bound = program.with_statics(&statics()).unwrap();
    let first = bound.bind("affine", &batch()).unwrap();
    let second = bound.bind("affine", &batch()).unwrap();
    assert!(Arc::ptr_eq(&first.env().statics, &second.env().statics));
    assert_eq!(
        first.env().statics[0].data.len(),
        6,
        "W as bound, converted once"
    );
}

#[test]
fn statics_are_read_replaced_and_updated_in_place() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let mut bound = program.with_statics(&statics()).unwrap();
    assert_eq!(bound.static_names().collect::<Vec<_>>(), ["W", "B"]);
    assert_eq!(
        bound.static_value("B").unwrap().data,
        Data::F64(vec![0.1, -0.2])
    );
    // A batch bound before an update keeps the values it was bound with.
    let before = bound.bind("affine", &batch()).unwrap();
    bound.static_values_mut::<f64>("B").unwrap()[1] = 5.0;
    let after = bound.bind("affine", &batch()).unwrap();
    let x = [1.0, 2.0, 3.0];
    let run = |b: &autobatch::BoundBatch| b.run(&config(Strategy::Reference)).unwrap().members;
    assert_eq!(
        run(&before)[0],
        Ok(affine(&w(), &[0.1, -0.2], &x).into_value())
    );
    assert_eq!(
        run(&after)[0],
        Ok(affine(&w(), &[0.1, 5.0], &x).into_value())
    );
    let wrong_type = bound.static_values_mut::<f32>("B").unwrap_err();
    assert_eq!(
        wrong_type.message(),
        "static `B` is of type [f64; H], whose elements are not f32"
    );

    // Replacing one static leaves the others.
    let w2 = vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]];
    bound.set_static("W", serde_json::json!(w2)).unwrap();
    assert_eq!(
        run(&bound.bind("affine", &batch()).unwrap())[0],
        Ok(affine(&w2, &[0.1, 5.0], &x).into_value())
    );
    // A new value must agree with the other statics' dimensions.
    let error = bound
        .set_static("W", serde_json::json!([[1.0, 2.0, 3.0]]))
        .unwrap_err();
    assert_eq!(error.kind(), InputErrorKind::DimensionMismatch);
    assert_eq!(
        error.message(),
        "symbolic dimension `H` is 2 in static `B` but 1 in static `W`"
    );
    let error = bound.set_static("V", 1.0).unwrap_err();
    assert_eq!(
        error.message(),
        "no static named `V` in bound.ab (statics: W, B)"
    );
}

#[test]
fn batches_may_not_name_statics_and_statics_must_all_be_given() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let bound = program.with_statics(&statics()).unwrap();
    let error = bound
        .bind("affine", &batch().shared("W", serde_json::json!(w())))
        .unwrap_err();
    assert!(error
        .message()
        .starts_with("static `W` is bound already (the program holds its statics)"));
    let error = program
        .with_statics(&Inputs::new().shared("W", serde_json::json!(w())))
        .unwrap_err();
    assert_eq!(error.message(), "missing static `B`: give it in `shared`");
    let error = program.with_statics(&batch()).unwrap_err();
    assert!(error.message().starts_with("`x` is in `batch`"));
}

#[test]
fn shared_arguments_bound_with_the_statics() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let bound = program.with_statics(&statics().shared("k", 10.0)).unwrap();
    let out = bound
        .bind("offset", &batch())
        .unwrap()
        .run(&config(Strategy::ProgramCounter))
        .unwrap();
    assert_eq!(out.members, [Ok(11.0.into_value()), Ok(9.0.into_value())]);
}

#[test]
fn gradients_run_against_the_resident_statics() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let bound = program.with_statics(&statics()).unwrap();
    let resident = bound
        .bind_static_gradient("loss", &["W", "B"], &batch())
        .unwrap()
        .run(&config(Strategy::ProgramCounter))
        .unwrap();
    let given = program
        .bind_static_gradient("loss", &["W", "B"], &statics().merge(batch()))
        .unwrap()
        .run(&config(Strategy::ProgramCounter))
        .unwrap();
    assert_eq!(resident.static_gradients, given.static_gradients);
    // d/dB of 0.5 |W x + B|^2 summed over the members: the residuals' sum.
    let b = [0.1, -0.2];
    let sum: Vec<f64> = [[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]]
        .iter()
        .map(|x| affine(&w(), &b, x))
        .fold(vec![0.0, 0.0], |acc, y| vec![acc[0] + y[0], acc[1] + y[1]]);
    let Data::F64(gradient_b) = &resident.static_gradients[1].1.data else {
        panic!("f64 gradient")
    };
    for (got, want) in gradient_b.iter().zip(&sum) {
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // The derived program is kept: a second batch derives nothing.
    let again = bound
        .bind_static_gradient("loss", &["W", "B"], &batch())
        .unwrap()
        .run(&config(Strategy::ProgramCounter))
        .unwrap();
    assert_eq!(again.static_gradients, resident.static_gradients);
}

fn array(shape: Vec<usize>, data: Data, dtype: &str) -> ArrayInput {
    ArrayInput::new(Tensor::new(shape, data), dtype)
}

#[test]
fn arrays_convert_within_their_family() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    // float32 for f64, int32 for i64.
    let w32 = array(
        vec![2, 3],
        Data::F32(vec![0.5, -1.0, 0.25, 2.0, 0.125, -0.5]),
        "float32",
    );
    let bound = program
        .with_statics(&Inputs::new().shared("W", w32).shared("B", vec![0.1, -0.2]))
        .unwrap();
    assert_eq!(
        bound.static_value("W").unwrap().data,
        Data::F64(w().concat())
    );
    let ks = array(vec![2, 3], Data::I32(vec![1, 2, 3, 4, 5, 6]), "int32");
    let out = bound
        .bind("count", &Inputs::new().batched("ks", ks.rows()))
        .unwrap()
        .run(&config(Strategy::Reference))
        .unwrap();
    assert_eq!(
        out.members,
        [Ok(6_i64.into_value()), Ok(15_i64.into_value())]
    );
}

#[test]
fn arrays_of_another_family_or_shape_are_refused_by_name() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let bound = program.with_statics(&statics()).unwrap();
    let bind_ks = |ks: ArrayInput| {
        bound
            .bind("count", &Inputs::new().shared("ks", ks))
            .unwrap_err()
            .message()
            .to_owned()
    };
    assert_eq!(
        bind_ks(array(vec![3], Data::F64(vec![1.0, 2.0, 3.0]), "float64")),
        "argument `ks` must be an array of integers (i64), found an array of float64"
    );
    assert_eq!(
        bind_ks(array(vec![3], Data::Usize(vec![1, u64::MAX, 3]), "uint64")),
        "argument `ks`: `ks[1]` must fit i64, found 18446744073709551615 in an array of uint64"
    );
    assert_eq!(
        bind_ks(array(vec![2, 2], Data::I64(vec![1, 2, 3, 4]), "int64")),
        "argument `ks` is an array of int64 with shape [2, 2], but its type `[i64; 3]` needs shape [3]"
    );
    let error = program
        .with_statics(
            &Inputs::new()
                .shared("W", array(vec![6], Data::F64(w().concat()), "float64"))
                .shared("B", vec![0.0, 0.0]),
        )
        .unwrap_err();
    assert_eq!(error.input_name(), Some("W"));
    assert_eq!(
        error.message(),
        "static `W` is an array of float64 with shape [6], but its type `[[f64; D]; H]` needs shape [H, D]"
    );
    let bools = array(vec![2], Data::Bool(vec![true, false]), "bool");
    let error = program
        .with_statics(
            &Inputs::new()
                .shared("W", serde_json::json!(w()))
                .shared("B", bools),
        )
        .unwrap_err();
    assert_eq!(
        error.message(),
        "static `B` must be an array of numbers (f64), found an array of bool"
    );
}

/// The address of the elements of an `f64` tensor.
fn f64_buffer(data: &Data) -> *const f64 {
    match data {
        Data::F64(v) => v.as_ptr(),
        other => panic!("f64 elements expected, found {:?}", other.ty()),
    }
}

#[test]
fn owned_inputs_give_their_statics_arrays_to_the_program_uncopied() {
    let program = compile(SOURCE, "bound.ab").unwrap();
    let w64 = || array(vec![2, 3], Data::F64(w().concat()), "float64");
    // B as float32: another element type of the family, converted as
    // `bind` converts it.
    let b32 = || array(vec![2], Data::F32(vec![0.1, -0.2]), "float32");
    // The inputs, and where W's elements are.
    let given = || {
        let w = w64();
        let address = f64_buffer(&w.tensor.data);
        (Inputs::new().shared("W", w).shared("B", b32()), address)
    };
    let run = |batch: &autobatch::BoundBatch| batch.run(&config(Strategy::Reference)).unwrap();

    let (inputs, w_address) = given();
    let owned = program.bind_owned("affine", inputs.merge(batch())).unwrap();
    let copied = program.bind("affine", &given().0.merge(batch())).unwrap();
    assert_eq!(owned.env().statics, copied.env().statics);
    assert_eq!(f64_buffer(&owned.env().statics[0].data), w_address);
    assert_eq!(run(&owned).members, run(&copied).members);

    let (inputs, w_address) = given();
    let bound = program.with_statics_owned(inputs).unwrap();
    assert_eq!(
        f64_buffer(&bound.static_value("W").unwrap().data),
        w_address
    );
    assert_eq!(
        bound.statics(),
        program.with_statics(&given().0).unwrap().statics()
    );

    let (inputs, w_address) = given();
    let gradient = program
        .bind_static_gradient_owned("loss", &["W", "B"], inputs.merge(batch()))
        .unwrap();
    assert_eq!(f64_buffer(&gradient.env().statics[0].data), w_address);
    let copied = program
        .bind_static_gradient("loss", &["W", "B"], &given().0.merge(batch()))
        .unwrap();
    assert_eq!(
        run(&gradient).static_gradients,
        run(&copied).static_gradients
    );

    // Errors are binding's: a wrong shape is refused by name.
    let error = program
        .bind_owned(
            "affine",
            Inputs::new()
                .shared("W", array(vec![6], Data::F64(w().concat()), "float64"))
                .shared("B", b32())
                .merge(batch()),
        )
        .unwrap_err();
    assert_eq!(
        error.message(),
        "static `W` is an array of float64 with shape [6], but its type `[[f64; D]; H]` needs shape [H, D]"
    );
}
