//! The fake API server's request costs. The write lane
//! (`set_write_service_time`): writes are committed one after another, each
//! holding the lane for the service time, as etcd commits them, while reads are
//! answered without waiting for the lane unless they have a service time too
//! (`set_read_service_time`). Latency (`set_request_latency`): each request
//! waits that long on its own, side by side with the others in flight.
//! The lane runs on a stopped clock that the test moves on, so every step is an
//! event the test waits for, not a duration it measures: after each move the
//! test waits until every held request has seen it before it counts those
//! still held.

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

/// Waits until `n` requests (`what`) are held in the lane or their latency.
async fn until_held(api: &FakeApiServer, n: usize, what: &str) {
    assert!(
        api.wait_until(PATIENCE, |a| a.writes_in_lane() == n).await,
        "{} of {n} {what} were held",
        api.writes_in_lane()
    );
}

/// Moves the lane's clock on by `d` and waits until every request held in
/// the lane has seen the move; returns how many are still held.
async fn advance_lane(api: &FakeApiServer, d: Duration) -> usize {
    api.advance_write_lane(d);
    assert!(
        api.wait_until(PATIENCE, FakeApiServer::write_lane_settled)
            .await,
        "the held requests did not all see the clock move"
    );
    api.writes_in_lane()
}

/// The API server with node `n1`, its costs set by `costs` and its lane's
/// clock stopped; a client, the node's URL and the authorization header.
async fn stopped_server_with_n1(
    costs: impl FnOnce(&FakeApiServer),
) -> (FakeApiServer, reqwest::Client, String, String) {
    let api = FakeApiServer::start().await;
    api.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
    costs(&api);
    api.stop_write_lane_clock();
    let url = format!("{}/api/v1/nodes/n1", api.url());
    let auth = format!("Bearer {}", api.token());
    (api, reqwest::Client::new(), url, auth)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queue_on_one_lane_and_reads_pass_them() {
    let (api, http, url, auth) =
        stopped_server_with_n1(|api| api.set_write_service_time(SERVICE)).await;
    let writes: Vec<_> = (0..WRITES)
        .map(|i| {
            let (http, url, auth) = (http.clone(), url.clone(), auth.clone());
            tokio::spawn(async move { patch_node(http, url, auth, &format!("w{i}")).await })
        })
        .collect();
    until_held(&api, WRITES, "writes").await;

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
        assert_eq!(advance_lane(&api, SERVICE).await, WRITES - done);
        assert!(
            api.wait_until(PATIENCE, |a| stored_writes(a) >= done).await,
            "write {done} did not commit"
        );
        assert_eq!(stored_writes(&api), done);
    }
    for write in writes {
        assert_eq!(write.await.expect("write task"), 200);
    }
}

async fn patch_node(http: reqwest::Client, url: String, auth: String, key: &str) -> u16 {
    let patch = json!({"metadata": {"annotations": {key: "x"}}});
    http.patch(&url)
        .header("authorization", auth)
        .header("content-type", "application/merge-patch+json")
        .body(patch.to_string())
        .send()
        .await
        .expect("patch")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_together_spend_their_latency_side_by_side() {
    const LATENCY: Duration = Duration::from_millis(300);
    const READS: usize = 3;
    let (api, http, url, auth) =
        stopped_server_with_n1(|api| api.set_request_latency(LATENCY, LATENCY)).await;
    let reads: Vec<_> = (0..READS)
        .map(|_| {
            let read = http.get(&url).header("authorization", auth.clone()).send();
            tokio::spawn(async move { read.await.expect("get").status().as_u16() })
        })
        .collect();
    until_held(&api, READS, "reads").await;
    // A watch is not held: its answer starts while the reads wait.
    let watch = http
        .get(format!("{}/api/v1/nodes?watch=true", api.url()))
        .header("authorization", auth.clone())
        .send();
    let watch = tokio::time::timeout(PATIENCE, watch)
        .await
        .expect("the watch was held like a read")
        .expect("watch");
    assert_eq!(watch.status().as_u16(), 200);

    assert_eq!(
        advance_lane(&api, LATENCY - Duration::from_millis(1)).await,
        READS,
        "answered before their latency"
    );
    // One latency answers them all: they overlap instead of queueing.
    assert_eq!(advance_lane(&api, Duration::from_millis(1)).await, 0);
    for read in reads {
        let status = tokio::time::timeout(PATIENCE, read)
            .await
            .expect("a read was not answered after one latency")
            .expect("read task");
        assert_eq!(status, 200);
    }
    assert_eq!(api.writes_in_lane(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_with_a_service_time_take_their_turn_after_writes_and_writes_show_after_their_latency()
 {
    const SERVICE: Duration = Duration::from_millis(100);
    const WRITE_LATENCY: Duration = Duration::from_millis(300);
    let (api, http, url, auth) = stopped_server_with_n1(|api| {
        api.set_write_service_time(SERVICE);
        api.set_read_service_time(SERVICE);
        api.set_request_latency(Duration::ZERO, WRITE_LATENCY);
    })
    .await;
    let write = tokio::spawn(patch_node(http.clone(), url.clone(), auth.clone(), "w0"));
    until_held(&api, 1, "writes").await;
    let read = http.get(&url).header("authorization", auth).send();
    let read = tokio::spawn(async move { read.await.expect("get").json::<Value>().await });
    until_held(&api, 2, "requests (a write, a read)").await;

    // The write holds the lane first; the read is served after it.
    assert_eq!(
        advance_lane(&api, SERVICE).await,
        2,
        "the read passed the write's turn"
    );
    assert_eq!(
        advance_lane(&api, SERVICE).await,
        1,
        "the read has had its turn, the write not its latency"
    );
    let node = tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the read was not answered after its turn")
        .expect("read task")
        .expect("node");
    // The write has had its turn but not its latency: not committed yet.
    assert_eq!(committed(&node), 0, "{node}");
    assert_eq!(stored_writes(&api), 0);
    assert_eq!(advance_lane(&api, WRITE_LATENCY - SERVICE).await, 0);
    assert_eq!(write.await.expect("write task"), 200);
    assert_eq!(stored_writes(&api), 1);
}
