//! Following kube-scheduler's own leader election: this replica counts as leader
//! while the kube-scheduler container of the same pod holds its Lease. The gang
//! planner uses it so that planning and `/filter` run in one process, against one
//! ledger: a planner in one replica and an active kube-scheduler calling the
//! extender of another would both reserve GPUs, each unaware of the other's newest
//! reservations until the watch delivers them.
//!
//! kube-scheduler's holder identity is `<hostname>_<uuid>`, and a pod's hostname is
//! its name, so the holder is recognised by the prefix `<POD_NAME>_`.

use super::leader::Leadership;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use std::time::Duration;

/// Whether `identity`'s pod holds the lease at `now`.
pub fn held_by_pod(lease: &Lease, pod: &str, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    let ours = holder == pod
        || holder
            .strip_prefix(pod)
            .is_some_and(|rest| rest.starts_with('_'));
    if !ours {
        return false;
    }
    let Some(renewed) = spec.renew_time.as_ref() else {
        return false;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    now.as_second() <= renewed.0.as_second() + duration
}

/// Watches the Lease `namespace/name` every `period`, updating `leadership`. A
/// failed read keeps the last answer only until the lease could have expired.
pub async fn run(
    client: Client,
    namespace: String,
    name: String,
    pod: String,
    period: Duration,
    leadership: Leadership,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let mut last_seen = tokio::time::Instant::now();
    loop {
        match api.get_opt(&name).await {
            Ok(Some(lease)) => {
                last_seen = tokio::time::Instant::now();
                leadership.set(held_by_pod(&lease, &pod, Timestamp::now()));
            }
            Ok(None) => leadership.set(false),
            Err(e) => {
                tracing::warn!(error = %e, lease = %name, "cannot read kube-scheduler's Lease");
                if last_seen.elapsed() > Duration::from_secs(15) {
                    leadership.set(false);
                }
            }
        }
        tokio::time::sleep(period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: Timestamp) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ks"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": renewed.to_string()}
        }))
        .unwrap()
    }

    #[test]
    fn the_pod_of_the_holding_kube_scheduler_leads_while_the_lease_is_fresh() {
        let now = Timestamp::now();
        let l = lease("vgpu-scheduler-7d9f-abcde_3c4b9a1e-0f", now);
        assert!(held_by_pod(&l, "vgpu-scheduler-7d9f-abcde", now));
        assert!(
            !held_by_pod(&l, "vgpu-scheduler-7d9f", now),
            "prefix of another pod"
        );
        assert!(!held_by_pod(&l, "vgpu-scheduler-7d9f-xyz", now));
        let later = Timestamp::from_second(now.as_second() + 16).unwrap();
        assert!(
            !held_by_pod(&l, "vgpu-scheduler-7d9f-abcde", later),
            "expired"
        );
    }
}
