//! Native code kept for the next run of the same program.
//!
//! Compiling a program to machine code takes milliseconds; a host that
//! runs one program many times
//! (`sample` with pooled adaptation runs the batch once per pooling, a
//! Python loop calls `run` per step, ragged batches whose longest
//! members round to the same capacity) would pay that every time.
//! [`compile`] therefore keeps the last [`CAPACITY`] compiled programs of
//! the process and gives a run the one it already has. Lock-step code
//! (`native-lockstep`) is kept the same way, in the same cache
//! ([`compile_lockstep`]).
//!
//! What identifies compiled code: the program, the entry, the lengths of
//! the symbolic dimensions (native code has them as constants, or, for a
//! ragged batch's, the capacities it is compiled for), whether it
//! counts operations and whether it can be interrupted. The statics'
//! values, the members' inputs, the seed and the limits are read at run
//! time, so they are not part of the key. A program the compiler refuses is
//! not kept (refusing is quick). Dropping an entry never frees code a run
//! is using: runs hold their programs by `Arc`.
//!
//! The program is kept with its code. A program its host holds in an
//! `Arc` and has said so ([`share_program`]: a bound program, run once
//! per call) is kept as that `Arc`, and its next runs find their code by
//! its address: while the cache holds it, no other program can be there.
//! Any other program is kept as a copy and found by a fingerprint of its
//! shape, then compared whole.

use std::cell::OnceCell;
use std::sync::{Arc, Mutex, Weak};

use autobatch_ir::{FuncId, Program};
use autobatch_native::{
    Counting, Interrupts, Lengths, LockStepProgram, NativeProgram, NotCompiled,
};

/// The most compiled programs kept (the least recently used goes first).
pub const CAPACITY: usize = 128;

/// A program as the caches find it: the program, and a fingerprint of its
/// shape (its functions' names and their numbers of blocks, variables and
/// operations), which tells most other programs apart without comparing
/// them whole, made when first asked for (a program found by its address
/// needs none). Cheap to make for every run: it copies nothing.
pub(crate) struct ProgramKey<'a> {
    pub(crate) program: &'a Program,
    fingerprint: OnceCell<u64>,
}

impl<'a> ProgramKey<'a> {
    pub(crate) fn of(program: &'a Program) -> ProgramKey<'a> {
        ProgramKey {
            program,
            fingerprint: OnceCell::new(),
        }
    }

    /// The fingerprint of the program's shape.
    pub(crate) fn fingerprint(&self) -> u64 {
        *self.fingerprint.get_or_init(|| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            let program = self.program;
            program.statics.len().hash(&mut hasher);
            program.symbols.hash(&mut hasher);
            for (_, function) in program.functions.iter() {
                function.name.hash(&mut hasher);
                function.vars.len().hash(&mut hasher);
                for block in function.blocks.values() {
                    block.ops.len().hash(&mut hasher);
                }
            }
            hasher.finish()
        })
    }

    /// Whether `kept` (of fingerprint `fingerprint`), a program a cache
    /// keeps, is this program: the very same (a shared program, kept as
    /// its host's `Arc`), or one the same to the bit.
    pub(crate) fn is(&self, kept: &Program, fingerprint: u64) -> bool {
        std::ptr::eq(kept, self.program)
            || (fingerprint == self.fingerprint() && same_program(kept, self.program))
    }

    /// The program for a cache to keep: its host's own `Arc` if it is
    /// shared ([`share_program`]), else a copy.
    pub(crate) fn to_kept(&self) -> Arc<Program> {
        shared(self.program).unwrap_or_else(|| Arc::new(self.program.clone()))
    }
}

/// The programs their hosts said they hold ([`share_program`]), at most
/// [`CAPACITY`] (the first said goes first). A `Weak` keeps its program's
/// allocation, so no other program can be at its address while it is here.
static SHARED: Mutex<Vec<Weak<Program>>> = Mutex::new(Vec::new());

fn lock_shared() -> std::sync::MutexGuard<'static, Vec<Weak<Program>>> {
    // Every change is one push or one removal.
    SHARED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Says that `program` is held by its host, which runs it again: the
/// caches keep what they make of it with this `Arc` (no copy of the
/// program), and find it again by the program's address instead of
/// comparing the program whole. Cheap to call before every run.
pub fn share_program(program: &Arc<Program>) {
    let mut shared = lock_shared();
    if shared
        .iter()
        .any(|s| std::ptr::eq(s.as_ptr(), Arc::as_ptr(program)))
    {
        return;
    }
    shared.retain(|s| s.strong_count() > 0);
    if shared.len() >= CAPACITY {
        shared.remove(0);
    }
    shared.push(Arc::downgrade(program));
}

/// The `Arc` its host shares `program` in, if it does.
fn shared(program: &Program) -> Option<Arc<Program>> {
    lock_shared()
        .iter()
        .find(|s| std::ptr::eq(s.as_ptr(), program))
        .and_then(Weak::upgrade)
}

/// Whether two programs are the same to the bit: equal, and their float
/// constants of the same bits (equality takes `-0.0` for `0.0`, whose
/// code differs). A program with a NaN constant equals no program, itself
/// included: unless it is shared, it is compiled again on each run.
fn same_program(a: &Program, b: &Program) -> bool {
    fn constants(p: &Program) -> impl Iterator<Item = &autobatch_ir::Scalar> {
        p.functions
            .iter()
            .flat_map(|(_, f)| f.blocks.values())
            .flat_map(|b| &b.ops)
            .filter_map(|op| match op {
                autobatch_ir::Op::Prim {
                    prim: autobatch_ir::Prim::Const(value),
                    ..
                } => Some(value),
                _ => None,
            })
    }
    let bits = |value: &autobatch_ir::Scalar| match *value {
        autobatch_ir::Scalar::F32(x) => u64::from(x.to_bits()),
        autobatch_ir::Scalar::F64(x) => x.to_bits(),
        _ => 0,
    };
    a == b && constants(a).map(bits).eq(constants(b).map(bits))
}

/// How a program's code is made beyond the program, entry and lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flavor {
    pub counting: Counting,
    pub interrupts: Interrupts,
}

/// The two shapes of compiled code.
#[derive(Clone)]
enum Kept {
    PerMember(Arc<NativeProgram>),
    LockStep(Arc<LockStepProgram>),
}

impl Kept {
    fn lockstep(&self) -> bool {
        matches!(self, Kept::LockStep(_))
    }
}

/// One compiled program and what it was compiled from.
struct Entry {
    /// The program the code was compiled from ([`ProgramKey::to_kept`]).
    program_ir: Arc<Program>,
    fingerprint: u64,
    entry: FuncId,
    lengths: Lengths,
    flavor: Flavor,
    program: Kept,
    /// When it was last given out (a counter of lookups).
    used: u64,
}

impl Entry {
    /// Whether it is the code of `key`.
    fn is(&self, key: &Key<'_>) -> bool {
        self.entry == key.entry
            && self.flavor == key.flavor
            && self.program.lockstep() == key.lockstep
            && self.lengths == *key.lengths
            && key.program.is(&self.program_ir, self.fingerprint)
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

/// What identifies compiled code.
struct Key<'a> {
    program: &'a ProgramKey<'a>,
    entry: FuncId,
    lengths: &'a Lengths,
    flavor: Flavor,
    lockstep: bool,
}

impl<'a> Key<'a> {
    /// The key of the code per member (not lock-step).
    fn per_member(
        program: &'a ProgramKey<'a>,
        entry: FuncId,
        lengths: &'a Lengths,
        flavor: Flavor,
    ) -> Self {
        Key {
            program,
            entry,
            lengths,
            flavor,
            lockstep: false,
        }
    }
}

/// A compiled program, and whether it came from the cache.
pub(crate) struct Code {
    pub program: Arc<NativeProgram>,
    pub cached: bool,
}

/// The native code of `program` for `entry` and `lengths`: the kept one
/// if there is one, else compiled now and kept.
pub(crate) fn compile(
    program: &ProgramKey<'_>,
    entry: FuncId,
    lengths: &Lengths,
    flavor: Flavor,
) -> Result<Code, NotCompiled> {
    let key = Key::per_member(program, entry, lengths, flavor);
    let (kept, cached) = kept_or_compiled(&key, || {
        let compiled = autobatch_native::compile_for(
            program.program,
            entry,
            lengths,
            flavor.counting,
            flavor.interrupts,
        )?;
        Ok(Kept::PerMember(Arc::new(compiled)))
    })?;
    let Kept::PerMember(program) = kept else {
        unreachable!("the key asks for code per member")
    };
    Ok(Code { program, cached })
}

/// Whether the code of `program` for `entry`, `lengths` and `flavor` is
/// kept: a [`compile`] of it now would compile nothing.
pub(crate) fn is_kept(
    program: &ProgramKey<'_>,
    entry: FuncId,
    lengths: &Lengths,
    flavor: Flavor,
) -> bool {
    let key = Key::per_member(program, entry, lengths, flavor);
    lock().entries.iter().any(|e| e.is(&key))
}

/// A compiled lock-step program, and whether it came from the cache.
pub(crate) struct LockCode {
    pub program: Arc<LockStepProgram>,
    pub cached: bool,
}

/// [`compile`] for lock-step code (`native-lockstep`), which only
/// `counting` makes in another flavor.
pub(crate) fn compile_lockstep(
    program: &ProgramKey<'_>,
    entry: FuncId,
    symbols: &[u64],
    counting: Counting,
) -> Result<LockCode, NotCompiled> {
    let lengths = Lengths::fixed(symbols);
    let key = Key {
        program,
        entry,
        lengths: &lengths,
        flavor: Flavor {
            counting,
            interrupts: Interrupts::Ignored,
        },
        lockstep: true,
    };
    let (kept, cached) = kept_or_compiled(&key, || {
        let compiled =
            autobatch_native::compile_lockstep(program.program, entry, symbols, counting)?;
        Ok(Kept::LockStep(Arc::new(compiled)))
    })?;
    let Kept::LockStep(program) = kept else {
        unreachable!("the key asks for lock-step code")
    };
    Ok(LockCode { program, cached })
}

/// The code of `key`: the kept one (and `true`), else `compile`'s, kept
/// (and `false`).
fn kept_or_compiled(
    key: &Key<'_>,
    compile: impl FnOnce() -> Result<Kept, NotCompiled>,
) -> Result<(Kept, bool), NotCompiled> {
    if let Some(kept) = lookup(key) {
        return Ok((kept, true));
    }
    // Compiled outside the lock: other runs go on meanwhile (two runs of a
    // new program may both compile it; the second one kept wins).
    let compiled = compile()?;
    keep(
        key,
        Entry {
            program_ir: key.program.to_kept(),
            fingerprint: key.program.fingerprint(),
            entry: key.entry,
            lengths: key.lengths.clone(),
            flavor: key.flavor,
            program: compiled.clone(),
            used: 0,
        },
    );
    Ok((compiled, false))
}

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    // A panic elsewhere while holding the lock leaves the cache whole
    // (every change is one push or one removal).
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lookup(key: &Key<'_>) -> Option<Kept> {
    let mut cache = lock();
    cache.clock += 1;
    let now = cache.clock;
    let found = cache.entries.iter_mut().find(|e| e.is(key))?;
    found.used = now;
    Some(found.program.clone())
}

/// Keeps `new`, the code of `key`.
fn keep(key: &Key<'_>, mut new: Entry) {
    let mut cache = lock();
    cache.clock += 1;
    new.used = cache.clock;
    let same = cache.entries.iter().position(|e| e.is(key));
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
    fn programs_that_differ_only_in_the_sign_of_a_zero_are_different_programs() {
        let program = |zero: &str| {
            let source = format!(
                "\
fn f0 f(v0 x: f64) -> (f64)  @1:1
  vars: v0 x: f64, v1: f64, v2: f64
b0:  @1:1
  v1 = const {zero}_f64  @1:27
  v2 = mul v0, v1  @1:23
  return v2
"
            );
            autobatch_ir::parse::parse_program(&source).expect("a program")
        };
        let (positive, negative) = (program("0.0"), program("-0.0"));
        assert_eq!(positive, negative, "equality does not tell them apart");
        let entry = positive.function_by_name("f").expect("f");
        let flavor = Flavor {
            counting: Counting::Skipped,
            interrupts: Interrupts::Ignored,
        };
        let lengths = Lengths::fixed(&[]);
        let first = compile(&ProgramKey::of(&positive), entry, &lengths, flavor).unwrap();
        let second = compile(&ProgramKey::of(&negative), entry, &lengths, flavor).unwrap();
        assert!(!second.cached, "-0.0 is not 0.0");
        assert!(!Arc::ptr_eq(&first.program, &second.program));
    }

    #[test]
    fn a_shared_program_is_found_by_its_address_and_kept_without_a_copy() {
        // A NaN constant makes the program equal to no program, itself
        // included: only its address finds it.
        let source = "\
fn f0 f(v0 x: f64) -> (f64)  @1:1
  vars: v0 x: f64, v1: f64, v2: f64
b0:  @1:1
  v1 = const NaN_f64  @1:27
  v2 = add v0, v1  @1:23
  return v2
";
        let program = Arc::new(autobatch_ir::parse::parse_program(source).expect("a program"));
        assert!(!same_program(&program, &program));
        let entry = program.function_by_name("f").expect("f");
        let flavor = Flavor {
            counting: Counting::Skipped,
            interrupts: Interrupts::Polled,
        };
        let lengths = Lengths::fixed(&[]);
        share_program(&program);
        share_program(&program);
        let first = compile(&ProgramKey::of(&program), entry, &lengths, flavor).unwrap();
        let again = compile(&ProgramKey::of(&program), entry, &lengths, flavor).unwrap();
        assert!(again.cached, "found by its address");
        assert!(Arc::ptr_eq(&first.program, &again.program));
        assert!(
            lock()
                .entries
                .iter()
                .any(|e| Arc::ptr_eq(&e.program_ir, &program)),
            "kept as the host's own Arc"
        );
        let copy = (*program).clone();
        let other = compile(&ProgramKey::of(&copy), entry, &lengths, flavor).unwrap();
        assert!(!other.cached, "a copy is not the shared program");
    }

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
        let key = ProgramKey::of(&program);
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
        let one = Lengths::fixed(&[u64::MAX - 1]);
        let first = compile(&key, entry, &one, kept).unwrap();
        assert!(!first.cached);
        let again = compile(&key, entry, &one, kept).unwrap();
        assert!(again.cached);
        assert!(Arc::ptr_eq(&first.program, &again.program));
        let other = compile(&key, entry, &one, skipped).unwrap();
        assert!(!other.cached, "counting is part of the key");
        let other = compile(&key, entry, &one, polled).unwrap();
        assert!(!other.cached, "interrupts are part of the key");
        let ragged = Lengths {
            values: one.values.clone(),
            per_member: vec![true],
        };
        let other = compile(&key, entry, &ragged, kept).unwrap();
        assert!(
            !other.cached,
            "which lengths are per member is part of the key"
        );
        for k in 0..CAPACITY as u64 {
            compile(&key, entry, &Lengths::fixed(&[u64::MAX - 2 - k]), kept).unwrap();
        }
        let evicted = compile(&key, entry, &one, kept).unwrap();
        assert!(!evicted.cached, "the oldest entry was dropped");
        assert!(lock().entries.len() <= CAPACITY);
        // Lock-step code is kept too, apart from the per-member code of the
        // same program, lengths and counting.
        let lockstep = compile_lockstep(&key, entry, &[u64::MAX - 1], Counting::Kept).unwrap();
        assert!(!lockstep.cached, "the shape is part of the key");
        let again = compile_lockstep(&key, entry, &[u64::MAX - 1], Counting::Kept).unwrap();
        assert!(again.cached);
        assert!(Arc::ptr_eq(&lockstep.program, &again.program));
        let uncounted = compile_lockstep(&key, entry, &[u64::MAX - 1], Counting::Skipped).unwrap();
        assert!(!uncounted.cached, "counting is part of the key");
        let per_member = compile(&key, entry, &one, kept).unwrap();
        assert!(per_member.cached, "the per-member code is still kept");
    }
}
