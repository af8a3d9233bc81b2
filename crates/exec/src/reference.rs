//! (being written)
use crate::*; pub fn run(_p: &Program, _e: &Env, _b: &Batch, _o: &RunOptions) -> RunOutput { unimplemented!() }
