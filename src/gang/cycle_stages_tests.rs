//! Timing a cycle's stages must not itself cost a stage: the list of stages is
//! never grown while the cycle runs, since growing it may make the allocator
//! sort out everything the cycle freed so far, and the stage that follows would
//! be charged for it (the events stage was, for about 4 ms of a 60 ms cycle).
//! And with the stage log off, no clock is read at all.

use super::{CycleStages, STAGES};
use crate::log_writer::tests::Captured;

#[test]
fn timing_every_stage_of_a_cycle_never_grows_the_list_of_stages() {
    let mut stages = CycleStages::new(true);
    let list = stages.stages.as_ptr();
    // A cycle's stages, from settling pipelined plans to the view.
    for _ in 0..STAGES {
        stages.done("stage");
    }
    assert_eq!(stages.stages.len(), STAGES);
    assert_eq!(
        stages.stages.as_ptr(),
        list,
        "the list of stages was moved to grow while the cycle ran"
    );
}

/// Runs a cycle's stages under a log at `level` and returns what was logged.
fn cycle_logged_at(level: tracing::Level) -> (usize, String) {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(move || writer.clone())
        .finish();
    let timed = tracing::subscriber::with_default(subscriber, || {
        let mut stages = CycleStages::default();
        stages.done("open");
        stages.done("allocate");
        stages.log();
        stages.stages.len()
    });
    let text = String::from_utf8(out.0.lock().clone()).expect("UTF-8");
    (timed, text)
}

#[test]
fn the_stage_log_names_every_stage_when_debug_is_on() {
    let (timed, text) = cycle_logged_at(tracing::Level::DEBUG);
    assert_eq!(timed, 2);
    assert!(text.contains("planning cycle stages"), "{text}");
    assert!(
        text.contains("open=") && text.contains("allocate="),
        "{text}"
    );
}

#[test]
fn with_the_stage_log_off_no_stage_is_timed() {
    let (timed, text) = cycle_logged_at(tracing::Level::INFO);
    assert_eq!(timed, 0, "stages were timed for a log nobody writes");
    assert!(text.is_empty(), "{text}");
}
