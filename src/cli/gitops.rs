//! The flags the commands that apply share: `--lock-timeout`, in the one duration grammar.

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
