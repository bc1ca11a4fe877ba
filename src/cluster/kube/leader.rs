//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! algorithm: the holder renews `renewTime` with an optimistic-concurrency update;
//! anyone may take the lease over once `renewTime + leaseDurationSeconds` passed.
//! Only the leader does cluster-wide housekeeping (handshakes, lock repair,
//! clearing expired reservations); every replica serves all requests.
//!
//! Written against plain get/create/replace (resourceVersion preconditions) rather
//! than a server-side-apply based crate, so it behaves the same on every API server
//! that implements optimistic concurrency.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// Our identity (pod name).
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How often we try to acquire or renew.
    pub retry_period: Duration,
}

/// Whether this replica leads; shared with the housekeeping tasks.
#[derive(Debug, Clone)]
pub struct Leadership(Arc<AtomicBool>);

impl Leadership {
    /// Always leader (leader election disabled: a single replica).
    pub fn always() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    /// Not leader until the election says so.
    pub fn follower() -> Self {
        Self(Arc::new(AtomicBool::new(false)))
    }

    /// True while this replica holds the lease.
    pub fn is_leader(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Records the outcome of an election round.
    pub fn set(&self, leader: bool) {
        let was = self.0.swap(leader, Ordering::AcqRel);
        if was != leader {
            tracing::info!(leader, "leadership changed");
        }
    }
}

fn expired(lease: &Lease, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return true;
    };
    if spec.holder_identity.as_deref().unwrap_or("").is_empty() {
        return true;
    }
    let Some(renewed) = spec.renew_time.as_ref() else {
        return true;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    now.as_second() > renewed.0.as_second() + duration
}

/// One acquire-or-renew attempt; returns whether we hold the lease afterwards.
pub async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderConfig,
) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let duration = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
    if !ours && !expired(&lease, now) {
        return Ok(false);
    }
    let spec = lease.spec.get_or_insert_with(Default::default);
    if !ours {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(MicroTime(now));
    spec.lease_duration_seconds = Some(duration);
    // replace carries the resourceVersion we read: a concurrent writer makes it 409.
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs the election forever, updating `leadership`.
pub async fn run(client: Client, config: LeaderConfig, leadership: Leadership) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut last_renewal = tokio::time::Instant::now();
    loop {
        match try_acquire_or_renew(&api, &config).await {
            Ok(true) => {
                last_renewal = tokio::time::Instant::now();
                leadership.set(true);
            }
            Ok(false) => leadership.set(false),
            Err(e) => {
                tracing::warn!(error = %e, lease = %config.name, "lease update failed");
                // Stop acting as leader before the lease could have passed to
                // someone else.
                if last_renewal.elapsed() + config.retry_period >= config.lease_duration {
                    leadership.set(false);
                }
            }
        }
        tokio::time::sleep(config.retry_period).await;
    }
}
