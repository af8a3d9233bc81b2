//! Gradients with respect to statics, summed over a batch's members
//! (`autobatch run --grad-statics`): the members' logs of contributions
//! ([`AdjointLog`]: an [`AdjointRecord`] per `static_adjoint` operation a
//! member runs, the values in the log's arenas) and their sum
//! ([`static_gradients`]).
//!
//! A contribution is kept in the compact form the use gives it (the two
//! vectors of an outer product, a row and its index), so that a member's
//! log grows with the activations of the model, not with copies of its
//! weight matrices. The sum is defined so that its bits depend only on the
//! **multiset** of contributions: not on the strategy, the threads, the
//! schedule of instances, the order of the members or how they were split
//! (see [`static_gradients`]).

use std::cmp::Ordering;
use std::sync::Mutex;

use autobatch_ir::{AdjointKind, StaticAdjoint, StaticId};
use autobatch_types::{Data, Tensor};

use crate::buffer::Values;
use crate::gemm::Path;

use crate::internal_error;
use crate::scalar::Float;

/// A log of contributions to static adjoints: one [`AdjointRecord`] per
/// `static_adjoint` operation run, their values in arenas the log's
/// records share (one per float type, growing as a vector does: no
/// allocation per record). An executor's members log straight into the
/// log of their thread or run (taken with [`AdjointLog::spare`]), which
/// drops what a member that fails logged ([`AdjointLog::truncate`],
/// [`AdjointLog::retain`]); logs of several threads are joined with
/// [`AdjointLog::joined`], and the run's log is given back
/// ([`AdjointLog::give_back`]) once summed.
#[derive(Clone, Debug, Default)]
pub struct AdjointLog {
    records: Vec<AdjointRecord>,
    f32s: Vec<f32>,
    f64s: Vec<f64>,
}

/// One contribution to a static's adjoint, made by member `member`. Its
/// values lie in the arena of the [`AdjointLog`] that holds it (or that
/// it was read from: a record means nothing with another log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdjointRecord {
    pub member: u32,
    pub id: StaticId,
    pub kind: AdjointKind,
    /// The row of a `Row` or `OuterRow` contribution (0 otherwise).
    pub row: u64,
    /// The values: the whole contribution (`Dense`), the row (`Row`), or
    /// `u` then `v` (`Outer`, `OuterRow`: `outer(u, v)` is the contribution
    /// to the matrix, `u` as long as its first axis).
    values: Span,
}

/// Where a log stood ([`AdjointLog::mark`]), to go back to
/// ([`AdjointLog::truncate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogMark {
    records: usize,
    f32s: usize,
    f64s: usize,
}

/// The logs given back ([`AdjointLog::give_back`]), cleared, for the next
/// runs to take ([`AdjointLog::spare`]): a run after the first logs into
/// the memory an earlier one grew instead of growing its own from empty.
static SPARE: Mutex<Vec<AdjointLog>> = Mutex::new(Vec::new());

/// The most logs [`SPARE`] keeps (a run takes one per chunk of members it
/// runs at once); a log given back beyond them is freed.
const MAX_SPARE: usize = 64;

/// Where a record's values lie: `len` elements from `start` in the arena
/// of `float`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    float: Arena,
    start: usize,
    len: usize,
}

/// The arenas of an [`AdjointLog`], by element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arena {
    F32,
    F64,
}

impl AdjointRecord {
    /// How many values the record holds.
    pub fn len(&self) -> usize {
        self.values.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.values.len == 0
    }
}

impl AdjointLog {
    pub fn new() -> AdjointLog {
        AdjointLog::default()
    }

    /// The records, in the order logged.
    pub fn records(&self) -> &[AdjointRecord] {
        &self.records
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Forgets every record, keeping the memory for the next ones.
    pub fn clear(&mut self) {
        self.records.clear();
        self.f32s.clear();
        self.f64s.clear();
    }

    /// An empty log, with the memory of one given back earlier if any.
    pub fn spare() -> AdjointLog {
        let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        spare.pop().unwrap_or_default()
    }

    /// Gives the log's memory to the next [`AdjointLog::spare`] (its
    /// records are forgotten).
    pub fn give_back(mut self) {
        if self.records.capacity() == 0 {
            return;
        }
        self.clear();
        let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < MAX_SPARE {
            spare.push(self);
        }
    }

    /// Where the log stands now: [`AdjointLog::truncate`] forgets what is
    /// logged after it.
    pub fn mark(&self) -> LogMark {
        LogMark {
            records: self.records.len(),
            f32s: self.f32s.len(),
            f64s: self.f64s.len(),
        }
    }

    /// Forgets the records logged since `mark` (a mark of this log), and
    /// their values.
    pub fn truncate(&mut self, mark: LogMark) {
        self.records.truncate(mark.records);
        self.f32s.truncate(mark.f32s);
        self.f64s.truncate(mark.f64s);
    }

    /// Logs `member`'s operation `adjoint` on `args` (operands the IR
    /// verifier accepted for it).
    pub fn push_tensors(&mut self, member: u32, adjoint: &StaticAdjoint, args: &[&Tensor]) {
        // (At most three operands: a row, then two vectors.)
        let mut values = [Values::Bool(&[]); 3];
        let count = args.len().min(3);
        for (value, arg) in values.iter_mut().zip(args) {
            *value = Values::all(&arg.data);
        }
        self.push(member, adjoint, &values[..count])
    }

    /// [`AdjointLog::push_tensors`] on the operands' elements (an executor
    /// that keeps them elsewhere than in tensors).
    pub fn push(&mut self, member: u32, adjoint: &StaticAdjoint, args: &[Values<'_>]) {
        let operand = |k: usize| match args.get(k) {
            Some(v) => *v,
            None => internal_error(format!(
                "static_adjoint.{} without operand {k}",
                adjoint.kind.name()
            )),
        };
        let row_of = |v: Values<'_>| match v.integer(0) {
            i if i >= 0 => i as u64,
            _ => internal_error("a static adjoint's row is not an index".to_string()),
        };
        let (id, kind) = (adjoint.id, adjoint.kind);
        match kind {
            AdjointKind::Dense => self.push_parts(member, id, kind, 0, &[operand(0)]),
            AdjointKind::Row => {
                self.push_parts(member, id, kind, row_of(operand(0)), &[operand(1)])
            }
            AdjointKind::Outer => self.push_parts(member, id, kind, 0, &[operand(0), operand(1)]),
            AdjointKind::OuterRow => {
                let row = row_of(operand(0));
                self.push_parts(member, id, kind, row, &[operand(1), operand(2)])
            }
        }
    }

    /// Logs a record whose values are `parts` joined (of one float type).
    fn push_parts(
        &mut self,
        member: u32,
        id: StaticId,
        kind: AdjointKind,
        row: u64,
        parts: &[Values<'_>],
    ) {
        let float = match parts.first() {
            Some(Values::F32(_)) => Arena::F32,
            Some(Values::F64(_)) => Arena::F64,
            _ => internal_error("static adjoints of another type than their static".to_string()),
        };
        let start = self.arena_len(float);
        for part in parts {
            match (float, part) {
                (Arena::F32, Values::F32(p)) => self.f32s.extend_from_slice(p),
                (Arena::F64, Values::F64(p)) => self.f64s.extend_from_slice(p),
                (_, p) => internal_error(format!(
                    "a static adjoint joins {float:?} and {} values",
                    p.ty()
                )),
            }
        }
        let len = self.arena_len(float) - start;
        self.records.push(AdjointRecord {
            member,
            id,
            kind,
            row,
            values: Span { float, start, len },
        });
    }

    fn arena_len(&self, float: Arena) -> usize {
        match float {
            Arena::F32 => self.f32s.len(),
            Arena::F64 => self.f64s.len(),
        }
    }

    /// Adds `other`'s records and their values, each record's member
    /// renamed `member(its member)`.
    pub fn append(&mut self, other: &AdjointLog, member: impl Fn(u32) -> u32) {
        let (f32_base, f64_base) = (self.f32s.len(), self.f64s.len());
        self.f32s.extend_from_slice(&other.f32s);
        self.f64s.extend_from_slice(&other.f64s);
        self.records.extend(other.records.iter().map(|r| {
            let base = match r.values.float {
                Arena::F32 => f32_base,
                Arena::F64 => f64_base,
            };
            AdjointRecord {
                member: member(r.member),
                values: Span {
                    start: r.values.start + base,
                    ..r.values
                },
                ..*r
            }
        }));
    }

    /// The records of `logs` in turn, in one log (the first one's memory
    /// reused, the others' given back).
    pub fn joined(logs: impl IntoIterator<Item = AdjointLog>) -> AdjointLog {
        let mut logs = logs.into_iter();
        let mut joined = logs.next().unwrap_or_default();
        for log in logs {
            joined.append(&log, |m| m);
            log.give_back();
        }
        joined
    }

    /// Keeps the records `keep` accepts (their values stay in the arenas
    /// until the log is dropped or cleared).
    pub fn retain(&mut self, keep: impl FnMut(&AdjointRecord) -> bool) {
        self.records.retain(keep);
    }

    /// A record's values (`F` the type they were logged in).
    fn values<F: Summed>(&self, r: &AdjointRecord) -> &[F] {
        let Span { float, start, len } = r.values;
        match F::of_arena(self, float).get(start..start + len) {
            Some(values) => values,
            None => internal_error("a static adjoint's values outside its log".to_string()),
        }
    }

    /// The first of a record's values, by its bits (`None` if it has none).
    fn first_bits(&self, r: &AdjointRecord) -> Option<u64> {
        if r.values.len == 0 {
            return None;
        }
        Some(match r.values.float {
            Arena::F32 => u64::from(self.f32s[r.values.start].to_bits()),
            Arena::F64 => self.f64s[r.values.start].to_bits(),
        })
    }

    /// A fixed order on two records' values (of one type): by the bits of
    /// each element in turn.
    fn compare_bits(&self, a: &AdjointRecord, b: &AdjointRecord) -> Ordering {
        fn bits<F: Summed>(log: &AdjointLog, a: &AdjointRecord, b: &AdjointRecord) -> Ordering {
            let (x, y) = (log.values::<F>(a), log.values::<F>(b));
            x.iter().map(|v| v.bits()).cmp(y.iter().map(|v| v.bits()))
        }
        match (a.values.float, b.values.float) {
            (Arena::F32, Arena::F32) => bits::<f32>(self, a, b),
            (Arena::F64, Arena::F64) => bits::<f64>(self, a, b),
            _ => internal_error("static adjoints of another type than their static".to_string()),
        }
    }
}

/// Two logs are equal when they hold the same records with the same
/// values, in the same order (wherever the values lie in their arenas).
impl PartialEq for AdjointLog {
    fn eq(&self, other: &AdjointLog) -> bool {
        fn same<F: Summed>(
            a: &AdjointLog,
            r: &AdjointRecord,
            b: &AdjointLog,
            s: &AdjointRecord,
        ) -> bool {
            a.values::<F>(r) == b.values::<F>(s)
        }
        self.records.len() == other.records.len()
            && self.records.iter().zip(&other.records).all(|(r, s)| {
                (r.member, r.id, r.kind, r.row, r.values.float, r.values.len)
                    == (s.member, s.id, s.kind, s.row, s.values.float, s.values.len)
                    && match r.values.float {
                        Arena::F32 => same::<f32>(self, r, other, s),
                        Arena::F64 => same::<f64>(self, r, other, s),
                    }
            })
    }
}

/// How many contributions of an outer product are summed into a block
/// before the block is added to the gradient (fixed: part of the order).
const OUTER_BLOCK: usize = 64;

/// The gradient of each static of `wanted` (shaped like `statics[id]`,
/// float) from every member's contributions in `log` (members that
/// faulted already left out): their sum, in this order, whatever order the
/// records come in:
///
/// 1. the `outer` contributions `u vᵀ` (to the static, or to its row
///    `i` for `outer_row`), sorted by row, then their values' bits
///    (`u`, then `v`, element by element), in blocks of 64: each block's
///    sum `Σ u_r v_rᵀ` computed element by element in record order, then
///    added to the gradient;
/// 2. the `row` contributions, sorted by row, then values' bits, each added
///    to its row;
/// 3. the `dense` contributions, sorted by values' bits, each added.
///
/// Sorting by value makes the sum a function of the multiset of
/// contributions alone; equal records may go in either order.
pub fn static_gradients(statics: &[Tensor], wanted: &[StaticId], log: &AdjointLog) -> Vec<Tensor> {
    wanted
        .iter()
        .zip(by_static(wanted, log))
        .map(|(id, records)| gradient_of(static_of(statics, *id), log, records))
        .collect()
}

/// The records of each static of `wanted` in `log`, in order (the parts
/// of [`static_gradients`], which a caller may sum on several threads:
/// each static's sum depends on its records alone).
pub fn by_static(wanted: &[StaticId], log: &AdjointLog) -> Vec<Vec<AdjointRecord>> {
    let mut parts: Vec<Vec<AdjointRecord>> = vec![Vec::new(); wanted.len()];
    for r in log.records() {
        match wanted.iter().position(|w| *w == r.id) {
            Some(k) => parts[k].push(*r),
            None => internal_error(format!("an adjoint of {} was not asked for", r.id)),
        }
    }
    parts
}

/// Static `id` of `statics`.
pub fn static_of(statics: &[Tensor], id: StaticId) -> &Tensor {
    match statics.get(id.0 as usize) {
        Some(s) => s,
        None => internal_error(format!("static {id} is not in the environment")),
    }
}

/// About how many multiply-adds summing `records` takes (to share the
/// statics' sums among threads).
pub fn summing_cost(records: &[AdjointRecord]) -> usize {
    records
        .iter()
        .map(|r| match r.kind {
            // u (m) and v (k): m x k products.
            AdjointKind::Outer | AdjointKind::OuterRow => {
                let n = r.len();
                (n / 2) * (n - n / 2)
            }
            AdjointKind::Row | AdjointKind::Dense => r.len(),
        })
        .sum()
}

/// The gradient of one static from its `records` in `log` (see
/// [`static_gradients`]).
pub fn gradient_of(stat: &Tensor, log: &AdjointLog, mut records: Vec<AdjointRecord>) -> Tensor {
    sort_records(log, &mut records);
    let shape = stat.shape.clone();
    Tensor::new(shape.clone(), summed(stat, &shape, log, &records))
}

/// A static's gradient, summed whole ([`gradient_of`]) or kept to the rows
/// its contributions touch ([`row_gradient_of`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Gradient {
    Dense(Tensor),
    Rows(RowGradient),
}

impl Gradient {
    /// The sum of `records` in `log`, the contributions to `stat`: by rows
    /// when `by_rows` (every record must then be a row).
    pub fn of(
        stat: &Tensor,
        log: &AdjointLog,
        records: Vec<AdjointRecord>,
        by_rows: bool,
    ) -> Gradient {
        if by_rows {
            Gradient::Rows(row_gradient_of(stat, log, records))
        } else {
            Gradient::Dense(gradient_of(stat, log, records))
        }
    }

    /// The values kept: the whole gradient, or the rows touched.
    pub fn values(&self) -> &Tensor {
        match self {
            Gradient::Dense(t) => t,
            Gradient::Rows(g) => &g.values,
        }
    }

    /// [`Gradient::values`], to change in place.
    pub fn values_mut(&mut self) -> &mut Tensor {
        match self {
            Gradient::Dense(t) => t,
            Gradient::Rows(g) => &mut g.values,
        }
    }

    /// The whole gradient (zeros in rows not touched).
    pub fn into_dense(self) -> Tensor {
        match self {
            Gradient::Dense(t) => t,
            Gradient::Rows(g) => g.to_dense(),
        }
    }
}

/// The gradient of a static whose contributions are all rows (`row` and
/// `outer_row`: an embedding table's lookups), kept to the rows they
/// touch: every other row's gradient is zero.
#[derive(Clone, Debug, PartialEq)]
pub struct RowGradient {
    /// The static's shape.
    pub shape: Vec<usize>,
    /// The rows (indices on the static's first axis) touched, ascending.
    pub rows: Vec<usize>,
    /// Their gradients, in the order of `rows`: shape `[rows.len(), shape[1..]]`.
    pub values: Tensor,
}

impl RowGradient {
    /// The elements of one row.
    pub fn row_len(&self) -> usize {
        self.shape[1..].iter().product()
    }

    /// The whole gradient, zeros in the rows not touched.
    pub fn to_dense(&self) -> Tensor {
        fn spread<F: Summed>(g: &RowGradient, values: &[F]) -> Vec<F> {
            let n = g.row_len();
            let mut dense = vec![F::ZERO; g.shape.iter().product()];
            for (k, &row) in g.rows.iter().enumerate() {
                dense[row * n..(row + 1) * n].copy_from_slice(&values[k * n..(k + 1) * n]);
            }
            dense
        }
        let data = match &self.values.data {
            Data::F32(v) => Data::F32(spread(self, v)),
            Data::F64(v) => Data::F64(spread(self, v)),
            other => internal_error(format!("the gradient of a static of {}", other.ty())),
        };
        Tensor::new(self.shape.clone(), data)
    }
}

/// [`gradient_of`] for a static whose records are all rows, kept to the
/// rows they touch. Each touched row has the bits [`gradient_of`] gives
/// it: the records are summed in the same order, into a compact gradient
/// whose row `k` is the `k`-th touched row.
pub fn row_gradient_of(
    stat: &Tensor,
    log: &AdjointLog,
    mut records: Vec<AdjointRecord>,
) -> RowGradient {
    if stat.shape.is_empty() {
        internal_error("a row gradient of a scalar static".to_string());
    }
    if let Some(r) = records
        .iter()
        .find(|r| !matches!(r.kind, AdjointKind::Row | AdjointKind::OuterRow))
    {
        internal_error(format!(
            "a {} adjoint of a static summed by rows",
            r.kind.name()
        ));
    }
    sort_records(log, &mut records);
    let mut rows: Vec<usize> = records.iter().map(|r| r.row as usize).collect();
    rows.sort_unstable();
    rows.dedup();
    // Renumbering the rows in their order keeps the records' order.
    for r in &mut records {
        r.row = rows.partition_point(|&row| row < r.row as usize) as u64;
    }
    let mut shape = stat.shape.clone();
    shape[0] = rows.len();
    let values = Tensor::new(shape.clone(), summed(stat, &shape, log, &records));
    RowGradient {
        shape: stat.shape.clone(),
        rows,
        values,
    }
}

/// The order in which a static's records are summed (see [`static_gradients`]).
///
/// The records are sorted through a compact key each (kind, row, the bits
/// of the first value), so that most comparisons read no record's values.
/// Only records whose keys are equal compare their values; records equal
/// in the whole order are equal contributions, so the order among them
/// changes no bit of the sum.
fn sort_records(log: &AdjointLog, records: &mut Vec<AdjointRecord>) {
    let mut order: Vec<(SortKey, usize)> = records
        .iter()
        .enumerate()
        .map(|(k, r)| (SortKey::of(log, r), k))
        .collect();
    order.sort_unstable_by(|(a_key, a), (b_key, b)| {
        a_key
            .cmp(b_key)
            .then_with(|| log.compare_bits(&records[*a], &records[*b]))
    });
    *records = order.iter().map(|(_, k)| records[*k]).collect();
}

/// The start of a record's place in [`sort_records`]'s order: the kind's
/// rank, the row, then the first value's bits (`None`, no values, first),
/// as [`AdjointLog::compare_bits`] orders them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    rank: u8,
    row: u64,
    first: Option<u64>,
}

impl SortKey {
    fn of(log: &AdjointLog, r: &AdjointRecord) -> SortKey {
        SortKey {
            rank: kind_rank(r.kind),
            row: r.row,
            first: log.first_bits(r),
        }
    }
}

/// The sum of `records` (sorted) into a gradient of `shape`, in the
/// element type of `stat`.
fn summed(stat: &Tensor, shape: &[usize], log: &AdjointLog, records: &[AdjointRecord]) -> Data {
    match &stat.data {
        Data::F32(_) => Data::F32(sum_records::<f32>(shape, log, records)),
        Data::F64(_) => Data::F64(sum_records::<f64>(shape, log, records)),
        other => internal_error(format!("the gradient of a static of {}", other.ty())),
    }
}

fn kind_rank(kind: AdjointKind) -> u8 {
    match kind {
        AdjointKind::Outer | AdjointKind::OuterRow => 0,
        AdjointKind::Row => 1,
        AdjointKind::Dense => 2,
    }
}

/// The float types a gradient is summed in, with their values in a log.
trait Summed: Float {
    /// The arena of this type of `log` (which must be `float`).
    fn of_arena(log: &AdjointLog, float: Arena) -> &[Self];

    /// The value's bits (an order on values: [`AdjointLog::compare_bits`]).
    fn bits(self) -> u64;

    /// Sums whole register tiles of an outer-product block where this CPU
    /// has them (see [`add_outer_block`]): the rows and columns covered
    /// from the start of `g`.
    fn add_outer_tiles(_path: Path, _g: &mut [Self], _panels: &Panels<'_, Self>) -> (usize, usize) {
        (0, 0)
    }
}

impl Summed for f32 {
    fn of_arena(log: &AdjointLog, float: Arena) -> &[f32] {
        match float {
            Arena::F32 => &log.f32s,
            Arena::F64 => internal_error("an f32 static's adjoint is not f32".to_string()),
        }
    }

    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }

    #[cfg(target_arch = "x86_64")]
    fn add_outer_tiles(path: Path, g: &mut [f32], panels: &Panels<'_, f32>) -> (usize, usize) {
        tiles::add(path, g, panels)
    }
}

impl Summed for f64 {
    fn of_arena(log: &AdjointLog, float: Arena) -> &[f64] {
        match float {
            Arena::F64 => &log.f64s,
            Arena::F32 => internal_error("an f64 static's adjoint is not f64".to_string()),
        }
    }

    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// The sum of `records` (sorted) into a gradient of `shape`.
fn sum_records<F: Summed>(shape: &[usize], log: &AdjointLog, records: &[AdjointRecord]) -> Vec<F> {
    let len: usize = shape.iter().product();
    let mut g = vec![F::ZERO; len];
    let outer_end = records
        .iter()
        .position(|r| kind_rank(r.kind) != 0)
        .unwrap_or(records.len());
    if outer_end > 0 {
        // The matrix (a 2-D static, or each row of a 3-D one) and the
        // contributions to it (sorted by row, so consecutive).
        let (m, k) = match shape {
            [m, k] | [_, m, k] => (*m, *k),
            _ => {
                internal_error("an outer-product adjoint of a static that is no matrix".to_string())
            }
        };
        let mut rest = &records[..outer_end];
        let mut panel = Vec::new();
        while let Some(first) = rest.first() {
            let same = rest.iter().take_while(|r| r.row == first.row).count();
            let start = first.row as usize * m * k;
            let Some(matrix) = g.get_mut(start..start + m * k) else {
                internal_error(format!("a static adjoint's row {} is outside", first.row))
            };
            for block in rest[..same].chunks(OUTER_BLOCK) {
                add_outer_block(matrix, m, k, log, block, &mut panel);
            }
            rest = &rest[same..];
        }
    }
    let row_len: usize = shape.iter().skip(1).product();
    for r in &records[outer_end..] {
        let values = log.values::<F>(r);
        let target = match r.kind {
            AdjointKind::Row => {
                let start = r.row as usize * row_len;
                match g.get_mut(start..start + row_len) {
                    Some(row) => row,
                    None => internal_error(format!("a static adjoint's row {} is outside", r.row)),
                }
            }
            _ => &mut g[..],
        };
        if target.len() != values.len() {
            internal_error("a static adjoint of another shape than its static".to_string());
        }
        for (t, v) in target.iter_mut().zip(values) {
            *t = *t + *v;
        }
    }
    g
}

/// Adds `Σ_r u_r v_rᵀ` (each element summed in record order from zero)
/// to the `m × k` gradient `g`. Elements are independent, so which of
/// them are computed together (a register tile, a thread's rows) changes
/// no bit. `panel` is memory to reuse.
fn add_outer_block<F: Summed>(
    g: &mut [F],
    m: usize,
    k: usize,
    log: &AdjointLog,
    block: &[AdjointRecord],
    panel: &mut Vec<F>,
) {
    add_outer_block_on(Path::detected(), g, m, k, log, block, panel)
}

/// An outer-product block's records gathered into two panels, in record
/// order: every `u` (`m` elements each), then every `v` (`k` each), so
/// that the sums read them in strides rather than record by record.
struct Panels<'a, F> {
    us: &'a [F],
    vs: &'a [F],
    m: usize,
    k: usize,
    count: usize,
}

/// [`add_outer_block`] with the register tiles of `path` (available here).
fn add_outer_block_on<F: Summed>(
    path: Path,
    g: &mut [F],
    m: usize,
    k: usize,
    log: &AdjointLog,
    block: &[AdjointRecord],
    panel: &mut Vec<F>,
) {
    if g.len() != m * k {
        internal_error("an outer-product block of another shape".to_string());
    }
    panel.clear();
    for r in block {
        let values = log.values::<F>(r);
        if values.len() != m + k {
            internal_error("an outer-product adjoint of another shape".to_string());
        }
        panel.extend_from_slice(&values[..m]);
    }
    for r in block {
        panel.extend_from_slice(&log.values::<F>(r)[m..]);
    }
    let (us, vs) = panel.split_at(block.len() * m);
    let panels = Panels {
        us,
        vs,
        m,
        k,
        count: block.len(),
    };
    let (rows, cols) = F::add_outer_tiles(path, g, &panels);
    outer_rows(g, &panels, 0..rows, cols..k);
    outer_rows(g, &panels, rows..m, 0..k);
}

/// Elements of a row of an outer-product block summed at once: they stay
/// in registers while the block's records pass.
const OUTER_COLUMNS: usize = 32;

/// [`add_outer_block`]'s sums of the elements in `rows` x `cols`: for
/// every element, `s = s + u_r[i] * v_r[j]` over the records in order from
/// zero (a product, then a sum: no fused multiply-add, so the bits are
/// those of the scalar loop on any CPU), then added to the gradient, a
/// chunk of [`OUTER_COLUMNS`] elements of a row at a time. (An element
/// that is NaN is one of its operands' NaNs, the one the CPU's addition
/// keeps.)
fn outer_rows<F: Summed>(
    g: &mut [F],
    p: &Panels<'_, F>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    let k = p.k;
    for i in rows {
        let g_row = &mut g[i * k..(i + 1) * k];
        let mut j0 = cols.start;
        while j0 < cols.end {
            let width = OUTER_COLUMNS.min(cols.end - j0);
            let mut sum = [F::ZERO; OUTER_COLUMNS];
            let sum = &mut sum[..width];
            for r in 0..p.count {
                let ui = p.us[r * p.m + i];
                let v = &p.vs[r * k + j0..r * k + j0 + width];
                for (s, vj) in sum.iter_mut().zip(v) {
                    *s = *s + ui * *vj;
                }
            }
            for (t, s) in g_row[j0..j0 + width].iter_mut().zip(sum.iter()) {
                *t = *t + *s;
            }
            j0 += width;
        }
    }
}

/// The register tiles of [`add_outer_block`] for `f32` on x86-64: the
/// accumulators of several rows times several columns stay in vector
/// registers while the block's records pass, each record's `v` loaded once
/// for all the tile's rows. Each element's sum is the scalar loop's: a
/// product rounded, then a sum rounded (`mul`, `add`: no fused
/// multiply-add), in record order from `+0.0`, then added to the gradient.
#[cfg(target_arch = "x86_64")]
mod tiles {
    use std::arch::x86_64::*;

    use super::{Panels, Path};

    /// Sums the elements of `g` (`m x k`) in whole tiles of `path` (which
    /// must run here) and returns how many rows and columns from the start
    /// they cover (the rest is the caller's).
    pub fn add(path: Path, g: &mut [f32], p: &Panels<'_, f32>) -> (usize, usize) {
        if !path.available() {
            crate::internal_error(format!("this CPU cannot sum on the {path:?} path"));
        }
        let (m, k) = (p.m, p.k);
        match path {
            Path::Avx512 => {
                // Tiles of 8 rows, then one of 4 if as many rows are left.
                let cols = k - k % 32;
                let eights = m - m % 8;
                let fours = m - m % 4;
                // SAFETY: the CPU has AVX-512 F; the panels hold `count`
                // records of `m` and `k` elements and `g` has `m * k` (the
                // caller checked); the tiles lie within `fours` x `cols`.
                unsafe {
                    avx512::<8>(g, p, 0..eights, cols);
                    avx512::<4>(g, p, eights..fours, cols);
                }
                (fours, cols)
            }
            Path::Avx2 => {
                let cols = k - k % 16;
                let fours = m - m % 4;
                // SAFETY: the CPU has AVX2; the lengths as above.
                unsafe { avx2(g, p, 0..fours, cols) };
                (fours, cols)
            }
            _ => (0, 0),
        }
    }

    /// Tiles of 4 rows x 16 columns (two 256-bit registers a row) over
    /// `rows` (a multiple of 4 long) and the first `cols` columns (a
    /// multiple of 16).
    #[target_feature(enable = "avx2")]
    unsafe fn avx2(g: &mut [f32], p: &Panels<'_, f32>, rows: std::ops::Range<usize>, cols: usize) {
        const ROWS: usize = 4;
        for i0 in rows.step_by(ROWS) {
            for j0 in (0..cols).step_by(16) {
                let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
                let mut u = p.us.as_ptr().add(i0);
                let mut v = p.vs.as_ptr().add(j0);
                for _ in 0..p.count {
                    let v0 = _mm256_loadu_ps(v);
                    let v1 = _mm256_loadu_ps(v.add(8));
                    for (a, acc) in acc.iter_mut().enumerate() {
                        let b = _mm256_set1_ps(*u.add(a));
                        acc[0] = _mm256_add_ps(acc[0], _mm256_mul_ps(b, v0));
                        acc[1] = _mm256_add_ps(acc[1], _mm256_mul_ps(b, v1));
                    }
                    u = u.add(p.m);
                    v = v.add(p.k);
                }
                for (a, acc) in acc.iter().enumerate() {
                    let at = g.as_mut_ptr().add((i0 + a) * p.k + j0);
                    _mm256_storeu_ps(at, _mm256_add_ps(_mm256_loadu_ps(at), acc[0]));
                    let at = at.add(8);
                    _mm256_storeu_ps(at, _mm256_add_ps(_mm256_loadu_ps(at), acc[1]));
                }
            }
        }
    }

    /// Tiles of `ROWS` rows x 32 columns (two 512-bit registers a row)
    /// over `rows` (a multiple of `ROWS` long) and the first `cols`
    /// columns (a multiple of 32).
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512<const ROWS: usize>(
        g: &mut [f32],
        p: &Panels<'_, f32>,
        rows: std::ops::Range<usize>,
        cols: usize,
    ) {
        for i0 in rows.step_by(ROWS) {
            for j0 in (0..cols).step_by(32) {
                let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
                let mut u = p.us.as_ptr().add(i0);
                let mut v = p.vs.as_ptr().add(j0);
                for _ in 0..p.count {
                    let v0 = _mm512_loadu_ps(v);
                    let v1 = _mm512_loadu_ps(v.add(16));
                    for (a, acc) in acc.iter_mut().enumerate() {
                        let b = _mm512_set1_ps(*u.add(a));
                        acc[0] = _mm512_add_ps(acc[0], _mm512_mul_ps(b, v0));
                        acc[1] = _mm512_add_ps(acc[1], _mm512_mul_ps(b, v1));
                    }
                    u = u.add(p.m);
                    v = v.add(p.k);
                }
                for (a, acc) in acc.iter().enumerate() {
                    let at = g.as_mut_ptr().add((i0 + a) * p.k + j0);
                    _mm512_storeu_ps(at, _mm512_add_ps(_mm512_loadu_ps(at), acc[0]));
                    let at = at.add(16);
                    _mm512_storeu_ps(at, _mm512_add_ps(_mm512_loadu_ps(at), acc[1]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A contribution to static 0, to log.
    #[derive(Clone, Debug)]
    struct Contribution {
        member: u32,
        kind: AdjointKind,
        row: u64,
        values: Vec<f64>,
    }

    fn outer(member: u32, u: &[f64], v: &[f64]) -> Contribution {
        Contribution {
            member,
            kind: AdjointKind::Outer,
            row: 0,
            values: u.iter().chain(v).copied().collect(),
        }
    }

    fn row(member: u32, i: u64, r: &[f64]) -> Contribution {
        Contribution {
            member,
            kind: AdjointKind::Row,
            row: i,
            values: r.to_vec(),
        }
    }

    fn dense(member: u32, d: &[f64]) -> Contribution {
        Contribution {
            member,
            kind: AdjointKind::Dense,
            row: 0,
            values: d.to_vec(),
        }
    }

    /// A log of `contributions`, in order.
    fn log_of(contributions: &[Contribution]) -> AdjointLog {
        let mut log = AdjointLog::new();
        for c in contributions {
            log.push_parts(
                c.member,
                StaticId(0),
                c.kind,
                c.row,
                &[Values::F64(&c.values)],
            );
        }
        log
    }

    #[test]
    fn the_sum_of_every_kind_of_contribution() {
        let stat = Tensor::new(vec![2, 3], Data::F64(vec![0.0; 6]));
        let records = vec![
            outer(0, &[1.0, 2.0], &[1.0, 0.0, -1.0]),
            row(1, 1, &[0.5, 0.5, 0.5]),
            dense(0, &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
            outer(1, &[0.0, 1.0], &[2.0, 2.0, 2.0]),
        ];
        let g = static_gradients(&[stat], &[StaticId(0)], &log_of(&records));
        assert_eq!(g[0].data, Data::F64(vec![2.0, 1.0, 0.0, 5.5, 3.5, 1.5]));
    }

    /// The operands of `static_adjoint` become a record's row and values,
    /// and logs joined keep them (with their members renamed).
    #[test]
    fn operands_are_logged_and_logs_joined() {
        let (i, u, v) = (
            Tensor::new(vec![], Data::I64(vec![2])),
            Tensor::new(vec![2], Data::F32(vec![1.0, 2.0])),
            Tensor::new(vec![1], Data::F32(vec![3.0])),
        );
        let adjoint = |kind| StaticAdjoint {
            id: StaticId(1),
            kind,
        };
        let mut a = AdjointLog::new();
        a.push_tensors(0, &adjoint(AdjointKind::OuterRow), &[&i, &u, &v]);
        let mut b = AdjointLog::new();
        b.push_tensors(0, &adjoint(AdjointKind::Dense), &[&v]);
        b.push(
            1,
            &adjoint(AdjointKind::Row),
            &[Values::I64(&[5]), Values::F64(&[0.5])],
        );
        let mut joined = a.clone();
        joined.append(&b, |m| m + 7);
        let records = joined.records();
        assert_eq!(records.len(), 3);
        assert_eq!((records[0].member, records[0].row), (0, 2));
        assert_eq!(joined.values::<f32>(&records[0]), &[1.0, 2.0, 3.0]);
        assert_eq!(
            (records[1].member, records[1].kind),
            (7, AdjointKind::Dense)
        );
        assert_eq!(joined.values::<f32>(&records[1]), &[3.0]);
        assert_eq!((records[2].member, records[2].row), (8, 5));
        assert_eq!(joined.values::<f64>(&records[2]), &[0.5]);
        joined.retain(|r| r.member != 7);
        let mut again = a;
        again.push(
            8,
            &adjoint(AdjointKind::Row),
            &[Values::I32(&[5]), Values::F64(&[0.5])],
        );
        assert_eq!(joined, again);
    }

    /// Rows summed alone: each touched row has the bits of the whole sum,
    /// and the rows not touched are the whole sum's zeros.
    #[test]
    fn a_row_gradient_has_the_bits_of_the_whole_sum() {
        let stat = Tensor::new(vec![6, 2], Data::F64(vec![0.0; 12]));
        let records: Vec<Contribution> = (0..40u32)
            .map(|i| {
                let x = (i as f64 * 0.917).sin() * 1e2_f64.powf((i % 5) as f64 - 2.0);
                row(i, [4, 1, 4, 0][i as usize % 4], &[x, 1.0 / (3.0 + x)])
            })
            .collect();
        let log = log_of(&records);
        let whole = gradient_of(&stat, &log, log.records().to_vec());
        let rows = row_gradient_of(&stat, &log, log.records().to_vec());
        assert_eq!(rows.rows, vec![0, 1, 4]);
        assert_eq!(rows.values.shape, vec![3, 2]);
        assert_eq!(rows.to_dense(), whole);
        assert_eq!(
            Gradient::of(&stat, &log, Vec::new(), true).into_dense(),
            stat
        );
    }

    #[test]
    fn the_order_of_the_records_does_not_change_a_bit() {
        let stat = Tensor::new(vec![3, 2], Data::F64(vec![0.0; 6]));
        let mut records: Vec<Contribution> = (0..300u32)
            .map(|i| {
                let x = (i as f64 * 0.7311).sin() * 1e3_f64.powf((i % 7) as f64 - 3.0);
                match i % 3 {
                    0 => outer(i, &[x, 0.1 * x, -x], &[1.0 / (1.0 + x.abs()), x]),
                    1 => row(i, (i % 3) as u64, &[x, -0.3 * x]),
                    _ => dense(i, &[x, x, 0.5, -x, 1.0 / 3.0, x * x]),
                }
            })
            .collect();
        let first = static_gradients(
            std::slice::from_ref(&stat),
            &[StaticId(0)],
            &log_of(&records),
        );
        records.reverse();
        records.swap(3, 150);
        // Split in two logs, joined the other way round.
        let (front, back) = records.split_at(120);
        let mut joined = log_of(back);
        joined.append(&log_of(front), |m| m);
        let second = static_gradients(&[stat], &[StaticId(0)], &joined);
        assert_eq!(first, second);
    }

    /// The keyed sort gives the order of a plain sort by kind, row and every
    /// value's bits, also where records tie on the first value (and row)
    /// and differ further on, or are equal.
    #[test]
    fn the_keyed_sort_is_the_plain_sort() {
        let mut records: Vec<Contribution> = (0..200u32)
            .map(|i| {
                let x = ((i % 9) as f64 * 0.37).sin();
                let y = (i as f64 * 1.91).cos() * 1e3_f64.powf((i % 4) as f64 - 2.0);
                match i % 4 {
                    0 => outer(i, &[1.0, x], &[y, -0.0]),
                    1 => row(i, (i % 3) as u64, &[x, y]),
                    2 => dense(i, &[x, y, 0.0, -y, x, 1.0]),
                    _ => outer(i, &[1.0, x], &[(i % 3) as f64, 0.5]),
                }
            })
            .collect();
        records.push(dense(900, &[]));
        let bits = |values: &[f64]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mut plain: Vec<(u8, u64, Vec<u64>)> = records
            .iter()
            .map(|c| (kind_rank(c.kind), c.row, bits(&c.values)))
            .collect();
        plain.sort();
        let log = log_of(&records);
        let mut sorted = log.records().to_vec();
        sort_records(&log, &mut sorted);
        let keyed: Vec<(u8, u64, Vec<u64>)> = sorted
            .iter()
            .map(|r| (kind_rank(r.kind), r.row, bits(log.values::<f64>(r))))
            .collect();
        assert_eq!(keyed, plain);
    }

    /// The block sums, on every path, have the bits of the plain loop:
    /// a product then a sum per element, records in order, for widths on
    /// and off the chunk of columns, with signed zeros, infinities and NaNs
    /// (a NaN where the plain loop has one).
    #[test]
    fn outer_blocks_have_the_bits_of_the_plain_loop() {
        fn plain(g: &mut [f32], m: usize, k: usize, pairs: &[(Vec<f32>, Vec<f32>)]) {
            for i in 0..m {
                let mut sum = vec![0.0f32; k];
                for (u, v) in pairs {
                    for j in 0..k {
                        sum[j] += u[i] * v[j];
                    }
                }
                for j in 0..k {
                    g[i * k + j] += sum[j];
                }
            }
        }
        let mut seed = 7u32;
        // Finite values of several magnitudes; with `specials`, now and then
        // a signed zero, an infinity or a NaN.
        let mut draw = move |specials: bool| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            match seed >> 22 {
                0 if specials => -0.0,
                1 if specials => f32::INFINITY,
                2 if specials => f32::NAN,
                _ => {
                    ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5)
                        * 1e3f32.powi((seed % 7) as i32 - 3)
                }
            }
        };
        // Whole register tiles (4 or 8 rows x 16 or 32 columns) and the
        // rows and columns left of them.
        let shapes = [
            (1, 1),
            (3, 5),
            (2, 32),
            (5, 45),
            (4, 128),
            (3, 131),
            (8, 48),
            (9, 80),
            (16, 64),
            (13, 33),
            (23, 96),
        ];
        for (m, k, specials) in shapes
            .iter()
            .flat_map(|&(m, k)| [(m, k, false), (m, k, true)])
        {
            let mut next = || draw(specials);
            let pairs: Vec<(Vec<f32>, Vec<f32>)> = (0..70)
                .map(|_| {
                    (
                        (0..m).map(|_| next()).collect(),
                        (0..k).map(|_| next()).collect(),
                    )
                })
                .collect();
            let mut log = AdjointLog::new();
            for (u, v) in &pairs {
                let parts = [Values::F32(u), Values::F32(v)];
                log.push_parts(0, StaticId(0), AdjointKind::Outer, 0, &parts);
            }
            let start: Vec<f32> = (0..m * k).map(|_| next()).collect();
            let mut want = start.clone();
            plain(&mut want, m, k, &pairs);
            let mut got = Vec::new();
            for path in Path::ALL.into_iter().filter(|p| p.available()) {
                let mut on_path = start.clone();
                let mut panel = Vec::new();
                add_outer_block_on::<f32>(
                    path,
                    &mut on_path,
                    m,
                    k,
                    &log,
                    log.records(),
                    &mut panel,
                );
                got.push(on_path);
            }
            // (Which of two NaNs a sum keeps is the CPU's choice, and the
            // compiler's, which may commute a sum: NaNs are one class here.)
            let bits = |x: &[f32]| {
                x.iter()
                    .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                    .collect::<Vec<_>>()
            };
            for (path, got) in got.iter().enumerate() {
                assert_eq!(bits(got), bits(&want), "m={m} k={k} path {path}");
            }
        }
    }
}
