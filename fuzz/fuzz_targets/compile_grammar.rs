//! Fuzz target: structure-aware. The input bytes drive a generator of mostly
//! well-typed programs ([`autobatch_fuzz::grammar`]), which get past the
//! parser and the checker and so exercise the lowering as well.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    autobatch_fuzz::check_never_crashes(&autobatch_fuzz::grammar::program(data));
});
