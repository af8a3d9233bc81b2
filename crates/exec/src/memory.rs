//! Sizes and memory: the bytes of values and of a run's state, what the
//! system has available (capped by [`MEMORY_LIMIT_VARIABLE`]), and the
//! checks that refuse, before anything runs, a run that cannot fit.

use autobatch_ir::{EntityRef, FuncId};
use autobatch_kernels::dim_length;
use autobatch_types::{ScalarType, TensorType};

/// The shape of a value of type `ty` in this run.
pub fn concrete_shape(ty: &TensorType, symbols: &[u64]) -> Vec<usize> {
    ty.dims.iter().map(|d| dim_length(symbols, *d)).collect()
}

/// Bytes per element of a scalar type, as stored.
pub fn element_bytes(elem: ScalarType) -> usize {
    elem.byte_size()
}

/// Bytes each member costs besides its variables, whatever the program: its
/// inputs and results as tensors, its error or JSON result, its random
/// stream: about 1 KiB for a member with one scalar in and out.
pub const MEMBER_OVERHEAD_BYTES: u128 = 1024;

/// Refuses a run whose state would not fit in memory, before anything is
/// allocated: `bytes_per_member` (and [`MEMBER_OVERHEAD_BYTES`]) for each
/// of `members`, plus `shared_bytes` stored once.
pub fn check_memory(
    bytes_per_member: u128,
    members: usize,
    shared_bytes: u128,
) -> Result<(), String> {
    let bytes_per_member = bytes_per_member.saturating_add(MEMBER_OVERHEAD_BYTES);
    let needed = bytes_per_member
        .saturating_mul(members as u128)
        .saturating_add(shared_bytes);
    if needed <= SURELY_AVAILABLE && memory_limit().is_none() {
        return Ok(());
    }
    let available = available_memory_bytes();
    if needed > available as u128 {
        return Err(format!(
            "this run needs about {} MiB for the variables of {} members ({} bytes each), but only {} MiB of memory is available; run fewer members at once",
            needed >> 20,
            members,
            bytes_per_member,
            available >> 20
        ));
    }
    Ok(())
}

/// Refuses a run one of whose values could not fit in memory even once
/// (`let big = [0.0; 100000000000];`), naming the variable and where it is
/// assigned, before anything runs. Only the functions `entry` reaches count.
pub fn check_value_sizes(
    program: &autobatch_ir::Program,
    entry: FuncId,
    symbols: &[u64],
) -> Result<(), String> {
    let reachable = program.reachable(entry);
    let mut largest: Option<(u128, &autobatch_ir::Function, autobatch_ir::Var)> = None;
    for (id, f) in program.functions.iter() {
        if !reachable.get(id.index()).copied().unwrap_or(false) {
            continue;
        }
        for (v, data) in f.vars.iter() {
            let bytes = value_bytes(&data.ty, symbols);
            // The first of the largest: the one the error names.
            if largest.is_none_or(|(most, _, _)| bytes > most) {
                largest = Some((bytes, f, v));
            }
        }
    }
    let Some((bytes, f, v)) = largest else {
        return Ok(());
    };
    if bytes <= SURELY_AVAILABLE && memory_limit().is_none() {
        return Ok(());
    }
    let available = available_memory_bytes() as u128;
    if bytes > available {
        return Err(format!(
            "{} would take {} MiB as a {}, but only {} MiB of memory is available",
            describe_var(f, v),
            bytes >> 20,
            program.type_name(&f.vars[v].ty),
            available >> 20
        ));
    }
    Ok(())
}

/// Values no larger than this fit in memory on any machine autobatch runs
/// on: [`check_value_sizes`] and [`check_memory`] ask the system only for
/// larger ones (reading
/// `/proc/meminfo` costs more than a small run), or when [`MEMORY_LIMIT_VARIABLE`] sets a limit.
const SURELY_AVAILABLE: u128 = 16 << 20;

/// A variable as a user finds it in the source: its name and where it is
/// first assigned (a parameter: where its function is declared).
/// A variable of a function the compiler derived (a gradient's) is
/// described in the words of the user's function it comes from.
fn describe_var(f: &autobatch_ir::Function, v: autobatch_ir::Var) -> String {
    // The compiler writes an ODE solver's call as functions of its own,
    // whose variables the user never wrote: such a value is the call's.
    if let Some((solver, call)) = autobatch_types::ode_call_of(&f.name) {
        return format!("a value of the `{solver}` call at {call}");
    }
    let identifier = |name: &&str| name.chars().all(|c| c.is_alphanumeric() || c == '_');
    let name = match f.vars[v].name.as_deref().filter(identifier) {
        Some(name) => format!("`{name}`"),
        None => "a temporary value".to_string(),
    };
    let (of, within) = if f.is_derived() {
        let derivative = format!("the derivative of `{}`", f.user_name());
        (derivative.clone(), derivative)
    } else {
        (format!("`{}`", f.name), format!("function `{}`", f.name))
    };
    if f.params.contains(&v) {
        return format!("{name}, a parameter of {of} (declared at {}),", f.loc);
    }
    let assigned = f
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .find_map(|op| match op {
            autobatch_ir::Op::Prim {
                dst: Some(d), loc, ..
            } if *d == v => Some(*loc),
            autobatch_ir::Op::Call { dsts, loc, .. } if dsts.contains(&v) => Some(*loc),
            _ => None,
        });
    match assigned {
        Some(loc) => format!("{name} (assigned at {loc} in {within})"),
        None => format!("{name} in {within} (declared at {})", f.loc),
    }
}

/// The bytes of the program-counter strategy's variables: per member (its
/// columns) and once (the invariant values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateBytes {
    pub per_member: u128,
    pub shared: u128,
}

/// The bytes of the variables of the functions `entry` reaches, in the
/// explicit-stack form `lowered` of `program` (a function `entry` never
/// calls allocates nothing, however large its variables).
pub fn lowered_state_bytes(
    program: &autobatch_ir::Program,
    lowered: &autobatch_passes::stack::LoweredProgram,
    entry: FuncId,
    symbols: &[u64],
) -> StateBytes {
    let reachable = program.reachable(entry);
    let mut bytes = StateBytes {
        per_member: 0,
        shared: 0,
    };
    for v in lowered.vars.values() {
        if !reachable.get(v.func.index()).copied().unwrap_or(false) {
            continue;
        }
        let size = value_bytes(&v.ty, symbols);
        if v.class == autobatch_passes::stack::VarClass::Invariant {
            bytes.shared = bytes.shared.saturating_add(size);
        } else {
            bytes.per_member = bytes.per_member.saturating_add(size);
        }
    }
    bytes
}

/// [`check_memory`] for the program-counter strategy: the variables of the
/// functions `entry` reaches, for `members` members.
pub fn check_lowered_memory(
    program: &autobatch_ir::Program,
    lowered: &autobatch_passes::stack::LoweredProgram,
    entry: FuncId,
    symbols: &[u64],
    members: usize,
) -> Result<(), String> {
    let bytes = lowered_state_bytes(program, lowered, entry, symbols);
    check_memory(bytes.per_member, members, bytes.shared)
}

/// Per function, whether an instance may run it: whether it is reached
/// (through calls and forks) from the callee of a fork in a function that
/// `entry` reaches.
pub fn instance_functions(program: &autobatch_ir::Program, entry: FuncId) -> Vec<bool> {
    let reachable = program.reachable(entry);
    let mut runs = vec![false; program.functions.len()];
    for (id, f) in program.functions.iter() {
        if !reachable.get(id.index()).copied().unwrap_or(false) {
            continue;
        }
        for op in f.blocks.values().flat_map(|b| &b.ops) {
            if let autobatch_ir::Op::Fork { instances, .. } = op {
                for callee in instances.callees() {
                    let reached = program.reachable(callee);
                    for (r, by_callee) in runs.iter_mut().zip(reached) {
                        *r |= by_callee;
                    }
                }
            }
        }
    }
    runs
}

/// Bytes one instance lane costs at most: the variables of every function
/// an instance may run ([`instance_functions`]) but those stored once for
/// all members or once per member (`invariance`: a static an instance
/// loads, a tree passed down unchanged), and [`MEMBER_OVERHEAD_BYTES`].
pub fn lane_bytes(
    program: &autobatch_ir::Program,
    invariance: &autobatch_passes::uniformity::Invariance,
    entry: FuncId,
    symbols: &[u64],
) -> u128 {
    let runs = instance_functions(program, entry);
    let vars: u128 = program
        .functions
        .iter()
        .filter(|(id, _)| runs.get(id.index()).copied().unwrap_or(false))
        .flat_map(|(id, f)| f.vars.iter().map(move |(v, data)| (id, v, data)))
        .filter(|(id, v, _)| {
            !invariance.is_invariant(*id, *v) && invariance.member_root(*id, *v).is_none()
        })
        .map(|(_, _, data)| value_bytes(&data.ty, symbols))
        .fold(0u128, u128::saturating_add);
    vars.saturating_add(MEMBER_OVERHEAD_BYTES)
}

/// The most instance lanes `--max-instances` allows by default: as many
/// lanes of `lane_bytes` each as a quarter of the available memory holds
/// (at least 1, at most 2^24).
pub fn default_max_instances(lane_bytes: u128) -> usize {
    let budget = (available_memory_bytes() / 4) as u128;
    let lanes = budget / lane_bytes.max(1);
    lanes.clamp(1, 1 << 24) as usize
}

/// The most bytes one member's tape holds by default (`--max-tape-bytes`):
/// a quarter of the available memory.
pub fn default_max_tape_bytes() -> u64 {
    available_memory_bytes() / 4
}

/// The environment variable that caps the memory autobatch plans to use, in
/// bytes, or with a suffix `K`, `M` or `G` (powers of 1024): `512M`.
pub const MEMORY_LIMIT_VARIABLE: &str = "AUTOBATCH_MEMORY_LIMIT";

/// Memory the run may use: what the system reports available (else 8 GiB),
/// at most [`MEMORY_LIMIT_VARIABLE`] when it is set to a size.
pub fn available_memory_bytes() -> u64 {
    let system = system_available_bytes();
    match memory_limit() {
        Some(limit) => system.min(limit),
        None => system,
    }
}

/// The limit [`MEMORY_LIMIT_VARIABLE`] sets, if it is set to a size.
fn memory_limit() -> Option<u64> {
    std::env::var(MEMORY_LIMIT_VARIABLE)
        .ok()
        .and_then(|text| parse_size(&text))
}

/// `1234`, `64K`, `512M`, `2G` (powers of 1024) as bytes.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 10),
        (i, 'M' | 'm') => (&text[..i], 20),
        (i, 'G' | 'g') => (&text[..i], 30),
        _ => (text, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// How long a reading of what the system has available is used again:
/// reading `/proc/meminfo` costs the kernel more than a small run's own
/// setup, and a host that runs a small batch every millisecond (a Python
/// loop) would pay it on every run.
const AVAILABLE_READING_KEPT: std::time::Duration = std::time::Duration::from_millis(100);

/// What the system reports available, else 8 GiB: read at most once per
/// [`AVAILABLE_READING_KEPT`].
fn system_available_bytes() -> u64 {
    use std::sync::{Mutex, PoisonError};
    static LAST: Mutex<Option<Reading>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    kept_or_read(
        &mut last,
        std::time::Instant::now(),
        read_system_available_bytes,
    )
}

/// A reading of what the system has available, and when it was made.
#[derive(Clone, Copy)]
struct Reading {
    at: std::time::Instant,
    bytes: u64,
}

/// The `last` reading if it was made less than [`AVAILABLE_READING_KEPT`]
/// before `now`, else a new one (`read`), kept as `last`.
fn kept_or_read(
    last: &mut Option<Reading>,
    now: std::time::Instant,
    read: impl FnOnce() -> u64,
) -> u64 {
    match *last {
        Some(reading) if now.saturating_duration_since(reading.at) < AVAILABLE_READING_KEPT => {
            reading.bytes
        }
        _ => {
            let bytes = read();
            *last = Some(Reading { at: now, bytes });
            bytes
        }
    }
}

/// `MemAvailable` of `/proc/meminfo`, else 8 GiB.
fn read_system_available_bytes() -> u64 {
    let from_proc = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
                .map(|kib| kib * 1024)
        });
    from_proc.unwrap_or(8 << 30)
}

/// Bytes of one value of type `ty` in this run.
pub fn value_bytes(ty: &TensorType, symbols: &[u64]) -> u128 {
    let elements: u128 = ty
        .dims
        .iter()
        .map(|d| dim_length(symbols, *d) as u128)
        .product();
    elements * element_bytes(ty.elem) as u128
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_available_memory_is_read_again_only_once_its_reading_is_old() {
        let start = Instant::now();
        let mut last = None;
        let reads = std::cell::Cell::new(0);
        let read = |bytes: u64| {
            let reads = &reads;
            move || {
                reads.set(reads.get() + 1);
                bytes
            }
        };
        assert_eq!(kept_or_read(&mut last, start, read(100)), 100);
        let soon = start + AVAILABLE_READING_KEPT / 2;
        assert_eq!(kept_or_read(&mut last, soon, read(200)), 100, "kept");
        let later = start + AVAILABLE_READING_KEPT + Duration::from_millis(1);
        assert_eq!(kept_or_read(&mut last, later, read(300)), 300, "read again");
        assert_eq!(kept_or_read(&mut last, later, read(400)), 300, "kept");
        assert_eq!(reads.get(), 2);
    }
}
