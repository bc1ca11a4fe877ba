//! Multi-dimensional resource amounts for queue accounting.
//!
//! Every value is an integer number of **milli-units** of the resource's canonical
//! Kubernetes quantity: `cpu: 500m` is 500, `cpu: 2` is 2000, `memory: 1Gi` is
//! 1 073 741 824 000 (bytes × 1000), `nvidia.com/gpu: 2` is 2000 and
//! `nvidia.com/gpumem: 4096` (MiB in HAMi's convention) is 4 096 000. One unit for all
//! dimensions keeps the arithmetic exact and free of special cases: nothing here knows
//! a resource name except the human-readable formatting of `cpu` and `memory`.
//!
//! The same type carries two kinds of values, and the comparison helpers say which
//! they expect:
//! - **amounts** (allocated, requested, in-queue): a missing dimension is zero;
//! - **limits** (capability, real capability, deserved): a missing dimension is
//!   **unlimited** (spec §F.15: adding one dimension to a queue's capability must not
//!   silently cap all the others at zero). An explicit `0` in a limit is a real cap.
//!
//! Arithmetic saturates instead of overflowing: a cluster total in milli-bytes is
//! large but stays far below `i64::MAX` (about 8 PiB of memory), and saturation keeps
//! pathological inputs from panicking.

use crate::quantity::{NotExact, QuantityError, parse_quantity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use thiserror::Error;

/// Milli-units per whole unit.
pub const MILLI: i64 = 1000;

/// Why a resource list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ResourcesError {
    /// The value of one key is not a valid quantity.
    #[error("resource {key:?}: {source}")]
    Quantity {
        /// The resource name.
        key: String,
        /// What is wrong with the quantity.
        source: QuantityError,
    },
    /// The value of one key is neither a string nor a number.
    #[error("resource {key:?}: expected a quantity string or number, got {found}")]
    NotAQuantity {
        /// The resource name.
        key: String,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// The value of one key is negative.
    #[error("resource {key:?}: quantity {value:?} must not be negative")]
    Negative {
        /// The resource name.
        key: String,
        /// The offending text.
        value: String,
    },
    /// The value of one key does not fit 64-bit milli-units.
    #[error("resource {key:?}: quantity {value:?} is too large")]
    TooLarge {
        /// The resource name.
        key: String,
        /// The offending text.
        value: String,
    },
    /// The resource list is not a JSON object.
    #[error("expected an object of resource quantities, got {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
}

/// The first dimension on which an amount exceeds a limit, with both values, so a
/// rejection can print what was asked and what was allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excess {
    /// The resource name.
    pub dimension: String,
    /// The amount, in milli-units.
    pub amount: i64,
    /// The limit it exceeds, in milli-units.
    pub limit: i64,
}

/// Resource names the queues count vGPUs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VgpuDims {
    /// vGPU count (`nvidia.com/gpu`).
    pub count: String,
    /// vGPU memory in MiB (`nvidia.com/gpumem`).
    pub memory: String,
    /// vGPU compute in percent (`nvidia.com/gpucores`).
    pub cores: String,
}

impl Default for VgpuDims {
    fn default() -> Self {
        Self {
            count: "nvidia.com/gpu".into(),
            memory: "nvidia.com/gpumem".into(),
            cores: "nvidia.com/gpucores".into(),
        }
    }
}

/// Resource name → milli-units. See the module documentation for the unit and for
/// the meaning of a missing dimension.
///
/// Kept as a list sorted by name with shared names: an amount has a handful of
/// dimensions and is copied, added and dropped for every job and queue in every
/// planning session, and a sorted list copies in one allocation where a map of
/// owned names made one per dimension (and one per name again at every `add`).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources(Vec<(Dim, i64)>);

/// A dimension's name, shared between every amount that has it.
pub(crate) type Dim = Arc<str>;

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Resources(")?;
        f.debug_map().entries(self.iter()).finish()?;
        f.write_str(")")
    }
}

impl Resources {
    /// No dimensions at all.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// Where `dim` is, or where it would go.
    fn position(&self, dim: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(dim))
    }

    /// Builds from dimensions already in name order, each given once, keeping
    /// their shared names; negative values become zero. For amounts worked out
    /// over another amount's dimensions: no name is copied or looked for.
    pub(crate) fn from_ordered(pairs: impl IntoIterator<Item = (Dim, i64)>) -> Self {
        let dims: Vec<(Dim, i64)> = pairs.into_iter().map(|(k, v)| (k, v.max(0))).collect();
        debug_assert!(
            dims.windows(2).all(|w| w[0].0 < w[1].0),
            "in name order, once each"
        );
        Self(dims)
    }

    /// `(dimension, milli-units)` pairs in name order, with the shared names.
    pub(crate) fn shared_iter(&self) -> impl Iterator<Item = (&Dim, i64)> {
        self.0.iter().map(|(k, v)| (k, *v))
    }

    /// Builds from `(name, milli-units)` pairs; negative values become zero. A name
    /// given twice keeps its last value.
    pub fn from_milli<K: AsRef<str>>(pairs: impl IntoIterator<Item = (K, i64)>) -> Self {
        let mut out = Self::new();
        for (k, v) in pairs {
            out.set(k, v);
        }
        out
    }

    /// Builds from `(name, whole units)` pairs (`("nvidia.com/gpu", 8)` is 8000
    /// milli-units); negative values become zero.
    pub fn from_units<K: AsRef<str>>(pairs: impl IntoIterator<Item = (K, i64)>) -> Self {
        Self::from_milli(pairs.into_iter().map(|(k, v)| (k, v.saturating_mul(MILLI))))
    }

    /// Reads a Kubernetes resource list (`requests`, `capability`, ...).
    pub fn from_quantities(list: &BTreeMap<String, Quantity>) -> Result<Self, ResourcesError> {
        let mut out = Vec::with_capacity(list.len());
        for (key, quantity) in list {
            out.push((Dim::from(key.as_str()), parse_milli(key, &quantity.0)?));
        }
        // A BTreeMap iterates in name order: already sorted and unique.
        Ok(Self(out))
    }

    /// Reads a JSON object of quantities. Values may be quantity strings (`"500m"`,
    /// `"16Gi"`) or plain JSON numbers (`4`, `0.5`), as hand-written cluster files
    /// contain both.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, ResourcesError> {
        let object = value.as_object().ok_or(ResourcesError::NotAnObject {
            found: json_type(value),
        })?;
        let mut out = Self::new();
        for (key, v) in object {
            let milli = match v {
                serde_json::Value::String(s) => parse_milli(key, s)?,
                serde_json::Value::Number(n) => parse_milli(key, &n.to_string())?,
                other => {
                    return Err(ResourcesError::NotAQuantity {
                        key: key.clone(),
                        found: json_type(other),
                    });
                }
            };
            out.put(key, milli);
        }
        Ok(out)
    }

    /// Sets one dimension (negative values become zero). The name is copied
    /// only when the dimension is new.
    pub fn set(&mut self, dim: impl AsRef<str>, milli: i64) {
        self.put(dim.as_ref(), milli.max(0));
    }

    /// Sets one dimension as given.
    fn put(&mut self, dim: &str, milli: i64) {
        match self.position(dim) {
            Ok(i) => self.0[i].1 = milli,
            Err(i) => self.0.insert(i, (Dim::from(dim), milli)),
        }
    }

    /// The amount of one dimension; a missing dimension is zero (amount semantics).
    pub fn get(&self, dim: &str) -> i64 {
        self.limit(dim).unwrap_or(0)
    }

    /// The limit of one dimension; `None` means unlimited (limit semantics).
    pub fn limit(&self, dim: &str) -> Option<i64> {
        self.position(dim).ok().map(|i| self.0[i].1)
    }

    /// Whether the dimension is present (even with value zero).
    pub fn contains(&self, dim: &str) -> bool {
        self.position(dim).is_ok()
    }

    /// The dimensions present, in name order.
    pub fn dims(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }

    /// `(dimension, milli-units)` pairs in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (&**k, *v))
    }

    /// Number of dimensions present, including zero-valued ones (unlike
    /// [`Self::is_empty`], which asks whether any amount is positive).
    pub fn dimension_count(&self) -> usize {
        self.0.len()
    }

    /// True when no dimension holds a positive amount.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|(_, v)| *v <= 0)
    }

    /// Merges `other` in: `both(mine, theirs)` where both have the dimension,
    /// `only_other(theirs)` where only `other` has it. One walk over both sorted
    /// lists; a name is shared, never copied.
    fn merge(&mut self, other: &Resources, both: impl Fn(i64, i64) -> i64) {
        let mut i = 0;
        for (k, v) in &other.0 {
            while i < self.0.len() && *self.0[i].0 < **k {
                i += 1;
            }
            if i < self.0.len() && self.0[i].0 == *k {
                self.0[i].1 = both(self.0[i].1, *v);
            } else {
                self.0.insert(i, (Arc::clone(k), *v));
            }
            i += 1;
        }
    }

    /// `self += other`, dimension by dimension (saturating).
    pub fn add(&mut self, other: &Resources) {
        self.merge(other, i64::saturating_add);
    }

    /// `self -= other`, floored at zero, on the dimensions `self` has. Dimensions only
    /// `other` has are not added: for an amount they are zero either way, and for a
    /// limit an absent dimension stays unlimited.
    pub fn saturating_sub(&mut self, other: &Resources) {
        for (k, v) in self.0.iter_mut() {
            *v = v.saturating_sub(other.get(k)).max(0);
        }
    }

    /// `self + other` as a new value.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add(other);
        out
    }

    /// `self − other` (saturating) as a new value.
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.saturating_sub(other);
        out
    }

    /// Drops zero-valued dimensions. Amounts are kept in this canonical form so that
    /// adding and then subtracting the same request restores an equal value.
    pub fn prune_zeros(&mut self) {
        self.0.retain(|(_, v)| *v > 0);
    }

    /// The same amounts without zero-valued dimensions.
    pub fn without_zeros(mut self) -> Resources {
        self.prune_zeros();
        self
    }

    /// Per-dimension minimum of two **limits**: the union of dimensions, the smaller
    /// value where both have one (an absent dimension is unlimited).
    pub fn min_limit(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.merge(other, i64::min);
        out
    }

    /// This **amount** capped by a **limit**, on this amount's dimensions only (an
    /// absent limit dimension leaves the amount as it is).
    pub fn capped_by(&self, limit: &Resources) -> Resources {
        Self(
            self.0
                .iter()
                .map(|(k, v)| {
                    (
                        Arc::clone(k),
                        limit.limit(k).map_or(*v, |cap| (*v).min(cap)),
                    )
                })
                .collect(),
        )
    }

    /// Per-dimension maximum of two **amounts**: the union of dimensions, the larger
    /// value where both have one.
    pub fn max_amount(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.merge(other, i64::max);
        out
    }

    /// Dimensions whose name starts with `prefix`, and the rest.
    pub fn split_prefix(&self, prefix: &str) -> (Resources, Resources) {
        let (with, without) = self
            .0
            .iter()
            .cloned()
            .partition(|(k, _)| k.starts_with(prefix));
        (Resources(with), Resources(without))
    }

    /// Every dimension of this **amount** is ≤ the same dimension of `other`, read as
    /// an amount too (missing = 0). Used for "request ≤ deserved" and "deserved ≤
    /// allocated", where both sides are amounts.
    pub fn fits_within_amount(&self, other: &Resources) -> bool {
        self.0.iter().all(|(k, v)| *v <= other.get(k))
    }

    /// This amount is ≤ `limit` on each of `dims` (missing in `self` = 0, missing in
    /// `limit` = unlimited).
    pub fn less_equal_on<'a>(
        &self,
        limit: &Resources,
        dims: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        self.first_excess_on(limit, dims).is_none()
    }

    /// The first dimension (in name order) on which this amount exceeds `limit`; a
    /// dimension missing from the limit is unlimited (spec §F.15).
    pub fn first_exceeding(&self, limit: &Resources) -> Option<String> {
        self.first_excess(limit).map(|e| e.dimension)
    }

    /// Like [`Self::first_exceeding`], with the amount and the limit.
    pub fn first_excess(&self, limit: &Resources) -> Option<Excess> {
        self.first_excess_on(limit, self.dims())
    }

    /// The first of `dims` on which this amount exceeds `limit` (missing in `self` =
    /// 0, missing in `limit` = unlimited).
    pub fn first_excess_on<'a>(
        &self,
        limit: &Resources,
        dims: impl IntoIterator<Item = &'a str>,
    ) -> Option<Excess> {
        dims.into_iter().find_map(|dim| {
            let cap = limit.limit(dim)?;
            let amount = self.get(dim);
            (amount > cap).then(|| Excess {
                dimension: dim.to_owned(),
                amount,
                limit: cap,
            })
        })
    }
}

impl FromIterator<(String, i64)> for Resources {
    fn from_iter<T: IntoIterator<Item = (String, i64)>>(iter: T) -> Self {
        Self::from_milli(iter)
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Reads one quantity as milli-units (rounded up, as Kubernetes does).
pub fn parse_milli(key: &str, text: &str) -> Result<i64, ResourcesError> {
    let q = parse_quantity(text).map_err(|source| ResourcesError::Quantity {
        key: key.to_owned(),
        source,
    })?;
    if q.is_negative() {
        return Err(ResourcesError::Negative {
            key: key.to_owned(),
            value: text.to_owned(),
        });
    }
    let too_large = || ResourcesError::TooLarge {
        key: key.to_owned(),
        value: text.to_owned(),
    };
    let milli = q.to_milli_ceil().map_err(|e| match e {
        NotExact::OutOfRange | NotExact::Fraction => too_large(),
    })?;
    i64::try_from(milli).map_err(|_| too_large())
}

/// The exact Kubernetes quantity text for milli-units: whole units without a suffix
/// (`2000` → `2`), the rest with `m` (`500` → `500m`).
pub fn quantity_text(milli: i64) -> String {
    if milli % MILLI == 0 {
        (milli / MILLI).to_string()
    } else {
        format!("{milli}m")
    }
}

/// A human-readable amount: cpu in cores or millicores (`2`, `500m`), memory with a
/// binary unit (`4Gi`, `512Mi`, `1.5Gi`), anything else as a count (`8`, `0.5`).
pub fn format_amount(dim: &str, milli: i64) -> String {
    match dim {
        "cpu" => quantity_text(milli),
        "memory" => format_bytes(milli / MILLI),
        _ => format_decimal(milli, MILLI),
    }
}

fn format_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 5] = [
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, size) in UNITS {
        if bytes >= size {
            return format!("{}{suffix}", format_decimal_scaled(bytes, size, 2));
        }
    }
    bytes.to_string()
}

/// `value / unit` with up to three decimals, trailing zeros trimmed.
fn format_decimal(value: i64, unit: i64) -> String {
    format_decimal_scaled(value, unit, 3)
}

fn format_decimal_scaled(value: i64, unit: i64, decimals: u32) -> String {
    let whole = value / unit;
    let rest = value % unit;
    if rest == 0 {
        return whole.to_string();
    }
    let scale = 10_i128.pow(decimals);
    // Rounded to `decimals` places; i128 keeps `rest × scale` from overflowing.
    let frac = (i128::from(rest) * scale + i128::from(unit) / 2) / i128::from(unit);
    let (whole, frac) = if frac >= scale {
        (whole + 1, 0)
    } else {
        (whole, frac)
    };
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:0width$}", width = decimals as usize);
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("{}");
        }
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}: {}", format_amount(k, *v))?;
        }
        Ok(())
    }
}

/// Serialized as a resource list of exact quantity strings (`{"cpu": "500m",
/// "nvidia.com/gpu": "8"}`), so a debug dump reads like a Kubernetes object and
/// parses back to the same value.
impl Serialize for Resources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter().map(|(k, v)| (k, quantity_text(v))))
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Resources::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// CPU and memory a pod requests, as Kubernetes counts it: the sum over containers,
/// or the largest init container when that is more.
pub fn pod_requests(pod: &k8s_openapi::api::core::v1::Pod) -> Resources {
    pod_requests_of(pod, Some(&["cpu", "memory"]))
}

/// What a pod requests of each resource (only `only` when given), as Kubernetes
/// counts it: the sum over containers, or the largest init container when that is
/// more. Unparsable quantities count zero.
pub fn pod_requests_of(pod: &k8s_openapi::api::core::v1::Pod, only: Option<&[&str]>) -> Resources {
    let mut total = Resources::default();
    let Some(spec) = pod.spec.as_ref() else {
        return total;
    };
    let requests = |c: &'_ k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .into_iter()
            .flatten()
            .filter(|(dim, _)| only.is_none_or(|o| o.contains(&dim.as_str())))
            .filter_map(|(dim, q)| parse_milli(dim, &q.0).ok().map(|v| (dim.clone(), v)))
            .collect::<Vec<(String, i64)>>()
    };
    let mut app: BTreeMap<String, i64> = BTreeMap::new();
    for c in &spec.containers {
        for (dim, v) in requests(c) {
            let slot = app.entry(dim).or_default();
            *slot = slot.saturating_add(v);
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (dim, v) in requests(c) {
            let slot = app.entry(dim).or_default();
            *slot = (*slot).max(v);
        }
    }
    for (dim, v) in app {
        if v > 0 {
            total.set(dim, v);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_quantities_into_milli_units() {
        let r = Resources::from_json(&json!({
            "cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 2, "nvidia.com/gpumem": "4k",
            "nvidia.com/gpucores": "50", "pods": 0.5
        }))
        .unwrap();
        assert_eq!(r.get("cpu"), 500);
        assert_eq!(r.get("memory"), 1_073_741_824_000);
        assert_eq!(r.get("nvidia.com/gpu"), 2000);
        assert_eq!(r.get("nvidia.com/gpumem"), 4_000_000);
        assert_eq!(r.get("nvidia.com/gpucores"), 50_000);
        assert_eq!(r.get("pods"), 500);
        assert_eq!(r.get("absent"), 0);
        assert_eq!(r.limit("absent"), None);

        let mut list = BTreeMap::new();
        list.insert("cpu".to_owned(), Quantity("2".to_owned()));
        assert_eq!(Resources::from_quantities(&list).unwrap().get("cpu"), 2000);
    }

    #[test]
    fn bad_quantities_name_the_key() {
        let e = Resources::from_json(&json!({"cpu": "1", "nvidia.com/gpu": "two"})).unwrap_err();
        assert!(e.to_string().contains("\"nvidia.com/gpu\""), "{e}");
        let e = Resources::from_json(&json!({"memory": "-1Gi"})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "resource \"memory\": quantity \"-1Gi\" must not be negative"
        );
        let e = Resources::from_json(&json!({"cpu": true})).unwrap_err();
        assert!(e.to_string().contains("\"cpu\""), "{e}");
        let e = Resources::from_json(&json!({"cpu": "1e30"})).unwrap_err();
        assert!(matches!(e, ResourcesError::TooLarge { .. }), "{e}");
        assert!(Resources::from_json(&json!(["cpu"])).is_err());
    }

    #[test]
    fn arithmetic_saturates_and_keeps_dimensions() {
        let mut a = Resources::from_units([("cpu", 4), ("nvidia.com/gpu", 2)]);
        a.add(&Resources::from_units([
            ("nvidia.com/gpu", 1),
            ("memory", 1),
        ]));
        assert_eq!(a.get("nvidia.com/gpu"), 3000);
        assert_eq!(a.get("memory"), 1000);
        a.saturating_sub(&Resources::from_units([("cpu", 10), ("pods", 1)]));
        assert_eq!(a.get("cpu"), 0);
        assert!(
            a.contains("cpu"),
            "a zero stays: in a limit it is a real cap"
        );
        assert!(!a.contains("pods"), "sub does not invent dimensions");
        assert!(!a.is_empty());
        assert!(Resources::from_units([("cpu", 0)]).is_empty());
        assert!(Resources::new().is_empty());
        let pruned = a.clone().without_zeros();
        assert!(!pruned.contains("cpu"));
        let mut big = Resources::from_milli([("x", i64::MAX)]);
        big.add(&Resources::from_milli([("x", 5)]));
        assert_eq!(big.get("x"), i64::MAX);
    }

    #[test]
    fn missing_limit_dimensions_are_unlimited() {
        let want = Resources::from_units([("cpu", 10), ("nvidia.com/gpu", 10)]);
        // Capability only lists cpu: gpu is unlimited, cpu is checked.
        let cap = Resources::from_units([("cpu", 16)]);
        assert_eq!(want.first_exceeding(&cap), None);
        let cap = Resources::from_units([("cpu", 16), ("nvidia.com/gpu", 8)]);
        assert_eq!(
            want.first_exceeding(&cap).as_deref(),
            Some("nvidia.com/gpu")
        );
        assert_eq!(
            want.first_excess(&cap),
            Some(Excess {
                dimension: "nvidia.com/gpu".into(),
                amount: 10_000,
                limit: 8_000
            })
        );
        // Only the named dimensions are compared.
        assert!(want.less_equal_on(&cap, ["cpu"]));
        assert!(!want.less_equal_on(&cap, ["cpu", "nvidia.com/gpu"]));
        // An explicit zero is a real cap.
        let zero = Resources::from_units([("nvidia.com/gpu", 0)]);
        assert!(!want.less_equal_on(&zero, ["nvidia.com/gpu"]));
        // A dimension the amount lacks is zero.
        assert!(Resources::new().less_equal_on(&zero, ["nvidia.com/gpu"]));
    }

    #[test]
    fn min_and_max_follow_their_semantics() {
        let a = Resources::from_units([("cpu", 4), ("memory", 8)]);
        let b = Resources::from_units([("cpu", 2), ("nvidia.com/gpu", 1)]);
        assert_eq!(
            a.min_limit(&b),
            Resources::from_units([("cpu", 2), ("memory", 8), ("nvidia.com/gpu", 1)])
        );
        assert_eq!(
            a.max_amount(&b),
            Resources::from_units([("cpu", 4), ("memory", 8), ("nvidia.com/gpu", 1)])
        );
        assert_eq!(
            a.capped_by(&Resources::from_units([("cpu", 3), ("pods", 1)])),
            Resources::from_units([("cpu", 3), ("memory", 8)])
        );
        assert!(b.fits_within_amount(&Resources::from_units([("cpu", 2), ("nvidia.com/gpu", 1)])));
        assert!(!b.fits_within_amount(&Resources::from_units([("cpu", 2)])));
        let (cards, rest) =
            Resources::from_units([("card/A", 1), ("cpu", 1)]).split_prefix("card/");
        assert_eq!(cards, Resources::from_units([("card/A", 1)]));
        assert_eq!(rest, Resources::from_units([("cpu", 1)]));
    }

    #[test]
    fn display_is_human() {
        let r = Resources::from_milli([
            ("cpu", 2500),
            ("memory", 4 * (1_i64 << 30) * 1000),
            ("nvidia.com/gpu", 8000),
            ("nvidia.com/gpumem", 4_096_000),
            ("nvidia.com/gpucores", 1500),
        ]);
        assert_eq!(
            r.to_string(),
            "cpu: 2500m, memory: 4Gi, nvidia.com/gpu: 8, nvidia.com/gpucores: 1.5, nvidia.com/gpumem: 4096"
        );
        assert_eq!(format_amount("cpu", 3000), "3");
        assert_eq!(format_amount("memory", 1536 * (1 << 20) * 1000), "1.5Gi");
        assert_eq!(format_amount("memory", 512 * (1 << 20) * 1000), "512Mi");
        assert_eq!(format_amount("memory", 100_000), "100");
        assert_eq!(format_amount("x", 1), "0.001");
        assert_eq!(format_amount("x", 9_999_999), "9999.999");
        assert_eq!(format_amount("memory", ((2_i64 << 30) - 1) * 1000), "2Gi");
        assert_eq!(Resources::new().to_string(), "{}");
    }

    #[test]
    fn serde_round_trips_through_quantity_strings() {
        let r = Resources::from_milli([("cpu", 500), ("nvidia.com/gpu", 8000)]);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v, json!({"cpu": "500m", "nvidia.com/gpu": "8"}));
        let back: Resources = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
