//! Many kube-scheduler-shaped /filter + /bind pairs in flight at once against an
//! oversubscribed cluster: no GPU may ever be overbooked, the books must add up, and
//! every bound pod must sit where its /filter said.

mod support;

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const NODES: usize = 20;
const GPUS_PER_NODE: u32 = 4;
const PODS: usize = 400;
const IN_FLIGHT: usize = 32;

struct Outcome {
    uid: String,
    name: String,
    filtered_to: Option<String>,
    filter_error: Option<String>,
    bound: bool,
    bind_error: Option<String>,
    exclusive: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_filter_and_bind_never_oversubscribe() {
    run_load(Mode::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_filter_all_and_bind_never_oversubscribe() {
    run_load(Mode::All).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_filter_and_bind_on_two_server_threads_never_oversubscribe() {
    run_load(Mode::TwoThreads).await;
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// HAMi's way: /filter picks one node and reserves.
    Single,
    /// --filter-mode all: /filter lists fitting nodes, /bind places the GPUs.
    All,
    /// HAMi's way on a server with `--worker-threads 2`, where requests for the
    /// same node race on two threads.
    TwoThreads,
}

async fn run_load(mode: Mode) {
    let started = Instant::now();
    let node_names: Vec<String> = (0..NODES).map(|i| format!("a10-node-{i:02}")).collect();
    let cluster: Vec<Value> = node_names
        .iter()
        .map(|n| {
            let gpus: Vec<Gpu> = (0..GPUS_PER_NODE)
                .map(|i| {
                    h100(&gpu_uuid(n, i), i)
                        .count(4)
                        .devmem(24000)
                        .model("NVIDIA A10")
                        .numa(i32::from(i >= 2))
                })
                .collect();
            node(n, &gpus, &[])
        })
        .collect();
    let args: &[&str] = match mode {
        Mode::Single => &[],
        Mode::All => &["--filter-mode", "all"],
        Mode::TwoThreads => &["--worker-threads", "2"],
    };
    let server = Arc::new(Server::start(cluster, args).await);

    let mut rng = Rng::new(0x5eed_1234_abcd_0042);
    let mut pods = Vec::with_capacity(PODS);
    let mut demand_mib = 0u64;
    for i in 0..PODS {
        let gpus = rng.range(1, 2) as u32;
        let mem = rng.range(4, 24) * 500; // 2000..=12000 MiB
        let exclusive = rng.range(0, 9) == 0;
        let cores = if exclusive {
            100
        } else {
            rng.range(0, 50) as u32
        };
        demand_mib += mem * u64::from(gpus);
        let mut b = pod("load", &format!("job-{i:03}"));
        // A few policy overrides, so binpack and spread run side by side.
        match i % 5 {
            3 => b = b.annotation("hami.io/gpu-scheduler-policy", "binpack"),
            4 => b = b.annotation("hami.io/node-scheduler-policy", "spread"),
            _ => {}
        }
        pods.push((b.gpus(gpus, mem, cores).build(), exclusive));
    }
    let capacity_mib = (NODES as u64) * u64::from(GPUS_PER_NODE) * 24000;
    assert!(
        demand_mib > capacity_mib,
        "the load must oversubscribe: {demand_mib} <= {capacity_mib}"
    );

    let names: Arc<Vec<String>> = Arc::new(node_names.clone());
    let gate = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tasks = JoinSet::new();
    for (p, exclusive) in pods {
        let server = server.clone();
        let names = names.clone();
        let gate = gate.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.expect("semaphore");
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let answer = server.filter(&p, &refs).await;
            let mut outcome = Outcome {
                uid: pod_uid(&p).to_string(),
                name: pod_name(&p).to_string(),
                filtered_to: None,
                filter_error: answer["Error"].as_str().map(String::from),
                bound: false,
                bind_error: None,
                exclusive,
            };
            if let Some(nodes) = answer["NodeNames"].as_array() {
                if mode != Mode::All {
                    assert_eq!(nodes.len(), 1, "single mode answers one node: {answer}");
                }
                assert!(!nodes.is_empty(), "{answer}");
                // kube-scheduler's pick among the survivors: spread them around.
                let pick: usize = pod_uid(&p).bytes().map(usize::from).sum();
                let node_name = nodes[pick % nodes.len()]
                    .as_str()
                    .expect("node name")
                    .to_string();
                assert!(names.contains(&node_name), "{answer}");
                let bind = server.bind(&p, &node_name).await;
                outcome.bound = bind == json!({});
                outcome.bind_error = bind["Error"].as_str().map(String::from);
                outcome.filtered_to = Some(node_name);
            } else if outcome.filter_error.is_none() {
                let failed = expect_rejected(&answer);
                assert_eq!(failed.len(), NODES, "every node has a reason: {answer}");
            }
            if mode == Mode::All && outcome.filter_error.is_none() {
                let failed = answer["FailedNodes"].as_object().map_or(0, |m| m.len());
                let fitting = answer["NodeNames"].as_array().map_or(0, Vec::len);
                assert_eq!(
                    failed + fitting,
                    NODES,
                    "every node accounted for: {answer}"
                );
            }
            outcome
        });
    }
    let mut outcomes = Vec::with_capacity(PODS);
    while let Some(done) = tasks.join_next().await {
        outcomes.push(done.expect("request task"));
    }

    let state = server.state().await;
    let gpus = state.gpus();
    assert_eq!(gpus.len(), NODES * GPUS_PER_NODE as usize);

    // 1. Nothing is overbooked.
    for g in &gpus {
        assert!(g.usage.used <= g.count, "slots overbooked: {g:?}");
        assert!(g.usage.usedmem <= g.devmem, "memory overbooked: {g:?}");
        assert!(g.usage.usedcores <= g.devcore, "cores overbooked: {g:?}");
    }

    // Each container's GPUs are distinct cards.
    for p in state.pods() {
        for container in p["devices"].as_array().expect("devices") {
            let uuids: BTreeSet<&str> = container
                .as_array()
                .expect("container")
                .iter()
                .map(|d| d["uuid"].as_str().expect("uuid"))
                .collect();
            assert_eq!(
                uuids.len(),
                container.as_array().map_or(0, Vec::len),
                "one container got the same GPU twice: {p}"
            );
        }
    }

    // 2. The reported usage is exactly the sum of the pods' holds.
    let mut recomputed: BTreeMap<(String, String), Usage> = BTreeMap::new();
    for p in state.pods() {
        let node_name = p["node"].as_str().expect("pod node").to_string();
        for (uuid, u) in collapse(&p["devices"], 0) {
            let e = recomputed.entry((node_name.clone(), uuid)).or_default();
            e.used += u.used;
            e.usedmem += u.usedmem;
            e.usedcores += u.usedcores;
        }
    }
    for g in &gpus {
        let want = recomputed
            .remove(&(g.node.clone(), g.id.clone()))
            .unwrap_or_default();
        assert_eq!(g.usage, want, "usage of {} on {}", g.id, g.node);
    }
    assert!(
        recomputed.is_empty(),
        "pods hold GPUs that are not on their node: {recomputed:?}"
    );

    // 3. Bound pods are exactly the ones whose /bind said {}, on the node /filter chose.
    let by_uid: BTreeMap<&str, &Outcome> = outcomes.iter().map(|o| (o.uid.as_str(), o)).collect();
    let mut bound_in_state = BTreeSet::new();
    for p in state.pods() {
        let uid = p["uid"].as_str().expect("uid");
        let outcome = by_uid
            .get(uid)
            .unwrap_or_else(|| panic!("unknown pod in /debug/state: {p}"));
        assert_eq!(
            p["phase"], "Bound",
            "no reservation is left behind once every bind has answered: {p}"
        );
        assert_eq!(
            p["node"].as_str(),
            outcome.filtered_to.as_deref(),
            "{} bound where /filter put it",
            outcome.name
        );
        bound_in_state.insert(uid.to_string());
    }
    let bound_by_answer: BTreeSet<String> = outcomes
        .iter()
        .filter(|o| o.bound)
        .map(|o| o.uid.clone())
        .collect();
    assert_eq!(bound_in_state, bound_by_answer);

    // 4. Exclusive pods (100 cores) are alone on their cards.
    for o in outcomes.iter().filter(|o| o.bound && o.exclusive) {
        let p = state.expect_pod(&o.uid);
        for uuid in collapse(&p["devices"], 0).keys() {
            let u = state.gpu_usage(uuid);
            assert_eq!(u.used, 1, "{} is exclusive on {uuid}: {u:?}", o.name);
            assert_eq!(u.usedcores, 100);
        }
    }

    // 5. The load was really contended: some pods placed, not all.
    let bound = bound_by_answer.len();
    let filter_errors: Vec<&String> = outcomes
        .iter()
        .filter_map(|o| o.filter_error.as_ref())
        .collect();
    let bind_errors: Vec<&String> = outcomes
        .iter()
        .filter_map(|o| o.bind_error.as_ref())
        .collect();
    assert!(
        bound > 0 && bound < PODS,
        "bound {bound} of {PODS} (filter errors {filter_errors:?}, bind errors {bind_errors:?})"
    );
    if mode != Mode::All {
        assert!(
            bind_errors.is_empty(),
            "binds after a successful filter should not fail: {bind_errors:?}"
        );
    }
    let elapsed = started.elapsed();
    println!(
        "{mode:?}: bound {bound} of {PODS}; {} filter errors; {} bind errors; {elapsed:?}",
        filter_errors.len(),
        bind_errors.len()
    );
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}
