//! A step budget for checking one payload against a schema.
//!
//! A schema can cost exponential time in the payload's nesting: an `anyOf` whose branches
//! recurse into the items is tried branch by branch at every level, and finding the error of
//! a payload that fails at its bottom walks every branch at every level. The validator has no
//! limit of its own, so the schema is compiled with a step keyword added to every subschema
//! (through `allOf`), each check of a subschema pays a step, and once the steps are spent the
//! check is unwound at once (without the panic hook: nothing is printed) and `within` reports
//! it. Unwinding is safe here: a check holds no lock and changes nothing shared.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value, json};

/// The steps a payload check may take: far more than a schema of a few thousand keywords
/// takes on the largest payload hookd accepts by default, and a fraction of a second of work.
pub const STEPS: u64 = 1_000_000;

/// The steps finding the error of a failed check may take (it costs more per step).
pub const ERROR_STEPS: u64 = 25_000;

/// The keyword each subschema gets (through `allOf`); it pays one step.
pub(super) const KEYWORD: &str = "x-hookd-step";

thread_local! {
    /// Steps left for the check running on this thread (no limit outside [`within`]).
    static LEFT: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// What unwinds a check that ran out of steps.
struct OutOfSteps;

/// Runs `check` with `steps` steps; `None` when they ran out.
pub(super) fn within<T>(steps: u64, check: impl FnOnce() -> T) -> Option<T> {
    LEFT.set(steps);
    let result = catch_unwind(AssertUnwindSafe(check));
    LEFT.set(u64::MAX);
    match result {
        Ok(result) => Some(result),
        Err(payload) if payload.is::<OutOfSteps>() => None,
        Err(payload) => resume_unwind(payload),
    }
}

/// The step keyword: always valid, but each check pays a step.
pub(super) struct Step;

impl Step {
    fn pay() {
        let left = LEFT.get();
        if left == 0 {
            resume_unwind(Box::new(OutOfSteps));
        }
        LEFT.set(left - 1);
    }
}

impl<'i> Keyword<'i> for Step {
    fn validate(&self, _: &'i Value) -> Result<(), ValidationError<'i>> {
        Self::pay();
        Ok(())
    }

    fn is_valid(&self, _: &'i Value) -> bool {
        Self::pay();
        true
    }
}

/// Keywords whose values are data, never schemas: left as they are.
const DATA: &[&str] = &[
    "const",
    "enum",
    "default",
    "examples",
    "example",
    "$vocabulary",
    "discriminator",
];
/// Keywords whose values are maps of names (or patterns) to schemas.
const MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// `schema` with the step keyword in every subschema. Objects under unknown keywords get it
/// too: they may be the target of a `$ref`, and validation ignores them otherwise. Adding a
/// keyword moves nothing, so every JSON Pointer of a `$ref` still points where it did.
pub(super) fn instrument(schema: &Value) -> Value {
    let Value::Object(fields) = schema else {
        return schema.clone();
    };
    let mut instrumented: Map<String, Value> = fields
        .iter()
        .map(|(keyword, value)| {
            let value = match value {
                _ if DATA.contains(&keyword.as_str()) => value.clone(),
                Value::Object(map) if MAPS.contains(&keyword.as_str()) => Value::Object(
                    map.iter()
                        .map(|(name, schema)| (name.clone(), instrument_all(schema)))
                        .collect(),
                ),
                _ => instrument_all(value),
            };
            (keyword.clone(), value)
        })
        .collect();
    let step = json!({ KEYWORD: true });
    match instrumented.get_mut("allOf") {
        Some(Value::Array(parts)) => parts.push(step),
        Some(_) => {}
        None => {
            instrumented.insert("allOf".into(), json!([step]));
        }
    }
    Value::Object(instrumented)
}

/// A keyword's value: a schema, or an array of schemas.
fn instrument_all(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(instrument_all).collect()),
        _ => instrument(value),
    }
}
