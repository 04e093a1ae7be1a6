//! Reading a source's `config` object field by field, so every refusal names the exact field
//! (`config.secret`, `config.basicAuth.password`) and unknown fields are refused rather than
//! ignored: a misspelt credential must not leave a source open.

use serde_json::{Map, Value};

use crate::ConfigError;

/// Longest secret, password or key accepted, in bytes.
const MAX_SECRET_LEN: usize = 1024;

/// A JSON object and the path it was found at.
pub(crate) struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// `value` (found at `path`) as an object holding no field outside `known`.
    pub(crate) fn new(path: &str, value: &'a Value, known: &[&str]) -> Result<Self, ConfigError> {
        let map = value
            .as_object()
            .ok_or_else(|| ConfigError::new(path, "must be an object"))?;
        if let Some(unknown) = map.keys().find(|key| !known.contains(&key.as_str())) {
            let expected = if known.is_empty() {
                "no fields are expected".to_owned()
            } else {
                format!("expected {}", known.join(", "))
            };
            return Err(ConfigError::new(
                format!("{path}.{unknown}"),
                format!("unknown field; {expected}"),
            ));
        }
        Ok(Self {
            path: path.to_owned(),
            map,
        })
    }

    fn path(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    /// Field `name`, absent when missing or `null`.
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    /// The secret-like string field `name` (1..=1024 bytes), `None` when absent or `null`.
    pub(crate) fn optional_secret(&self, name: &str) -> Result<Option<String>, ConfigError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let text = value
            .as_str()
            .ok_or_else(|| ConfigError::new(self.path(name), "must be a string"))?;
        match text.len() {
            0 => Err(ConfigError::new(self.path(name), "must not be empty")),
            1..=MAX_SECRET_LEN => Ok(Some(text.to_owned())),
            _ => Err(ConfigError::new(
                self.path(name),
                format!("must be at most {MAX_SECRET_LEN} bytes"),
            )),
        }
    }

    /// The secret-like string field `name`, which is required.
    pub(crate) fn secret(&self, name: &str) -> Result<String, ConfigError> {
        self.optional_secret(name)?
            .ok_or_else(|| ConfigError::new(self.path(name), "is required"))
    }

    /// The object field `name` holding no field outside `known`, `None` when absent or `null`.
    pub(crate) fn optional_object(
        &self,
        name: &str,
        known: &[&str],
    ) -> Result<Option<Fields<'a>>, ConfigError> {
        self.get(name)
            .map(|value| Fields::new(&self.path(name), value, known))
            .transpose()
    }
}
