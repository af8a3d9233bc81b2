//! Inputs that once made the checker hang, found by fuzzing (`fuzz/`,
//! `tools/fuzz-frontend.sh`). Each must be answered within a deadline.
//!
//! `syn` finds the extent of a node (`Spanned::span`) by printing it, and
//! printing an expression decides where parentheses go by rescanning the
//! right spine of each operand: exponential in the number of `..` after a
//! closure. The checker asked for such spans of expressions, types,
//! patterns, generic arguments and items when it reported an error.

use std::sync::mpsc;
use std::time::Duration;

/// The shape the fuzzer found, with `ranges` prefix `..` operators: before
/// the fix, each `..` more doubled the time (28 took 25 s).
fn pathological(ranges: usize) -> String {
    format!(
        "x * 2 && && && || && && && && && && && {}v .. .. .. .. .. .. .. && && && 10 && sigmoid && && || && && x ( x )",
        ".. ".repeat(ranges)
    )
}

/// Checks `src` on another thread and fails if no answer comes in time.
fn check_within_deadline(src: String) -> Vec<String> {
    let (send, receive) = mpsc::channel();
    let shown = src.chars().take(80).collect::<String>();
    std::thread::spawn(move || {
        let messages = match autobatch_frontend::check(&src) {
            Ok(_) => Vec::new(),
            Err(ds) => ds.into_iter().map(|d| d.message).collect(),
        };
        let _ = send.send(messages);
    });
    receive
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("no answer within 30 s for {shown}..."))
}

#[test]
fn closures_after_many_ranges_are_rejected_quickly() {
    let q = pathological(40);
    let programs = [
        // in an expression
        format!("fn f(x: i64) -> i64 {{ {q} }}"),
        // in the length of an array in a reference type
        format!("fn f(x: &[f64; {{ {q} }}]) -> f64 {{ 1.0 }}"),
        // in a generic argument
        format!("fn g<const K: usize>() -> usize {{ K }} fn f() -> usize {{ g::<&[f64; {{ {q} }}]>() }}"),
        // in a pattern
        format!("fn f(x: i64) -> i64 {{ let const {{ {q} }} = x; 1 }}"),
        // in an item inside a function
        format!("fn f() -> i64 {{ impl X for [f64; {{ {q} }}] {{}} 1 }}"),
        // in a `self` parameter
        format!("fn f(self: [f64; {{ {q} }}]) -> i64 {{ 1 }}"),
        // in an `extern` block
        format!("extern \"autobatch\" {{ type T = [f64; {{ {q} }}]; }} fn f() -> i64 {{ 1 }}"),
    ];
    for src in programs {
        let messages = check_within_deadline(src.clone());
        assert!(!messages.is_empty(), "accepted: {src}");
    }
}

#[test]
fn programs_beyond_the_size_limit_are_rejected_with_the_limit() {
    let line = "fn f(x: i64) -> i64 { x }\n";
    let src = line.repeat(autobatch_frontend::MAX_SOURCE_BYTES / line.len() + 1);
    let messages = check_within_deadline(src);
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0].contains("the program is too large") && messages[0].contains("16777216 bytes"),
        "{}",
        messages[0]
    );
}
