//! Devices: the vendor-neutral model, the device config, request parsing and the
//! NVIDIA codecs HAMi's device plugin speaks.

pub mod allocation_codec;
pub mod card_name;
pub mod device_config;
#[cfg(test)]
pub(crate) mod hami_mig_tests;
#[cfg(test)]
mod hami_tests;
pub mod mig;
pub mod mig_allocations;
pub mod model;
pub mod pair_score;
pub mod register_codec;
pub mod request;
pub mod selectors;
