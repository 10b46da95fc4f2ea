fn main() {
    one_malloc_arena();
    let cli = gkq::cli::Cli::parse_with_help();
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

/// One malloc arena for the whole process. glibc gives each thread that allocates its own arena,
/// and gkq's runtime threads hand objects to each other (a list parsed on one, judged and
/// dropped on another), so memory one thread frees is not reused by the next and a plan's peak
/// grows: 12 MB of 157 MB for a plan of 5,000 changed objects (BENCHMARKS.md). gkq's threads
/// wait on the network far more than they allocate, so sharing one arena costs no time there.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    // SAFETY: mallopt sets a parameter of the allocator and touches no memory of ours; it runs
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}
