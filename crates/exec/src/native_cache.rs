//! Native code kept for the next run of the same program.
//!
//! Compiling a program to machine code takes milliseconds (25 ms for the
//! sampler with a small model); a host that runs one program many times
//! (`sample` with pooled adaptation runs the batch once per pooling, a
//! Python loop calls `run` per step, a ragged batch compiles each of its
//! sizes) would pay that every time. [`compile`] therefore keeps the last
//! [`CAPACITY`] compiled programs of the process and gives a run the one
//! it already has.
//!
//! What identifies compiled code: the program's text form (which determines
//! the program exactly: `parse(print(p)) == p`), the entry, the values of
//! the symbolic dimensions (native code has them as constants), whether it
//! counts operations and whether it can be interrupted. The statics'
//! values, the members' inputs, the seed and the limits are read at run
//! time, so they are not part of the key. A program the compiler refuses is
//! not kept (refusing is quick). Dropping an entry never frees code a run
//! is using: runs hold their programs by `Arc`.

use std::sync::{Arc, Mutex};

use autobatch_ir::{FuncId, Program};
use autobatch_native::{Counting, Interrupts, NativeProgram, NotCompiled};

/// The most compiled programs kept (the least recently used goes first).
pub const CAPACITY: usize = 128;

/// A program's text form, computed once per run and shared by the sizes
/// of a ragged batch.
pub(crate) struct ProgramText {
    text: Arc<str>,
    hash: u64,
}

impl ProgramText {
    pub(crate) fn of(program: &Program) -> ProgramText {
        use std::hash::{Hash, Hasher};
        let text: Arc<str> = autobatch_ir::print::program_to_string(program).into();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        ProgramText {
            text,
            hash: hasher.finish(),
        }
    }
}

/// How a program's code is made beyond its text, entry and lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flavor {
    pub counting: Counting,
    pub interrupts: Interrupts,
}

/// One compiled program and what it was compiled from.
struct Entry {
    text: Arc<str>,
    hash: u64,
    entry: FuncId,
    symbols: Vec<u64>,
    flavor: Flavor,
    program: Arc<NativeProgram>,
    /// When it was last given out (a counter of lookups).
    used: u64,
}

impl Entry {
    /// Whether it was compiled from this text (of this hash), entry,
    /// lengths and flavor.
    fn is(&self, text: &str, hash: u64, entry: FuncId, symbols: &[u64], flavor: Flavor) -> bool {
        self.hash == hash
            && self.entry == entry
            && self.flavor == flavor
            && self.symbols == symbols
            && *self.text == *text
    }
}

struct Cache {
    entries: Vec<Entry>,
    clock: u64,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    entries: Vec::new(),
    clock: 0,
});

/// A compiled program, and whether it came from the cache.
pub(crate) struct Code {
    pub program: Arc<NativeProgram>,
    pub cached: bool,
}

/// The native code of `program` (whose text is `text`) for `entry` and
/// `symbols`: the kept one if there is one, else compiled now and kept.
pub(crate) fn compile(
    program: &Program,
    text: &ProgramText,
    entry: FuncId,
    symbols: &[u64],
    flavor: Flavor,
) -> Result<Code, NotCompiled> {
    if let Some(program) = lookup(text, entry, symbols, flavor) {
        return Ok(Code {
            program,
            cached: true,
        });
    }
    // Compiled outside the lock: other runs go on meanwhile (two runs of a
    // new program may both compile it; the second one kept wins).
    let compiled = Arc::new(autobatch_native::compile(
        program,
        entry,
        symbols,
        flavor.counting,
        flavor.interrupts,
    )?);
    keep(Entry {
        text: text.text.clone(),
        hash: text.hash,
        entry,
        symbols: symbols.to_vec(),
        flavor,
        program: compiled.clone(),
        used: 0,
    });
    Ok(Code {
        program: compiled,
        cached: false,
    })
}

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    // A panic elsewhere while holding the lock leaves the cache whole
    // (every change is one push or one removal).
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lookup(
    text: &ProgramText,
    entry: FuncId,
    symbols: &[u64],
    flavor: Flavor,
) -> Option<Arc<NativeProgram>> {
    let mut cache = lock();
    cache.clock += 1;
    let now = cache.clock;
    let found = cache
        .entries
        .iter_mut()
        .find(|e| e.is(&text.text, text.hash, entry, symbols, flavor))?;
    found.used = now;
    Some(found.program.clone())
}

fn keep(mut new: Entry) {
    let mut cache = lock();
    cache.clock += 1;
    new.used = cache.clock;
    let same = cache
        .entries
        .iter()
        .position(|e| e.is(&new.text, new.hash, new.entry, &new.symbols, new.flavor));
    if let Some(same) = same {
        cache.entries[same] = new;
        return;
    }
    if cache.entries.len() >= CAPACITY {
        if let Some(oldest) = (0..cache.entries.len()).min_by_key(|&i| cache.entries[i].used) {
            cache.entries.swap_remove(oldest);
        }
    }
    cache.entries.push(new);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_program_goes_first() {
        let source = "\
fn f0 quotient(v0 a: i64, v1 b: i64) -> (i64)  @1:1
  vars: v0 a: i64, v1 b: i64, v2: i64
b0:  @1:1
  v2 = div v0, v1  @1:40
  return v2
";
        let program = autobatch_ir::parse::parse_program(source).expect("a program");
        let text = ProgramText::of(&program);
        let entry = program.function_by_name("quotient").expect("quotient");
        // Fill the cache with CAPACITY + 1 sizes of nothing: symbols that
        // the program does not read still make distinct keys.
        let kept = Flavor {
            counting: Counting::Kept,
            interrupts: Interrupts::Ignored,
        };
        let skipped = Flavor {
            counting: Counting::Skipped,
            ..kept
        };
        let polled = Flavor {
            interrupts: Interrupts::Polled,
            ..kept
        };
        let first = compile(&program, &text, entry, &[u64::MAX - 1], kept).unwrap();
        assert!(!first.cached);
        let again = compile(&program, &text, entry, &[u64::MAX - 1], kept).unwrap();
        assert!(again.cached);
        assert!(Arc::ptr_eq(&first.program, &again.program));
        let other = compile(&program, &text, entry, &[u64::MAX - 1], skipped).unwrap();
        assert!(!other.cached, "counting is part of the key");
        let other = compile(&program, &text, entry, &[u64::MAX - 1], polled).unwrap();
        assert!(!other.cached, "interrupts are part of the key");
        for k in 0..CAPACITY as u64 {
            compile(&program, &text, entry, &[u64::MAX - 2 - k], kept).unwrap();
        }
        let evicted = compile(&program, &text, entry, &[u64::MAX - 1], kept).unwrap();
        assert!(!evicted.cached, "the oldest entry was dropped");
        assert!(lock().entries.len() <= CAPACITY);
    }
}
