//! Timing a cycle's stages must not itself cost a stage: the list of stages is
//! never grown while the cycle runs, since growing it may make the allocator
//! sort out everything the cycle freed so far, and the stage that follows would
//! be charged for it (the events stage was, for about 4 ms of a 60 ms cycle).

use super::{CycleStages, STAGES};

#[test]
fn timing_every_stage_of_a_cycle_never_grows_the_list_of_stages() {
    let mut stages = CycleStages::default();
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
