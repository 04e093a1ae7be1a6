//! The JSON text columns (metadata, filters, headers, schemas), encoded the same way by both
//! implementations.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::StoreError;

/// Encodes a value for a JSON text column.
pub fn encode<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("maps, lists and JSON values always serialize")
}

/// Encodes an optional value; `None` stays SQL NULL.
pub fn encode_opt<T: Serialize>(value: Option<&T>) -> Option<String> {
    value.map(encode)
}

/// Decodes a JSON text column.
pub fn decode<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    Ok(serde_json::from_str(text)?)
}

/// Decodes a nullable JSON text column.
pub fn decode_opt<T: DeserializeOwned>(text: Option<String>) -> Result<Option<T>, StoreError> {
    text.as_deref().map(decode).transpose()
}
