//! Recording a trace of what the scheduler sees (`serve --record-trace FILE`),
//! for `simulate` to replay as a workload: pods as they arrive, when they are
//! bound and when they go, and the PodGroups they belong to. One JSON object a
//! line, appended as it happens (see `line` for the format).
//!
//! Recording never slows a request: the scheduler's hooks hand events to a
//! [`TraceRecorder`], which queues them without waiting, and a thread of its own
//! writes them out.

pub mod budget;
pub mod line;
pub mod line_cap;
pub mod private;
pub mod read;
pub mod recorder;
pub mod scrub;
pub mod seen;
pub mod writer;

pub use line::{TraceEvent, TraceLine};
pub use read::{Trace, looks_like_trace, parse_trace};
pub use recorder::{TraceRecorder, TraceSettings};
pub use writer::TraceWriter;
