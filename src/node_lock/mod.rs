//! HAMi's per-node lock (`hami.io/mutex.lock`), shared with HAMi's device plugin.

pub mod value;
