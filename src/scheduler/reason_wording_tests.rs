//! The reasons this server hands kube-scheduler, walked through one by one, read
//! without a `%`. kube-scheduler writes them into its `FailedScheduling` event
//! through a format string (see `extender::format_verbs`); the fullwidth stand-in
//! there is for a `%` of user data, never for our own words. Reasons built with
//! numbers are driven with the numbers that would put a `%` next to them.

use super::GangConfig;
use super::busy_nodes::BUSY_OR_WORSE;
use super::gang_tests::{Cluster, queue};
use super::registration::{NODE_DEVICE_PLUGIN_NOT_READY, NODE_REGISTRATION_INVALID};
use crate::fit::{CardReason, FitRejection};
use crate::ledger::NODE_UNREGISTERED;
use crate::node_metrics::UsagePercent;
use crate::placement::NodeRejection;
use crate::resources::Excess;
use crate::volcano::framework::rejection::Rejection;
use crate::volcano::plugins::usage::Usage;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// Fails, naming where it came from, when the text holds a format verb.
fn assert_verb_free(source: &str, text: &str) {
    assert!(
        !text.contains('%'),
        "{source} hands kube-scheduler a format verb: {text}"
    );
}

#[test]
fn every_fit_reason_reads_without_a_format_verb() {
    let mut rejections = vec![NodeRejection::Fit(FitRejection::InsufficientDevice)];
    for &reason in CardReason::ALL {
        for (count, total) in [(1, 1), (3, 8), (10, 12)] {
            rejections.push(NodeRejection::Fit(FitRejection::Cards {
                counts: BTreeMap::from([(reason, count)]),
                total,
            }));
        }
    }
    rejections.push(NodeRejection::Fit(FitRejection::Cards {
        counts: CardReason::ALL.iter().map(|&r| (r, 1)).collect(),
        total: CardReason::ALL.len(),
    }));
    for unusable in [
        NODE_UNREGISTERED,
        NODE_REGISTRATION_INVALID,
        NODE_DEVICE_PLUGIN_NOT_READY,
        BUSY_OR_WORSE,
    ] {
        rejections.push(NodeRejection::Unusable(unusable));
    }
    for rejection in &rejections {
        assert_verb_free("a fit reason", &rejection.to_string());
    }
}

#[test]
fn usage_refusals_read_without_a_format_verb_at_any_threshold() {
    for threshold in [0.0, 12.5, 80.0, 99.99, 100.0] {
        let plugin = Usage {
            cpu_threshold: threshold,
            memory_threshold: threshold,
            ..Usage::default()
        };
        for (cpu, memory) in [(threshold + 1.0, 0.0), (0.0, threshold + 1.0)] {
            let usage = UsagePercent {
                cpu,
                memory,
                age: Duration::ZERO,
            };
            let refusal = plugin.refusal(&usage).expect("above the threshold");
            assert!(refusal.contains(" percent threshold"), "{refusal}");
            assert_verb_free("the usage plugin", &refusal);
        }
    }
}

#[test]
fn queue_refusals_read_without_a_format_verb() {
    let dimensions = [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "nvidia.com/gpucores",
        "nvidia.com/gpumem",
        "card/NVIDIA-H100-80GB-HBM3",
    ];
    let mut rejections = vec![Rejection::unknown_queue("team")];
    for dimension in dimensions {
        for ancestor in [None, Some("root")] {
            rejections.push(Rejection::exceeded(
                "capacity",
                "team",
                Excess {
                    dimension: dimension.to_string(),
                    amount: 100_500,
                    limit: 80_000,
                },
                "capability",
                ancestor,
            ));
        }
    }
    for rejection in &rejections {
        assert_verb_free("a queue refusal", &rejection.to_string());
    }
}

/// The gang and queue wait messages a waiting member's `/filter` answers with:
/// a gang too big for the cluster, one over its queue's capability and one whose
/// queue does not exist.
#[tokio::test]
async fn gang_wait_messages_read_without_a_format_verb() {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    c.s.apply_queue(&queue(
        "team",
        json!({"weight": 1, "capability": {"nvidia.com/gpu": "1"}}),
    ));
    c.gang("big", 8, "default", "b", 8);
    c.gang("wide", 2, "team", "w", 2);
    c.gang("lost", 1, "nowhere", "l", 1);
    c.s.run_gang_cycle().await;
    for gang in ["ml/big", "ml/wide", "ml/lost"] {
        let message = c.verdict(gang).message.expect("the gang waits");
        assert_verb_free("a gang wait", &message);
    }
    assert_eq!(
        c.verdict("ml/lost").message.as_deref(),
        Some("queue \"nowhere\" does not exist")
    );
}
