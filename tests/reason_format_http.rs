//! Reasons kube-scheduler formats: it writes the extender's `FailedNodes` and
//! `Error` into the pod's `FailedScheduling` event through a format string, where
//! a `%` is a verb. A `%` a user put in a gang name reaches `/filter`'s
//! answer and `/debug/queues` as `％`, with the rest of the name intact.

mod support;

use serde_json::{Value, json};
use support::*;

const NS: &str = "ml";

/// A one-GPU pod whose annotations name its gang.
fn annotated_pod(name: &str, annotations: Value) -> Value {
    let mut p = pod(NS, name).gpus(1, 0, 0).build();
    p["metadata"]["annotations"] = annotations;
    p
}

/// Every string in the value, keys included.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

#[tokio::test]
async fn a_percent_sign_in_a_gang_name_never_reaches_kube_scheduler() {
    let (server, _conf) = Server::start_with_scheduler_conf(
        vec![node("n1", &[h100(&gpu_uuid("n1", 0), 0)], &[])],
        GANG_PROPORTION_CONF,
    )
    .await;

    // A gang named by the pod's annotation alone (no PodGroup yet).
    let member = annotated_pod(
        "member",
        json!({"scheduling.k8s.io/group-name": "team%three"}),
    );
    let answer = server.filter(&member, &["n1"]).await;
    let reason = answer["FailedNodes"]["n1"].as_str().unwrap_or_default();
    assert!(reason.contains("ml/team％three"), "{answer}");
    assert_eq!(
        answer["FailedAndUnresolvableNodes"]["n1"], reason,
        "{answer}"
    );
    assert!(!answer.to_string().contains('%'), "{answer}");

    // `/debug/queues` repeats the reason the gang waits for.
    let queues = planned_gang(&server, "ml/team%three").await;
    let gang = gang_of(&queues, "ml/team%three").expect("judged");
    let message = gang["message"].as_str().unwrap_or_default();
    assert!(message.contains("ml/team％three"), "{gang}");
    let with_sign: Vec<String> = strings(&queues["gangs"])
        .into_iter()
        // The gang's own name is an identity, not a formatted message.
        .filter(|s| s.contains('%') && s != "ml/team%three")
        .collect();
    assert!(with_sign.is_empty(), "{with_sign:?}");
}

/// The gang's entry in `/debug/queues`.
fn gang_of<'a>(queues: &'a Value, gang: &str) -> Option<&'a Value> {
    queues["gangs"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["gang"] == gang))
}

/// `/debug/queues` once a planning cycle has judged the gang.
async fn planned_gang(server: &Server, gang: &str) -> Value {
    for _ in 0..200 {
        let (status, text) = server.get("/debug/queues").await;
        assert_eq!(status, 200, "{text}");
        let queues: Value = serde_json::from_str(&text).expect("JSON");
        if gang_of(&queues, gang).is_some() {
            return queues;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no planning cycle judged {gang}");
}
