//! Annotation and label keys shared with HAMi's device plugin and tooling.

/// Node: devices registered by the device plugin.
pub const NODE_REGISTER: &str = "hami.io/node-nvidia-register";
/// Node: GPU pair interconnect scores.
pub const NODE_SCORE: &str = "hami.io/node-nvidia-score";
/// Node: comma-separated GPU UUIDs excluded from new allocations.
pub const DEVICE_CORDON: &str = "hami.io/device-cordon";
/// Node: the per-node bind lock.
pub const NODE_LOCK: &str = "hami.io/mutex.lock";
/// Pod (annotation and label): node chosen by the scheduler.
pub const VGPU_NODE: &str = "hami.io/vgpu-node";
/// Pod: Unix seconds when the GPUs were chosen.
pub const VGPU_TIME: &str = "hami.io/vgpu-time";
/// Pod: devices still to hand to containers (the device plugin erases consumed ones).
pub const DEVICES_TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";
/// Pod: devices allocated to the pod; the source of truth for usage.
pub const DEVICES_ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
/// Pod: MIG placements (scheduler), with runtime ids added by the device plugin.
pub const MIG_ALLOCATIONS: &str = "hami.io/vgpu-mig-allocations";
/// Pod: `allocating` (bind), `success` / `failed` (device plugin).
pub const BIND_PHASE: &str = "hami.io/bind-phase";
/// Pod: Unix seconds of the bind.
pub const BIND_TIME: &str = "hami.io/bind-time";
