//! Every diagnostic is reported, each where it points.
fn main() {
    let _prog = autobatch::program! {
        fn f(x: f64) -> f64 { y + 1.0 }
        fn g(n: i64) -> bool { n }
    };
}
