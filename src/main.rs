fn main() {
    tune_allocator();
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

/// mimalloc rather than glibc's malloc: a plan reads, compares and drops tens of thousands of
/// small JSON values, and under glibc allocating and freeing them was a quarter of an unchanged
/// plan's CPU (BENCHMARKS.md, tenth round).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`, numbered as in the `mi_option_e` enum of the mimalloc.h
/// that libmimalloc-sys builds (v3); the assertion stops a build whose numbering moved.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const _: () = assert!(libmimalloc_sys::_mi_option_last == 47);

/// Memory gkq frees goes back to the system at once: by default mimalloc keeps freed pages for a
/// second or more, and a plan reads a list, compares it and drops it, then reads the next: a
/// 1,000-object plan's peak RSS was 50-58 MB with mimalloc's delay against 45 MB without, at the
/// same speed (BENCHMARKS.md, tenth round). `MIMALLOC_PURGE_DELAY` in the environment, mimalloc's
/// own setting, still wins.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mi_option_set writes one of mimalloc's option values; it runs first in main, before
    // any thread of ours exists (the function is not thread safe).
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}
