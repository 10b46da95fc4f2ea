//! `gke-emulator`: the same as `gkq emulator serve`, as its own small binary for the Python
//! conformance suite. Prints `gke-emulator listening on http://127.0.0.1:PORT/` once bound.

use clap::Parser;

#[derive(Parser, Debug)]
#[command(version, about = "Local emulator of the GKE REST API (container v1)")]
struct Cli {
    #[command(flatten)]
    serve: gkq::cli::emulator::ServeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    gkq::cli::emulator::serve(&Cli::parse().serve).await?;
    Ok(())
}
