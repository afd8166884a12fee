//! What a job runs, carried with the workflow: the Fuzzfile job's `script`, or its `command`
//! and `args`, with its `env` and `cwd`, as one POSIX shell script in the workflow's
//! annotation `fedvol.io/job-script.<job>`. The funnel never reads it; an agent that submits
//! jobs to its resource manager (Slurm's `sbatch`) runs it.
//!
//! The script travels as an annotation so that requests and stored decisions of earlier
//! releases decode unchanged and the funnel's model keeps its shape.

use std::collections::BTreeMap;

/// The prefix of a job's script annotation; the job's name follows it.
pub const SCRIPT_ANNOTATION_PREFIX: &str = "fedvol.io/job-script.";

/// The annotation key holding job `job`'s script.
pub fn script_key(job: &str) -> String {
    format!("{SCRIPT_ANNOTATION_PREFIX}{job}")
}

/// The script of job `job` in `annotations`, if the workflow gave one.
pub fn script_of<'a>(annotations: &'a BTreeMap<String, String>, job: &str) -> Option<&'a str> {
    annotations.get(&script_key(job)).map(String::as_str)
}

/// The environment variable a job's mount of volume `key` is exported as on a cluster that
/// runs jobs: `FEDVOL_VOLUME_` and the key in upper case, every character other than an ASCII
/// letter or digit written `_`.
pub fn volume_env(key: &str) -> String {
    let name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("FEDVOL_VOLUME_{name}")
}

/// The first two of `keys` (volume keys, in workflow order) whose [`volume_env`] variables are
/// the same (`data-1` and `data_1` are both `FEDVOL_VOLUME_DATA_1`: one of them would have no
/// variable), with that variable.
pub fn colliding_volume_env<'a>(keys: impl IntoIterator<Item = &'a str>) -> Option<(&'a str, &'a str, String)> {
    let mut seen: BTreeMap<String, &'a str> = BTreeMap::new();
    for k in keys {
        let var = volume_env(k);
        if let Some(first) = seen.get(&var) {
            return Some((first, k, var));
        }
        seen.insert(var, k);
    }
    None
}

/// `s` quoted for a POSIX shell: inside single quotes, each `'` written `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script a Fuzzfile job runs: `cd` to `cwd`, `export` each `NAME=value` of `env`, then the
/// `script` text as written, or `command` followed by `args` as one quoted command line.
/// `None` when the job gives neither a script nor a command.
pub fn compose(
    command: &[String],
    args: &[String],
    script: Option<&str>,
    env: &[(String, String)],
    cwd: Option<&str>,
) -> Option<String> {
    if script.is_none() && command.is_empty() && args.is_empty() {
        return None;
    }
    let mut out = String::new();
    if let Some(d) = cwd {
        out.push_str(&format!("cd {} || exit 1\n", shell_quote(d)));
    }
    for (k, v) in env {
        out.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    match script {
        Some(s) => {
            out.push_str(s);
            if !s.ends_with('\n') {
                out.push('\n');
            }
        }
        None => {
            let words: Vec<String> = command.iter().chain(args).map(|w| shell_quote(w)).collect();
            out.push_str(&words.join(" "));
            out.push('\n');
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_args_env_and_cwd_make_one_script() {
        let s = compose(
            &["/bin/sh".into(), "-c".into()],
            &["echo 'hi' $X".into()],
            None,
            &[("X".into(), "a b".into())],
            Some("/tmp"),
        )
        .unwrap();
        assert_eq!(
            s,
            "cd '/tmp' || exit 1\nexport X='a b'\n'/bin/sh' '-c' 'echo '\\''hi'\\'' $X'\n"
        );
        assert_eq!(compose(&[], &[], Some("sleep 2"), &[], None).unwrap(), "sleep 2\n");
        assert_eq!(compose(&[], &[], None, &[], None), None);
    }
}
