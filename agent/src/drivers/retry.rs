//! How often and how patiently the agent asks an out-of-tree provisioner before giving up.

use std::time::Duration;

/// Retry policy for requests to external provisioners (the Kubernetes volume provisioning design: out-of-tree provisioners are
/// reached by request/reply; a provisioner that is restarting or slow gets more chances).
///
/// An attempt that times out, finds no responder or hits a transport error is retried after a
/// backoff that starts at `first_backoff_ms` and doubles up to `max_backoff_ms`, until
/// `attempts` attempts were made or the request's deadline would pass. A provisioner's refusal
/// (`ok: false`) is never retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RetryPolicy {
    /// Most attempts per request, including the first (at least 1 is always made). Default 4.
    pub attempts: u32,
    /// Pause after the first failed attempt, ms. Default 100.
    pub first_backoff_ms: u64,
    /// Longest pause between attempts, ms. Default 2000.
    pub max_backoff_ms: u64,
    /// How long one attempt waits for the answer, ms (cut short by the deadline). Default 2000.
    pub attempt_timeout_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            first_backoff_ms: 100,
            max_backoff_ms: 2000,
            attempt_timeout_ms: 2000,
        }
    }
}

impl RetryPolicy {
    /// The pause after failed attempt number `failed` (1-based): `first_backoff_ms *
    /// 2^(failed-1)`, capped at `max_backoff_ms` (never overflows).
    pub fn backoff(&self, failed: u32) -> Duration {
        let shift = failed.saturating_sub(1).min(63);
        let ms = self
            .first_backoff_ms
            .saturating_mul(1u64 << shift)
            .min(self.max_backoff_ms);
        Duration::from_millis(ms)
    }

    /// Attempts to make: `attempts`, or 1 when it is 0.
    pub fn max_attempts(&self) -> u32 {
        self.attempts.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        let ms: Vec<u128> = (1..=7).map(|n| p.backoff(n).as_millis()).collect();
        assert_eq!(ms, vec![100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(p.backoff(200).as_millis(), 2000);
        assert_eq!(RetryPolicy { attempts: 0, ..p }.max_attempts(), 1);
    }

    #[test]
    fn policy_reads_partial_json() {
        let p: RetryPolicy = serde_json::from_str(r#"{"attempts": 2}"#).unwrap();
        assert_eq!(
            p,
            RetryPolicy {
                attempts: 2,
                ..RetryPolicy::default()
            }
        );
    }
}
