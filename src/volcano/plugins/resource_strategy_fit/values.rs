//! Reading the nested values of the plugin's arguments (`resources`, `sra`,
//! `proportional` are mappings, where `Arguments` reads flat keys). Numbers may be
//! written as strings that hold them, as elsewhere in Volcano's configuration.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::arguments::{Arguments, number};
use serde_json::{Map, Value};

/// A whole number, written as a number or as a string holding one.
pub fn whole_number(value: &Value) -> Option<i64> {
    number(value)
        .filter(|f| f.is_finite() && f.fract() == 0.0)
        .map(|f| f as i64)
}

/// A whole number at `at`, or an error naming it.
pub fn whole_number_at(args: &Arguments<'_>, at: &str, value: &Value) -> Result<i64, ConfError> {
    whole_number(value)
        .ok_or_else(|| args.error(at, format!("expected a whole number, got {value}")))
}

/// A finite number at `at`, or an error naming it.
pub fn number_at(args: &Arguments<'_>, at: &str, value: &Value) -> Result<f64, ConfError> {
    number(value)
        .filter(|f| f.is_finite())
        .ok_or_else(|| args.error(at, format!("expected a number, got {value}")))
}

/// A boolean (or the strings `true` / `false`) at `at`.
pub fn boolean_at(args: &Arguments<'_>, at: &str, value: &Value) -> Result<bool, ConfError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.trim() == "true" => Ok(true),
        Value::String(s) if s.trim() == "false" => Ok(false),
        _ => Err(args.error(at, format!("expected true or false, got {value}"))),
    }
}

/// A mapping at `at`.
pub fn mapping_at<'v>(
    args: &Arguments<'_>,
    at: &str,
    value: &'v Value,
) -> Result<&'v Map<String, Value>, ConfError> {
    match value {
        Value::Object(m) => Ok(m),
        _ => Err(args.error(at, format!("expected a mapping, got {value}"))),
    }
}

/// A comma-separated list of resource names (Volcano's `resources: a, b`). Names
/// are taken literally, so a `*` in one is refused rather than never matching.
pub fn resource_list(
    args: &Arguments<'_>,
    at: &str,
    value: &Value,
) -> Result<Vec<String>, ConfError> {
    let Value::String(text) = value else {
        return Err(args.error(
            at,
            format!("expected comma-separated resource names, got {value}"),
        ));
    };
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(bad) = names.iter().find(|n| n.contains('*')) {
        return Err(args.error(
            at,
            format!("{bad}: wildcards apply to the resources table only; name each resource"),
        ));
    }
    Ok(names)
}
