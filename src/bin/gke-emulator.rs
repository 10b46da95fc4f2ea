//! `gke-emulator`: the local GKE REST emulator as a process, for the Python conformance suite and
//! for people. Prints `gke-emulator listening on http://127.0.0.1:PORT/` on stdout once bound.
//!
//! ```text
//! gke-emulator [--port N] [--state-dir DIR] [--phase-ms MS] [--reject-tpu-flex-start-queued]
//! ```

use clap::Parser;

#[derive(Parser, Debug)]
#[command(version, about = "Local emulator of the GKE REST API (container v1)")]
struct Args {
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Persist state in this directory.
    #[arg(long)]
    state_dir: Option<std::path::PathBuf>,
    /// Duration of each operation phase (PENDING, RUNNING), in milliseconds.
    #[arg(long, default_value_t = 200)]
    phase_ms: u64,
    /// Reject TPU pools with flex-start and queued provisioning (GKE's answer until early 2026).
    #[arg(long)]
    reject_tpu_flex_start_queued: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let config = gkq::emulator::EmulatorConfig {
        state_dir: args.state_dir,
        pending_ms: args.phase_ms,
        running_ms: args.phase_ms,
        reject_tpu_flex_start_queued: args.reject_tpu_flex_start_queued,
        ..Default::default()
    };
    gkq::emulator::serve(
        std::net::SocketAddr::from(([127, 0, 0, 1], args.port)),
        config,
    )
    .await
}
