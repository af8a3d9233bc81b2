//! A type error in an embedded program is a compile error of the Rust code,
//! at the program's own token.
fn main() {
    let _prog = autobatch::program! {
        fn twice(x: f64) -> f64 {
            x * 2
        }
    };
}
