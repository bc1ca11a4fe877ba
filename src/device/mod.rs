//! Devices: the vendor-neutral model and the NVIDIA codecs HAMi's device plugin speaks.

pub mod allocation_codec;
pub mod model;
pub mod pair_score;
pub mod register_codec;
