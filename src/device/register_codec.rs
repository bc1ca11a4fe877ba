//! Codec for the node annotation `hami.io/node-nvidia-register`, through which HAMi's
//! device plugin tells the scheduler which GPUs a node has.
//!
//! Two wire formats exist in the field and both are decoded:
//!
//! * the JSON array written by device plugins v2.8 and later, e.g.
//!   `[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0,"mode":"hami-core"}]`;
//! * the legacy text format of device plugins up to v2.7, e.g.
//!   `GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:`.
//!
//! A value whose trimmed text starts with `[` is JSON; anything else is the legacy format.
//! Encoding always produces the JSON format. A GPU in `mig` mode also lists its
//! `migProfiles` (see `mig`); a profile that could not be placed safely (no name,
//! an empty placement, a placement beyond the tracked slices) makes the whole value
//! invalid, like any other malformed field.

use crate::device::mig::{MIG_SLICES, MigPlacement, MigProfile};
use crate::device::model::GpuDevice;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Sharing mode assumed when the device plugin does not state one (legacy 7-field
/// entries and JSON objects without a `mode` key).
pub const DEFAULT_MODE: &str = "hami-core";

/// Why a register annotation could not be decoded. Any of these means the node's
/// NVIDIA devices cannot be (re-)registered from this value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegisterError {
    /// The annotation decoded to an empty device list.
    #[error("no gpu found on node")]
    NoGpu,
    /// The value looked like JSON (starts with `[`) but is not a valid device array.
    #[error("invalid node annotation JSON: {0}")]
    Json(String),
    /// Legacy format: the value contains no `:` at all.
    #[error("node annotation missing device separator")]
    MissingSeparator,
    /// Legacy format: a non-empty device segment contains no `,`.
    #[error("malformed node annotation segment: {0:?}")]
    MalformedSegment(String),
    /// Legacy format: a device segment has neither 7 nor 9 comma-separated fields.
    #[error("unexpected field count {0} in node annotation")]
    FieldCount(usize),
    /// A numeric or boolean field could not be parsed or is out of range.
    #[error("invalid {field} field: {value:?} ({reason})")]
    InvalidField {
        /// Field name: `count`, `memory`, `core`, `numa`, `health` or `index`.
        field: &'static str,
        /// The offending text.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A field that counts something (count, memory, core, index) is negative.
    #[error("{field} field must not be negative: {value}")]
    Negative {
        /// Field name: `count`, `memory`, `core` or `index`.
        field: &'static str,
        /// The negative value.
        value: i64,
    },
    /// A device has an empty UUID; allocations refer to GPUs by UUID, so such a
    /// device could never be addressed.
    #[error("empty gpu id in node annotation")]
    EmptyId,
    /// The same UUID appears twice on one node.
    #[error("duplicate gpu id {0} in node annotation")]
    DuplicateId(String),
    /// A MIG profile of a GPU cannot be used.
    #[error("invalid MIG profile {profile:?} of gpu {gpu}: {reason}")]
    MigProfile {
        /// The GPU's UUID.
        gpu: String,
        /// The profile's name as registered.
        profile: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One device object of the JSON format. Every key is optional (missing or `null`
/// means the zero value, as in HAMi's Go decoder); unknown keys are ignored.
#[derive(Debug, Deserialize)]
struct JsonDevice {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    count: Option<i64>,
    #[serde(default)]
    devmem: Option<i64>,
    #[serde(default)]
    devcore: Option<i64>,
    #[serde(default, rename = "type")]
    model: Option<String>,
    #[serde(default)]
    numa: Option<i64>,
    #[serde(default)]
    health: Option<bool>,
    #[serde(default)]
    index: Option<i64>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default, rename = "migProfiles")]
    mig_profiles: Option<Vec<JsonMigProfile>>,
}

/// One MIG profile of the JSON format; missing keys are zero, as for devices.
#[derive(Debug, Deserialize)]
struct JsonMigProfile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "memoryMB")]
    memory_mb: Option<i64>,
    #[serde(default)]
    core: Option<i64>,
    #[serde(default, rename = "sliceCount")]
    slice_count: Option<i64>,
    #[serde(default)]
    placements: Option<Vec<JsonMigPlacement>>,
}

#[derive(Debug, Deserialize)]
struct JsonMigPlacement {
    #[serde(default)]
    start: Option<i64>,
    #[serde(default)]
    size: Option<i64>,
}

/// Decodes a `hami.io/node-nvidia-register` value in either wire format.
///
/// JSON (trimmed value starts with `[`): missing keys take zero values, a missing
/// `health` means unhealthy and a missing `mode` means `hami-core`. Legacy text:
/// devices joined by `:`, 7 fields `UUID,count,devmem,devcore,type,numa,health` or 9
/// fields `...,index,mode`; empty segments are skipped. In both formats negative
/// count/memory/core/index values, empty or duplicate UUIDs and an empty device list
/// are errors. `pair_scores` is left empty (see `pair_score`).
pub fn decode_register_annotation(value: &str) -> Result<Vec<GpuDevice>, RegisterError> {
    let trimmed = value.trim();
    let devices = if trimmed.starts_with('[') {
        decode_json(trimmed)?
    } else {
        decode_legacy(trimmed)?
    };
    if devices.is_empty() {
        return Err(RegisterError::NoGpu);
    }
    let mut seen = BTreeSet::new();
    for device in &devices {
        if device.id.is_empty() {
            return Err(RegisterError::EmptyId);
        }
        if !seen.insert(&*device.id) {
            return Err(RegisterError::DuplicateId(device.id.to_string()));
        }
    }
    Ok(devices)
}

/// Encodes devices in HAMi's current JSON format, keys in the order HAMi's device
/// plugin writes them (`id,count,devmem,devcore,type,numa,health,index,mode`). All
/// keys are always written, which every HAMi version decodes; `migProfiles` follows
/// for GPUs that have some. Pair scores are not part of this annotation and are
/// not written.
pub fn encode_register_annotation(devices: &[GpuDevice]) -> String {
    let objects: Vec<String> = devices
        .iter()
        .map(|d| {
            let profiles = if d.mig_profiles.is_empty() {
                String::new()
            } else {
                format!(
                    ",\"migProfiles\":{}",
                    serde_json::to_string(&d.mig_profiles).unwrap_or_else(|_| "[]".into())
                )
            };
            format!(
                "{{\"id\":{},\"count\":{},\"devmem\":{},\"devcore\":{},\"type\":{},\"numa\":{},\"health\":{},\"index\":{},\"mode\":{}{}}}",
                json_string(&d.id),
                d.count,
                d.devmem,
                d.devcore,
                json_string(&d.model),
                d.numa,
                d.health,
                d.index,
                json_string(&d.mode),
                profiles,
            )
        })
        .collect();
    format!("[{}]", objects.join(","))
}

/// Quotes and escapes a string as a JSON string literal.
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn decode_json(value: &str) -> Result<Vec<GpuDevice>, RegisterError> {
    let raw: Vec<JsonDevice> =
        serde_json::from_str(value).map_err(|e| RegisterError::Json(e.to_string()))?;
    raw.into_iter()
        .map(|d| {
            let numa = d.numa.unwrap_or(0);
            let id = d.id.unwrap_or_default();
            let mig_profiles = d
                .mig_profiles
                .unwrap_or_default()
                .into_iter()
                .map(|p| decode_mig_profile(&id, p))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(GpuDevice {
                id: id.into(),
                index: non_negative_u32("index", d.index.unwrap_or(0))?,
                count: non_negative_u32("count", d.count.unwrap_or(0))?,
                devmem: non_negative_u64("memory", d.devmem.unwrap_or(0))?,
                devcore: non_negative_u32("core", d.devcore.unwrap_or(0))?,
                model: d.model.unwrap_or_default(),
                numa: i32::try_from(numa).map_err(|_| RegisterError::InvalidField {
                    field: "numa",
                    value: numa.to_string(),
                    reason: "out of range".to_owned(),
                })?,
                health: d.health.unwrap_or(false),
                mode: d.mode.unwrap_or_else(|| DEFAULT_MODE.to_owned()),
                pair_scores: BTreeMap::new(),
                mig_profiles,
            })
        })
        .collect()
}

/// Decodes one MIG profile of GPU `gpu`: counts must not be negative, the name
/// must not be empty, and every placement must cover at least one slice and end
/// within the slices tracked.
fn decode_mig_profile(gpu: &str, p: JsonMigProfile) -> Result<MigProfile, RegisterError> {
    let name = p.name.unwrap_or_default();
    let invalid = |reason: String| RegisterError::MigProfile {
        gpu: gpu.to_owned(),
        profile: name.clone(),
        reason,
    };
    if name.trim().is_empty() {
        return Err(invalid("the profile has no name".into()));
    }
    let count = |field: &str, v: Option<i64>| {
        let v = v.unwrap_or(0);
        u32::try_from(v).map_err(|_| invalid(format!("{field} {v} is out of range")))
    };
    let memory_mb = p.memory_mb.unwrap_or(0);
    let memory_mb = u64::try_from(memory_mb)
        .map_err(|_| invalid(format!("memoryMB {memory_mb} is negative")))?;
    let core = count("core", p.core)?;
    let slice_count = count("sliceCount", p.slice_count)?;
    let placements = p
        .placements
        .unwrap_or_default()
        .into_iter()
        .map(|at| {
            let placement = MigPlacement {
                start: count("placement start", at.start)?,
                size: count("placement size", at.size)?,
            };
            if !placement.is_trackable() {
                return Err(invalid(format!(
                    "placement {{start {}, size {}}} is empty or ends past slice {MIG_SLICES}",
                    placement.start, placement.size
                )));
            }
            Ok(placement)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MigProfile {
        name,
        memory_mb,
        core,
        slice_count,
        placements,
    })
}

fn decode_legacy(value: &str) -> Result<Vec<GpuDevice>, RegisterError> {
    if !value.contains(':') {
        return Err(RegisterError::MissingSeparator);
    }
    let mut devices = Vec::new();
    for segment in value.split(':') {
        if segment.trim().is_empty() {
            continue;
        }
        if !segment.contains(',') {
            return Err(RegisterError::MalformedSegment(segment.to_owned()));
        }
        let fields: Vec<&str> = segment.split(',').map(str::trim).collect();
        devices.push(decode_legacy_fields(&fields)?);
    }
    Ok(devices)
}

/// Decodes the 7 fields `UUID,count,devmem,devcore,type,numa,health` or the 9 fields
/// `...,index,mode` of one legacy device segment.
fn decode_legacy_fields(fields: &[&str]) -> Result<GpuDevice, RegisterError> {
    let (base, index, mode) = match *fields {
        [id, count, devmem, devcore, model, numa, health] => (
            [id, count, devmem, devcore, model, numa, health],
            0,
            DEFAULT_MODE,
        ),
        [id, count, devmem, devcore, model, numa, health, index, mode] => (
            [id, count, devmem, devcore, model, numa, health],
            non_negative_u32("index", parse_int("index", index)?)?,
            mode,
        ),
        _ => return Err(RegisterError::FieldCount(fields.len())),
    };
    let [id, count, devmem, devcore, model, numa, health] = base;
    Ok(GpuDevice {
        id: id.into(),
        index,
        count: non_negative_u32("count", parse_int("count", count)?)?,
        devmem: non_negative_u64("memory", parse_int("memory", devmem)?)?,
        devcore: non_negative_u32("core", parse_int("core", devcore)?)?,
        model: model.to_owned(),
        numa: i32::try_from(parse_int("numa", numa)?).map_err(|_| RegisterError::InvalidField {
            field: "numa",
            value: numa.to_owned(),
            reason: "out of range".to_owned(),
        })?,
        health: parse_bool(health)?,
        mode: mode.to_owned(),
        pair_scores: BTreeMap::new(),
        mig_profiles: Vec::new(),
    })
}

fn parse_int(field: &'static str, text: &str) -> Result<i64, RegisterError> {
    text.parse::<i64>()
        .map_err(|e| RegisterError::InvalidField {
            field,
            value: text.to_owned(),
            reason: e.to_string(),
        })
}

/// Parses a boolean the way Go's `strconv.ParseBool` does, which is what the legacy
/// device plugins used to write and HAMi used to read.
fn parse_bool(text: &str) -> Result<bool, RegisterError> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(RegisterError::InvalidField {
            field: "health",
            value: text.to_owned(),
            reason: "expected true or false".to_owned(),
        }),
    }
}

fn non_negative_u32(field: &'static str, value: i64) -> Result<u32, RegisterError> {
    if value < 0 {
        return Err(RegisterError::Negative { field, value });
    }
    u32::try_from(value).map_err(|_| RegisterError::InvalidField {
        field,
        value: value.to_string(),
        reason: "out of range".to_owned(),
    })
}

fn non_negative_u64(field: &'static str, value: i64) -> Result<u64, RegisterError> {
    u64::try_from(value).map_err(|_| RegisterError::Negative { field, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn device(id: &str, index: u32, model: &str) -> GpuDevice {
        GpuDevice {
            id: id.into(),
            index,
            count: 10,
            devmem: 81559,
            devcore: 100,
            model: model.to_owned(),
            numa: 0,
            health: true,
            mode: "hami-core".to_owned(),
            pair_scores: BTreeMap::new(),
            mig_profiles: Vec::new(),
        }
    }

    #[test]
    fn decodes_hami_json_example() {
        let v = r#"[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0,"mode":"hami-core"}]"#;
        let devices = decode_register_annotation(v).unwrap();
        assert_eq!(
            devices,
            vec![GpuDevice {
                id: "GPU-0".into(),
                index: 0,
                count: 10,
                devmem: 8192,
                devcore: 100,
                model: "NVIDIA-A100".into(),
                numa: 0,
                health: true,
                mode: "hami-core".into(),
                pair_scores: BTreeMap::new(),
                mig_profiles: Vec::new(),
            }]
        );
    }

    #[test]
    fn encodes_hami_json_example_exactly() {
        let d = GpuDevice {
            id: "GPU-0".into(),
            index: 0,
            count: 10,
            devmem: 8192,
            devcore: 100,
            model: "NVIDIA-A100".into(),
            numa: 0,
            health: true,
            mode: "hami-core".into(),
            pair_scores: BTreeMap::new(),
            mig_profiles: Vec::new(),
        };
        assert_eq!(
            encode_register_annotation(&[d]),
            r#"[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0,"mode":"hami-core"}]"#
        );
        assert_eq!(encode_register_annotation(&[]), "[]");
    }

    #[test]
    fn decodes_realistic_h100_node() {
        let v = r#"[{"id":"GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"mode":"hami-core"},{"id":"GPU-5c1bd0a6-1f1e-6c3b-9b1a-2f6d7e0c4a11","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","numa":1,"health":true,"index":1,"mode":"hami-core"}]"#;
        let devices = decode_register_annotation(v).unwrap();
        let mut second = device(
            "GPU-5c1bd0a6-1f1e-6c3b-9b1a-2f6d7e0c4a11",
            1,
            "NVIDIA H100 80GB HBM3",
        );
        second.numa = 1;
        assert_eq!(
            devices,
            vec![
                device(
                    "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc",
                    0,
                    "NVIDIA H100 80GB HBM3"
                ),
                second
            ]
        );
        assert_eq!(
            decode_register_annotation(&encode_register_annotation(&devices)).unwrap(),
            devices
        );
    }

    #[test]
    fn json_missing_keys_take_zero_values() {
        let devices = decode_register_annotation(r#" [{"id":"GPU-1"}] "#).unwrap();
        assert_eq!(
            devices,
            vec![GpuDevice {
                id: "GPU-1".into(),
                index: 0,
                count: 0,
                devmem: 0,
                devcore: 0,
                model: String::new(),
                numa: 0,
                health: false,
                mode: "hami-core".into(),
                pair_scores: BTreeMap::new(),
                mig_profiles: Vec::new(),
            }]
        );
        let devices = decode_register_annotation(
            r#"[{"id":"GPU-1","health":null,"mode":null,"count":null}]"#,
        )
        .unwrap();
        assert!(!devices[0].health);
        assert_eq!(devices[0].mode, "hami-core");
    }

    #[test]
    fn json_decodes_mig_profiles_and_writes_them_back() {
        let v = r#"[{"id":"GPU-m","count":7,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB","health":true,"mode":"mig","migProfiles":[{"name":"1g.10gb","memoryMB":9856,"core":14,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":6,"size":1}]},{"name":"7g.80gb","memoryMB":80896,"core":100,"sliceCount":7,"placements":[{"start":0,"size":8}]}],"futureKey":1}]"#;
        let devices = decode_register_annotation(v).unwrap();
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        assert!(d.is_mig());
        assert_eq!(d.count, 7);
        assert_eq!(
            d.mig_profiles,
            vec![
                MigProfile {
                    name: "1g.10gb".into(),
                    memory_mb: 9856,
                    core: 14,
                    slice_count: 1,
                    placements: vec![
                        MigPlacement { start: 0, size: 1 },
                        MigPlacement { start: 6, size: 1 }
                    ],
                },
                MigProfile {
                    name: "7g.80gb".into(),
                    memory_mb: 80896,
                    core: 100,
                    slice_count: 7,
                    placements: vec![MigPlacement { start: 0, size: 8 }],
                },
            ]
        );
        let encoded = encode_register_annotation(&devices);
        assert!(
            encoded.contains(r#""mode":"mig","migProfiles":[{"name":"1g.10gb","memoryMB":9856,"core":14,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":6,"size":1}]}"#),
            "{encoded}"
        );
        assert_eq!(decode_register_annotation(&encoded).unwrap(), devices);
    }

    #[test]
    fn unusable_mig_profiles_invalidate_the_registration() {
        let with = |profiles: &str| {
            format!(
                r#"[{{"id":"GPU-m","count":7,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB","health":true,"mode":"mig","migProfiles":{profiles}}}]"#
            )
        };
        for (profiles, message) in [
            (
                r#"[{"memoryMB":9856,"placements":[{"start":0,"size":1}]}]"#,
                r#"invalid MIG profile "" of gpu GPU-m: the profile has no name"#,
            ),
            (
                r#"[{"name":"1g.10gb","memoryMB":9856,"placements":[{"start":0,"size":0}]}]"#,
                r#"invalid MIG profile "1g.10gb" of gpu GPU-m: placement {start 0, size 0} is empty or ends past slice 8"#,
            ),
            (
                r#"[{"name":"1g.10gb","memoryMB":9856,"placements":[{"start":7,"size":2}]}]"#,
                r#"invalid MIG profile "1g.10gb" of gpu GPU-m: placement {start 7, size 2} is empty or ends past slice 8"#,
            ),
            (
                r#"[{"name":"1g.10gb","memoryMB":-1}]"#,
                r#"invalid MIG profile "1g.10gb" of gpu GPU-m: memoryMB -1 is negative"#,
            ),
            (
                r#"[{"name":"1g.10gb","placements":[{"start":-1,"size":1}]}]"#,
                r#"invalid MIG profile "1g.10gb" of gpu GPU-m: placement start -1 is out of range"#,
            ),
        ] {
            assert_eq!(
                decode_register_annotation(&with(profiles))
                    .unwrap_err()
                    .to_string(),
                message,
                "{profiles}"
            );
        }
        assert!(matches!(
            decode_register_annotation(&with(r#"{"name":"1g.10gb"}"#)),
            Err(RegisterError::Json(_))
        ));
        // No profiles at all is a MIG GPU nothing can be placed on, not an error.
        assert!(
            decode_register_annotation(&with("[]")).unwrap()[0]
                .mig_profiles
                .is_empty()
        );
    }

    #[test]
    fn json_negative_numa_is_kept() {
        let devices = decode_register_annotation(r#"[{"id":"GPU-1","numa":-1}]"#).unwrap();
        assert_eq!(devices[0].numa, -1);
    }

    #[test]
    fn json_errors() {
        assert_eq!(decode_register_annotation("[]"), Err(RegisterError::NoGpu));
        assert_eq!(
            decode_register_annotation("  [ ]\n")
                .unwrap_err()
                .to_string(),
            "no gpu found on node"
        );
        for (field, key) in [
            ("count", "count"),
            ("memory", "devmem"),
            ("core", "devcore"),
            ("index", "index"),
        ] {
            let v = format!(r#"[{{"id":"GPU-1","{key}":-1}}]"#);
            assert_eq!(
                decode_register_annotation(&v),
                Err(RegisterError::Negative { field, value: -1 }),
                "{key}"
            );
        }
        assert!(matches!(
            decode_register_annotation(r#"[{"id":"GPU-1","count":"ten"}]"#),
            Err(RegisterError::Json(_))
        ));
        assert!(matches!(
            decode_register_annotation(r#"[{"id":"GPU-1","count":4294967296}]"#),
            Err(RegisterError::InvalidField { field: "count", .. })
        ));
        assert!(matches!(
            decode_register_annotation(r#"[{"id":"GPU-1""#),
            Err(RegisterError::Json(_))
        ));
        assert_eq!(
            decode_register_annotation(r#"[{"id":"GPU-1"},{"id":"GPU-1"}]"#)
                .unwrap_err()
                .to_string(),
            "duplicate gpu id GPU-1 in node annotation"
        );
        assert_eq!(
            decode_register_annotation(r#"[{"count":10}]"#),
            Err(RegisterError::EmptyId)
        );
    }

    #[test]
    fn decodes_legacy_example_with_nine_fields() {
        let v = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:";
        let devices = decode_register_annotation(v).unwrap();
        assert_eq!(
            devices,
            vec![GpuDevice {
                id: "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4".into(),
                index: 1,
                count: 10,
                devmem: 7680,
                devcore: 100,
                model: "NVIDIA-Tesla P4".into(),
                numa: 0,
                health: true,
                mode: "hami-core".into(),
                pair_scores: BTreeMap::new(),
                mig_profiles: Vec::new(),
            }]
        );
    }

    #[test]
    fn decodes_legacy_seven_fields_and_multiple_devices() {
        let v = "GPU-a,10,8192,100,NVIDIA-A10,1,false:GPU-b,5,4096,50,NVIDIA-A10,-1,TRUE,3,mps::";
        let devices = decode_register_annotation(v).unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0].index, 0);
        assert_eq!(devices[0].mode, "hami-core");
        assert_eq!(devices[0].numa, 1);
        assert!(!devices[0].health);
        assert_eq!(devices[1].index, 3);
        assert_eq!(devices[1].mode, "mps");
        assert_eq!(devices[1].numa, -1);
        assert!(devices[1].health);
        assert_eq!(devices[1].count, 5);
        assert_eq!(devices[1].devcore, 50);
    }

    #[test]
    fn legacy_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "GPU-a,10,8192,100,NVIDIA,0,true",
                "node annotation missing device separator",
            ),
            ("", "node annotation missing device separator"),
            (":", "no gpu found on node"),
            ("::", "no gpu found on node"),
            (
                "GPU-a,10,8192,100,NVIDIA,0,true:garbage:",
                "malformed node annotation segment: \"garbage\"",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,0:",
                "unexpected field count 6 in node annotation",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,0,true,1:",
                "unexpected field count 8 in node annotation",
            ),
            (
                "GPU-a,ten,8192,100,NVIDIA,0,true:",
                "invalid count field: \"ten\" (invalid digit found in string)",
            ),
            (
                "GPU-a,10,8k,100,NVIDIA,0,true:",
                "invalid memory field: \"8k\" (invalid digit found in string)",
            ),
            (
                "GPU-a,10,8192,x,NVIDIA,0,true:",
                "invalid core field: \"x\" (invalid digit found in string)",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,zero,true:",
                "invalid numa field: \"zero\" (invalid digit found in string)",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,0,yes:",
                "invalid health field: \"yes\" (expected true or false)",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,0,true,one,hami-core:",
                "invalid index field: \"one\" (invalid digit found in string)",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,0,true,-1,hami-core:",
                "index field must not be negative: -1",
            ),
            (
                "GPU-a,-10,8192,100,NVIDIA,0,true:",
                "count field must not be negative: -10",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,0,true:GPU-a,10,8192,100,NVIDIA,0,true:",
                "duplicate gpu id GPU-a in node annotation",
            ),
            (
                ",10,8192,100,NVIDIA,0,true:",
                "empty gpu id in node annotation",
            ),
            (
                "GPU-a,10,8192,100,NVIDIA,99999999999,true:",
                "invalid numa field: \"99999999999\" (out of range)",
            ),
        ];
        for (input, message) in cases {
            let err = decode_register_annotation(input).unwrap_err();
            assert_eq!(err.to_string(), *message, "input {input:?}");
        }
    }

    fn arb_device() -> impl Strategy<Value = GpuDevice> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>().prop_map(u64::from),
            any::<u32>(),
            any::<String>(),
            any::<i32>(),
            any::<bool>(),
            any::<String>(),
        )
            .prop_map(
                |(index, count, devmem, devcore, model, numa, health, mode)| GpuDevice {
                    id: "".into(),
                    index,
                    count,
                    devmem,
                    devcore,
                    model,
                    numa,
                    health,
                    mode,
                    pair_scores: BTreeMap::new(),
                    mig_profiles: Vec::new(),
                },
            )
    }

    proptest! {
        #[test]
        fn garbage_never_panics(s in any::<String>()) {
            let _ = decode_register_annotation(&s);
        }

        #[test]
        fn legacy_shaped_garbage_never_panics(s in "[-A-Za-z0-9,:. \\[\\]{}\"]{0,80}") {
            let _ = decode_register_annotation(&s);
        }

        #[test]
        fn encode_decode_round_trip(
            ids in prop::collection::btree_set("GPU-[ -~]{1,40}", 1..8),
            template in prop::collection::vec(arb_device(), 8),
            big_mem in any::<i64>(),
        ) {
            let devices: Vec<GpuDevice> = ids
                .into_iter()
                .zip(template)
                .enumerate()
                .map(|(i, (id, mut d))| {
                    d.id = id.into();
                    if i == 0 {
                        d.devmem = big_mem.unsigned_abs().min(i64::MAX as u64);
                    }
                    d
                })
                .collect();
            let encoded = encode_register_annotation(&devices);
            prop_assert_eq!(decode_register_annotation(&encoded), Ok(devices));
        }
    }
}
