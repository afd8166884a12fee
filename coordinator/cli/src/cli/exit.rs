//! The exit statuses of every `fedvol` command (docs/design.md §4): 0 when a cluster was
//! chosen (or the command did what it was asked), 2 when nothing fits, 1 on bad input or an
//! error; 64 when the command line itself is wrong; 75 when clusters did not answer and
//! nothing was placed (ask again).

/// Exit status: a cluster was chosen / the files are valid.
pub const EXIT_OK: u8 = 0;

/// Exit status: bad input (unreadable or invalid files, bad flags).
pub const EXIT_BAD_INPUT: u8 = 1;

/// Exit status: the input is valid but no cluster can place the workflow.
pub const EXIT_NO_FIT: u8 = 2;

/// Exit status: the workflow was not placed because clusters did not answer (timed out,
/// unreachable, still restoring) and none that answered can place it (`clusters_unavailable`):
/// nothing was booked; running the same submit again may place it. sysexits(3)'s
/// `EX_TEMPFAIL`, so that 2 keeps meaning "nothing fits".
pub const EXIT_UNAVAILABLE: u8 = 75;

/// Exit status: the command line itself is wrong (unknown subcommand or flag, missing or bad
/// argument): sysexits(3)'s `EX_USAGE`, so that 2 means only "valid input, nothing fits".
pub const EXIT_USAGE: u8 = 64;

/// The exit status of a command line clap refused: 0 for `--help` and `--version`,
/// [`EXIT_USAGE`] for everything else.
pub fn usage_exit(e: &clap::Error) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => EXIT_OK,
        _ => EXIT_USAGE,
    }
}
