//! `autobatch run` over the ranks of a job: scatter the slices, run them,
//! gather the members' results and the figures on the root, and write the
//! document one process writes.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use super::wire::{Reader, WireError, Writer};
use super::{member_range, payloads, status_bytes, Communicator, RankFailure};
use crate::bind::{BoundBatch, Preparation};
use crate::compile::Compiled;
use crate::json_output::{float_to_json, member_result_to_json};
use crate::run::{RunConfig, RunResult};
use autobatch_exec::Observer;

/// What a rank's run adds to the figures of the job: its `stats` object
/// (as `--stats` prints it for the slice), and the two sums its lane
/// utilization is the ratio of.
#[derive(Clone, Debug, PartialEq)]
pub struct RankFigures {
    pub stats: Json,
    /// Active lanes over every operation's executions.
    pub active_lanes: u64,
    /// The lanes (threads of control) there were at those executions.
    pub lane_slots: u64,
}

impl RankFigures {
    /// The figures of one rank's result.
    pub fn of(result: &RunResult) -> RankFigures {
        let active_lanes: u64 = result.stats.op_counts.iter().map(|c| c.active_lanes).sum();
        let utilization = result.stats.lane_utilization;
        // The executors compute the utilization as the ratio of these two
        // integers; the slots come back from it exactly while they stay
        // below 2^52.
        let lane_slots = if utilization > 0.0 {
            (active_lanes as f64 / utilization).round() as u64
        } else {
            0
        };
        RankFigures {
            stats: result.stats_to_json(),
            active_lanes,
            lane_slots,
        }
    }
}

/// What `autobatch run` gets back on the root: the document it writes,
/// and the run's profile when it asked for one (`RunConfig::profile`, in a
/// job of one process: ranks record none).
#[derive(Clone, Debug)]
pub struct RunDocument {
    pub text: String,
    pub profile: Option<autobatch_exec::profile::Profile>,
}

/// Runs `batch` (given on the root, the whole batch bound there) over the
/// ranks of `comm`; on the root, the document `autobatch run` writes (with
/// `stats` if `with_stats`), exactly the bytes one process writes but for
/// the timing figures. Every rank calls it, with its program (or why it has
/// none); the other ranks get `None`, and only the root learns of a failed
/// rank.
pub fn run_sharded(
    comm: &dyn Communicator,
    compiled: Result<&Compiled, String>,
    batch: Option<&BoundBatch>,
    config: &RunConfig,
    with_stats: bool,
) -> Result<Option<RunDocument>, RankFailure> {
    run_sharded_observed(comm, compiled, batch, config, with_stats, None)
}

/// [`run_sharded`], calling `observer` while this rank's part runs
/// ([`BoundBatch::run_observed`]).
pub fn run_sharded_observed(
    comm: &dyn Communicator,
    compiled: Result<&Compiled, String>,
    batch: Option<&BoundBatch>,
    config: &RunConfig,
    with_stats: bool,
    observer: Option<Observer>,
) -> Result<Option<RunDocument>, RankFailure> {
    let (rank, size) = (comm.rank(), comm.size());
    if size == 1 {
        // One process: no slices, no copies.
        let Some(batch) = batch else {
            return Ok(None);
        };
        return one_process(batch, config, with_stats, observer).map(Some);
    }
    let members = batch.map_or(0, BoundBatch::batch_size);
    let slice = comm.scatter(&mut |to| match batch {
        Some(batch) => batch.slice_bytes(member_range(to, size, members)),
        None => Vec::new(),
    });
    let status = compiled.and_then(|compiled| {
        compiled
            .bind_slice(&slice)
            .map_err(|e| format!("internal error: {e} (this is a bug in autobatch)"))
            .and_then(|mine| run_slice(&mine, config, observer))
    });
    drop(slice);
    let Some(statuses) = comm.gather(status_bytes(status)) else {
        return Ok(None);
    };
    debug_assert_eq!(rank, 0);
    let parts = payloads(statuses)?;
    let preparation = batch.map(BoundBatch::preparation).unwrap_or_default();
    let text = assemble(&parts, members, with_stats.then_some(preparation))?;
    Ok(Some(RunDocument {
        text,
        profile: None,
    }))
}

/// The document of a job of one rank.
fn one_process(
    batch: &BoundBatch,
    config: &RunConfig,
    with_stats: bool,
    observer: Option<Observer>,
) -> Result<RunDocument, RankFailure> {
    let failure = |message: String| RankFailure { rank: 0, message };
    let mut result = batch
        .run_observed(config, observer)
        .map_err(|e| failure(e.to_string()))?;
    let mut text = serde_json::to_string(&result.to_json(with_stats))
        .map_err(|e| failure(format!("cannot write the results as JSON: {e}")))?;
    text.push('\n');
    Ok(RunDocument {
        text,
        profile: result.stats.profile.take(),
    })
}

/// This rank's part: its members' results as JSON, separated by commas,
/// and its figures (none for a rank without members).
fn run_slice(
    batch: &BoundBatch,
    config: &RunConfig,
    observer: Option<Observer>,
) -> Result<Vec<u8>, String> {
    let mut w = Writer::new();
    if batch.batch_size() == 0 {
        w.str("");
        w.bool(false);
        return Ok(w.finish());
    }
    let result = batch
        .run_observed(config, observer)
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    for (i, member) in result.members.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        let json = serde_json::to_string(&member_result_to_json(member))
            .map_err(|e| format!("cannot write the results as JSON: {e}"))?;
        text.push_str(&json);
    }
    w.str(&text);
    w.bool(true);
    let figures = RankFigures::of(&result);
    w.str(&figures.stats.to_string());
    w.u64(figures.active_lanes);
    w.u64(figures.lane_slots);
    Ok(w.finish())
}

/// The root's document from every rank's part, with the stats when
/// given how long the root took to read and bind the whole batch.
fn assemble(
    parts: &[Vec<u8>],
    members: usize,
    stats: Option<Preparation>,
) -> Result<String, RankFailure> {
    let mut text = String::from("{\"results\":[");
    let mut figures = Vec::new();
    let mut first = true;
    for (rank, part) in parts.iter().enumerate() {
        let failure = |e: WireError| RankFailure {
            rank,
            message: format!("internal error: {e} (this is a bug in autobatch)"),
        };
        let mut r = Reader::new(part);
        let results = r.str().map_err(failure)?;
        if !results.is_empty() {
            if !first {
                text.push(',');
            }
            first = false;
            text.push_str(&results);
        }
        if r.bool().map_err(failure)? {
            figures.push(read_figures(&mut r).map_err(failure)?);
        }
    }
    text.push(']');
    if let Some(preparation) = stats {
        let mut stats = merge_stats_json(&figures, members);
        if let Json::Object(fields) = &mut stats {
            fields.insert(
                "read_seconds".into(),
                float_to_json(preparation.read_seconds),
            );
            fields.insert(
                "bind_seconds".into(),
                float_to_json(preparation.bind_seconds),
            );
        }
        text.push_str(",\"stats\":");
        text.push_str(&stats.to_string());
    }
    text.push_str("}\n");
    Ok(text)
}

fn read_figures(r: &mut Reader<'_>) -> Result<RankFigures, WireError> {
    let stats = serde_json::from_str(&r.str()?)
        .map_err(|e| WireError(format!("figures that are not JSON: {e}")))?;
    Ok(RankFigures {
        stats,
        active_lanes: r.u64()?,
        lane_slots: r.u64()?,
    })
}

/// The `stats` of a job from its ranks' (those that ran members), for a
/// batch of `members`: counts summed (steps, instances, bytes, every
/// operation's executions and active lanes), peaks summed (what the ranks
/// held at once at most) but `tape_bytes` (one member's: the most of any
/// rank), seconds the slowest rank's, the lane utilization
/// the active lanes over the lane slots of all ranks. An executor's own
/// figures: counts summed but `functions` (of the program, the same on
/// every rank), seconds the most, the others rank 0's.
pub fn merge_stats_json(ranks: &[RankFigures], members: usize) -> Json {
    let Some(first) = ranks.first() else {
        return Json::Null;
    };
    let mut stats = first.stats.clone();
    fn all<'a>(ranks: &'a [RankFigures], key: &'a str) -> impl Iterator<Item = &'a Json> {
        ranks.iter().map(move |f| &f.stats[key])
    }
    for key in [
        "steps",
        "instances",
        "peak_instances",
        "call_bytes",
        "peak_state_bytes",
    ] {
        stats[key] = all(ranks, key).filter_map(Json::as_u64).sum::<u64>().into();
    }
    // A member's tape is on one rank: the most of any rank.
    let tape_bytes = all(ranks, "tape_bytes").filter_map(Json::as_u64).max();
    stats["tape_bytes"] = tape_bytes.unwrap_or(0).into();
    let slowest = all(ranks, "wall_seconds")
        .filter_map(Json::as_f64)
        .fold(0.0, f64::max);
    stats["wall_seconds"] = float_to_json(slowest);
    // A size may have members on several ranks: the most any rank ran is
    // what one process can say without the lengths of the others' members.
    let sizes = all(ranks, "sizes").filter_map(Json::as_u64).max();
    stats["sizes"] = sizes.unwrap_or(1).into();
    let active: u64 = ranks.iter().map(|f| f.active_lanes).sum();
    let slots: u64 = ranks.iter().map(|f| f.lane_slots).sum();
    let utilization = if slots == 0 {
        0.0
    } else {
        active as f64 / slots as f64
    };
    stats["lane_utilization"] = float_to_json(utilization);
    stats["batch_size"] = members.into();
    stats["op_counts"] = merge_op_counts(ranks);
    if let Some(strategy) = first.stats["strategy"].as_str() {
        if first.stats.get(strategy).is_some() {
            let reports: Vec<&Json> = ranks.iter().map(|f| &f.stats[strategy]).collect();
            stats[strategy] = merge_report(&reports);
        }
    }
    stats
}

/// Every operation's counts summed over the ranks, sorted by location then
/// name, as one executor sorts them.
fn merge_op_counts(ranks: &[RankFigures]) -> Json {
    let mut merged: BTreeMap<(u64, u64, String), (u64, u64)> = BTreeMap::new();
    for count in ranks
        .iter()
        .filter_map(|f| f.stats["op_counts"].as_array())
        .flatten()
    {
        let key = (
            count["line"].as_u64().unwrap_or(0),
            count["column"].as_u64().unwrap_or(0),
            count["op"].as_str().unwrap_or("").to_owned(),
        );
        let entry = merged.entry(key).or_default();
        entry.0 += count["executions"].as_u64().unwrap_or(0);
        entry.1 += count["active_lanes"].as_u64().unwrap_or(0);
    }
    Json::Array(
        merged
            .into_iter()
            .map(|((line, column, op), (executions, active_lanes))| {
                serde_json::json!({
                    "op": op,
                    "line": line,
                    "column": column,
                    "executions": executions,
                    "active_lanes": active_lanes,
                })
            })
            .collect(),
    )
}

/// An executor's own figures merged (see [`merge_stats_json`]).
fn merge_report(reports: &[&Json]) -> Json {
    let Some(Json::Object(first)) = reports.first() else {
        return Json::Null;
    };
    let mut merged = Map::new();
    for (name, value) in first {
        let values = reports.iter().map(|r| &r[name.as_str()]);
        let value = match value {
            Json::Number(n) if n.is_u64() && name != "functions" => {
                values.filter_map(Json::as_u64).sum::<u64>().into()
            }
            Json::Number(n) if n.is_f64() => {
                float_to_json(values.filter_map(Json::as_f64).fold(0.0, f64::max))
            }
            other => other.clone(),
        };
        merged.insert(name.clone(), value);
    }
    Json::Object(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, Inputs, Strategy};

    const SOURCE: &str = "fn f(n: i64, x: f64) -> f64 {\n    let mut s = x;\n    let mut i = 0;\n    while i < n { s = s + normal(); i += 1; }\n    s\n}\n";

    fn whole() -> (Compiled, BoundBatch) {
        let compiled = compile(SOURCE, "f.ab").expect("compiles");
        let inputs = Inputs::new()
            .batched("n", (0..10_i64).map(|i| i % 4))
            .batched("x", (0..10).map(|i| i as f64 * 0.5));
        let batch = compiled.bind("f", &inputs).expect("binds");
        (compiled, batch)
    }

    fn one_process(config: &RunConfig, with_stats: bool) -> String {
        let (_, batch) = whole();
        let result = batch.run(config).expect("runs");
        serde_json::to_string(&result.to_json(with_stats)).unwrap() + "\n"
    }

    fn without(mut doc: Json, keys: &[&str]) -> Json {
        for key in keys {
            doc["stats"].as_object_mut().unwrap().remove(*key);
        }
        doc
    }

    /// On every strategy and each number of ranks, the root writes the
    /// bytes one process writes for `batch`, and the other ranks nothing.
    fn ranks_write_what_one_process_writes(
        compiled: &Compiled,
        batch: &BoundBatch,
        ranks: &[usize],
    ) {
        for strategy in Strategy::ALL {
            let config = RunConfig {
                strategy,
                options: crate::RunOptions {
                    threads: 1,
                    ..RunConfig::default().options
                },
            };
            let result = batch.run(&config).expect("runs");
            let expected = serde_json::to_string(&result.to_json(false)).unwrap() + "\n";
            for &size in ranks {
                let out = super::super::InProcess::run(size, |comm| {
                    let root = comm.is_root().then_some(batch);
                    run_sharded(comm, Ok(compiled), root, &config, false)
                });
                let text = out[0]
                    .clone()
                    .expect("no rank fails")
                    .expect("the root writes")
                    .text;
                assert_eq!(text, expected, "{} on {size} ranks", strategy.name());
                assert!(out[1..].iter().all(|o| matches!(o, Ok(None))));
            }
        }
    }

    #[test]
    fn ranks_write_the_bytes_of_one_process() {
        let (compiled, batch) = whole();
        ranks_write_what_one_process_writes(&compiled, &batch, &[1, 2, 3, 4, 12]);
    }

    #[test]
    fn a_ragged_batch_on_ranks_writes_the_bytes_of_one_process() {
        let source = "fn g(xs: [f64; L]) -> [f64; L] { let mut ys = xs; for i in 0..xs.len() { ys[i] = xs[i] + normal(); } ys }\n";
        let compiled = compile(source, "g.ab").expect("compiles");
        let arrays: Vec<Vec<f64>> = (0..10)
            .map(|m| (0..(m * 7) % 4).map(|k| k as f64).collect())
            .collect();
        let inputs =
            Inputs::from_json_str(&serde_json::json!({"batch": {"xs": arrays}}).to_string())
                .expect("inputs parse");
        let batch = compiled.bind("g", &inputs).expect("binds");
        ranks_write_what_one_process_writes(&compiled, &batch, &[2, 3, 4]);
    }

    #[test]
    fn reference_figures_merge_to_one_process_figures() {
        let (compiled, batch) = whole();
        let config = RunConfig {
            strategy: Strategy::Reference,
            options: crate::RunOptions {
                threads: 1,
                ..RunConfig::default().options
            },
        };
        let expected: Json = serde_json::from_str(&one_process(&config, true)).unwrap();
        let out = super::super::InProcess::run(3, |comm| {
            run_sharded(
                comm,
                Ok(&compiled),
                comm.is_root().then_some(&batch),
                &config,
                true,
            )
        });
        let got: Json =
            serde_json::from_str(&out[0].as_ref().unwrap().as_ref().unwrap().text).unwrap();
        // Timings, and the utilization (the ranks' lanes are their own).
        let varying = [
            "wall_seconds",
            "read_seconds",
            "bind_seconds",
            "lane_utilization",
        ];
        assert_eq!(without(got, &varying), without(expected, &varying));
    }
}
