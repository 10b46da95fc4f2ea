use clap::Parser;

fn main() {
    let cli = gkq::cli::Cli::parse();
    let agent = matches!(cli.command, gkq::cli::Command::Agent(_));
    gkq::cli::output::init_tracing(cli.verbose, agent);
    if agent {
        // A log collector reads the agent's stderr as JSON lines: a panic is one too.
        std::panic::set_hook(Box::new(|panic| tracing::error!(%panic, "panicked")));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();

    let code = match gkq::cli::run(cli) {
        Ok(exit) => exit.code(),
        Err(e) if agent => {
            tracing::error!("{e:#}");
            1
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
