//! Black-box test of raw TCP connections that never start TLS: opened from
//! another loopback address and reopened as soon as they are closed, they must not
//! keep kube-scheduler's new connections from being served.

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;

/// Connections the flood keeps open, far more than the server's slots.
const FLOOD: usize = 200;
/// Slots the server under test has.
const MAX_CONNECTIONS: &str = "64";
/// How long one `/filter` on a fresh connection may take during the flood.
const PROMPT: Duration = Duration::from_secs(3);

/// Keeps one raw connection from `source` to `server` open, sending nothing,
/// and opens another as soon as the server closes it, until `stop` is set.
async fn hold_one(source: &str, server: SocketAddr, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let connected = async {
            let socket = TcpSocket::new_v4()?;
            socket.bind(
                format!("{source}:0")
                    .parse()
                    .map_err(std::io::Error::other)?,
            )?;
            socket.connect(server).await
        };
        match connected.await {
            Ok(mut stream) => {
                let mut buffer = [0u8; 64];
                // Ends when the server closes the connection.
                let _ = stream.read(&mut buffer).await;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_connections_from_one_address_leave_room_for_new_filters() {
    let node = node("gpu-a", &[h100(&gpu_uuid("gpu-a", 0), 0)], &[]);
    let server = Server::start(vec![node], &["--max-connections", MAX_CONNECTIONS]).await;
    let address: SocketAddr = server
        .base
        .trim_start_matches("https://")
        .parse()
        .expect("server address");
    let stop = Arc::new(AtomicBool::new(false));
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..FLOOD {
        flood.spawn(hold_one("127.0.0.2", address, Arc::clone(&stop)));
    }
    // Let the flood take what it can.
    tokio::time::sleep(Duration::from_millis(500)).await;

    for i in 0..5 {
        // A client of its own each time: a new connection, as after a restart of
        // kube-scheduler or a dropped keep-alive.
        let client = https_client(&server.root_pem, None);
        let p = pod("default", &format!("during-flood-{i}"))
            .gpus(1, 1000, 1)
            .build();
        let answer = tokio::time::timeout(PROMPT, async {
            client
                .post(server.url("/filter"))
                .json(&filter_args(&p, &["gpu-a"]))
                .send()
                .await
                .expect("filter")
                .json::<Value>()
                .await
                .expect("filter JSON")
        })
        .await;
        let answer = answer.unwrap_or_else(|_| panic!("filter {i} not answered during the flood"));
        assert_eq!(chosen_node(&answer), "gpu-a", "{answer}");
    }
    stop.store(true, Ordering::Relaxed);
    flood.abort_all();
}
