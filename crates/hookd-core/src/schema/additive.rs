//! The add-only rule between an event type's schema versions: a receiver written against one
//! version keeps working with the next only if the next adds fields and never removes,
//! renames or retypes one. A breaking change is a new event type (`order.shipped.v2`), sent
//! beside the old one while receivers move.
//!
//! Two schemas are compared as JSON Schema describes objects: a property of the older one
//! missing from the newer (removed, or renamed: the old name is gone), a property whose `type`
//! changed, and a field required before but not any more each break receivers. Properties
//! both have are compared again inside (nested objects, and the `items` of arrays). Anything
//! else a schema says (formats, bounds, `$ref`s) is left alone: the rule is about the fields a
//! receiver reads.

use serde_json::{Map, Value};

/// How deep the comparison follows nested schemas (a recursive schema would never end).
const DEPTH: usize = 32;

/// Why the versions of `new` (an event type's `schemas`, `{"1": {…}, …}`) break receivers of
/// what they replace, naming the version and the field; `None` if they only add. `old` is what
/// the catalog holds now, if anything: every version `new` adds or changes is held to the
/// version before it in `new` and to what it replaces, and a newest version taken away is
/// held to by the newest that stays.
pub fn breaking_change(old: Option<&Value>, new: &Value) -> Option<String> {
    let old = old.map(versions).unwrap_or_default();
    let new = versions(new);
    for (i, (version, schema)) in new.iter().enumerate() {
        let stored = old.iter().find(|(v, _)| v == version).map(|(_, s)| *s);
        if stored == Some(*schema) {
            continue;
        }
        if let Some((before, previous)) = i.checked_sub(1).map(|p| new[p])
            && let Some(why) = compare(previous, schema, DEPTH, "")
        {
            return Some(format!(
                "version \"{version}\" {why} (in version \"{before}\")"
            ));
        }
        if let Some(why) = stored.and_then(|stored| compare(stored, schema, DEPTH, "")) {
            return Some(format!(
                "version \"{version}\" {why} (in the version it replaces)"
            ));
        }
    }
    let (Some((old_newest, was)), Some((newest, is))) = (old.last(), new.last()) else {
        return None;
    };
    if old_newest > newest {
        return compare(was, is, DEPTH, "").map(|why| {
            format!("version \"{newest}\", newest once \"{old_newest}\" goes, {why} (in \"{old_newest}\")")
        });
    }
    None
}

/// The numbered versions of `schemas`, oldest first.
fn versions(schemas: &Value) -> Vec<(u64, &Value)> {
    let mut versions: Vec<(u64, &Value)> = schemas
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(version, schema)| Some((version.parse().ok()?, schema)))
        .collect();
    versions.sort_by_key(|(version, _)| *version);
    versions
}

/// What `new` does to a field of `old` that breaks receivers of `old`, the field named by its
/// path from the payload's top (`address.city`, `items[].sku`).
fn compare(old: &Value, new: &Value, depth: usize, path: &str) -> Option<String> {
    if depth == 0 {
        return None;
    }
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return None;
    };
    let name = |field: &str| match path {
        "" => field.to_owned(),
        _ => format!("{path}.{field}"),
    };
    if let Some(old_type) = old.get("type")
        && new.get("type") != Some(old_type)
    {
        let new_type = new.get("type").map_or("none".to_owned(), Value::to_string);
        let field = if path.is_empty() { "the payload" } else { path };
        return Some(format!(
            "changes the type of {field} from {old_type} to {new_type}"
        ));
    }
    let new_fields = properties(new);
    for (field, old_field) in properties(old).into_iter().flatten() {
        match new_fields.and_then(|fields| fields.get(field)) {
            None => return Some(format!("removes the field {}", name(field))),
            Some(new_field) => {
                if let Some(why) = compare(old_field, new_field, depth - 1, &name(field)) {
                    return Some(why);
                }
            }
        }
    }
    if let Some(field) = required(old).find(|field| !required(new).any(|f| f == *field)) {
        return Some(format!("no longer requires the field {}", name(field)));
    }
    let items = (old.get("items"), new.get("items"));
    if let (Some(old_items), Some(new_items)) = items {
        return compare(old_items, new_items, depth - 1, &format!("{path}[]"));
    }
    None
}

fn properties(schema: &Map<String, Value>) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn required(schema: &Map<String, Value>) -> impl Iterator<Item = &str> {
    let fields = schema.get("required").and_then(Value::as_array);
    fields.into_iter().flatten().filter_map(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn order() -> Value {
        json!({
            "type": "object",
            "required": ["orderId"],
            "properties": {
                "orderId": {"type": "integer"},
                "address": {"type": "object", "properties": {"city": {"type": "string"}}},
                "items": {"type": "array", "items": {"type": "object",
                    "properties": {"sku": {"type": "string"}}}}
            }
        })
    }

    /// A change made to a schema.
    type Change = fn(&mut Value);

    /// `order()` changed by `change`, as version 2 after it as version 1.
    fn second(change: impl FnOnce(&mut Value)) -> Option<String> {
        let mut next = order();
        change(&mut next);
        breaking_change(None, &json!({"1": order(), "2": next}))
    }

    #[test]
    fn added_fields_are_accepted() {
        let added = second(|v| {
            v["properties"]["carrier"] = json!({"type": "string"});
            v["properties"]["address"]["properties"]["zip"] = json!({"type": "string"});
            v["properties"]["items"]["items"]["properties"]["qty"] = json!({"type": "integer"});
            v["required"] = json!(["orderId", "carrier"]);
        });
        assert_eq!(added, None);
    }

    #[test]
    fn removed_renamed_retyped_and_unrequired_fields_are_named() {
        let cases: [(Change, &str); 6] = [
            (
                |v| drop(v["properties"].as_object_mut().unwrap().remove("orderId")),
                "removes the field orderId",
            ),
            (
                |v| {
                    let city = v["properties"]["address"]["properties"]
                        .as_object_mut()
                        .unwrap()
                        .remove("city")
                        .unwrap();
                    v["properties"]["address"]["properties"]["town"] = city;
                },
                "removes the field address.city",
            ),
            (
                |v| v["properties"]["orderId"]["type"] = json!("string"),
                r#"changes the type of orderId from "integer" to "string""#,
            ),
            (
                |v| {
                    v["properties"]["items"]["items"]["properties"]["sku"]["type"] =
                        json!(["string", "null"])
                },
                "changes the type of items[].sku",
            ),
            (
                |v| v["required"] = json!([]),
                "no longer requires the field orderId",
            ),
            (
                |v| v["type"] = json!("array"),
                r#"changes the type of the payload from "object" to "array""#,
            ),
        ];
        for (change, named) in cases {
            let why = second(change).expect(named);
            assert!(why.starts_with("version \"2\" "), "{why}");
            assert!(why.contains(named), "{named}: {why}");
        }
    }

    #[test]
    fn only_what_a_change_adds_or_changes_is_held_to_the_rule() {
        let mut broken = order();
        broken["properties"]
            .as_object_mut()
            .unwrap()
            .remove("address");
        let stored = json!({"1": order(), "2": broken.clone()});
        let mut third = broken.clone();
        third["properties"]["carrier"] = json!({"type": "string"});
        let next = json!({"1": order(), "2": broken, "3": third});
        assert_eq!(
            breaking_change(Some(&stored), &next),
            None,
            "kept as stored"
        );

        let edited = json!({"1": {"type": "object", "properties": {}}});
        let why = breaking_change(Some(&json!({"1": order()})), &edited).unwrap();
        assert!(why.contains("in the version it replaces"), "{why}");

        let shrunk = json!({"1": {"type": "object", "properties": {}}});
        let stored = json!({"1": shrunk["1"].clone(), "2": order()});
        let why = breaking_change(Some(&stored), &shrunk).unwrap();
        assert!(
            why.starts_with("version \"1\", newest once \"2\" goes, removes the field address"),
            "{why}"
        );
    }
}
