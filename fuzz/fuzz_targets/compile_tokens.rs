//! Fuzz target: each input byte picks a token of the language
//! ([`autobatch_fuzz::TOKENS`]); the tokens, glued by spaces, are compiled.
//! Random bytes rarely get past the parser; random tokens often do.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    autobatch_fuzz::check_never_crashes(&autobatch_fuzz::source_from_tokens(data));
});
