//! Binding tests against hand-built IR: one helper that makes a program
//! from type text, and many tiny cases, one per rule of the module docs.

use autobatch_exec::Arg;
use autobatch_ir::{BlockData, Function, Param, Program, StaticDecl, Terminator, VarData};
use autobatch_types::{Data, Dim, Loc, ScalarType, SymbolId, Tensor, TensorType, Type, Value};

use crate::{BoundBatch, Compiled, InputError, InputErrorKind, Inputs};

/// Parses type text in source syntax (`[[f64; D]; 3]`, `(i64, bool)`, `()`);
/// identifiers used as lengths become symbolic dimensions of `symbols`.
fn parse_type(text: &str, symbols: &mut Vec<String>) -> Type {
    let spaced = text
        .replace('[', " [ ")
        .replace(']', " ] ")
        .replace('(', " ( ")
        .replace(')', " ) ");
    let spaced = spaced.replace(';', " ; ").replace(',', " , ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut position = 0;
    let ty = parse_type_tokens(&tokens, &mut position, symbols);
    assert_eq!(position, tokens.len(), "trailing tokens in type `{text}`");
    ty
}

fn parse_type_tokens(tokens: &[&str], position: &mut usize, symbols: &mut Vec<String>) -> Type {
    let token = tokens[*position];
    *position += 1;
    match token {
        "(" => {
            let mut items = Vec::new();
            while tokens[*position] != ")" {
                items.push(parse_type_tokens(tokens, position, symbols));
                if tokens[*position] == "," {
                    *position += 1;
                }
            }
            *position += 1;
            Type::Tuple(items)
        }
        "[" => {
            let Type::Tensor(inner) = parse_type_tokens(tokens, position, symbols) else {
                panic!("array of tuples")
            };
            assert_eq!(tokens[*position], ";");
            let length = tokens[*position + 1];
            assert_eq!(tokens[*position + 2], "]");
            *position += 3;
            let dim = match length.parse::<u64>() {
                Ok(n) => Dim::Fixed(n),
                Err(_) => {
                    let index = symbols.iter().position(|s| s == length).unwrap_or_else(|| {
                        symbols.push(length.to_owned());
                        symbols.len() - 1
                    });
                    Dim::Symbolic(SymbolId(index as u32))
                }
            };
            let mut dims = vec![dim];
            dims.extend(inner.dims);
            Type::Tensor(TensorType {
                elem: inner.elem,
                dims,
            })
        }
        name => Type::Tensor(TensorType::scalar(
            ScalarType::from_name(name).expect("a scalar type"),
        )),
    }
}

/// A program with the given statics and one function `f` with the given
/// parameters (name, type text); the body is irrelevant to binding.
fn program(statics: &[(&str, &str)], params: &[(&str, &str)]) -> Compiled {
    let mut program = Program::default();
    for (name, text) in statics {
        let Type::Tensor(ty) = parse_type(text, &mut program.symbols) else {
            panic!("tuple static")
        };
        program.statics.push(StaticDecl {
            name: (*name).into(),
            ty,
            loc: Loc::new(1, 1),
        });
    }
    let mut function = Function {
        name: "f".into(),
        signature: Vec::new(),
        ret_type: Type::unit(),
        params: Vec::new(),
        results: Vec::new(),
        vars: Default::default(),
        blocks: Default::default(),
        loc: Loc::new(1, 1),
        uncounted: false,
    };
    for (name, text) in params {
        let ty = parse_type(text, &mut program.symbols);
        for flat in ty.flatten() {
            let var = function.vars.push(VarData {
                ty: flat,
                name: Some((*name).into()),
            });
            function.params.push(var);
        }
        function.signature.push(Param {
            name: (*name).into(),
            ty,
        });
    }
    function.blocks.push(BlockData::new(
        Vec::new(),
        Terminator::Return(Vec::new()),
        Loc::new(1, 1),
    ));
    program.functions.push(function);
    Compiled::from_ir(program, "", "test.ab")
}

fn bind(
    statics: &[(&str, &str)],
    params: &[(&str, &str)],
    json: &str,
) -> Result<BoundBatch, InputError> {
    let compiled = program(statics, params);
    let inputs = Inputs::from_json_str(json)?;
    compiled.bind("f", &inputs)
}

fn bind_ok(statics: &[(&str, &str)], params: &[(&str, &str)], json: &str) -> BoundBatch {
    bind(statics, params, json).unwrap_or_else(|e| panic!("expected {json} to bind, got: {e}"))
}

/// Binding must fail with `kind` and a message containing `expected_text`.
fn check_error(
    statics: &[(&str, &str)],
    params: &[(&str, &str)],
    json: &str,
    kind: InputErrorKind,
    expected_text: &str,
) {
    match bind(statics, params, json) {
        Ok(_) => panic!("expected {json} to fail with {kind:?}"),
        Err(error) => {
            assert_eq!(error.kind(), kind, "wrong kind for {json}: {error}");
            assert!(
                error.message().contains(expected_text),
                "message for {json}:\n  {error}\nlacks:\n  {expected_text}"
            );
            assert!(
                !error.message().contains('\n'),
                "message must be one line: {error}"
            );
        }
    }
}

fn shared_arg(batch: &BoundBatch, index: usize) -> &Tensor {
    match &batch.batch().args[index] {
        Arg::Shared(t) => t,
        Arg::Batched(_) => panic!("argument {index} is batched"),
    }
}

fn batched_arg(batch: &BoundBatch, index: usize) -> &[Tensor] {
    match &batch.batch().args[index] {
        Arg::Batched(ts) => ts,
        Arg::Shared(_) => panic!("argument {index} is shared"),
    }
}

use InputErrorKind::*;

// ---- names and sections ----

#[test]
fn batched_and_shared_arguments_bind() {
    let b = bind_ok(
        &[],
        &[("n", "i64"), ("k", "f64")],
        r#"{"batch": {"n": [3, 7, 4]}, "shared": {"k": 2}}"#,
    );
    assert_eq!(b.batch_size(), 3);
    assert_eq!(
        batched_arg(&b, 0)[1],
        Tensor::scalar(autobatch_types::Scalar::I64(7))
    );
    assert_eq!(shared_arg(&b, 1).data, Data::F64(vec![2.0]));
}

#[test]
fn no_batched_argument_means_one_member() {
    assert_eq!(
        bind_ok(&[], &[("k", "i64")], r#"{"shared": {"k": 1}}"#).batch_size(),
        1
    );
    assert_eq!(bind_ok(&[], &[], "{}").batch_size(), 1);
    assert_eq!(
        bind_ok(&[], &[], r#"{"batch": {}, "shared": {}}"#).batch_size(),
        1
    );
}

#[test]
fn unknown_entry_lists_the_functions() {
    let compiled = program(&[], &[]);
    let error = compiled
        .bind("main", &Inputs::new())
        .expect_err("no function main");
    assert_eq!(error.kind(), UnknownEntry);
    assert!(
        error.message().contains("no function named `main`"),
        "{error}"
    );
    assert!(error.message().contains("available: f"), "{error}");
}

#[test]
fn const_generic_function_is_not_an_entry() {
    let source = "fn norm2<const K: usize>(v: [f64; K]) -> f64 { dot(v, v) }";
    let compiled = crate::compile(source, "norm2.ab").expect("compiles");
    let error = compiled
        .bind("norm2", &Inputs::new())
        .expect_err("a const-generic entry");
    assert_eq!(error.kind(), UnknownEntry);
    assert!(
        error.message().contains(
            "`norm2` in norm2.ab cannot be an entry: it has const generic parameters (K)"
        ),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains("the program has no function that can be an entry"),
        "{error}"
    );
}

#[test]
fn missing_argument() {
    check_error(
        &[],
        &[("n", "i64"), ("k", "i64")],
        r#"{"batch": {"n": [1]}}"#,
        MissingName,
        "missing argument `k` of `f`",
    );
}

#[test]
fn missing_static() {
    check_error(
        &[("X", "[f64; 2]")],
        &[],
        "{}",
        MissingName,
        "missing static `X`",
    );
}

#[test]
fn extra_argument_in_batch() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1], "m": [2]}}"#,
        UnknownName,
        "`m` in `batch` is not a parameter of `f`",
    );
}

#[test]
fn extra_argument_in_shared() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1]}, "shared": {"q": 2}}"#,
        UnknownName,
        "`q` in `shared` is neither",
    );
}

#[test]
fn argument_in_both_sections() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1]}, "shared": {"n": 2}}"#,
        DuplicatedName,
        "`n` is given in both `batch` and `shared`",
    );
}

#[test]
fn repeated_key_in_a_section_is_an_error() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1], "n": [2]}}"#,
        BadLayout,
        "`n` is given twice in `batch`",
    );
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"shared": {"n": 1, "n": 2}}"#,
        BadLayout,
        "`n` is given twice in `shared`",
    );
}

#[test]
fn repeated_section_or_nested_key_is_an_error() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1]}, "batch": {"n": [2]}}"#,
        BadLayout,
        "duplicate key `batch`",
    );
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"shared": {"n": {"a": 1, "a": 2}}}"#,
        BadLayout,
        "duplicate key `a`",
    );
}

#[test]
fn repeated_name_given_in_rust_is_an_error() {
    let compiled = program(&[], &[("n", "i64")]);
    let inputs = Inputs::new().batched("n", [1_i64]).batched("n", [2_i64]);
    let error = compiled.bind("f", &inputs).expect_err("duplicate");
    assert_eq!(error.kind(), DuplicatedName);
    assert!(
        error.message().contains("`n` is given twice in `batch`"),
        "{error}"
    );
}

#[test]
fn static_given_per_member() {
    check_error(
        &[("X", "f64")],
        &[],
        r#"{"batch": {"X": [1.0]}}"#,
        StaticInBatch,
        "static `X` is shared by all members",
    );
}

#[test]
fn parameter_named_like_a_static() {
    check_error(
        &[("X", "f64")],
        &[("X", "f64")],
        r#"{"shared": {"X": 1.0}}"#,
        NameClash,
        "parameter `X` of `f` has the same name as a static",
    );
}

#[test]
fn not_json_gives_line_and_column() {
    check_error(
        &[],
        &[],
        "{\"batch\": {\"n\": [1,}}",
        InvalidJson,
        "line 1 column",
    );
    check_error(&[], &[], "", InvalidJson, "not valid JSON");
    check_error(&[], &[], "{} trailing", InvalidJson, "trailing characters");
}

#[test]
fn wrong_layout() {
    check_error(
        &[],
        &[],
        "[1, 2]",
        BadLayout,
        r#"the inputs must be a JSON object with the keys "batch" and "shared""#,
    );
    check_error(
        &[],
        &[],
        r#"{"inputs": {}}"#,
        BadLayout,
        "unknown key `inputs`",
    );
    check_error(
        &[],
        &[],
        r#"{"batch": [1, 2]}"#,
        BadLayout,
        "an object mapping names to values in `batch`",
    );
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": 3}}"#,
        BadLayout,
        "batched argument `n` must be a list with one value per member, found 3",
    );
}

#[test]
fn empty_batch() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": []}}"#,
        EmptyBatch,
        "batched argument `n` is an empty list",
    );
}

#[test]
fn batch_lengths_differ() {
    check_error(
        &[],
        &[("n", "i64"), ("m", "i64")],
        r#"{"batch": {"n": [1, 2, 3], "m": [1, 2]}}"#,
        BatchLengthMismatch,
        "`n` has 3 values but `m` has 2",
    );
}

// ---- scalar conversion ----

#[test]
fn integer_is_accepted_for_a_float() {
    let b = bind_ok(
        &[],
        &[("x", "f64"), ("y", "f32")],
        r#"{"shared": {"x": 2, "y": -3}}"#,
    );
    assert_eq!(shared_arg(&b, 0).data, Data::F64(vec![2.0]));
    assert_eq!(shared_arg(&b, 1).data, Data::F32(vec![-3.0]));
}

#[test]
fn non_finite_float_strings() {
    let b = bind_ok(
        &[],
        &[("x", "[f64; 3]")],
        r#"{"shared": {"x": ["NaN", "inf", "-inf"]}}"#,
    );
    let Data::F64(values) = &shared_arg(&b, 0).data else {
        panic!("not f64")
    };
    assert!(values[0].is_nan());
    assert_eq!(values[1..], [f64::INFINITY, f64::NEG_INFINITY]);
    check_error(
        &[],
        &[("x", "f64")],
        r#"{"shared": {"x": "nan"}}"#,
        BadValue,
        r#"argument `x` must be a number (f64) or one of the strings "NaN", "inf", "-inf", found the string "nan""#,
    );
}

#[test]
fn fraction_for_an_integer() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1, 2.5]}}"#,
        BadValue,
        "argument `n` of member 1 must be an integer (i64), found 2.5",
    );
}

#[test]
fn whole_numbers_with_an_exponent_for_an_integer() {
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"batch": {"n": [1e29]}}"#,
        BadValue,
        "argument `n` of member 0 must be an integer that fits i64, found 1e29, which is out of range",
    );
    check_error(
        &[],
        &[("n", "i32")],
        r#"{"shared": {"n": -3e9}}"#,
        BadValue,
        "fits i32",
    );
    check_error(
        &[],
        &[("n", "usize")],
        r#"{"shared": {"n": -1e3}}"#,
        BadValue,
        "must be a non-negative integer (usize)",
    );
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"shared": {"n": 1e3}}"#,
        BadValue,
        "must be an integer (i64), found 1e3; write it without a fraction or an exponent",
    );
}

#[test]
fn negative_usize() {
    check_error(
        &[],
        &[("n", "usize")],
        r#"{"shared": {"n": -1}}"#,
        BadValue,
        "must be a non-negative integer (usize), found -1",
    );
}

#[test]
fn integers_out_of_range() {
    check_error(
        &[],
        &[("n", "i32")],
        r#"{"shared": {"n": 3000000000}}"#,
        BadValue,
        "must be an integer that fits i32, found 3000000000",
    );
    check_error(
        &[],
        &[("n", "i32")],
        r#"{"shared": {"n": -2147483649}}"#,
        BadValue,
        "fits i32",
    );
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"shared": {"n": 9223372036854775808}}"#,
        BadValue,
        "fits i64",
    );
    let b = bind_ok(
        &[],
        &[("n", "usize"), ("m", "i32")],
        r#"{"shared": {"n": 18446744073709551615, "m": -2147483648}}"#,
    );
    assert_eq!(shared_arg(&b, 0).data, Data::Usize(vec![u64::MAX]));
    assert_eq!(shared_arg(&b, 1).data, Data::I32(vec![i32::MIN]));
}

#[test]
fn bool_is_only_true_or_false() {
    check_error(
        &[],
        &[("c", "bool")],
        r#"{"shared": {"c": 1}}"#,
        BadValue,
        "must be `true` or `false` (bool), found 1",
    );
    check_error(
        &[],
        &[("c", "bool")],
        r#"{"shared": {"c": "true"}}"#,
        BadValue,
        "found the string \"true\"",
    );
    check_error(
        &[],
        &[("n", "i64")],
        r#"{"shared": {"n": true}}"#,
        BadValue,
        "must be an integer (i64), found true",
    );
}

#[test]
fn f32_range_and_shortest_value() {
    check_error(
        &[],
        &[("x", "f32")],
        r#"{"shared": {"x": 1e39}}"#,
        BadValue,
        "fits f32",
    );
    let b = bind_ok(&[], &[("x", "f32")], r#"{"shared": {"x": 0.1}}"#);
    assert_eq!(shared_arg(&b, 0).data, Data::F32(vec![0.1]));
}

// ---- arrays, tuples, unit ----

#[test]
fn nested_arrays_are_row_major() {
    let b = bind_ok(
        &[],
        &[("m", "[[i64; 2]; 3]")],
        r#"{"shared": {"m": [[1, 2], [3, 4], [5, 6]]}}"#,
    );
    assert_eq!(shared_arg(&b, 0).shape, vec![3, 2]);
    assert_eq!(shared_arg(&b, 0).data, Data::I64(vec![1, 2, 3, 4, 5, 6]));
}

#[test]
fn wrong_fixed_length_names_the_path() {
    check_error(
        &[],
        &[("m", "[[f64; 2]; 3]")],
        r#"{"batch": {"m": [[[1, 2], [3], [5, 6]]]}}"#,
        BadValue,
        "argument `m` of member 0: `m[1]` must have 2 elements (type `[f64; 2]`), found 1",
    );
    check_error(
        &[],
        &[("m", "[[f64; 2]; 3]")],
        r#"{"shared": {"m": [[1, 2]]}}"#,
        BadValue,
        "argument `m` must have 3 elements (type `[[f64; 2]; 3]`), found 1",
    );
}

#[test]
fn bad_element_names_the_path() {
    check_error(
        &[],
        &[("x", "[[f64; 2]; 3]")],
        r#"{"batch": {"x": [[[1, 2], [3, 4], [5, 6]], [[1, 2], [3, 4], ["a", 6]]]}}"#,
        BadValue,
        "argument `x` of member 1: `x[2][0]` must be a number (f64)",
    );
}

#[test]
fn scalar_where_an_array_is_expected() {
    check_error(
        &[],
        &[("x", "[f64; 2]")],
        r#"{"shared": {"x": 1.0}}"#,
        BadValue,
        "argument `x` must be an array `[f64; 2]` (a list), found 1.0",
    );
    check_error(
        &[],
        &[("x", "f64")],
        r#"{"shared": {"x": [1.0]}}"#,
        BadValue,
        "found a list of 1 value",
    );
}

#[test]
fn ragged_array_with_symbolic_length() {
    check_error(
        &[],
        &[("x", "[[f64; D]; N]")],
        r#"{"shared": {"x": [[1, 2], [3]]}}"#,
        BadValue,
        "`x[1]` has 1 elements but `x[0]` has 2: arrays must be rectangular",
    );
}

#[test]
fn tuples_are_lists_of_their_arity() {
    let b = bind_ok(
        &[],
        &[("t", "(i64, [f64; 2])")],
        r#"{"batch": {"t": [[1, [2, 3]], [4, [5, 6]]]}}"#,
    );
    assert_eq!(
        b.batch().args.len(),
        2,
        "a tuple parameter flattens to two arguments"
    );
    assert_eq!(batched_arg(&b, 0)[1].data, Data::I64(vec![4]));
    assert_eq!(batched_arg(&b, 1)[1].data, Data::F64(vec![5.0, 6.0]));
    check_error(
        &[],
        &[("t", "(i64, bool)")],
        r#"{"shared": {"t": [1]}}"#,
        BadValue,
        "must be a tuple `(i64, bool)`, written as a list of 2 values, found a list of 1 value",
    );
    check_error(
        &[],
        &[("t", "(i64, [f64; 2])")],
        r#"{"shared": {"t": [1, [2, true]]}}"#,
        BadValue,
        "argument `t`: `t.1[1]` must be a number (f64)",
    );
}

#[test]
fn unit_is_null_or_empty_list() {
    bind_ok(&[], &[("u", "()")], r#"{"shared": {"u": null}}"#);
    bind_ok(&[], &[("u", "()")], r#"{"batch": {"u": [[], null]}}"#);
    check_error(
        &[],
        &[("u", "()")],
        r#"{"shared": {"u": 0}}"#,
        BadValue,
        "must be `()` (null or []), found 0",
    );
}

// ---- symbolic dimensions ----

#[test]
fn symbolic_dimensions_bind_from_statics_and_arguments() {
    let b = bind_ok(
        &[("X", "[[f64; D]; N]")],
        &[("y", "[f64; D]")],
        r#"{"batch": {"y": [[1, 2], [3, 4]]}, "shared": {"X": [[1, 2], [3, 4], [5, 6]]}}"#,
    );
    assert_eq!(b.env().symbols, vec![2, 3], "D = 2, N = 3");
    assert_eq!(b.env().statics[0].shape, vec![3, 2]);
}

#[test]
fn symbolic_dimensions_disagree_between_static_and_member() {
    check_error(
        &[("X", "[f64; N]")],
        &[("y", "[f64; N]")],
        r#"{"batch": {"y": [[1, 2, 3], [1, 2, 3], [1, 2, 3, 4]]}, "shared": {"X": [1, 2, 3]}}"#,
        DimensionMismatch,
        "symbolic dimension `N` is 3 in static `X` but 4 in argument `y` of member 2",
    );
}

#[test]
fn a_dimension_only_batched_arguments_fix_may_differ_between_members() {
    let b = bind_ok(
        &[],
        &[("y", "[f64; N]"), ("z", "[[f64; D]; N]")],
        r#"{"batch": {"y": [[1], [1, 2], [3]], "z": [[[1, 2]], [[1], [2]], [[4, 5]]]}}"#,
    );
    let ragged: Vec<(u32, Vec<u64>)> = b
        .env()
        .ragged
        .iter()
        .map(|r| (r.symbol.0, r.lengths.clone()))
        .collect();
    assert_eq!(
        ragged,
        vec![(0, vec![1, 2, 1]), (1, vec![2, 1, 2])],
        "N and D per member"
    );
    assert_eq!(b.env().symbols, vec![2, 2], "the longest member's lengths");
}

#[test]
fn a_member_disagrees_with_itself() {
    check_error(
        &[],
        &[("y", "[f64; N]"), ("z", "[f64; N]")],
        r#"{"batch": {"y": [[1], [1, 2]], "z": [[1], [1, 2, 3]]}}"#,
        DimensionMismatch,
        "`N` is 2 in argument `y` of member 1 but 3 in argument `z` of member 1",
    );
}

#[test]
fn a_shared_argument_fixes_a_dimension_for_every_member() {
    check_error(
        &[],
        &[("y", "[f64; N]"), ("w", "[f64; N]")],
        r#"{"batch": {"y": [[1, 2], [1]]}, "shared": {"w": [1, 2]}}"#,
        DimensionMismatch,
        "symbolic dimension `N` is 2 in argument `w` but 1 in argument `y` of member 1",
    );
}

#[test]
fn a_ragged_dimension_only_inside_a_members_empty_array_is_undetermined() {
    check_error(
        &[],
        &[("m", "[[f64; D]; N]")],
        r#"{"batch": {"m": [[[1, 2]], [[1, 2, 3]], []]}}"#,
        UndeterminedDimension,
        "symbolic dimension `D` cannot be determined for member 2",
    );
    // Where the other members agree, an empty member takes their length.
    let b = bind_ok(
        &[],
        &[("m", "[[f64; D]; N]")],
        r#"{"batch": {"m": [[[1, 2]], [[3, 4], [5, 6]], []]}}"#,
    );
    assert_eq!(b.env().ragged.len(), 1, "only N is ragged");
    assert_eq!(b.env().ragged[0].lengths, vec![1, 2, 0]);
    assert_eq!(b.batch().args.len(), 1);
}

#[test]
fn symbolic_dimension_used_twice_in_one_type() {
    bind_ok(
        &[],
        &[("m", "[[f64; N]; N]")],
        r#"{"shared": {"m": [[1, 2], [3, 4]]}}"#,
    );
    check_error(
        &[],
        &[("m", "[[f64; N]; N]")],
        r#"{"shared": {"m": [[1, 2, 3], [4, 5, 6]]}}"#,
        DimensionMismatch,
        "`N` is 2 in argument `m` but 3 in argument `m` (at `m[0]`)",
    );
}

#[test]
fn empty_array_takes_inner_lengths_from_other_inputs() {
    let b = bind_ok(
        &[("X", "[[f64; D]; N]")],
        &[("v", "[f64; D]")],
        r#"{"shared": {"X": [], "v": [1, 2, 3]}}"#,
    );
    assert_eq!(b.env().statics[0].shape, vec![0, 3]);
    assert_eq!(b.env().symbols, vec![3, 0]);
}

#[test]
fn dimension_only_inside_empty_arrays() {
    check_error(
        &[("X", "[[f64; D]; N]")],
        &[],
        r#"{"shared": {"X": []}}"#,
        UndeterminedDimension,
        "symbolic dimension `D` cannot be determined",
    );
}

// ---- structured values given in Rust ----

#[test]
fn structured_values_must_have_the_exact_type() {
    let compiled = program(&[], &[("x", "[f64; N]"), ("n", "i64")]);
    let vector = Value::Tensor(Tensor::new(vec![2], Data::F64(vec![1.0, 2.0])));
    let inputs = Inputs::new()
        .batched("x", [vector.clone(), vector])
        .shared("n", 5_i64);
    let b = compiled.bind("f", &inputs).expect("binds");
    assert_eq!(b.env().symbols, vec![2]);
    assert_eq!(batched_arg(&b, 0).len(), 2);

    let wrong = Value::Tensor(Tensor::new(vec![2], Data::F32(vec![1.0, 2.0])));
    let error = compiled
        .bind("f", &Inputs::new().shared("x", wrong).shared("n", 1_i64))
        .expect_err("f32 for f64");
    assert_eq!(error.kind(), BadValue);
    assert!(
        error
            .message()
            .contains("argument `x` must be `[f64; N]`, found an array of f32 with shape [2]"),
        "{error}"
    );

    let scalar = Value::Tensor(Tensor::scalar(autobatch_types::Scalar::I32(1)));
    let error = compiled
        .bind("f", &Inputs::new().shared("x", scalar).shared("n", 1_i64))
        .expect_err("scalar");
    assert!(
        error.message().contains("found a scalar of type i32"),
        "{error}"
    );
}

#[test]
fn rust_numbers_convert_like_json() {
    let compiled = program(&[], &[("x", "f64"), ("v", "[f64; 2]")]);
    let inputs = Inputs::new()
        .batched("x", [f64::NAN, 1.5])
        .shared("v", vec![1.0, f64::INFINITY]);
    let b = compiled.bind("f", &inputs).expect("binds");
    assert!(matches!(batched_arg(&b, 0)[0].data, Data::F64(ref v) if v[0].is_nan()));
    assert_eq!(shared_arg(&b, 1).data, Data::F64(vec![1.0, f64::INFINITY]));
}

// ---- running what was bound ----

#[test]
fn unit_results_under_every_strategy() {
    use crate::{RunConfig, RunError, Strategy};
    let batch = bind_ok(&[], &[("n", "i64")], r#"{"batch": {"n": [1, 2, 3]}}"#);
    let reference = RunConfig {
        strategy: Strategy::Reference,
        ..RunConfig::default()
    };
    let result = batch.run(&reference).expect("the reference strategy runs");
    assert_eq!(result.batch_size, 3);
    assert_eq!(result.members, vec![Ok(Value::Tuple(vec![])); 3]);
    assert_eq!(
        result.to_json(false),
        serde_json::json!({"results": [{"ok": null}, {"ok": null}, {"ok": null}]})
    );
    for strategy in Strategy::ALL {
        let config = RunConfig {
            strategy,
            ..RunConfig::default()
        };
        let result = batch.run(&config).expect("every strategy runs");
        assert_eq!(
            result.members,
            vec![Ok(Value::Tuple(vec![])); 3],
            "{strategy}"
        );
    }
    let zero_threads = RunConfig {
        options: crate::RunOptions {
            threads: 0,
            ..reference.options
        },
        ..reference
    };
    assert!(matches!(
        batch.run(&zero_threads),
        Err(RunError::InvalidConfig(_))
    ));
}

/// A number in a message is quoted as the inputs' text writes it, at any
/// depth: in a static, a shared argument, a member's value, a tuple.
#[test]
fn numbers_are_quoted_as_written() {
    let cases = [
        (
            r#"{"shared": {"S": 99999999999999999999, "t": [[0, 1], [2, 3]]}, "batch": {"x": [1]}}"#,
            "static `S` must be an integer that fits i64, found 99999999999999999999,",
        ),
        (
            r#"{"shared": {"S": 1, "t": [[0, 1], [2, 3]]}, "batch": {"x": [1, 2.50]}}"#,
            "argument `x` of member 1 must be an integer (i64), found 2.50",
        ),
        (
            r#"{"shared": {"S": 1, "t": [[0, 1], [2, 1E1]]}, "batch": {"x": [1]}}"#,
            "argument `t`: `t.1[1]` must be an integer (i32), found 1E1;",
        ),
        (
            r#"{"shared": {"S": 1, "t": [[0, 1], 5.0e0]}, "batch": {"x": [1]}}"#,
            "must be an array `[i32; 2]` (a list), found 5.0e0",
        ),
    ];
    for (json, expected) in cases {
        check_error(
            &[("S", "i64")],
            &[("x", "i64"), ("t", "([i64; 2], [i32; 2])")],
            json,
            InputErrorKind::BadValue,
            expected,
        );
    }
    // Inputs built in Rust have no text: the number as it parsed.
    let compiled = program(&[], &[("x", "i64")]);
    let inputs = Inputs::new().batched("x", [1.5_f64]);
    let error = compiled.bind("f", &inputs).unwrap_err();
    assert!(error.message().contains("found 1.5"), "{error}");
}

#[test]
fn inputs_that_are_not_an_object_say_what_they_are() {
    for (json, found) in [
        ("[1, 2]", "a list of 2 values"),
        ("2.50", "2.50"),
        ("null", "null"),
    ] {
        let error = Inputs::from_json_str(json).unwrap_err();
        assert_eq!(error.kind(), InputErrorKind::BadLayout);
        assert!(
            error.message().starts_with(
                r#"the inputs must be a JSON object with the keys "batch" and "shared""#
            ),
            "{error}"
        );
        assert!(
            error.message().ends_with(&format!("found {found}")),
            "{error}"
        );
    }
    // Text that is not JSON is reported as such.
    let error = Inputs::from_json_str("[1, 2").unwrap_err();
    assert_eq!(error.kind(), InputErrorKind::InvalidJson);
}

/// Errors about the entry or the program are not about the inputs (a
/// command does not blame the inputs file for them); the others are.
#[test]
fn errors_say_whether_they_are_about_the_inputs() {
    let compiled = program(&[("S", "f64")], &[("x", "f64")]);
    let inputs = Inputs::from_json_str(r#"{"batch": {"x": [1.0]}, "shared": {"S": 1.0}}"#).unwrap();
    let unknown = compiled.bind("g", &inputs).unwrap_err();
    assert!(!unknown.is_about_the_inputs(), "{unknown}");
    let missing = compiled.bind("f", &Inputs::new()).unwrap_err();
    assert!(missing.is_about_the_inputs(), "{missing}");
}

#[test]
fn derived_functions_are_named_by_the_users_function() {
    assert_eq!(
        autobatch_ir::user_function_name("predict'sgrad@0"),
        "predict"
    );
    assert_eq!(autobatch_ir::user_function_name("f'vjp"), "f");
    assert_eq!(autobatch_ir::user_function_name("norm2<3>"), "norm2<3>");
    assert_eq!(autobatch_ir::user_function_name("plain"), "plain");
}
