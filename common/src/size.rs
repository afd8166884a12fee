//! Exact byte sizes: Fuzzball sizes (`10GB`, `1TiB`, `512MIB`, `0.5GiB`) and Kubernetes
//! quantities (`10Gi`, `800E`, `1e3`, `1500m`), held as `u128` bytes, never as floats.
//!
//! Rules:
//! - A suffix ending in `B`/`b` is a Fuzzball unit, read case-insensitively: `B`, `KB`..`EB`
//!   (powers of 1000) and `KiB`..`EiB` (powers of 1024).
//! - Otherwise the suffix is a Kubernetes quantity suffix, case-sensitive: `Ki`..`Ei` (1024),
//!   `k`, `M`, `G`, `T`, `P`, `E` (1000), `m` (1/1000), or a decimal exponent `e3`/`E3`.
//! - No suffix means bytes. Decimals are allowed; a fractional byte count is rounded **up**, as
//!   Kubernetes does for quantities.

use std::fmt;
use std::str::FromStr;

/// A size in bytes. Serialized as a JSON integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ByteSize(pub u128);

/// Why a size string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Nothing to parse.
    #[error("empty size; expected a number with an optional unit such as 10GB, 1TiB or 10Gi")]
    Empty,
    /// The text does not start with a number.
    #[error("`{0}` is not a size; expected a number with an optional unit such as 10GB, 1TiB or 10Gi")]
    NotANumber(String),
    /// Negative sizes make no sense.
    #[error("`{0}` is negative; sizes must be zero or more")]
    Negative(String),
    /// The unit is not one fedvol knows.
    #[error(
        "unknown unit `{unit}` in `{text}`; expected B, KB, MB, GB, TB, PB, EB, KiB..EiB (any case) or Kubernetes Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E, m"
    )]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit part.
        unit: String,
    },
    /// Larger than 2^128 bytes.
    #[error("`{0}` is too large")]
    TooLarge(String),
}

/// Multiplier as a fraction `num / den`.
fn unit_factor(unit: &str) -> Option<(u128, u128)> {
    const K: u128 = 1000;
    const KI: u128 = 1024;
    if unit.is_empty() {
        return Some((1, 1));
    }
    if unit.ends_with(['b', 'B']) {
        let f = match unit.to_ascii_lowercase().as_str() {
            "b" => 1,
            "kb" => K,
            "mb" => K.pow(2),
            "gb" => K.pow(3),
            "tb" => K.pow(4),
            "pb" => K.pow(5),
            "eb" => K.pow(6),
            "kib" => KI,
            "mib" => KI.pow(2),
            "gib" => KI.pow(3),
            "tib" => KI.pow(4),
            "pib" => KI.pow(5),
            "eib" => KI.pow(6),
            _ => return None,
        };
        return Some((f, 1));
    }
    let f = match unit {
        "Ki" => KI,
        "Mi" => KI.pow(2),
        "Gi" => KI.pow(3),
        "Ti" => KI.pow(4),
        "Pi" => KI.pow(5),
        "Ei" => KI.pow(6),
        "k" => K,
        "M" => K.pow(2),
        "G" => K.pow(3),
        "T" => K.pow(4),
        "P" => K.pow(5),
        "E" => K.pow(6),
        "m" => return Some((1, 1000)),
        _ => {
            // decimal exponent: e3, E+3, e-2
            let rest = unit.strip_prefix(['e', 'E'])?;
            let exp: i32 = rest.parse().ok()?;
            if !(-30..=38).contains(&exp) {
                return None;
            }
            return Some(if exp >= 0 {
                (10u128.pow(exp as u32), 1)
            } else {
                (1, 10u128.pow((-exp) as u32))
            });
        }
    };
    Some((f, 1))
}

impl ByteSize {
    /// Parses a Fuzzball size or Kubernetes quantity (see the module docs for the rules).
    ///
    /// Errors: [`SizeError`] naming the text and what was expected.
    pub fn parse(text: &str) -> Result<ByteSize, SizeError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(SizeError::Empty);
        }
        let (sign, body) = match t.as_bytes()[0] {
            b'-' => (-1, &t[1..]),
            b'+' => (1, &t[1..]),
            _ => (1, t),
        };
        let num_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (num, unit) = body.split_at(num_end);
        let unit = unit.trim_start();
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(SizeError::NotANumber(text.to_string()));
        }
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        let digits = format!("{int_part}{frac_part}");
        let mantissa: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| SizeError::TooLarge(text.to_string()))?
        };
        if sign < 0 && mantissa != 0 {
            return Err(SizeError::Negative(text.to_string()));
        }
        let (num_f, den_f) = unit_factor(unit).ok_or_else(|| SizeError::UnknownUnit {
            text: text.to_string(),
            unit: unit.to_string(),
        })?;
        let frac_den = 10u128
            .checked_pow(frac_part.len() as u32)
            .ok_or_else(|| SizeError::TooLarge(text.to_string()))?;
        let top = mantissa
            .checked_mul(num_f)
            .ok_or_else(|| SizeError::TooLarge(text.to_string()))?;
        let bottom = frac_den
            .checked_mul(den_f)
            .ok_or_else(|| SizeError::TooLarge(text.to_string()))?;
        Ok(ByteSize(top.div_ceil(bottom)))
    }

    /// The size in bytes.
    pub fn bytes(self) -> u128 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = SizeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ByteSize::parse(s)
    }
}

impl fmt::Display for ByteSize {
    /// The shortest exact form: `10GiB`, `10GB`, or plain bytes `1234B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v == 0 {
            return write!(f, "0B");
        }
        const BIN: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        const DEC: [&str; 6] = ["KB", "MB", "GB", "TB", "PB", "EB"];
        for i in (0..6).rev() {
            let b = 1024u128.pow(i as u32 + 1);
            if v.is_multiple_of(b) {
                return write!(f, "{}{}", v / b, BIN[i]);
            }
            let d = 1000u128.pow(i as u32 + 1);
            if v.is_multiple_of(d) {
                return write!(f, "{}{}", v / d, DEC[i]);
            }
        }
        write!(f, "{v}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> u128 {
        ByteSize::parse(s).unwrap().0
    }

    #[test]
    fn fuzzball_units() {
        assert_eq!(b("10GB"), 10_000_000_000);
        assert_eq!(b("1TiB"), 1 << 40);
        assert_eq!(b("512MIB"), 512 << 20);
        assert_eq!(b("0.5GiB"), 1 << 29);
        assert_eq!(b("32768MiB"), 32 << 30);
        assert_eq!(b("128MB"), 128_000_000);
        assert_eq!(b("1gb"), 1_000_000_000);
        assert_eq!(b("100"), 100);
    }

    #[test]
    fn kubernetes_quantities() {
        assert_eq!(b("10Gi"), 10 << 30);
        assert_eq!(b("800E"), 800 * 10u128.pow(18));
        assert_eq!(b("1e3"), 1000);
        assert_eq!(b("1E3"), 1000);
        assert_eq!(b("1500m"), 2); // 1.5 bytes rounds up
        assert_eq!(b("4Gi"), 4 << 30);
        assert_eq!(b("1.5Gi"), 3 << 29);
        assert_eq!(b("100k"), 100_000);
    }

    #[test]
    fn refusals() {
        assert!(matches!(ByteSize::parse(""), Err(SizeError::Empty)));
        assert!(matches!(ByteSize::parse("GB"), Err(SizeError::NotANumber(_))));
        assert!(matches!(ByteSize::parse("-1Gi"), Err(SizeError::Negative(_))));
        assert!(matches!(ByteSize::parse("10gi"), Err(SizeError::UnknownUnit { .. })));
        assert!(matches!(ByteSize::parse("10XB"), Err(SizeError::UnknownUnit { .. })));
        assert!(matches!(ByteSize::parse("1.2.3G"), Err(SizeError::NotANumber(_))));
        assert!(ByteSize::parse("99999999999999999999999999999999999999999E").is_err());
    }

    #[test]
    fn display_round_trips() {
        for s in ["10GiB", "10GB", "1234B", "800EB", "0B"] {
            assert_eq!(ByteSize::parse(s).unwrap().to_string(), s);
        }
    }
}
