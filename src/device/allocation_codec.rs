//! stand-in
use crate::device::model::{ContainerDevice, PodDevices};
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AllocationCodecError(String);
pub fn encode_pod_devices(devices: &PodDevices) -> String {
    let mut s = String::new();
    for c in devices { for d in c { s.push_str(&format!("{},{},{},{}:", d.uuid, d.vendor, d.usedmem, d.usedcores)); } s.push(';'); }
    s
}
pub fn decode_pod_devices(value: &str) -> Result<PodDevices, AllocationCodecError> {
    let mut parts: Vec<&str> = value.split(';').collect();
    if parts.last() == Some(&"") { parts.pop(); }
    parts.iter().map(|c| c.split(':').filter(|i| i.contains(',')).map(|i| {
        let f: Vec<&str> = i.split(',').collect();
        if f.len() < 4 { return Err(AllocationCodecError("pod annotation format error, missing fields, do not use nodeName in task spec".into())); }
        Ok(ContainerDevice { uuid: f[0].into(), vendor: f[1].into(), usedmem: f[2].parse().map_err(|_| AllocationCodecError("mem".into()))?, usedcores: f[3].parse().map_err(|_| AllocationCodecError("cores".into()))? })
    }).collect()).collect()
}
