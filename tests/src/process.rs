//! A child process owned by a test: its stdout and stderr go to a log file the test can read,
//! and it is killed (SIGKILL) when dropped, so a failing test never leaves processes behind.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running (or finished) child process with its output captured in a log file.
#[derive(Debug)]
pub struct Spawned {
    child: Child,
    label: String,
    log: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Spawned {
    /// Starts `cmd` with stdin closed and stdout+stderr appended to a fresh log file, removed
    /// with the process, or kept under `$FEDVOL_TEST_KEEP_LOGS` when that names a directory
    /// (each start its own `<program>-XXXXXX/output.log`: a restarted daemon's earlier runs too),
    /// to read after a failed fault run.
    ///
    /// Panics (test failure) when the program cannot be started, naming it.
    /// A command that talks to a shipped test server logs in as its role's NATS user first
    /// ([`crate::shipped::login`]).
    pub fn start(mut cmd: Command) -> Spawned {
        crate::shipped::login(&mut cmd);
        let label = format!("{cmd:?}");
        let (dir, log) = log_dir(&cmd);
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .expect("the process log file");
        let err = out.try_clone().expect("a second handle on the process log");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
        Spawned {
            child,
            label,
            log,
            _dir: dir,
        }
    }

    /// Starts the workspace binary `name` (see [`crate::bin_path`]) with `args`.
    pub fn bin<S: AsRef<OsStr>>(name: &str, args: impl IntoIterator<Item = S>) -> Spawned {
        let mut cmd = Command::new(crate::bin_path(name));
        cmd.args(args);
        Spawned::start(cmd)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where its output goes.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything it printed so far (lossy UTF-8).
    pub fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// How many lines of its output contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    /// Its exit status, if it has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits (asynchronously) until its output contains `needle`.
    ///
    /// Panics with the whole log when the process exits first or `timeout` passes.
    pub async fn wait_for_log(&mut self, needle: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            if self.log().contains(needle) {
                return;
            }
            if let Some(status) = self.try_status() {
                panic!(
                    "{} exited ({status}) before printing {needle:?}; its output:\n{}",
                    self.label,
                    self.log()
                );
            }
            if Instant::now() >= end {
                panic!(
                    "{} did not print {needle:?} within {timeout:?}; its output:\n{}",
                    self.label,
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `signal` to the process (ignored when it has already exited).
    pub fn signal(&self, signal: Signal) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// `kill -9` and reap it (a crash, as far as the process is concerned).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits up to `grace` for it to exit, then SIGKILL. Returns the exit status
    /// when it exited on its own within the grace period.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.try_status() {
            return Some(s);
        }
        self.signal(Signal::SIGTERM);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Some(s) = self.try_status() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        None
    }
}

/// Where a process's log goes: a directory removed with the process, or one kept under
/// `$FEDVOL_TEST_KEEP_LOGS`.
fn log_dir(cmd: &Command) -> (Option<tempfile::TempDir>, PathBuf) {
    let program = Path::new(cmd.get_program())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match std::env::var_os("FEDVOL_TEST_KEEP_LOGS") {
        Some(keep) if !keep.is_empty() => {
            std::fs::create_dir_all(&keep).expect("the directory $FEDVOL_TEST_KEEP_LOGS");
            let dir = tempfile::Builder::new()
                .prefix(&format!("{program}-"))
                .tempdir_in(&keep)
                .expect("a log directory under $FEDVOL_TEST_KEEP_LOGS")
                .keep();
            let log = dir.join("output.log");
            (None, log)
        }
        _ => {
            let dir = tempfile::tempdir().expect("a temporary directory for the process log");
            let log = dir.path().join("output.log");
            (Some(dir), log)
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            self.kill();
        }
    }
}
