//! Event types' JSON Schemas: whether a payload matches its event type's newest schema (what
//! `--strict-event-types` enforces on every publish), and an example payload made from a
//! schema (for test sends and catalogs that give no example of their own).
//!
//! An event type keeps its schemas by version (`{"1": {…}, "2": {…}}`, as Svix does); the
//! newest version is the one payloads are held to.
//!
//! A schema costs a bounded amount whatever it says: patterns run on a linear-time engine, a
//! schema holds a bounded number of them, and a payload check stops after a number of steps
//! ([`budget`]). The catalog's routes compile schemas as a publish does, so a schema that
//! cannot be held to is refused when it is stored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use jsonschema::{PatternOptions, Validator};
use serde_json::{Map, Value, json};

pub mod additive;
pub mod budget;

/// How deep an example follows nested schemas (a recursive schema would never end).
const EXAMPLE_DEPTH: usize = 8;

/// The newest version of `schemas` (the greatest numeric key), if any.
pub fn newest(schemas: &Value) -> Option<&Value> {
    newest_version(schemas).map(|(_, schema)| schema)
}

fn newest_version(schemas: &Value) -> Option<(u64, &Value)> {
    schemas
        .as_object()?
        .iter()
        .filter_map(|(version, schema)| Some((version.parse::<u64>().ok()?, schema)))
        .max_by_key(|(version, _)| *version)
}

/// Whether `schema` is a JSON Schema a payload can be checked against; why not. Compiled as a
/// publish compiles it, so what passes here never fails there.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    compile(schema).map(drop)
}

/// Whether every version of an event type's `schemas` (`{"1": {…}, …}`) is a JSON Schema a
/// payload can be checked against; why not, naming the version.
pub fn check_schemas(schemas: &Value) -> Result<(), String> {
    let versions = schemas.as_object().ok_or("must be a JSON object")?;
    versions.iter().try_for_each(|(version, schema)| {
        check_schema(schema).map_err(|why| format!("version {version:?}: {why}"))
    })
}

/// Checks `payload` against the newest of `schemas`, those of the event type `event_type`
/// (nothing to check without one). The error names the JSON path (a JSON Pointer into the
/// payload) that failed, and why; a check that would take more than [`budget::STEPS`] steps
/// stops and says so.
pub fn check_payload(event_type: &str, schemas: &Value, payload: &Value) -> Result<(), String> {
    let Some((version, schema)) = newest_version(schemas) else {
        return Ok(());
    };
    let compiled = compiled(event_type, version, schema)?;
    let validator = &compiled.validator;
    match budget::within(budget::STEPS, || validator.is_valid(payload)) {
        Some(true) => Ok(()),
        Some(false) => Err(
            budget::within(budget::ERROR_STEPS, || validator.validate(payload))
                .and_then(Result::err)
                .map_or_else(
                    || "does not match the event type's schema".to_owned(),
                    |e| failure(&e),
                ),
        ),
        None => Err(format!(
            "checking it against the event type's schema takes more than {} steps; the schema \
             is too costly to hold payloads to",
            budget::STEPS
        )),
    }
}

fn failure(error: &jsonschema::ValidationError<'_>) -> String {
    let path = error.instance_path().to_string();
    let path = if path.is_empty() { "/" } else { &path };
    format!("at {path}: {error}")
}

/// `schema` compiled as payloads are held to it: `pattern`s on the `regex` crate (no
/// backreferences or look-around, but matching in linear time, where the default engine
/// backtracks without bound) with a size limit on each compiled pattern, and every subschema
/// paying a step from the [`budget`].
fn compile(schema: &Value) -> Result<Validator, String> {
    if patterns(schema) > MAX_PATTERNS {
        return Err(format!(
            "holds more than {MAX_PATTERNS} patterns (`pattern`, `patternProperties`)"
        ));
    }
    let patterns = PatternOptions::regex()
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT);
    jsonschema::options()
        .with_pattern_options(patterns)
        .with_keyword(budget::KEYWORD, |_, _, _| Ok(Box::new(budget::Step)))
        .build(&budget::instrument(schema))
        .map_err(|e| match e.to_string() {
            bad_pattern if bad_pattern.contains(r#"is not a "regex""#) => format!(
                "{bad_pattern}: patterns are matched in linear time, which rules out \
                 backreferences and look-around, within {PATTERN_SIZE_LIMIT} bytes compiled"
            ),
            other => other,
        })
}

/// The most memory one compiled `pattern` may take (per limit of the `regex` crate), well above
/// what the patterns of real catalogs need (a 200-letter Unicode class repeated fits).
const PATTERN_SIZE_LIMIT: usize = 256 << 10;

/// How many patterns one schema may hold: with [`PATTERN_SIZE_LIMIT`], what compiling them
/// may take in all.
const MAX_PATTERNS: usize = 256;

/// How many patterns `schema` holds, counted wherever they are (a schema's data included).
fn patterns(schema: &Value) -> usize {
    match schema {
        Value::Object(fields) => fields
            .iter()
            .map(|(keyword, value)| match (keyword.as_str(), value) {
                ("pattern", Value::String(_)) => 1,
                ("patternProperties", Value::Object(map)) => map.len() + patterns(value),
                _ => patterns(value),
            })
            .sum(),
        Value::Array(items) => items.iter().map(patterns).sum(),
        _ => 0,
    }
}

/// Compiled schemas, by event type: strict mode checks every publish, and compiling a schema
/// costs far more than checking a payload against it. An entry is used while its version and
/// schema are those asked for (compared, never serialised). Emptied when full, so a catalog
/// with many event types never holds more than [`COMPILED_MAX`].
static COMPILED: Mutex<Option<HashMap<String, Arc<Compiled>>>> = Mutex::new(None);
const COMPILED_MAX: usize = 1024;

struct Compiled {
    version: u64,
    schema: Value,
    validator: Validator,
}

/// Version `version` of `event_type`'s schemas, `schema`, compiled (once while it stays).
fn compiled(event_type: &str, version: u64, schema: &Value) -> Result<Arc<Compiled>, String> {
    let cached = lock_compiled()
        .as_ref()
        .and_then(|cache| cache.get(event_type).cloned());
    if let Some(cached) = cached.filter(|c| c.version == version && c.schema == *schema) {
        return Ok(cached);
    }
    let validator = compile(schema)
        .map_err(|e| format!("the event type's schema is not a valid JSON Schema: {e}"))?;
    let compiled = Arc::new(Compiled {
        version,
        schema: schema.clone(),
        validator,
    });
    let mut cache = lock_compiled();
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= COMPILED_MAX {
        cache.clear();
    }
    cache.insert(event_type.to_owned(), compiled.clone());
    Ok(compiled)
}

fn lock_compiled() -> MutexGuard<'static, Option<HashMap<String, Arc<Compiled>>>> {
    COMPILED.lock().unwrap_or_else(PoisonError::into_inner)
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
        assert_eq!(check_payload("order", &schemas, &fine), Ok(()));
        let wrong = json!({"orderId": "3", "items": []});
        let error = check_payload("order", &schemas, &wrong).unwrap_err();
        assert!(error.starts_with("at /orderId: "), "{error}");
        let missing = check_payload("order", &schemas, &json!({"orderId": 3})).unwrap_err();
        assert!(
            missing.starts_with("at /: ") && missing.contains("items"),
            "{missing}"
        );
        assert_eq!(
            check_payload("order", &json!({}), &wrong),
            Ok(()),
            "no schema, nothing to hold to"
        );
    }

    #[test]
    fn a_schema_that_is_not_json_schema_is_named_as_such() {
        let schemas = json!({"1": {"type": "no-such-type"}});
        let error = check_payload("bad", &schemas, &json!({})).unwrap_err();
        assert!(error.contains("not a valid JSON Schema"), "{error}");
        assert!(check_schema(&json!({"type": 12})).is_err());
        let error = check_schemas(&json!({"1": {}, "2": {"type": 12}})).unwrap_err();
        assert!(error.starts_with("version \"2\": "), "{error}");
        assert!(check_schemas(&json!([])).is_err());
    }

    #[test]
    fn patterns_match_in_linear_time_and_backreferences_are_refused() {
        let error = check_schema(&json!({"pattern": "^(a+)\\1$"})).unwrap_err();
        assert!(error.contains("backreferences"), "{error}");
        assert!(check_schema(&json!({"pattern": "^(?=.*[0-9])[a-z0-9]{8,}$"})).is_err());
        assert_eq!(
            check_schema(&json!({"pattern": "^[a-z]+(-[0-9]{2,})*$"})),
            Ok(())
        );
        let many: Map<String, Value> = (0..=MAX_PATTERNS)
            .map(|n| (format!("p{n}"), json!({"pattern": format!("^{n}$")})))
            .collect();
        let error = check_schema(&json!({"properties": many})).unwrap_err();
        assert!(error.contains("more than 256 patterns"), "{error}");
        // Catastrophic on a backtracking engine; instant here.
        let schemas = json!({"1": {"properties": {"s": {"pattern": "^(a|a)*$"}}}});
        let payload = json!({"s": format!("{}b", "a".repeat(5_000))});
        let error = check_payload("re", &schemas, &payload).unwrap_err();
        assert!(error.starts_with("at /s: "), "{error}");
    }

    /// `anyOf` whose branches both recurse into the items: finding the error of a payload that
    /// fails at its bottom walks both at every level, 2^depth subschemas.
    fn doubling_schema() -> Value {
        let branch = |size| json!({"type": "array", "maxItems": size, "items": {"$ref": "#"}});
        json!({"1": {"anyOf": [branch(1), branch(2), {"type": "integer"}]}})
    }

    fn nested(levels: usize, bottom: Value) -> Value {
        (0..levels).fold(bottom, |inner, _| json!([inner]))
    }

    #[test]
    fn finding_an_error_that_would_take_exponential_time_stops_at_its_budget() {
        let schemas = doubling_schema();
        assert_eq!(
            check_payload("tree", &schemas, &nested(60, json!(1))),
            Ok(())
        );
        let costly = check_payload("tree", &schemas, &nested(60, json!("x"))).unwrap_err();
        assert_eq!(costly, "does not match the event type's schema");
        let found = check_payload("tree", &schemas, &nested(3, json!("x"))).unwrap_err();
        assert!(found.starts_with("at /: "), "{found}");
    }

    #[test]
    fn a_check_past_its_steps_is_stopped_and_named() {
        let validator = compile(&doubling_schema()["1"]).unwrap();
        let payload = nested(40, json!(1));
        assert_eq!(
            budget::within(1_000, || validator.is_valid(&payload)),
            Some(true)
        );
        assert_eq!(budget::within(10, || validator.is_valid(&payload)), None);
        assert_eq!(
            budget::within(10, || 1),
            Some(1),
            "a check that pays nothing is kept"
        );
    }

    #[test]
    fn the_step_keyword_leaves_data_keywords_and_pointers_alone() {
        let schema = json!({"$defs": {"n": {"const": {"a": 1}}}, "properties": {"x": {"$ref": "#/$defs/n"}},
            "allOf": [{"required": ["x"]}]});
        let instrumented = budget::instrument(&schema);
        assert_eq!(instrumented["$defs"]["n"]["const"], json!({"a": 1}));
        assert!(instrumented["properties"].get("allOf").is_none());
        assert_eq!(instrumented["allOf"][0]["required"], json!(["x"]));
        let schemas = json!({"1": schema});
        assert_eq!(
            check_payload("i", &schemas, &json!({"x": {"a": 1}})),
            Ok(())
        );
        assert!(check_payload("i", &schemas, &json!({"x": {"a": 2}})).is_err());
        let closed = json!({"1": {"properties": {"a": {}}, "unevaluatedProperties": false}});
        assert_eq!(check_payload("u", &closed, &json!({"a": 1})), Ok(()));
        assert!(check_payload("u", &closed, &json!({"a": 1, "b": 2})).is_err());
        let draft7 = json!({"1": {"$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "integer"}}, "items": {"$ref": "#/definitions/n"}}});
        assert_eq!(check_payload("d", &draft7, &json!([1, 2])), Ok(()));
        assert!(check_payload("d", &draft7, &json!([1, "2"])).is_err());
    }

    #[test]
    fn a_cached_validator_is_found_by_event_type_and_kept_while_its_schema_stays() {
        let schema = json!({"type": "object"});
        let first = compiled("cache.test", 1, &schema).unwrap();
        let again = compiled("cache.test", 1, &schema.clone()).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same schema is compiled once"
        );
        let changed = compiled("cache.test", 1, &json!({"type": "array"})).unwrap();
        assert!(
            !Arc::ptr_eq(&first, &changed),
            "a changed schema is compiled anew"
        );
        let next_version = compiled("cache.test", 2, &json!({"type": "array"})).unwrap();
        assert!(!Arc::ptr_eq(&changed, &next_version));
        assert!(next_version.validator.is_valid(&json!([])));
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
            check_payload("order", &order_schemas(), &example),
            Ok(()),
            "it passes its schema"
        );
    }
}
