//! Event types' JSON Schemas: whether a payload matches its event type's newest schema (what
//! `--strict-event-types` enforces on every publish), and an example payload made from a
//! schema (for test sends and catalogs that give no example of their own).
//!
//! An event type keeps its schemas by version (`{"1": {…}, "2": {…}}`, as Svix does); the
//! newest version is the one payloads are held to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use jsonschema::Validator;
use serde_json::{Map, Value, json};

/// How deep an example follows nested schemas (a recursive schema would never end).
const EXAMPLE_DEPTH: usize = 8;

/// The newest version of `schemas` (the greatest numeric key), if any.
pub fn newest(schemas: &Value) -> Option<&Value> {
    schemas
        .as_object()?
        .iter()
        .filter_map(|(version, schema)| Some((version.parse::<u64>().ok()?, schema)))
        .max_by_key(|(version, _)| *version)
        .map(|(_, schema)| schema)
}

/// Whether `schema` is a JSON Schema a payload can be checked against; why not.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    jsonschema::validator_for(schema)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Checks `payload` against the newest of `schemas` (nothing to check without one). The error
/// names the JSON path (a JSON Pointer into the payload) that failed, and why.
pub fn check_payload(schemas: &Value, payload: &Value) -> Result<(), String> {
    let Some(schema) = newest(schemas) else {
        return Ok(());
    };
    let validator = compiled(schema)?;
    validator.validate(payload).map_err(|error| {
        let path = error.instance_path().to_string();
        let path = if path.is_empty() {
            "/".to_owned()
        } else {
            path
        };
        format!("at {path}: {error}")
    })
}

/// Compiled schemas, by their JSON text: strict mode checks every publish, and compiling a
/// schema costs far more than checking a payload against it. Emptied when full, so a catalog
/// whose schemas keep changing never holds more than [`COMPILED_MAX`].
static COMPILED: Mutex<Option<HashMap<String, Arc<Validator>>>> = Mutex::new(None);
const COMPILED_MAX: usize = 1024;

/// `schema` compiled, once per distinct schema.
fn compiled(schema: &Value) -> Result<Arc<Validator>, String> {
    let key = schema.to_string();
    let mut cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(validator) = cache.get(&key) {
        return Ok(validator.clone());
    }
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("the event type's schema is not a valid JSON Schema: {e}"))?;
    if cache.len() >= COMPILED_MAX {
        cache.clear();
    }
    let validator = Arc::new(validator);
    cache.insert(key, validator.clone());
    Ok(validator)
}

/// An example payload for `schema`: its own example where it gives one (`examples`,
/// `example`, `default`, `const`, the first of an `enum`), otherwise one built from its type
/// and properties.
pub fn example(schema: &Value) -> Value {
    example_at(schema, EXAMPLE_DEPTH)
}

fn example_at(schema: &Value, depth: usize) -> Value {
    let Some(schema) = schema.as_object() else {
        return Value::Null;
    };
    let given = schema
        .get("examples")
        .and_then(|examples| examples.get(0))
        .or_else(|| schema.get("example"))
        .or_else(|| schema.get("default"))
        .or_else(|| schema.get("const"))
        .or_else(|| schema.get("enum").and_then(|values| values.get(0)));
    if let Some(given) = given {
        return given.clone();
    }
    if depth == 0 {
        return Value::Null;
    }
    let first_of = |key| schema.get(key).and_then(|options| options.get(0));
    if let Some(option) = first_of("oneOf").or_else(|| first_of("anyOf")) {
        return example_at(option, depth - 1);
    }
    if let Some(Value::Array(parts)) = schema.get("allOf") {
        let mut merged = Map::new();
        for part in parts {
            if let Value::Object(fields) = example_at(part, depth - 1) {
                merged.extend(fields);
            }
        }
        return Value::Object(merged);
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str),
        Some(kind) => kind.as_str(),
        None if schema.contains_key("properties") => Some("object"),
        None => None,
    };
    match kind {
        Some("object") => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let fields = properties
                .into_iter()
                .flatten()
                .map(|(name, property)| (name.clone(), example_at(property, depth - 1)));
            Value::Object(fields.collect())
        }
        Some("array") => {
            let items = schema
                .get("items")
                .map(|items| example_at(items, depth - 1));
            Value::Array(items.into_iter().collect())
        }
        Some("string") => json!(string_example(schema.get("format").and_then(Value::as_str))),
        Some("integer") => schema.get("minimum").cloned().unwrap_or(json!(0)),
        Some("number") => schema.get("minimum").cloned().unwrap_or(json!(0.0)),
        Some("boolean") => json!(true),
        _ => Value::Null,
    }
}

fn string_example(format: Option<&str>) -> &'static str {
    match format {
        Some("date-time") => "2026-01-01T00:00:00Z",
        Some("date") => "2026-01-01",
        Some("email") => "user@example.com",
        Some("uri" | "url") => "https://example.com",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        _ => "string",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_schemas() -> Value {
        json!({
            "1": {"type": "object"},
            "2": {
                "type": "object",
                "required": ["orderId", "items"],
                "properties": {
                    "orderId": {"type": "integer", "minimum": 1},
                    "status": {"enum": ["shipped", "delivered"]},
                    "shippedAt": {"type": "string", "format": "date-time"},
                    "items": {"type": "array", "items": {"type": "object",
                        "properties": {"sku": {"type": "string", "example": "A-1"}}}}
                }
            }
        })
    }

    #[test]
    fn a_payload_is_held_to_the_newest_schema_and_the_error_names_the_path() {
        let schemas = order_schemas();
        let fine = json!({"orderId": 3, "items": [{"sku": "B"}]});
        assert_eq!(check_payload(&schemas, &fine), Ok(()));
        let wrong = json!({"orderId": "3", "items": []});
        let error = check_payload(&schemas, &wrong).unwrap_err();
        assert!(error.starts_with("at /orderId: "), "{error}");
        let missing = check_payload(&schemas, &json!({"orderId": 3})).unwrap_err();
        assert!(
            missing.starts_with("at /: ") && missing.contains("items"),
            "{missing}"
        );
        assert_eq!(
            check_payload(&json!({}), &wrong),
            Ok(()),
            "no schema, nothing to hold to"
        );
    }

    #[test]
    fn a_schema_that_is_not_json_schema_is_named_as_such() {
        let schemas = json!({"1": {"type": "no-such-type"}});
        let error = check_payload(&schemas, &json!({})).unwrap_err();
        assert!(error.contains("not a valid JSON Schema"), "{error}");
        assert!(check_schema(&json!({"type": 12})).is_err());
    }

    #[test]
    fn an_example_follows_the_schema_and_its_own_examples() {
        let example = example(newest(&order_schemas()).unwrap());
        assert_eq!(
            example,
            json!({
                "orderId": 1,
                "status": "shipped",
                "shippedAt": "2026-01-01T00:00:00Z",
                "items": [{"sku": "A-1"}]
            })
        );
        assert_eq!(
            check_payload(&order_schemas(), &example),
            Ok(()),
            "it passes its schema"
        );
    }
}
