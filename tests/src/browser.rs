//! A real browser for tests: Debian's `chromium` run headless, one process per page load,
//! each with its own throw-away profile, killed if it runs past a deadline.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one page load may take before the browser is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// A headless Chromium found on this machine.
pub struct Chromium {
    program: PathBuf,
    profiles: tempfile::TempDir,
    runs: std::cell::Cell<u32>,
}

impl Chromium {
    /// The `chromium` (or `chromium-browser`, or `$FEDVOL_CHROMIUM`) on `PATH`, or `None`.
    pub fn find() -> Option<Chromium> {
        let named = std::env::var_os("FEDVOL_CHROMIUM").map(PathBuf::from);
        let program = named
            .into_iter()
            .chain(["chromium", "chromium-browser"].map(PathBuf::from))
            .find(|p| {
                Command::new(p)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })?;
        Some(Chromium {
            program,
            profiles: tempfile::tempdir().expect("a directory for browser profiles"),
            runs: std::cell::Cell::new(0),
        })
    }

    fn command(&self, extra: &[&str], url: &str) -> Command {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let profile = self.profiles.path().join(format!("p{n}"));
        let mut cmd = Command::new(&self.program);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        cmd
    }

    /// The DOM of `url` once loaded (scripts run), as Chromium serializes it.
    pub fn dump_dom(&self, url: &str) -> String {
        let out = run(self.command(&["--dump-dom"], url));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts loading `url` and dumps its DOM once the page has been idle for `budget_ms` of
    /// virtual time: a page with an open event stream is dumped only after the stream ends,
    /// so whatever arrived on it is in the DOM. Join the handle for the DOM.
    pub fn dump_dom_after_streams(&self, url: &str, budget_ms: u64) -> std::thread::JoinHandle<String> {
        let budget = format!("--virtual-time-budget={budget_ms}");
        let cmd = self.command(&[&budget, "--dump-dom"], url);
        std::thread::spawn(move || String::from_utf8_lossy(&run(cmd).stdout).into_owned())
    }

    /// A PNG of `url` in a `width`×`height` window, saved at `path`.
    pub fn screenshot(&self, url: &str, path: &Path, width: u32, height: u32) {
        let shot = format!("--screenshot={}", path.display());
        let size = format!("--window-size={width},{height}");
        run(self.command(&[&shot, &size], url));
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        assert!(
            len > 1000,
            "chromium saved no screenshot of {url} at {}",
            path.display()
        );
    }
}

/// Runs `cmd` to its end within [`DEADLINE`]; panics with its stderr when it fails or hangs.
fn run(mut cmd: Command) -> Output {
    let label = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
    // Read stdout and stderr on threads, so a large DOM cannot fill a pipe and stall it.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut b);
        b
    });
    let end = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for chromium") {
            break s;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            let err = err_t.join().unwrap_or_default();
            panic!(
                "{label} did not finish within {DEADLINE:?}; stderr:\n{}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    assert!(
        status.success(),
        "{label} failed ({status}); stderr:\n{}",
        String::from_utf8_lossy(&stderr)
    );
    Output { status, stdout, stderr }
}

/// `GET url` (an `http://127.0.0.1:PORT/...` address) without a browser: the status code and
/// the body. For checks that need no script (a page's HTML as served).
///
/// Panics (test failure) when the server cannot be reached or answers something that is not
/// HTTP, within 10 s.
pub fn http_get(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http:// address");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = std::net::TcpStream::connect(host).unwrap_or_else(|e| panic!("cannot reach {url}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").expect("the request is sent");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("no answer from {url}: {e}"));
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer from {url}: {text:.200}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
