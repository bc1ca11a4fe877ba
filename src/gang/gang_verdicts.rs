//! Every gang's verdict as the last cycle left it, kept as the session handed
//! them over: in gang order, looked up by gang. Copying thousands of verdicts
//! into a list each cycle, only to show a few of them, cost the planner more
//! than deciding the few that changed; the session's persistent map is shared
//! instead, so that building the view and dropping the last one cost nothing
//! per gang.

use crate::volcano::framework::{GangKey, GangVerdict, Verdicts};
use serde::{Serialize, Serializer};
use std::sync::Arc;

/// The verdicts, by gang.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GangVerdicts(Verdicts);

impl GangVerdicts {
    /// The verdicts in gang order.
    pub fn iter(&self) -> impl Iterator<Item = &GangVerdict> {
        self.0.values().map(|v| &**v)
    }

    /// How many gangs there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no gang.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One gang's verdict.
    pub fn get(&self, gang: &GangKey) -> Option<&GangVerdict> {
        self.0.get(gang).map(|v| &**v)
    }
}

impl From<Verdicts> for GangVerdicts {
    fn from(verdicts: Verdicts) -> Self {
        Self(verdicts)
    }
}

impl<'a> IntoIterator for &'a GangVerdicts {
    type Item = &'a GangVerdict;
    type IntoIter = std::iter::Map<
        imbl::ordmap::Values<'a, GangKey, Arc<GangVerdict>, imbl::shared_ptr::DefaultSharedPtr>,
        fn(&'a Arc<GangVerdict>) -> &'a GangVerdict,
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.values().map(|v| &**v)
    }
}

impl Serialize for GangVerdicts {
    /// A list of verdicts in gang order, as `/debug/queues` always showed them.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.values())
    }
}
