//! Volume names as directory names: a driver that creates `<base>/<name>` must never be steered
//! outside `<base>` by the name it was given.

use super::DriverError;

/// Longest accepted volume name, in bytes (a Kubernetes object name's limit, below every
/// common file system's 255-byte component limit).
pub const MAX_NAME_LEN: usize = 253;

/// Checks that `name` is one safe path component: 1..=[`MAX_NAME_LEN`] bytes of ASCII letters,
/// digits, `.`, `-` and `_`, not starting with `.` (so never `.`, `..` or a hidden file) nor
/// with `-` (never mistaken for an option). Funnel names (`pvc-` + 16 hex digits) always pass.
///
/// Errors: [`DriverError::Refused`] naming the rule the name breaks (retrying cannot help).
pub fn check_volume_name(name: &str) -> Result<(), DriverError> {
    let refuse = |why: &str| Err(DriverError::Refused(format!("volume name {name:?} {why}")));
    if name.is_empty() {
        return refuse("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return refuse(&format!("is longer than {MAX_NAME_LEN} bytes"));
    }
    if name.starts_with('.') {
        return refuse("starts with '.' (names like '.' and '..' are not directories of their own)");
    }
    if name.starts_with('-') {
        return refuse("starts with '-'");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        return refuse(&format!(
            "contains {c:?}: only ASCII letters, digits, '.', '-' and '_' make a single safe path component"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn funnel_names_pass() {
        for n in ["pvc-0123456789abcdef", "scratch", "data_v1.2", "A-b"] {
            assert_eq!(check_volume_name(n), Ok(()), "{n}");
        }
    }

    #[test]
    fn names_that_leave_the_base_are_refused() {
        for n in [
            "", ".", "..", "../etc", "a/b", "/abs", ".hidden", "-rf", "a\0b", "a b", "é", "a\\b",
        ] {
            match check_volume_name(n) {
                Err(DriverError::Refused(m)) => assert!(m.contains("volume name"), "{m}"),
                other => panic!("{n:?} gave {other:?}"),
            }
        }
        assert!(check_volume_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
        assert!(check_volume_name(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
    }
}
