//! The fake API server's write lane (`set_write_service_time`): writes are
//! committed one after another, each holding the lane for the service time, as
//! etcd commits them, while reads are answered without waiting for the lane.
//! The lane runs on a stopped clock that the test moves on, so every step is an
//! event the test waits for, not a duration it measures.

mod fake_apiserver;

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use std::time::Duration;

const SERVICE: Duration = Duration::from_millis(200);
const WRITES: usize = 3;
/// How long an awaited event may take to show on a busy machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// The write annotations (`w0`, `w1`, ...) the node carries.
fn committed(node: &Value) -> usize {
    node["metadata"]["annotations"]
        .as_object()
        .map_or(0, |a| a.keys().filter(|k| k.starts_with('w')).count())
}

fn stored_writes(api: &FakeApiServer) -> usize {
    api.get("Node", None, "n1").map_or(0, |n| committed(&n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queue_on_one_lane_and_reads_pass_them() {
    let api = FakeApiServer::start().await;
    api.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
    api.set_write_service_time(SERVICE);
    api.stop_write_lane_clock();
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/nodes/n1", api.url());
    let auth = format!("Bearer {}", api.token());
    let writes: Vec<_> = (0..WRITES)
        .map(|i| {
            let (http, url, auth) = (http.clone(), url.clone(), auth.clone());
            tokio::spawn(async move {
                let patch = json!({"metadata": {"annotations": {format!("w{i}"): "x"}}});
                http.patch(&url)
                    .header("authorization", auth)
                    .header("content-type", "application/merge-patch+json")
                    .body(patch.to_string())
                    .send()
                    .await
                    .expect("patch")
                    .status()
                    .as_u16()
            })
        })
        .collect();
    assert!(
        api.wait_until(PATIENCE, |a| a.writes_in_lane() == WRITES)
            .await,
        "{} of {WRITES} writes reached the lane",
        api.writes_in_lane()
    );

    // The clock has not moved: every write still waits, and a read passes them.
    let read = http.get(&url).header("authorization", auth.clone()).send();
    let resp = tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the read was held behind the queued writes")
        .expect("get");
    assert_eq!(resp.status().as_u16(), 200);
    let read: Value = resp.json().await.expect("node");
    assert_eq!(committed(&read), 0, "{read}");
    assert_eq!(api.writes_in_lane(), WRITES);

    // Each service time lets exactly one more write commit.
    for done in 1..=WRITES {
        api.advance_write_lane(SERVICE);
        assert!(
            api.wait_until(PATIENCE, |a| stored_writes(a) >= done).await,
            "write {done} did not commit"
        );
        assert_eq!(stored_writes(&api), done);
        assert_eq!(api.writes_in_lane(), WRITES - done);
    }
    for write in writes {
        assert_eq!(write.await.expect("write task"), 200);
    }
}
