//! A module's functions call each other with 32-bit displacements, so its
//! code must lie in one region whatever the process's address space looks
//! like. This test (its own process) lays the address space out so that
//! separately mapped pages of code would land more than 2 GiB apart: a
//! one-page hole above a 3 GiB reservation, every other gap above it
//! filled. Code placed page by page then starts in the hole and goes on
//! below the reservation, and compiling a program of many functions fails.

#![cfg(target_os = "linux")]

use autobatch_ir::{EntityRef, FuncId};
use autobatch_native::{compile, Counting, Interrupts};

/// A chain of `n` small functions, each calling the next.
fn chain(n: usize) -> String {
    let mut source = String::new();
    for i in 0..n {
        let next = if i + 1 < n {
            format!("f{}(y + 0.5, k - 1)", i + 1)
        } else {
            "y".to_string()
        };
        source += &format!(
            "fn f{i}(x: f64, k: i64) -> f64 {{\n\
             \x20   let mut y = x;\n\
             \x20   let mut j = 0;\n\
             \x20   while j < k {{ y = y * 0.999 + (y * 0.5).sin(); j = j + 1; }}\n\
             \x20   if k > 0 {{ {next} }} else {{ y }}\n\
             }}\n"
        );
    }
    source
}

/// The process's mappings, as (start, end, line of /proc/self/maps).
fn mappings() -> Vec<(usize, usize, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("Linux's /proc");
    maps.lines()
        .map(|line| {
            let range = line.split_whitespace().next().expect("an address range");
            let (start, end) = range.split_once('-').expect("start-end");
            let hex = |s| usize::from_str_radix(s, 16).expect("hex");
            (hex(start), hex(end), line.to_string())
        })
        .collect()
}

/// Address space that nothing may be placed in, at `start` if given.
fn reserve(start: Option<usize>, len: usize) -> usize {
    let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    if start.is_some() {
        flags |= libc::MAP_FIXED_NOREPLACE;
    }
    let at = start.unwrap_or(0) as *mut libc::c_void;
    // SAFETY: a new anonymous mapping, at an address nothing uses.
    let p = unsafe { libc::mmap(at, len, libc::PROT_NONE, flags, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED, "mmap of {len:#x} bytes");
    p as usize
}

/// Leaves one free page right above a 3 GiB reservation and no other free
/// address space between it and the stack, where mappings are placed.
fn leave_one_page_above_a_far_gap() {
    // SAFETY: sysconf reads a constant of the system.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).expect("a page size");
    let far = 3usize << 30;
    let low = reserve(None, far + page);
    let hole = low + far;
    // SAFETY: the page is part of the reservation just made.
    assert_eq!(unsafe { libc::munmap(hole as *mut libc::c_void, page) }, 0);
    for pair in mappings().windows(2) {
        let (end, next) = (pair[0].1, pair[1].0);
        if pair[1].2.contains("[stack]") {
            break;
        }
        if end >= low && next > end && end != hole {
            reserve(Some(end), next - end);
        }
    }
}

#[test]
fn a_modules_functions_call_each_other_wherever_pages_are_free() {
    leave_one_page_above_a_far_gap();
    let mut program = autobatch_lower::compile(&chain(40)).expect("the chain compiles");
    autobatch_passes::optimize(&mut program);
    let entry = FuncId::new(0);
    assert_eq!(program.functions[entry].name, "f0");
    compile(&program, entry, &[], Counting::Skipped, Interrupts::Ignored)
        .unwrap_or_else(|e| panic!("{}", e.reason));
}
