//! What the members of waiting gangs were told, followed cycle after cycle
//! from the verdicts that changed only, equals what every gang's verdict says
//! now: each waiting gang's reason, and nothing for gangs placed or gone.

use super::changed_reasons;
use crate::volcano::framework::testing;
use crate::volcano::framework::{GangKey, GangPhase, GangVerdict, Verdicts};
use proptest::prelude::*;
use std::collections::BTreeMap;

const PHASES: [GangPhase; 3] = [GangPhase::Pending, GangPhase::Inqueue, GangPhase::Running];

fn key(gang: usize) -> GangKey {
    testing::gang_key(&format!("g{gang}"))
}

fn verdict(gang: usize, phase: usize, reason: Option<usize>) -> GangVerdict {
    let message = reason.map(|r| format!("reason {r}"));
    testing::verdict(&format!("g{gang}"), "q", PHASES[phase], message)
}

/// What the members should have been told last: every waiting gang's reason.
fn told_anew(verdicts: &Verdicts) -> BTreeMap<GangKey, String> {
    verdicts
        .iter()
        .filter(|(_, v)| v.phase != GangPhase::Running)
        .filter_map(|(k, v)| Some((k.clone(), v.message.clone()?)))
        .collect()
}

proptest! {
    #[test]
    fn reasons_told_follow_the_verdicts_that_changed(
        cycles in prop::collection::vec(
            prop::collection::vec(
                (0usize..30, prop::option::of((0usize..3, prop::option::of(0usize..3)))),
                0..10,
            ),
            1..12,
        )
    ) {
        let mut told = BTreeMap::new();
        let mut told_from = Verdicts::new();
        let mut verdicts = Verdicts::new();
        for changes in cycles {
            for (gang, change) in changes {
                match change {
                    Some((phase, reason)) => {
                        verdicts.insert(key(gang), std::sync::Arc::new(verdict(gang, phase, reason)));
                    }
                    None => {
                        verdicts.remove(&key(gang));
                    }
                }
            }
            let (changed, forgotten) = changed_reasons(&told, &told_from, &verdicts);
            for (gang, message) in &changed {
                prop_assert_ne!(told.get(gang), Some(message), "told again the same reason");
            }
            for gang in forgotten {
                told.remove(&gang);
            }
            told.extend(changed);
            told_from = verdicts.clone();
            prop_assert_eq!(&told, &told_anew(&verdicts));
        }
    }
}
