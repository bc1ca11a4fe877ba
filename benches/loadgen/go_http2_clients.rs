//! kube-scheduler's HTTP client for its extender, shaped like Go's HTTP/2
//! transport (`golang.org/x/net/http2`, `StrictMaxConcurrentStreams` false, as
//! client-go's transport defaults leave it): requests share one TLS connection
//! until as many are in flight on it as the server allows streams
//! (`SETTINGS_MAX_CONCURRENT_STREAMS`), and the next opens another connection
//! rather than waiting. One reqwest client per connection: reqwest's own HTTP/2
//! pool would queue the next `/filter` behind binds waiting for node locks, and
//! HTTP/1.1 would open a connection, with its TLS handshake, per request in
//! flight, which kube-scheduler does not cost the server.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Makes a client holding one new HTTP/2 connection.
pub type NewConnection = Box<dyn Fn() -> Result<reqwest::Client, String> + Send + Sync>;

/// The connections, each with its requests in flight.
pub struct GoHttp2Clients {
    new_connection: NewConnection,
    streams_per_connection: usize,
    connections: Mutex<Vec<(reqwest::Client, Arc<AtomicUsize>)>>,
}

/// One request's use of a connection; frees its stream when dropped.
pub struct Stream {
    pub client: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl GoHttp2Clients {
    /// Connections made by `new_connection`, each carrying at most
    /// `streams_per_connection` requests at once.
    pub fn new(new_connection: NewConnection, streams_per_connection: usize) -> Self {
        Self {
            new_connection,
            streams_per_connection: streams_per_connection.max(1),
            connections: Mutex::new(Vec::new()),
        }
    }

    /// A stream on the first connection with one free, else on a new one.
    pub fn stream(&self) -> Result<Stream, String> {
        let mut connections = self.connections.lock();
        let free = connections
            .iter()
            .find(|(_, in_flight)| in_flight.load(Ordering::Acquire) < self.streams_per_connection);
        let (client, in_flight) = match free {
            Some((client, in_flight)) => (client.clone(), in_flight.clone()),
            None => {
                let opened = ((self.new_connection)()?, Arc::new(AtomicUsize::new(0)));
                connections.push(opened.clone());
                opened
            }
        };
        in_flight.fetch_add(1, Ordering::AcqRel);
        Ok(Stream { client, in_flight })
    }

    /// Connections opened so far.
    pub fn connections(&self) -> usize {
        self.connections.lock().len()
    }
}

/// Checks the connection accounting (a harness-less bench has no `#[test]`; this
/// runs at the start of every run instead): a connection takes requests up to
/// its streams, then another opens; freed streams are used before a new one.
pub fn self_check() {
    let c = GoHttp2Clients::new(Box::new(|| Ok(reqwest::Client::new())), 2);
    let stream = || c.stream().expect("a stream");
    let (a, b) = (stream(), stream());
    assert_eq!(c.connections(), 1);
    let third = stream();
    assert_eq!(c.connections(), 2);
    drop((a, b, third));
    let held: Vec<Stream> = (0..4).map(|_| stream()).collect();
    assert_eq!(c.connections(), 2);
    let fifth = stream();
    assert_eq!(c.connections(), 3);
    drop((held, fifth));
}
