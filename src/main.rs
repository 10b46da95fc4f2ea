use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = gkq::cli::Cli::parse();
    let default_level = match cli.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // The agent runs unattended: its logs are JSON lines for a log collector, and say what it
    // does at info level unless RUST_LOG says otherwise.
    if matches!(cli.command, gkq::cli::Command::Agent(_)) {
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            EnvFilter::new(if cli.verbose == 0 {
                "info"
            } else {
                default_level
            })
        });
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .json()
            .init();
    } else {
        subscriber
            .with_ansi(gkq::cli::output::stderr_color())
            .init();
    }
    let _ = rustls::crypto::ring::default_provider().install_default();

    let code = match gkq::cli::run(cli) {
        Ok(exit) => exit.code(),
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
