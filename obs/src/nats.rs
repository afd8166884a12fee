//! The NATS connection's metrics, read from the client at each scrape: whether it is connected
//! and how many times it reconnected. async-nats counts every connection it establishes (the
//! moments it emits its `Connected` event) in its statistics; the first one is not a reconnect.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Collects `fedvol_nats_connected` (1 when the connection is up, else 0, also before the
/// first connection) and `fedvol_nats_reconnects_total` (connections established after the
/// first). Register it at start-up, then [`NatsCollector::set`] the client once connected.
/// Cheap to clone: clones share the client slot.
#[derive(Debug, Clone, Default)]
pub struct NatsCollector {
    client: Arc<OnceLock<async_nats::Client>>,
}

impl NatsCollector {
    /// Reads `client` from now on (a second call is ignored: a daemon has one connection).
    pub fn set(&self, client: async_nats::Client) {
        let _ = self.client.set(client);
    }

    /// (connected, reconnects) now; (false, 0) before [`NatsCollector::set`].
    pub fn read(&self) -> (bool, u64) {
        match self.client.get() {
            None => (false, 0),
            Some(c) => {
                let connected = c.connection_state() == async_nats::connection::State::Connected;
                let connects = c.statistics().connects.load(std::sync::atomic::Ordering::Relaxed);
                (connected, connects.saturating_sub(1))
            }
        }
    }
}

impl Collector for NatsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (connected, reconnects) = self.read();
        let up = ConstGauge::new(i64::from(connected));
        up.encode(encoder.encode_descriptor(
            "fedvol_nats_connected",
            "1 when the connection to NATS is up, else 0.",
            None,
            up.metric_type(),
        )?)?;
        let again = ConstCounter::new(reconnects);
        again.encode(encoder.encode_descriptor(
            "fedvol_nats_reconnects",
            "Connections to NATS established after the first one (each follows a lost connection).",
            None,
            again.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_a_connection_it_reads_disconnected_and_no_reconnects() {
        let mut r = crate::Registry::new("agent", "0");
        let n = NatsCollector::default();
        r.register_collector(n.clone());
        assert_eq!(n.read(), (false, 0));
        let text = r.encode().unwrap();
        assert!(text.contains("fedvol_nats_connected 0\n"), "{text}");
        assert!(text.contains("# TYPE fedvol_nats_reconnects counter"), "{text}");
        assert!(text.contains("fedvol_nats_reconnects_total 0\n"), "{text}");
    }
}
