//! The flags the commands that apply share: `--lock-timeout` and `--submit-wait`, in the one
//! duration grammar.

use std::time::Duration;

use clap::Args;

use crate::vocab::duration;

/// `--lock-timeout`, shared by the commands that apply.
#[derive(Debug, Args, Clone, Default)]
pub struct LockArgs {
    /// How long to wait when another apply holds the cluster's lock (`30s`, `10m`, `1h30m`); 0
    /// fails at once, naming the holder (on the local target after waiting out holds of a moment).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration::parse_flag)]
    pub lock_timeout: Duration,
}

/// `--submit-wait`, for the commands that submit jobs (apply, watch --apply, the agent).
#[derive(Debug, Args, Clone)]
pub struct SubmitArgs {
    /// After creating each job Kueue queues, wait this long at most for Kueue's decision on it
    /// (quota reserved, or why not) before creating the next, so that Kueue sees them one after
    /// another as the plan predicted (`10s`, `2m`). When the time runs out the next job is
    /// created anyway and the output says the plan's prediction may not hold from there on.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::parse_flag)]
    pub submit_wait: Duration,
}
