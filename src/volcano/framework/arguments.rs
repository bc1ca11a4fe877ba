//! A plugin's `arguments:` map, read into typed values with errors that name the
//! plugin and the key. Volcano writes most arguments as numbers or as strings that
//! hold numbers (`binpack.weight: "10"`), so both are accepted where a number is
//! expected.

use crate::volcano::conf::ConfError;
use serde_json::Value;
use std::collections::BTreeMap;

/// One plugin's arguments.
#[derive(Debug, Clone, Copy)]
pub struct Arguments<'a> {
    at: &'a str,
    plugin: &'a str,
    map: &'a BTreeMap<String, Value>,
}

impl<'a> Arguments<'a> {
    /// The arguments of `plugin`, found at `at` (`tiers[i].plugins[j]`).
    pub fn new(at: &'a str, plugin: &'a str, map: &'a BTreeMap<String, Value>) -> Self {
        Self { at, plugin, map }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &'a str {
        self.plugin
    }

    /// An error about `key`.
    pub fn error(&self, key: &str, reason: impl Into<String>) -> ConfError {
        ConfError::BadPlugin {
            at: format!("{} ({})", self.at, self.plugin),
            reason: format!("arguments: {key}: {}", reason.into()),
        }
    }

    /// The raw value of `key`.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// Every key with its value.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a Value)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// A number (or a string holding one).
    pub fn number(&self, key: &str) -> Result<Option<f64>, ConfError> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => number(v)
                .filter(|f| f.is_finite())
                .map(Some)
                .ok_or_else(|| self.error(key, format!("expected a number, got {v}"))),
        }
    }

    /// A number that must be at least `min`.
    pub fn number_at_least(&self, key: &str, min: f64) -> Result<Option<f64>, ConfError> {
        match self.number(key)? {
            Some(f) if f < min => Err(self.error(key, format!("expected at least {min}, got {f}"))),
            other => Ok(other),
        }
    }

    /// A whole number that must be at least `min`.
    pub fn integer_at_least(&self, key: &str, min: i64) -> Result<Option<i64>, ConfError> {
        match self.number(key)? {
            None => Ok(None),
            Some(f) if f.fract() != 0.0 => {
                Err(self.error(key, format!("expected a whole number, got {f}")))
            }
            Some(f) if f < min as f64 => {
                Err(self.error(key, format!("expected at least {min}, got {f}")))
            }
            Some(f) => Ok(Some(f as i64)),
        }
    }

    /// A boolean (or the strings `true` / `false`).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ConfError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s.trim() == "true" => Ok(Some(true)),
            Some(Value::String(s)) if s.trim() == "false" => Ok(Some(false)),
            Some(v) => Err(self.error(key, format!("expected true or false, got {v}"))),
        }
    }

    /// A string.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>, ConfError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.error(key, format!("expected a string, got {v}"))),
        }
    }

    /// A mapping of strings to strings.
    pub fn string_map(&self, key: &str) -> Result<Option<BTreeMap<String, String>>, ConfError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    other => Err(self.error(
                        &format!("{key}.{k}"),
                        format!("expected a string, got {other}"),
                    )),
                })
                .collect::<Result<BTreeMap<_, _>, _>>()
                .map(Some),
            Some(v) => Err(self.error(key, format!("expected a mapping, got {v}"))),
        }
    }

    /// Refuses keys outside `known` (a misspelt argument would silently do nothing).
    pub fn only(&self, known: &[&str]) -> Result<(), ConfError> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) if known.is_empty() => Err(self.error(k, "this plugin takes no arguments")),
            Some(k) => Err(self.error(
                k,
                format!("unknown argument (expected one of: {})", known.join(", ")),
            )),
        }
    }
}

/// A JSON number, or a string holding one (`"1.5"`), as f64.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: Value) -> BTreeMap<String, Value> {
        json.as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    #[test]
    fn typed_values_and_errors_that_name_plugin_and_key() {
        let map = args(serde_json::json!({
            "weight": "10", "factor": 1.5, "on": "true", "bad": "lots", "m": {"a": "b"}
        }));
        let a = Arguments::new("tiers[1].plugins[0]", "binpack", &map);
        assert_eq!(a.number("weight").unwrap(), Some(10.0));
        assert_eq!(a.number("factor").unwrap(), Some(1.5));
        assert_eq!(a.number("missing").unwrap(), None);
        assert_eq!(a.boolean("on").unwrap(), Some(true));
        assert_eq!(
            a.string_map("m").unwrap(),
            Some(BTreeMap::from([("a".into(), "b".into())]))
        );
        let e = a.number("bad").unwrap_err().to_string();
        assert_eq!(
            e,
            "scheduler configuration: tiers[1].plugins[0] (binpack): arguments: bad: expected a number, got \"lots\""
        );
        let e = a.integer_at_least("factor", 0).unwrap_err().to_string();
        assert!(e.contains("factor: expected a whole number"), "{e}");
        let e = a.only(&["weight"]).unwrap_err().to_string();
        assert!(
            e.contains("(binpack)") && e.contains("unknown argument"),
            "{e}"
        );
    }
}
