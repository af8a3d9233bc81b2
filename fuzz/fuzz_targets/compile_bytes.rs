//! Fuzz target: arbitrary bytes, read as UTF-8 (invalid sequences replaced),
//! compiled as `autobatch check` does.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    autobatch_fuzz::check_never_crashes(&String::from_utf8_lossy(data));
});
