//! HAMi's Filter-level test tables, case by case, against the real binary:
//! `pkg/scheduler/scheduler_test.go` (Test_ResourceQuota, Test_getNodesUsage; its
//! Test_Filter is the worked example in extender_http.rs) and the multi-node rows of
//! `pkg/scheduler/score_test.go` (Test_calcScore).

mod support;

use serde_json::{Value, json};
use support::*;

// ---------------------------------------------------------------------------
// Test_ResourceQuota
// ---------------------------------------------------------------------------

/// node1 of Test_ResourceQuota: four idle cards of 2000, 8000, 4000 and 6000 MiB.
fn quota_node() -> Value {
    node(
        "node1",
        &[
            h100("device1", 0).devmem(2000),
            h100("device2", 1).devmem(8000),
            h100("device3", 2).devmem(4000),
            h100("device4", 3).devmem(6000),
        ],
        &[],
    )
}

/// A server whose `default` namespace may use `mem` MiB and `cores` percent.
async fn quota_server(mem: &str, cores: &str) -> Server {
    Server::start(
        vec![
            quota_node(),
            quota(
                "default",
                "test-quota",
                &[
                    ("limits.nvidia.com/gpucores", cores),
                    ("limits.nvidia.com/gpumem", mem),
                ],
            ),
        ],
        &[],
    )
    .await
}

async fn placed_devices(server: &Server, pod: &Value) -> String {
    let state = server.state().await;
    encode_devices(state.expect_pod(pod_uid(pod)))
}

#[tokio::test]
async fn quota_allows_a_pod_that_uses_it_exactly() {
    // "multi device Resourcequota pass": 2 x (2000 MiB, 100 cores) against 4000 / 200.
    let server = quota_server("4000", "200").await;
    let p = pod("default", "test1").gpus(2, 2000, 100).build();
    let answer = server.filter(&p, &["node1"]).await;
    assert_eq!(answer, json!({"NodeNames": ["node1"]}));
    assert_eq!(
        placed_devices(&server, &p).await,
        "device2,NVIDIA,2000,100:device4,NVIDIA,2000,100:;"
    );
}

#[tokio::test]
async fn quota_rejects_a_pod_over_it_with_the_quota_reason() {
    // "multi device Resourcequota deny": 2 x 3000 MiB against 4000. The stored table
    // expects the generic "NodeUnfitPod"; since v2.10 (#1773) the live path returns
    // the detailed reason (hami-compat §7.8 gives this very string).
    let server = quota_server("4000", "200").await;
    let p = pod("default", "test2").gpus(2, 3000, 60).build();
    let failed = expect_rejected(&server.filter(&p, &["node1"]).await);
    assert_eq!(
        Value::Object(failed),
        json!({"node1": "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit"})
    );
}

#[tokio::test]
async fn quota_counts_a_whole_card_request_at_the_cards_memory() {
    // "unspecified device Resourcequota pass": {gpu: 1} books the whole card, and only
    // the 2000 MiB card fits a 2000 MiB quota.
    let server = quota_server("2000", "100").await;
    let p = pod("default", "test3")
        .container(container("gpu-burn", &[("nvidia.com/gpu", "1")]))
        .build();
    let answer = server.filter(&p, &["node1"]).await;
    assert_eq!(answer, json!({"NodeNames": ["node1"]}));
    assert_eq!(placed_devices(&server, &p).await, "device1,NVIDIA,2000,0:;");
}

#[tokio::test]
async fn quota_smaller_than_every_card_rejects_a_whole_card_request() {
    // "unspecified device Resourcequota deny" (stored table: "NodeUnfitPod").
    let server = quota_server("1500", "100").await;
    let p = pod("default", "test4")
        .container(container("gpu-burn", &[("nvidia.com/gpu", "1")]))
        .build();
    let failed = expect_rejected(&server.filter(&p, &["node1"]).await);
    assert_eq!(
        Value::Object(failed),
        json!({"node1": "4/4 ResourceQuotaNotFit"})
    );
}

// ---------------------------------------------------------------------------
// Test_getNodesUsage
// ---------------------------------------------------------------------------

#[tokio::test]
async fn usage_adds_up_every_pod_on_a_card() {
    let gpus = [
        h100("GPU0", 0).devmem(1024).numa(1),
        h100("GPU1", 1).devmem(1024).numa(1),
    ];
    let holder = |name: &str| {
        pod("default", name)
            .gpus(1, 100, 10)
            .holding("node1", "GPU0,NVIDIA,100,10:;")
            .build()
    };
    let server = Server::start(
        vec![node("node1", &gpus, &[]), holder("test1"), holder("test2")],
        &[],
    )
    .await;
    let state = server.state().await;
    assert_eq!(
        state.gpu_usage("GPU0"),
        Usage {
            used: 2,
            usedmem: 200,
            usedcores: 20,
        }
    );
    assert_eq!(state.gpu_usage("GPU1"), Usage::default());
}

// ---------------------------------------------------------------------------
// Test_calcScore, two-node rows
// ---------------------------------------------------------------------------

/// A pod already holding `mem` MiB and `cores` of `gpu` on `node`.
fn holder(name: &str, node: &str, gpu: &str, mem: u64, cores: u32) -> Value {
    pod("default", name)
        .gpus(1, mem, cores)
        .holding(node, &format!("{gpu},NVIDIA,{mem},{cores}:;"))
        .build()
}

#[tokio::test]
async fn binpack_takes_the_busier_node_and_spread_the_idle_one() {
    // "two node per node having one device ..., one device having use 50%": node1's
    // card has 5 of 10 slots, 4000 of 8000 MiB and 50 of 100 cores in use (score 15),
    // node2's is idle (score 0).
    let mut cluster = vec![
        node("node1", &[h100("uuid1", 0).devmem(8000)], &[]),
        node("node2", &[h100("uuid2", 0).devmem(8000)], &[]),
    ];
    for i in 0..5 {
        cluster.push(holder(&format!("running-{i}"), "node1", "uuid1", 800, 10));
    }
    let server = Server::start(cluster, &[]).await;
    let state = server.state().await;
    assert_eq!(
        state.gpu_usage("uuid1"),
        Usage {
            used: 5,
            usedmem: 4000,
            usedcores: 50,
        }
    );

    let binpack = pod("default", "test-binpack").gpus(1, 1000, 30).build();
    assert_eq!(
        chosen_node(&server.filter(&binpack, &["node1", "node2"]).await),
        "node1"
    );
    assert_eq!(
        placed_devices(&server, &binpack).await,
        "uuid1,NVIDIA,1000,30:;"
    );

    let spread = pod("default", "test-spread")
        .annotation("hami.io/node-scheduler-policy", "spread")
        .gpus(1, 1000, 30)
        .build();
    assert_eq!(
        chosen_node(&server.filter(&spread, &["node1", "node2"]).await),
        "node2"
    );
    assert_eq!(
        placed_devices(&server, &spread).await,
        "uuid2,NVIDIA,1000,30:;"
    );
}

#[tokio::test]
async fn every_node_too_small_is_rejected_with_its_reason() {
    // "race condition test for failedNodes map with two nodes failing" (stored table:
    // "NodeUnfitPod" for both; detailed reasons since v2.10).
    let server = Server::start(
        vec![
            node("node1", &[h100("uuid1", 0).devmem(50)], &[]),
            node("node2", &[h100("uuid2", 0).devmem(50)], &[]),
        ],
        &[],
    )
    .await;
    let p = pod("default", "test-race").gpus(1, 1000, 30).build();
    let failed = expect_rejected(&server.filter(&p, &["node1", "node2"]).await);
    assert_eq!(
        Value::Object(failed),
        json!({
            "node1": "1/1 CardInsufficientMemory",
            "node2": "1/1 CardInsufficientMemory",
        })
    );
}
