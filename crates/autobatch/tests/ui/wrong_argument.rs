//! The methods are typed: an argument of the wrong Rust type does not compile.
fn main() {
    let prog = autobatch::program! {
        fn sq(x: f64) -> f64 { x * x }
    };
    let _ = prog.sq(vec![1_i64, 2]);
}
