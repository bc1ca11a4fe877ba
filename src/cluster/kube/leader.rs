//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! algorithm: the holder renews `renewTime` with an optimistic-concurrency update;
//! anyone may take the lease over once its record has not changed for
//! `leaseDurationSeconds`, timed by the taker's own clock (as client-go does), so
//! replicas whose clocks disagree cannot both lead.
//! Only the leader does cluster-wide housekeeping (handshakes, lock repair,
//! clearing expired reservations); every replica serves all requests.
//!
//! Written against plain get/create/replace (resourceVersion preconditions) rather
//! than a server-side-apply based crate, so it behaves the same on every API server
//! that implements optimistic concurrency.

use crate::clock::{self, SharedClock};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
#[cfg(test)]
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    /// Where time comes from.
    pub clock: SharedClock,
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

/// The Lease record last seen and when this process first saw it.
#[derive(Debug, Default)]
struct Observed {
    record: Option<LeaseSpec>,
    since: Option<Instant>,
}

impl Observed {
    /// Notes the record read at `now`; a record unlike the last one restarts the
    /// clock.
    fn see(&mut self, record: Option<&LeaseSpec>, now: Instant) {
        if self.since.is_none() || self.record.as_ref() != record {
            self.record = record.cloned();
            self.since = Some(now);
        }
    }

    /// Whether the lease may be taken over at `now`: nobody holds it, or its
    /// holder has not renewed it (as seen here) for its duration.
    fn expired(&self, now: Instant) -> bool {
        let Some(spec) = &self.record else {
            return true;
        };
        if spec.holder_identity.as_deref().unwrap_or("").is_empty() {
            return true;
        }
        let duration = u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(0);
        self.since
            .is_none_or(|since| now.duration_since(since) > Duration::from_secs(duration))
    }
}

/// Whether `holder` has the form of kube-scheduler's (client-go's) identities,
/// `<hostname>_<uuid>`, which this server never uses for itself.
fn is_kube_scheduler_identity(holder: &str) -> bool {
    let Some((host, uuid)) = holder.rsplit_once('_') else {
        return false;
    };
    let groups: Vec<&str> = uuid.split('-').collect();
    !host.is_empty()
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One acquire-or-renew attempt; returns whether we hold the lease afterwards.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderConfig,
    observed: &mut Observed,
) -> Result<bool, kube::Error> {
    let now = clock::timestamp(config.clock.wall());
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
    observed.see(lease.spec.as_ref(), config.clock.now());
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    let ours = holder == config.identity;
    if !ours && is_kube_scheduler_identity(holder) {
        // HAMi's --leader-elect follows kube-scheduler's own Lease, and its flags
        // name that Lease. Campaigning on it would, the first time kube-scheduler
        // lapsed, lock kube-scheduler out of scheduling for good.
        tracing::error!(
            lease = %config.name,
            holder,
            "this Lease belongs to kube-scheduler: give --leader-elect-resource-name a Lease of the extender's own"
        );
        return Ok(false);
    }
    if !ours && !observed.expired(config.clock.now()) {
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

/// Runs the election forever, updating `leadership` and counting rounds in
/// `metrics`.
pub async fn run(
    client: Client,
    config: LeaderConfig,
    leadership: Leadership,
    metrics: Arc<crate::metrics::Metrics>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut last_renewal = tokio::time::Instant::now();
    let mut observed = Observed::default();
    loop {
        let outcome = match try_acquire_or_renew(&api, &config, &mut observed).await {
            Ok(true) => {
                last_renewal = tokio::time::Instant::now();
                leadership.set(true);
                "leading"
            }
            Ok(false) => {
                leadership.set(false);
                "following"
            }
            Err(e) => {
                tracing::warn!(error = %e, lease = %config.name, "lease update failed");
                // Stop acting as leader before the lease could have passed to
                // someone else.
                if last_renewal.elapsed() + config.retry_period >= config.lease_duration {
                    leadership.set(false);
                }
                "failed"
            }
        };
        metrics.election_round(outcome);
        tokio::time::sleep(config.retry_period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str, renewed_at_second: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(
                Timestamp::from_second(renewed_at_second).unwrap_or(Timestamp::UNIX_EPOCH),
            )),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_expires_a_duration_after_its_record_last_changed_here() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut observed = Observed::default();
        // The holder's clock runs far behind ours: its renewTime looks ancient,
        // but it renews, so the lease is not ours to take.
        observed.see(Some(&held_by("a", 1_000)), at(0));
        assert!(!observed.expired(at(10)));
        observed.see(Some(&held_by("a", 1_002)), at(12));
        assert!(!observed.expired(at(26)), "renewed at 12 (our clock)");
        // It stops renewing: the same record for longer than the duration.
        observed.see(Some(&held_by("a", 1_002)), at(20));
        assert!(!observed.expired(at(27)));
        assert!(observed.expired(at(28)));
        // A clock far ahead does not make a fresh lease look expired either.
        let mut fresh = Observed::default();
        fresh.see(Some(&held_by("b", 4_000_000_000)), at(0));
        assert!(!fresh.expired(at(1)));
    }

    #[test]
    fn kube_scheduler_identities_are_recognised() {
        assert!(is_kube_scheduler_identity(
            "hami-scheduler-7d9f8-x2x5q_5b1c1f4e-2c39-4d5b-9a43-0c6f0e7d2a11"
        ));
        for ours in [
            "vgpu-scheduler-7d9f8-x2x5q",
            "host_with_underscores",
            "_5b1c1f4e-2c39-4d5b-9a43-0c6f0e7d2a11",
            "h_5b1c1f4e-2c39-4d5b-9a43-0c6f0e7d2a1z",
            "",
        ] {
            assert!(!is_kube_scheduler_identity(ours), "{ours}");
        }
    }

    #[test]
    fn an_unheld_or_missing_lease_is_free() {
        let now = Instant::now();
        let mut observed = Observed::default();
        assert!(observed.expired(now));
        observed.see(Some(&held_by("", 5)), now);
        assert!(observed.expired(now));
        observed.see(None, now);
        assert!(observed.expired(now));
    }
}
