//! Plain HTTP GETs to loopback servers (the daemons' `/metrics`, `/healthz`, `/readyz`, and
//! Prometheus' API), without an HTTP client crate: HTTP/1.0, so that every server answers with
//! the whole body and closes the connection (no chunked encoding to undo).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Spawned;

/// The status and body of `GET path` (with its query) on `addr`, within 5 s.
///
/// Errors: the connection failed, timed out, or the answer is not HTTP (a sentence).
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    get_as(addr, path, &addr.to_string())
        .await
        .map(|(status, _, body)| (status, body))
}

/// The status, header block and body of `GET path` on `addr` sent with the `Host` header
/// `host` (what a browser sends for the name in its address bar), within 5 s.
///
/// Errors: the connection failed, timed out, or the answer is not HTTP (a sentence).
pub async fn get_as(addr: SocketAddr, path: &str, host: &str) -> Result<(u16, String, String), String> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("not an HTTP answer: {raw:?}"))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status in {head:?}"))?;
        Ok((status, head.to_string(), body.to_string()))
    };
    match tokio::time::timeout(Duration::from_secs(5), exchange).await {
        Ok(r) => r.map_err(|e: String| format!("GET http://{addr}{path}: {e}")),
        Err(_) => Err(format!("GET http://{addr}{path}: no answer within 5 s")),
    }
}

/// `text` percent-encoded for a URL query value (everything but `A-Z a-z 0-9 - _ . ~`).
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The address a daemon started with `--metrics-listen 127.0.0.1:0` serves its metrics on:
/// the `addr` of its "metrics listening" log line.
///
/// Panics (test failure) when the line is not in its log, with the log.
pub fn metrics_addr(proc: &Spawned) -> SocketAddr {
    proc.log()
        .lines()
        .find(|l| l.contains("metrics listening"))
        .and_then(|l| crate::faultkit::field(l, "addr"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no `metrics listening` line with an addr in the log:\n{}", proc.log()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("sum(x{a=\"b c\"})"), "sum%28x%7Ba%3D%22b%20c%22%7D%29");
        assert_eq!(query_value("fedvol_up-1.0~"), "fedvol_up-1.0~");
    }
}
