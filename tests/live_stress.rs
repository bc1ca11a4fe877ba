//! Stress in live mode: a cluster of 50 nodes x 4 GPUs (4 slots each) and a flood
//! of vGPU pods that oversubscribes it, created in the fake API server and driven
//! through `/filter` + `/bind` with 48 requests in flight, while a kubelet / device
//! plugin stand-in marks pods allocated and finishes or deletes some of them.
//!
//! A sampler polls `/debug/state` every ~100 ms and checks, at every sample:
//! no GPU over its slots, memory or cores in the scheduler's ledger; the ledger's
//! per-GPU totals equal the sum of its pods; and the cluster itself (the
//! allocation annotations of live pods in the fake) never books a GPU over its
//! capacity. At the end the state equals that of a fresh server started on the
//! same API server (a from-scratch rebuild).
//!
//! Two runs: 2000 pods with the default resync period, 1000 pods with a full
//! resync every 2 s. `VGPU_STRESS_PODS` overrides both pod counts.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::{Rng, State, Usage};

const NS: &str = "stress";
const NODES: usize = 50;
const GPUS_PER_NODE: u32 = 4;
const SLOTS: u32 = 4;
const IN_FLIGHT: usize = 48;

#[derive(Debug, Clone, Copy)]
struct Spec {
    gpus: u32,
    mem: u64,
    cores: u32,
    /// After its bind: 0 keep running, 1 finish (Succeeded), 2 delete.
    fate: u8,
    fate_after_ms: u64,
}

fn specs(n: usize) -> Vec<Spec> {
    let mut rng = Rng::new(0x5eed_1234);
    let mems = [4000, 8000, 10000, 16000, 20000, 30000];
    let cores = [0, 10, 20, 25, 30, 50];
    (0..n)
        .map(|_| {
            let gpus = if rng.range(0, 9) < 7 { 1 } else { 2 };
            let exclusive = rng.range(0, 9) == 0;
            let (mem, c) = if exclusive {
                (0, 100)
            } else {
                (
                    mems[rng.range(0, 5) as usize],
                    cores[rng.range(0, 5) as usize],
                )
            };
            let fate = match rng.range(0, 9) {
                0..=1 => 1,
                2 => 2,
                _ => 0,
            };
            Spec {
                gpus,
                mem,
                cores: c,
                fate,
                fate_after_ms: rng.range(0, 800),
            }
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    bound: AtomicUsize,
    rejected: AtomicUsize,
    filter_errors: AtomicUsize,
    bind_errors: AtomicUsize,
    finished: AtomicUsize,
    deleted: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

/// Everything wrong with one sample (empty when fine).
fn check_sample(state: &State, api: &FakeApiServer) -> Vec<String> {
    let mut bad = over_capacity(&state.gpus())
        .into_iter()
        .map(|s| format!("ledger over capacity: {s}"))
        .collect::<Vec<_>>();
    // The per-GPU totals are the sum of the tracked pods.
    let mut from_pods: BTreeMap<String, Usage> = BTreeMap::new();
    for p in state.pods() {
        if let Some(usage) = p["usage"].as_object() {
            for (uuid, u) in usage {
                let t = from_pods.entry(uuid.clone()).or_default();
                t.used += u["used"].as_u64().unwrap_or(0);
                t.usedmem += u["usedmem"].as_u64().unwrap_or(0);
                t.usedcores += u["usedcores"].as_u64().unwrap_or(0);
            }
        }
    }
    let gpus = state.gpus();
    for g in &gpus {
        let sum = from_pods.get(&g.id).copied().unwrap_or_default();
        if sum != g.usage {
            bad.push(format!(
                "ledger totals of {} ({:?}) differ from its pods ({sum:?})",
                g.id, g.usage
            ));
        }
    }
    // The cluster's own record never books a GPU over capacity.
    let cluster = cluster_usage(api);
    for g in &gpus {
        if let Some(u) = cluster.get(&g.id)
            && (u.used > g.count || u.usedmem > g.devmem || u.usedcores > g.devcore)
        {
            bad.push(format!(
                "cluster annotations book {} on {} over capacity: {u:?} of {}/{}/{}",
                g.id, g.node, g.count, g.devmem, g.devcore
            ));
        }
    }
    bad
}

/// What the server logged about resync repairs (the first `n` lines).
fn resync_lines(server: &LiveServer, n: usize) -> String {
    server
        .log()
        .lines()
        .filter(|l| l.contains("resync:") || l.contains("missed delete"))
        .take(n)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn drive(
    server: Arc<LiveServer>,
    api: Arc<FakeApiServer>,
    specs: Arc<Vec<Spec>>,
    next: Arc<AtomicUsize>,
    tally: Arc<Tally>,
    fates: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
) {
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= specs.len() {
            return;
        }
        let spec = specs[i];
        let name = format!("job-{i:04}");
        // The pod appears in the API right before kube-scheduler asks about it: the
        // extender's own watch may not have seen it yet.
        let stored = create_pod(&api, gpu_pod(NS, &name, spec.gpus, spec.mem, spec.cores));
        let uid = uid_of(&stored);
        let answer = server.filter(&stored, &refs).await;
        let node = match answer["NodeNames"].as_array() {
            Some(n) if n.len() == 1 => n[0].as_str().unwrap_or("").to_string(),
            _ => {
                if answer["Error"].as_str().is_some_and(|e| !e.is_empty()) {
                    tally.filter_errors.fetch_add(1, Ordering::Relaxed);
                    tally
                        .errors
                        .lock()
                        .push(format!("filter {name}: {}", answer["Error"]));
                } else {
                    tally.rejected.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
        };
        let error = server.bind(NS, &name, &uid, &node).await;
        if !error.is_empty() {
            tally.bind_errors.fetch_add(1, Ordering::Relaxed);
            tally.errors.lock().push(format!("bind {name}: {error}"));
            continue;
        }
        tally.bound.fetch_add(1, Ordering::Relaxed);
        // The device plugin hands the GPUs over (and so frees the node lock).
        device_plugin_allocated(&api, NS, &name);
        if spec.fate != 0 {
            let api = api.clone();
            let tally = tally.clone();
            fates.lock().push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(spec.fate_after_ms)).await;
                if spec.fate == 1 {
                    api.set_pod_phase(NS, &name, "Succeeded");
                    tally.finished.fetch_add(1, Ordering::Relaxed);
                } else {
                    api.delete("Pod", Some(NS), &name);
                    tally.deleted.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
    }
}

/// The two floods run one after the other: each wants the machine's cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn pod_count(default: usize) -> usize {
    std::env::var("VGPU_STRESS_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// With the default resync period (5 m) nothing but the watches and our own
/// writes feed the ledger during the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversubscribed_flood_never_overbooks_and_matches_a_rebuild() {
    let _turn = SERIAL.lock().await;
    flood(pod_count(2000), "5m", false).await;
}

/// The same with a full resync every 2 s while pods are filtered, bound,
/// finished and deleted: a resync must repair drift, never create it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversubscribed_flood_with_frequent_resync_never_overbooks() {
    let _turn = SERIAL.lock().await;
    flood(pod_count(1000), "2s", true).await;
}

/// `resyncs_during_run`: the resync period is short enough to wait for one at
/// the end.
async fn flood(pods: usize, resync: &str, resyncs_during_run: bool) {
    let started = Instant::now();
    let api = Arc::new(FakeApiServer::start().await);
    for i in 0..NODES {
        add_node(&api, &format!("node-{i:02}"), GPUS_PER_NODE, SLOTS);
    }
    let server = Arc::new(LiveServer::start(&api, &["--resync-period", resync]).await);

    let stop = Arc::new(AtomicBool::new(false));
    // Distinct violations (first seen, with the time into the run) and how many
    // samples had any.
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let bad_samples = Arc::new(AtomicUsize::new(0));
    let samples = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (server, api, stop, violations, samples, bad_samples) = (
            server.clone(),
            api.clone(),
            stop.clone(),
            violations.clone(),
            samples.clone(),
            bad_samples.clone(),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Acquire) {
                let state = server.state().await;
                let bad = check_sample(&state, &api);
                samples.fetch_add(1, Ordering::Relaxed);
                if !bad.is_empty() {
                    bad_samples.fetch_add(1, Ordering::Relaxed);
                    let mut v = violations.lock();
                    for b in bad {
                        if v.len() < 20 && !v.iter().any(|x| x.ends_with(&b)) {
                            v.push(format!("[{:?}] {b}", started.elapsed()));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let specs = Arc::new(specs(pods));
    let next = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(Tally::default());
    let fates: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
    let drivers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            tokio::spawn(drive(
                server.clone(),
                api.clone(),
                specs.clone(),
                next.clone(),
                tally.clone(),
                fates.clone(),
            ))
        })
        .collect();
    for d in drivers {
        d.await.expect("driver task");
    }
    let pending: Vec<_> = std::mem::take(&mut *fates.lock());
    for f in pending {
        f.await.expect("fate task");
    }
    let driven = started.elapsed();

    // Keep sampling until the watches have delivered every change made so far
    // and, with frequent resyncs, until a resync that began after that has been
    // applied (the one under way may have begun before).
    watch_barrier(&api, &server).await;
    if resyncs_during_run {
        let finished = server.resyncs().await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.resyncs().await < finished + 2 {
            assert!(
                Instant::now() < deadline,
                "no resync finished within 60 s; log:\n{}",
                server.log_tail(20)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    stop.store(true, Ordering::Release);
    sampler.await.expect("sampler");

    // A from-scratch rebuild on the same cluster must agree with the survivor.
    let fresh = LiveServer::start(&api, &["--resync-period", resync]).await;
    let rebuilt = fresh.state().await;
    let (survivor, same) = server
        .wait_state(Duration::from_secs(10), |s| stable(s) == stable(&rebuilt))
        .await;
    let final_check = check_sample(&survivor, &api);
    let cluster = cluster_usage(&api);

    let t = &tally;
    let summary = format!(
        "resync {resync}: {pods} pods in {driven:?} (total {:?}): bound {}, rejected {}, filter errors {}, bind errors {}, \
         finished {}, deleted {}; {} samples ({} with violations); {} pods tracked at the end",
        started.elapsed(),
        t.bound.load(Ordering::Relaxed),
        t.rejected.load(Ordering::Relaxed),
        t.filter_errors.load(Ordering::Relaxed),
        t.bind_errors.load(Ordering::Relaxed),
        t.finished.load(Ordering::Relaxed),
        t.deleted.load(Ordering::Relaxed),
        samples.load(Ordering::Relaxed),
        bad_samples.load(Ordering::Relaxed),
        survivor.pods().len(),
    );
    eprintln!("{summary}");
    let errors = t.errors.lock().clone();
    for e in errors.iter().take(5) {
        eprintln!("  {e}");
    }

    let violations = violations.lock().clone();
    assert!(
        violations.is_empty(),
        "invariant violations while sampling ({summary}):\n{}\nresync repairs the server logged:\n{}",
        violations.join("\n"),
        resync_lines(&server, 12)
    );
    assert!(final_check.is_empty(), "final state: {final_check:?}");
    assert!(
        same,
        "survivor differs from a from-scratch rebuild ({summary}):\n{}\nserver log tail:\n{}",
        json_diff(&stable(&survivor), &stable(&rebuilt)).join("\n"),
        resync_lines(&server, 12)
    );
    // Every GPU's usage is exactly what the cluster's live pods hold.
    for g in survivor.gpus() {
        assert_eq!(
            g.usage,
            cluster.get(&g.id).copied().unwrap_or_default(),
            "GPU {} on {}",
            g.id,
            g.node
        );
    }
    assert!(
        survivor.pods().iter().all(|p| p["phase"] == "Bound"),
        "no reservation left behind: {}",
        survivor.0
    );
    assert_eq!(
        t.bind_errors.load(Ordering::Relaxed),
        0,
        "every /bind after a successful /filter succeeds: {errors:?}"
    );
    let bound = t.bound.load(Ordering::Relaxed);
    assert!(
        bound >= pods / 5 && t.rejected.load(Ordering::Relaxed) > 0,
        "the flood both filled and oversubscribed the cluster: {summary}"
    );
}
