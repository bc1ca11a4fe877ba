//! The fake API server's write lane (`set_write_service_time`): writes are
//! committed one after another, each holding the lane for the service time, as
//! etcd commits them, while reads are answered without waiting for the lane.

mod fake_apiserver;

use fake_apiserver::FakeApiServer;
use serde_json::json;
use std::time::{Duration, Instant};

const SERVICE: Duration = Duration::from_millis(200);
const WRITES: u32 = 3;

#[tokio::test]
async fn writes_queue_on_one_lane_and_reads_pass_them() {
    let api = FakeApiServer::start().await;
    api.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
    api.set_write_service_time(SERVICE);
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/nodes/n1", api.url());
    let auth = format!("Bearer {}", api.token());
    let started = Instant::now();
    let writes = (0..WRITES).map(|i| {
        let (http, url, auth) = (http.clone(), url.clone(), auth.clone());
        async move {
            let patch = json!({"metadata": {"annotations": {format!("w{i}"): "x"}}});
            let resp = http
                .patch(&url)
                .header("authorization", auth)
                .header("content-type", "application/merge-patch+json")
                .body(patch.to_string())
                .send()
                .await
                .expect("patch");
            assert_eq!(resp.status().as_u16(), 200);
            Instant::now()
        }
    });
    let read = async {
        // Asked once the writes are queued.
        tokio::time::sleep(SERVICE / 4).await;
        let resp = http
            .get(&url)
            .header("authorization", auth.clone())
            .send()
            .await
            .expect("get");
        assert_eq!(resp.status().as_u16(), 200);
        Instant::now()
    };
    let (written, read_at) = tokio::join!(futures::future::join_all(writes), read);
    let last = written.iter().max().copied().expect("writes");
    assert!(
        last.duration_since(started) >= SERVICE * WRITES,
        "{WRITES} writes of {SERVICE:?} each took {:?}",
        last.duration_since(started)
    );
    assert!(read_at < last, "the read waited for the writes");
    let node = api.get("Node", None, "n1").expect("node");
    for i in 0..WRITES {
        assert_eq!(node["metadata"]["annotations"][format!("w{i}")], "x");
    }
}
