//! Capturing the `tracing` output of library code a test drives in-process (e.g. to check that
//! secrets never reach the logs).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Collects every `tracing` event (all levels, plain text, with fields) emitted on the current
/// thread while it lives. Use with `#[tokio::test]` (current-thread runtime) so that spawned
/// tasks log on the same thread.
pub struct LogCapture {
    buf: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    /// Starts capturing on this thread (until dropped).
    pub fn start() -> LogCapture {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(buf.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        LogCapture {
            buf,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}
