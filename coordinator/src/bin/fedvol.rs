//! The `fedvol` command line (see `fedvol --help`).

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(fedvol_coordinator::cli::run())
}
