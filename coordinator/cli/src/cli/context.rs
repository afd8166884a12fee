//! The CLI's context file: where `fedvol dev` leaves the URL of the federation it runs, so that
//! every later `fedvol` command in any terminal reaches it without `--nats` or an `export`.
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
//!
//! One context per run: each `fedvol dev` also writes its own file beside it, `dev.env.<pid>`
//! ([`run_path`]), and the newest run's is the default (`dev.env`). When a run ends it removes
//! its own file and, if the default was its, puts back the newest other run still going (or
//! removes the default when none is): an older run stays reachable all along with
//! `FEDVOL_CONTEXT=.../dev.env.<pid>`, and becomes the default again when the newer one ends.
//! A default whose `fedvol dev` is no longer running (killed) gives way to the newest live
//! run's file (a note says so); stale files are removed by the next `fedvol dev`.

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

/// The file of the run of `fedvol dev` with process id `pid`, beside `default`
/// (`dev.env.<pid>`).
pub fn run_path(default: &Path, pid: u32) -> PathBuf {
    let mut name = default.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{pid}"));
    default.with_file_name(name)
}

/// The run files beside `default` (module docs), read, newest first (by modification time).
fn runs(default: &Path) -> Vec<(std::time::SystemTime, Context)> {
    let (Some(dir), Some(name)) = (default.parent(), default.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let is_run = file
            .strip_prefix(&prefix)
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()));
        if !is_run {
            continue;
        }
        let p = e.path();
        let modified = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        if let Some(c) = std::fs::read_to_string(&p).ok().and_then(|t| parse(&p, &t)) {
            out.push((modified, c));
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.0));
    out
}

/// Whether the `fedvol dev` that wrote `c` still runs (a file without a pid counts as live).
fn live(c: &Context) -> bool {
    c.pid.is_none_or(alive)
}

/// The context of a running `fedvol dev`: the default file if its writer still runs, else the
/// newest run file whose writer does (a stale default gets a note on stderr).
pub fn current() -> Option<Context> {
    let p = path()?;
    let default = std::fs::read_to_string(&p).ok().and_then(|t| parse(&p, &t));
    match default {
        Some(c) if live(&c) => return Some(c),
        Some(c) => eprintln!(
            "note: ignoring {}: the `fedvol dev` that wrote it (pid {}) is no longer running",
            p.display(),
            c.pid.unwrap_or_default()
        ),
        None => {}
    }
    let newest = runs(&p).into_iter().map(|(_, c)| c).find(live)?;
    eprintln!("note: using {} (a `fedvol dev` still running)", newest.path.display());
    Some(newest)
}

/// `text` written whole to `p`, then renamed: a reader never sees half a file.
fn write_whole(p: &Path, text: &str) -> std::io::Result<()> {
    let mut name = p.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = p.with_file_name(name);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, p)
}

/// Where [`write`] put this run's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The default file (`dev.env`), now this run's.
    pub default: PathBuf,
    /// This run's own file (`dev.env.<pid>`), kept until the run ends.
    pub run: PathBuf,
}

/// Writes the context of this process's federation at `url`: its own run file, and the
/// default file (the newest run is the default). Run files of runs no longer going are removed.
///
/// Errors: no place for the file (no `$HOME`), or the directory/file cannot be written.
pub fn write(url: &str) -> std::io::Result<Written> {
    let p = path().ok_or_else(|| std::io::Error::other("neither FEDVOL_CONTEXT, XDG_RUNTIME_DIR nor HOME is set"))?;
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    for (_, c) in runs(&p) {
        if !live(&c) {
            let _ = std::fs::remove_file(&c.path);
        }
    }
    let pid = std::process::id();
    let text = format!(
        "# written by `fedvol dev` (pid {pid}); removed when it stops\nFEDVOL_NATS_URL={url}\nFEDVOL_DEV_PID={pid}\n"
    );
    let run = run_path(&p, pid);
    write_whole(&run, &text)?;
    write_whole(&p, &text)?;
    Ok(Written { default: p, run })
}

/// At the end of this process's run: removes its run file and, when the default file is this
/// process's, makes the newest other live run the default (or removes the default when there
/// is none). A default another run wrote since stays as it is.
pub fn release(w: &Written) {
    let _ = std::fs::remove_file(&w.run);
    let ours = std::fs::read_to_string(&w.default)
        .ok()
        .and_then(|t| parse(&w.default, &t))
        .is_some_and(|c| c.pid == Some(std::process::id()));
    if !ours {
        return;
    }
    let next = runs(&w.default).into_iter().map(|(_, c)| c).find(live);
    let restored = next
        .and_then(|c| std::fs::read_to_string(&c.path).ok())
        .map(|text| write_whole(&w.default, &text));
    if !matches!(restored, Some(Ok(()))) {
        let _ = std::fs::remove_file(&w.default);
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
    fn run_files_sit_beside_the_default() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("dev.env");
        assert_eq!(run_path(&p, 42), d.path().join("dev.env.42"));
        std::fs::write(run_path(&p, 42), "FEDVOL_NATS_URL=nats://a:1\nFEDVOL_DEV_PID=42\n").unwrap();
        std::fs::write(d.path().join("dev.env.42.7.tmp"), "FEDVOL_NATS_URL=nats://b:1\n").unwrap();
        std::fs::write(d.path().join("dev.envx.43"), "FEDVOL_NATS_URL=nats://c:1\n").unwrap();
        let r = runs(&p);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].1.url, "nats://a:1");
    }

    #[test]
    fn this_process_is_alive_and_a_free_pid_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX), "not a pid");
    }
}
