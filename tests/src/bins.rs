//! Locating the workspace's binaries (`fedvol-agent`, `fedvol`, `fedvol-example-provisioner`)
//! from a test.
//!
//! `cargo test --workspace` builds a package's binaries only for that package's own integration
//! tests, so a binary of `fedvol-agent` is not guaranteed to exist (or to be current) when these
//! tests run, even though `fedvol-tests` depends on the agent's library. [`bin_path`] therefore
//! finds the directory cargo builds into and runs `cargo build --bin <name>` there once per test
//! process (a no-op when the binary is up to date; cargo serialises concurrent builds), so the
//! tests always run the code they were compiled with. `cargo build --workspace` beforehand makes
//! that step instantaneous.
//!
//! - Directory: `$FEDVOL_BIN_DIR` when set (used as is, nothing is built: for prebuilt or
//!   installed binaries); otherwise the profile directory holding the running test executable
//!   (`<target>/<profile>/deps/<test>` → `<target>/<profile>`, which honours `CARGO_TARGET_DIR`
//!   and `--release`) or the running binary of this package (`cargo run --release --bin
//!   fedvol-bench`: `<target>/<profile>/fedvol-bench` → `<target>/<profile>`, recognised by the
//!   `deps/` and `.fingerprint/` cargo keeps beside it); otherwise `$CARGO_TARGET_DIR/debug` or
//!   `<workspace>/target/debug`.
//! - Building: skipped when `FEDVOL_TEST_NO_BUILD` is set; cargo is `$CARGO` or `cargo`.
//! - Tools run by hand (`fedvol-burst`) call [`use_given_dir`] first: their `--bin-dir` or their
//!   own executable's directory, used as is; nothing is ever built.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The workspace root, where the shipped files (`deploy/`) are read: `$FEDVOL_WORKSPACE` when
/// set (binaries run from another copy of the tree, as `scripts/device-bench run` does on a
/// machine where the checkout lies elsewhere), otherwise the parent of this crate's directory
/// as it was built.
pub fn workspace_root() -> PathBuf {
    if let Some(root) = std::env::var_os("FEDVOL_WORKSPACE") {
        return PathBuf::from(root);
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The directory a tool (`fedvol-burst`) was given: its binaries are taken from there, as they
/// are, and nothing is built.
static GIVEN_DIR: OnceLock<PathBuf> = OnceLock::new();

/// A binary a tool needs is not in the directory it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name} not found in {dir}: pass --bin-dir with the directory of the workspace's binaries (e.g. target/release after `cargo build --release --workspace`)"
)]
pub struct MissingBinary {
    /// The binary's name.
    pub name: String,
    /// The directory looked in.
    pub dir: String,
}

/// For a tool run by hand (`fedvol-burst`): from now on [`bin_path`] takes every binary from
/// `dir` (the tool's `--bin-dir`, or the directory of its own executable, where cargo puts the
/// workspace's binaries: `target/<profile>/`) and never runs cargo, so a tool runs the binaries
/// it is given and writes nothing into a checkout. Checks first that each of `needed` is there.
///
/// Errors: [`MissingBinary`], naming the first binary of `needed` missing from `dir`.
pub fn use_given_dir(dir: PathBuf, needed: &[&str]) -> Result<(), MissingBinary> {
    for name in needed {
        if !dir.join(name).is_file() {
            return Err(MissingBinary {
                name: (*name).to_string(),
                dir: dir.display().to_string(),
            });
        }
    }
    // A second call keeps the first directory: a tool chooses once, at start-up.
    let _ = GIVEN_DIR.set(dir);
    Ok(())
}

/// The directory of the running executable (a tool's default `--bin-dir`).
pub fn own_dir() -> Option<PathBuf> {
    std::env::current_exe().ok()?.parent().map(Path::to_path_buf)
}

/// The directory holding the workspace's binaries (see the module docs for the order tried).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = GIVEN_DIR.get() {
        return d.clone();
    }
    if let Some(d) = std::env::var_os("FEDVOL_BIN_DIR") {
        return PathBuf::from(d);
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(parent) = exe.parent()
    {
        // A test executable: `<target>/<profile>/deps/<test>`.
        if parent.file_name().is_some_and(|n| n == "deps")
            && let Some(profile) = parent.parent()
        {
            return profile.to_path_buf();
        }
        // A binary of this package (`fedvol-bench`, `fedvol-soak`) run by `cargo run`:
        // `<target>/<profile>/<bin>`, next to that profile's `deps/` and `.fingerprint/`.
        if parent.join("deps").is_dir() && parent.join(".fingerprint").is_dir() {
            return parent.to_path_buf();
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("debug")
}

/// The path of workspace binary `name` (e.g. `"fedvol-agent"`), built first if needed.
///
/// Panics (test failure) when the build fails (with cargo's output) or the binary is still
/// missing, saying how to build it.
pub fn bin_path(name: &str) -> PathBuf {
    let dir = bin_dir();
    let explicit = GIVEN_DIR.get().is_some() || std::env::var_os("FEDVOL_BIN_DIR").is_some();
    if !explicit && std::env::var_os("FEDVOL_TEST_NO_BUILD").is_none() {
        ensure_built(name, &dir);
    }
    let path = dir.join(name);
    if !path.is_file() {
        panic!(
            "binary {name} not found at {}: build it with `cargo build --workspace` (or point FEDVOL_BIN_DIR \
             at a directory holding it)",
            path.display()
        );
    }
    path
}

/// Runs `cargo build --workspace --bin <name>` for the profile of `dir`, once per process.
fn ensure_built(name: &str, dir: &Path) {
    static BUILT: OnceLock<Mutex<HashMap<String, Result<(), String>>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let outcome = built.entry(name.to_string()).or_insert_with(|| build(name, dir));
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// True for the variables cargo sets when compiling or running a crate (as opposed to the user's
/// own cargo configuration such as `CARGO_HOME` or `CARGO_PROFILE_*`).
fn set_by_cargo_for_crates(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_BIN_")
        || matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

fn build(name: &str, dir: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--quiet", "--workspace", "--bin", name]);
    // Cargo gives a test process the variables it gives crates (CARGO_MANIFEST_DIR,
    // CARGO_PKG_*...). Some build scripts watch them (ring: CARGO_MANIFEST_DIR), so passing them
    // on would make this build and the next `cargo test` rebuild each other's dependencies.
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(set_by_cargo_for_crates) {
            cmd.env_remove(&key);
        }
    }
    // `<target>/<profile>`: build into the same target directory and profile.
    if let (Some(profile), Some(target)) = (dir.file_name().and_then(|p| p.to_str()), dir.parent()) {
        match profile {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run cargo to build {name}: {e}; build it with `cargo build --workspace`"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build --workspace --bin {name}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
