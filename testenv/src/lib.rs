//! What fedvol's tests need from the machine, found in one place, and the tests that could not
//! run for want of it, counted. A dev-dependency of every crate whose tests read third-party
//! inputs or need a program the repository does not hold; it depends on nothing.
//!
//! **Third-party inputs.** Some tests read files written by others, kept outside the
//! repository because they are other people's work: public Fuzzfiles, catalog templates and
//! their values, Kubernetes storage manifests (`real-inputs/`) and Fuzzball's public provisioner
//! reference (`reference/provisioner-schema.md`). They are found in one place
//! ([`third_party`]): the directory named by `FEDVOL_REAL_INPUTS`, else `../shared` beside the
//! clone when it holds `real-inputs/`. A test that needs them and finds neither is skipped
//! ([`real_inputs`], [`provisioner_reference`]); a `FEDVOL_REAL_INPUTS` that does not hold them fails the
//! test (it was asked for and is wrong).
//!
//! **Skips are counted.** A skipped test calls [`skip`]: one line on stderr (`SKIPPED <test>:
//! <why>`), and, when `FEDVOL_TEST_SKIPS` names a directory (`scripts/test` sets one), one file
//! in it, which `scripts/test` counts and names at the end of the run (`cargo test` hides the
//! output of passing tests, so a line alone would go unseen). When `FEDVOL_TEST_NO_SKIPS` is
//! set (`.ci/run`, which installs every program the tests use and refuses to run without the
//! third-party inputs), a skip fails the test instead.

#![warn(missing_docs)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the directory that holds `real-inputs/` and `reference/`.
pub const REAL_INPUTS_VAR: &str = "FEDVOL_REAL_INPUTS";
/// The variable naming the directory where each skipped test leaves a file.
pub const SKIPS_VAR: &str = "FEDVOL_TEST_SKIPS";
/// The variable that turns every skip into a failure (CI).
pub const NO_SKIPS_VAR: &str = "FEDVOL_TEST_NO_SKIPS";

/// Why a test was skipped, as `scripts/test` groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The third-party inputs ([`third_party`]): counted on one summary line.
    RealInputs,
    /// A program or a right of the machine (Chromium, Prometheus, mounting a tmpfs): each such
    /// test named with its reason.
    Tool,
}

impl Missing {
    /// The word `scripts/test` reads: `real-inputs` or `tool`.
    pub fn word(self) -> &'static str {
        match self {
            Missing::RealInputs => "real-inputs",
            Missing::Tool => "tool",
        }
    }
}

/// The running test's name, as `<test binary>::<test path>` (`observability::prometheus_...`,
/// `fedvol_formats::files::tests::...`): libtest runs each test on a thread named after it;
/// the binary's name loses cargo's `-<hash>`.
pub fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| match s.rsplit_once('-') {
            Some((name, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
            _ => s,
        })
        .unwrap_or_else(|| "?".to_string());
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(n) if n != "main" && !n.starts_with("tokio-runtime") => n.to_string(),
        _ => "(a test run outside libtest's named threads)".to_string(),
    };
    format!("{binary}::{test}")
}

/// True when `FEDVOL_TEST_NO_SKIPS` is set to anything but empty or `0`.
pub fn skips_forbidden() -> bool {
    std::env::var(NO_SKIPS_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Records that the running test is skipped because `why` (one line, no period needed): prints
/// `SKIPPED <test>: <why>` on stderr and leaves a file in `$FEDVOL_TEST_SKIPS` when set.
///
/// Panics (a test failure, as intended) when `FEDVOL_TEST_NO_SKIPS` is set: under CI nothing
/// may be skipped. The caller returns from the test right after.
pub fn skip(missing: Missing, why: &str) {
    let name = test_name();
    let why = why.replace(['\n', '\t'], " ");
    if skips_forbidden() {
        panic!(
            "{name} cannot run: {why}; {NO_SKIPS_VAR} is set (CI installs every program the tests use and \
             refuses to run without the third-party inputs), so this skip is a failure"
        );
    }
    eprintln!("SKIPPED {name}: {why}");
    if let Some(dir) = std::env::var_os(SKIPS_VAR).filter(|d| !d.is_empty()) {
        record(Path::new(&dir), missing, &name, &why);
    }
}

/// One file per skip (no two writers share a file): `<pid>-<n>.skip` holding
/// `<word>\t<test>\t<why>\n`.
fn record(dir: &Path, missing: Missing, name: &str, why: &str) {
    static N: AtomicU64 = AtomicU64::new(0);
    let file = dir.join(format!(
        "{}-{}.skip",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let line = format!("{}\t{name}\t{why}\n", missing.word());
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::File::create(&file))
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        // The skip still shows on stderr; the summary would undercount, so say so loudly.
        eprintln!("warning: cannot record the skip in {}: {e}", file.display());
    }
}

/// The workspace root (this crate's parent directory).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The directory holding the third-party inputs (`real-inputs/`, `reference/`):
/// `$FEDVOL_REAL_INPUTS` when set, else `../shared` beside the clone when it holds
/// `real-inputs/`, else `None`.
pub fn third_party() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(REAL_INPUTS_VAR).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let beside = workspace_root().join("../shared");
    beside.join("real-inputs").is_dir().then_some(beside)
}

/// The line a test skipped for want of the third-party inputs prints.
pub const NOT_FOUND: &str = "the real third-party inputs are not here (set FEDVOL_REAL_INPUTS to the directory holding \
                             real-inputs/ and reference/, or put that directory at ../shared beside the clone)";

/// `<third party>/<rel>`, or `None` after [`skip`] when there are no third-party inputs.
///
/// Panics (test failure) when the directory was found but has no `rel`: the inputs were asked
/// for (`FEDVOL_REAL_INPUTS`) or are beside the clone, and are incomplete.
fn under_third_party(rel: &str) -> Option<PathBuf> {
    let Some(root) = third_party() else {
        skip(Missing::RealInputs, NOT_FOUND);
        return None;
    };
    let p = root.join(rel);
    assert!(
        p.exists(),
        "{} has no {rel}: the third-party inputs there are incomplete ({REAL_INPUTS_VAR}, else ../shared \
         beside the clone, holds real-inputs/ and reference/)",
        root.display()
    );
    Some(p)
}

/// The real third-party inputs (`<third party>/real-inputs`), or `None` after [`skip`] when
/// there are none: call at the start of a test and return on `None`.
///
/// Panics (test failure) when the directory found has no `real-inputs/`.
pub fn real_inputs() -> Option<PathBuf> {
    under_third_party("real-inputs")
}

/// Fuzzball's public provisioner reference (`<third party>/reference/provisioner-schema.md`),
/// or `None` after [`skip`] when there are no third-party inputs.
///
/// Panics (test failure) when the directory found has no such file.
pub fn provisioner_reference() -> Option<PathBuf> {
    under_third_party("reference/provisioner-schema.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_name_is_the_binary_and_the_thread() {
        let name = test_name();
        assert!(
            name.ends_with("::tests::the_test_name_is_the_binary_and_the_thread"),
            "{name}"
        );
        assert!(name.starts_with("fedvol_testenv"), "{name}");
    }

    #[test]
    fn a_skip_leaves_one_file_naming_the_test_and_why() {
        let dir = std::env::temp_dir().join(format!("fedvol-testenv-{}", std::process::id()));
        record(&dir, Missing::Tool, "b::t", "no chromium");
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1);
        assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), "tool\tb::t\tno chromium\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
