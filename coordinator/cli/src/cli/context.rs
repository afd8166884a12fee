//! The CLI's context file: where `fedvol dev` leaves the URL of the federation it runs, so that
//! every later `fedvol` command in any terminal reaches it without `--nats` or an `export`
//!.
//!
//! The file is `$FEDVOL_CONTEXT` when set, else `$XDG_RUNTIME_DIR/fedvol/dev.env`, else
//! `~/.config/fedvol/dev.env`. It is shell syntax, so it can also be sourced:
//!
//! ```text
//! # written by `fedvol dev` (pid 4242); removed when it stops
//! FEDVOL_NATS_URL=nats://127.0.0.1:39113
//! FEDVOL_DEV_PID=4242
//! ```
//!
//! Precedence: `--nats`, then `FEDVOL_NATS_URL`, then this file, then `nats://127.0.0.1:4222`.
//! A file whose `fedvol dev` is no longer running is ignored (a note says so), and removed by
//! the next `fedvol dev`.

use std::path::{Path, PathBuf};

/// The URL a `fedvol dev` left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The file it was read from.
    pub path: PathBuf,
    /// `FEDVOL_NATS_URL`.
    pub url: String,
    /// The `fedvol dev` process that wrote it.
    pub pid: Option<u32>,
}

/// The context file's path (module docs), or `None` when neither `$FEDVOL_CONTEXT`,
/// `$XDG_RUNTIME_DIR` nor `$HOME` is set.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = var("FEDVOL_CONTEXT") {
        return Some(p);
    }
    if let Some(d) = var("XDG_RUNTIME_DIR") {
        return Some(d.join("fedvol").join("dev.env"));
    }
    var("HOME").map(|h| h.join(".config").join("fedvol").join("dev.env"))
}

/// Parses the file's text: `KEY=value` lines (`#` comments, blank lines and other keys
/// ignored). `None` when it names no URL.
pub fn parse(path: &Path, text: &str) -> Option<Context> {
    let mut url = None;
    let mut pid = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim().trim_matches('"');
            match k.trim() {
                "FEDVOL_NATS_URL" if !v.is_empty() => url = Some(v.to_string()),
                "FEDVOL_DEV_PID" => pid = v.parse().ok(),
                _ => {}
            }
        }
    }
    url.map(|url| Context {
        path: path.to_path_buf(),
        url,
        pid,
    })
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    // EPERM: it exists, run by someone else.
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// The context of a running `fedvol dev`, if the file exists and its writer still runs; a stale
/// file gets a note on stderr and is ignored.
pub fn current() -> Option<Context> {
    let p = path()?;
    let text = std::fs::read_to_string(&p).ok()?;
    let c = parse(&p, &text)?;
    match c.pid {
        Some(pid) if !alive(pid) => {
            eprintln!(
                "note: ignoring {}: the `fedvol dev` that wrote it (pid {pid}) is no longer running",
                p.display()
            );
            None
        }
        _ => Some(c),
    }
}

/// Writes the context of this process's federation at `url`.
///
/// Errors: no place for the file (no `$HOME`), or the directory/file cannot be written.
pub fn write(url: &str) -> std::io::Result<PathBuf> {
    let p = path().ok_or_else(|| std::io::Error::other("neither FEDVOL_CONTEXT, XDG_RUNTIME_DIR nor HOME is set"))?;
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let pid = std::process::id();
    let text = format!(
        "# written by `fedvol dev` (pid {pid}); removed when it stops\nFEDVOL_NATS_URL={url}\nFEDVOL_DEV_PID={pid}\n"
    );
    // Written whole, then renamed: a reader never sees half a file.
    let tmp = p.with_extension(format!("env.{pid}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &p)?;
    Ok(p)
}

/// Removes the file at `path` if it is still this process's (another `fedvol dev` started
/// since keeps its own).
pub fn remove_if_ours(path: &Path) {
    let ours = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| parse(path, &t))
        .is_some_and(|c| c.pid == Some(std::process::id()));
    if ours {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_read_as_shell_assignments() {
        let p = Path::new("/x/dev.env");
        let c = parse(
            p,
            "# c\n\nFEDVOL_NATS_URL=nats://127.0.0.1:5\nFEDVOL_DEV_PID=7\nOTHER=1\n",
        )
        .unwrap();
        assert_eq!(c.url, "nats://127.0.0.1:5");
        assert_eq!(c.pid, Some(7));
        assert_eq!(parse(p, "FEDVOL_NATS_URL=\"nats://h:1\"").unwrap().url, "nats://h:1");
        assert!(parse(p, "# nothing\nFEDVOL_NATS_URL=\n").is_none());
    }

    #[test]
    fn this_process_is_alive_and_a_free_pid_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX), "not a pid");
    }
}
