//! The `fedvol` command line (see `fedvol --help`).

fn main() -> std::process::ExitCode {
    restore_sigpipe();
    std::process::ExitCode::from(fedvol_cli::commands::run())
}

/// `fedvol decisions list | head -3` must end quietly when `head` exits, as every Unix filter
/// does, instead of panicking on the closed pipe: the Rust runtime ignores SIGPIPE, so its
/// default action (end the process) is put back before anything is printed.
fn restore_sigpipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: called first thing in main, before any other thread exists; SIG_DFL installs no
    // handler code.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}
