//! The values of the command's flags: their parsers, whose messages name
//! the range a number must be in, and the help texts made from the
//! registry of executors (`Strategy`).
//!
//! Every count is a whole number with a range; a negative number gets the
//! same message as any other number out of range (the commands accept
//! values that start with `-`, so that clap does not take `-1` for a flag).

use autobatch::{BlockChoice, LaneMode, Strategy};

/// A whole number from `min` to `max`; the message names the range.
fn whole_number(text: &str, min: u64, max: u64) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number from {min} to {max}")),
    }
}

/// A whole number from `min` that fits `usize`.
fn whole_usize(text: &str, min: u64) -> Result<usize, String> {
    whole_number(text, min, usize::MAX as u64).map(|n| n as usize)
}

/// `--seed`: any 64-bit seed.
pub fn seed(text: &str) -> Result<u64, String> {
    whole_number(text, 0, u64::MAX)
}

/// `--max-steps`: at least one step, since a member's first block is one.
pub fn max_steps(text: &str) -> Result<u64, String> {
    whole_number(text, 1, u64::MAX)
        .map_err(|range| format!("{range} (a member takes at least one step, its first block)"))
}

/// `--max-stack-depth`: at least one, since the entry's call is one.
pub fn max_stack_depth(text: &str) -> Result<usize, String> {
    whole_usize(text, 1)
        .map_err(|range| format!("{range} (a member's call of the entry is one level deep)"))
}

/// `--max-instances`, `--chains`: at least one.
pub fn positive(text: &str) -> Result<usize, String> {
    whole_usize(text, 1)
}

/// `--threads`: from 1 to the most this machine allows.
pub fn threads(text: &str) -> Result<usize, String> {
    let threads = text
        .trim()
        .parse::<usize>()
        .map_err(|_| autobatch::check_threads(0).unwrap_err())?;
    autobatch::check_threads(threads).map(|()| threads)
}

/// `--warmup`: none or more, within what a chain may run.
pub fn warmup(text: &str) -> Result<usize, String> {
    whole_number(text, 0, autobatch_sample::MAX_ITERATIONS as u64).map(|n| n as usize)
}

/// `--draws`, `--pool-every`: at least one, within what a chain may run.
pub fn iterations(text: &str) -> Result<usize, String> {
    whole_number(text, 1, autobatch_sample::MAX_ITERATIONS as u64).map(|n| n as usize)
}

/// `--max-depth`: the deepest tree of a trajectory.
pub fn tree_depth(text: &str) -> Result<u32, String> {
    whole_number(text, 1, 30).map(|n| n as u32)
}

/// `--target-accept`: strictly between 0 and 1.
pub fn target_accept(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err("must be a number strictly between 0 and 1".into()),
    }
}

pub fn strategy(text: &str) -> Result<Strategy, String> {
    text.parse()
}

pub fn lanes(text: &str) -> Result<LaneMode, String> {
    text.parse()
}

pub fn block_choice(text: &str) -> Result<BlockChoice, String> {
    text.parse()
}

/// The short help of `--strategy` (`-h`): the names.
pub fn strategy_help() -> String {
    let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
    format!("How to execute the batch: {}", names.join(", "))
}

/// The long help of `--strategy` (`--help`): one line per strategy, from
/// the registry of executors.
pub fn strategy_long_help() -> String {
    let mut help = String::from("How to execute the batch:");
    for strategy in Strategy::ALL {
        help.push_str(&format!(
            "\n- {}: {}",
            strategy.name(),
            strategy.description()
        ));
    }
    help
}

/// The help of `--lanes`, naming the strategies that read it.
pub fn lanes_help() -> String {
    format!(
        "How inactive members are treated (by {}): mask, compact or auto",
        Strategy::reading(|o| o.lanes)
    )
}

/// The help of `--block-choice`, naming the strategies that read it.
pub fn block_choice_help() -> String {
    format!(
        "How the next block is picked (by {}): smallest-index or most-members",
        Strategy::reading(|o| o.block_choice)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_name_their_range_for_any_bad_text() {
        for text in ["-1", "0", "x", "", "1.5", "99999999999999999999999"] {
            let message = max_steps(text).unwrap_err();
            assert!(
                message.starts_with(&format!("must be a whole number from 1 to {}", u64::MAX)),
                "{text}: {message}"
            );
        }
        assert_eq!(seed("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            seed("-1").unwrap_err(),
            format!("must be a whole number from 0 to {}", u64::MAX)
        );
        assert_eq!(tree_depth("30"), Ok(30));
        assert!(tree_depth("31").unwrap_err().contains("from 1 to 30"));
        assert_eq!(warmup("0"), Ok(0));
        assert!(iterations("0").is_err());
        assert!(target_accept("-0.5").is_err());
    }
}
