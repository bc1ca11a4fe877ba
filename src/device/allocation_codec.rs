//! Codec for the pod device-list annotations `hami.io/vgpu-devices-to-allocate` and
//! `hami.io/vgpu-devices-allocated`, the hand-off from the scheduler to HAMi's device
//! plugin and the record from which per-GPU usage is rebuilt.
//!
//! Per container (init containers first, then regular ones, in spec order) each
//! device is written `UUID,VENDOR,USEDMEM,USEDCORES` followed by `:`, and `;` ends
//! the container; a container without devices is just `;`. Example for three
//! containers of which only the middle one has a GPU: `;uuid1,NVIDIA,1000,30:;;`.

use crate::device::model::{ContainerDevice, PodDevices, vendor_word};
use std::sync::Arc;
use thiserror::Error;

/// Ends one container's device list.
const CONTAINER_SEPARATOR: char = ';';
/// Ends one device entry inside a container.
const DEVICE_SEPARATOR: char = ':';
/// Separates the fields of one device entry.
const FIELD_SEPARATOR: char = ',';

/// Why a pod device-list annotation could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocationCodecError {
    /// A device entry has fewer than the four fields `UUID,VENDOR,USEDMEM,USEDCORES`
    /// (HAMi's message, kept verbatim because operators search for it).
    #[error("pod annotation format error, missing fields, do not use nodeName in task spec")]
    MissingFields {
        /// The offending device entry.
        item: String,
    },
    /// The memory or cores field is not a non-negative integer in range.
    #[error("pod annotation format error: invalid {field} field {value:?} in {item:?}: {reason}")]
    InvalidNumber {
        /// `usedmem` or `usedcores`.
        field: &'static str,
        /// The offending field text.
        value: String,
        /// The whole device entry, for context.
        item: String,
        /// Why the number was rejected.
        reason: String,
    },
}

/// Encodes the devices of every container of a pod, one `;`-terminated list per
/// container, exactly as HAMi writes it.
pub fn encode_pod_devices(devices: &PodDevices) -> String {
    let mut out = String::new();
    for container in devices {
        for d in container {
            out.push_str(&d.uuid);
            out.push(FIELD_SEPARATOR);
            out.push_str(&d.vendor);
            out.push(FIELD_SEPARATOR);
            out.push_str(&d.usedmem.to_string());
            out.push(FIELD_SEPARATOR);
            out.push_str(&d.usedcores.to_string());
            out.push(DEVICE_SEPARATOR);
        }
        out.push(CONTAINER_SEPARATOR);
    }
    out
}

/// Decodes a pod device-list annotation into one entry per container.
///
/// The value is split on `;`. Because every container's list is *terminated* (not
/// separated) by `;`, splitting leaves one empty piece after the last `;`; HAMi keeps
/// it as an extra empty container, this decoder drops that single trailing empty
/// piece, so that `decode_pod_devices(&encode_pod_devices(x)) == Ok(x)` for every `x`
/// whose strings contain no separator characters and no surrounding whitespace.
/// Device entries without `,` (such as the empty piece after a trailing `:`) are
/// skipped; fields are trimmed; fields beyond the fourth are ignored.
pub fn decode_pod_devices(value: &str) -> Result<PodDevices, AllocationCodecError> {
    let trimmed = value.trim();
    let mut pieces: Vec<&str> = trimmed.split(CONTAINER_SEPARATOR).collect();
    if pieces.last().is_some_and(|last| last.trim().is_empty()) {
        pieces.pop();
    }
    pieces.into_iter().map(decode_container).collect()
}

fn decode_container(piece: &str) -> Result<Vec<ContainerDevice>, AllocationCodecError> {
    piece
        .split(DEVICE_SEPARATOR)
        .filter(|item| item.contains(FIELD_SEPARATOR))
        .map(decode_device)
        .collect()
}

fn decode_device(item: &str) -> Result<ContainerDevice, AllocationCodecError> {
    let fields: Vec<&str> = item.split(FIELD_SEPARATOR).map(str::trim).collect();
    let [uuid, vendor, usedmem, usedcores, ..] = fields.as_slice() else {
        return Err(AllocationCodecError::MissingFields {
            item: item.to_owned(),
        });
    };
    Ok(ContainerDevice {
        uuid: Arc::from(*uuid),
        vendor: vendor_word(vendor),
        usedmem: parse_number("usedmem", usedmem, item)?,
        usedcores: parse_number("usedcores", usedcores, item)?,
        mig: None,
    })
}

fn parse_number<T: std::str::FromStr<Err = std::num::ParseIntError>>(
    field: &'static str,
    value: &str,
    item: &str,
) -> Result<T, AllocationCodecError> {
    value
        .parse::<T>()
        .map_err(|e| AllocationCodecError::InvalidNumber {
            field,
            value: value.to_owned(),
            item: item.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dev(uuid: &str, usedmem: u64, usedcores: u32) -> ContainerDevice {
        ContainerDevice {
            uuid: uuid.into(),
            vendor: "NVIDIA".into(),
            usedmem,
            usedcores,
            mig: None,
        }
    }

    fn examples() -> Vec<(&'static str, PodDevices)> {
        vec![
            (
                "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;",
                vec![vec![dev(
                    "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448",
                    3000,
                    0,
                )]],
            ),
            (
                "GPU-a,NVIDIA,3000,0:;GPU-a,NVIDIA,5000,0:;",
                vec![vec![dev("GPU-a", 3000, 0)], vec![dev("GPU-a", 5000, 0)]],
            ),
            (
                "uuid2,NVIDIA,1000,30:uuid1,NVIDIA,1000,30:;",
                vec![vec![dev("uuid2", 1000, 30), dev("uuid1", 1000, 30)]],
            ),
            (
                ";uuid1,NVIDIA,1000,30:;;",
                vec![vec![], vec![dev("uuid1", 1000, 30)], vec![]],
            ),
            (";", vec![vec![]]),
            ("", vec![]),
        ]
    }

    #[test]
    fn encodes_spec_examples_exactly() {
        for (text, devices) in examples() {
            assert_eq!(encode_pod_devices(&devices), text);
        }
    }

    #[test]
    fn decodes_spec_examples() {
        for (text, devices) in examples() {
            assert_eq!(decode_pod_devices(text), Ok(devices), "{text:?}");
        }
    }

    #[test]
    fn decode_is_lenient_like_hami() {
        // Missing final ';', whitespace, extra fields, items without ','.
        assert_eq!(
            decode_pod_devices(" GPU-a , NVIDIA , 3000 , 10 ,extra:junk::\n"),
            Ok(vec![vec![dev("GPU-a", 3000, 10)]])
        );
        assert_eq!(decode_pod_devices(";;"), Ok(vec![vec![], vec![]]));
    }

    #[test]
    fn decode_errors() {
        assert_eq!(
            decode_pod_devices("GPU-a,NVIDIA,3000:;")
                .unwrap_err()
                .to_string(),
            "pod annotation format error, missing fields, do not use nodeName in task spec"
        );
        assert!(matches!(
            decode_pod_devices("GPU-a,NVIDIA:;"),
            Err(AllocationCodecError::MissingFields { .. })
        ));
        let err = decode_pod_devices("GPU-a,NVIDIA,3k,0:;").unwrap_err();
        assert!(matches!(
            err,
            AllocationCodecError::InvalidNumber {
                field: "usedmem",
                ..
            }
        ));
        assert!(err.to_string().contains("usedmem"), "{err}");
        assert!(err.to_string().contains("\"3k\""), "{err}");
        assert!(matches!(
            decode_pod_devices("GPU-a,NVIDIA,3000,-1:;"),
            Err(AllocationCodecError::InvalidNumber {
                field: "usedcores",
                ..
            })
        ));
        assert!(matches!(
            decode_pod_devices("GPU-a,NVIDIA,3000,4294967296:;"),
            Err(AllocationCodecError::InvalidNumber {
                field: "usedcores",
                ..
            })
        ));
    }

    fn arb_device() -> impl Strategy<Value = ContainerDevice> {
        (
            "[A-Za-z0-9-]{0,40}",
            "[A-Za-z0-9]{0,10}",
            any::<u64>(),
            any::<u32>(),
        )
            .prop_map(|(uuid, vendor, usedmem, usedcores)| ContainerDevice {
                uuid: uuid.into(),
                vendor: vendor.into(),
                usedmem,
                usedcores,
                mig: None,
            })
    }

    proptest! {
        #[test]
        fn round_trip(devices in prop::collection::vec(
            prop::collection::vec(arb_device(), 0..4),
            0..6,
        )) {
            let encoded = encode_pod_devices(&devices);
            prop_assert_eq!(decode_pod_devices(&encoded), Ok(devices));
        }

        #[test]
        fn garbage_never_panics(s in any::<String>()) {
            let _ = decode_pod_devices(&s);
        }

        #[test]
        fn shaped_garbage_never_panics(s in "[A-Za-z0-9,:; -]{0,80}") {
            let _ = decode_pod_devices(&s);
        }
    }
}
