//! `gkq emulator serve`: the local GKE REST emulator as a process, for people and tests.

use clap::{Args, Subcommand};

use super::Exit;

#[derive(Debug, Subcommand)]
pub enum EmulatorCommand {
    /// Serve the GKE REST API (container v1) on 127.0.0.1; prints the URL on stdout when bound.
    Serve(ServeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Persist state in this directory (loaded on start).
    #[arg(long)]
    pub state_dir: Option<std::path::PathBuf>,
    /// Duration of each operation phase (PENDING, RUNNING), in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub phase_ms: u64,
    /// Reject TPU pools with flex-start and queued provisioning (GKE's answer until early 2026).
    #[arg(long)]
    pub reject_tpu_flex_start_queued: bool,
}

pub async fn serve(args: &ServeArgs) -> anyhow::Result<Exit> {
    let config = crate::emulator::EmulatorConfig {
        state_dir: args.state_dir.clone(),
        pending_ms: args.phase_ms,
        running_ms: args.phase_ms,
        reject_tpu_flex_start_queued: args.reject_tpu_flex_start_queued,
        ..Default::default()
    };
    crate::emulator::serve(
        std::net::SocketAddr::from(([127, 0, 0, 1], args.port)),
        config,
    )
    .await?;
    Ok(Exit::Ok)
}
