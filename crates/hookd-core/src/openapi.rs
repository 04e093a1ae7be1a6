//! OpenAPI documents read for an event-type import, at a bounded cost whatever the input.
//!
//! A document is small text that can describe far more: YAML aliases repeat an anchored value
//! (nested aliases double it at each level, the "billion laughs"), `$ref`s repeat what they
//! point at, and nesting costs stack on every recursive walk. So the YAML is read event by
//! event (the loader of `yaml-rust2` recurses once per level and clones every alias), every
//! value produced is counted, aliases and `$ref` expansions included, and reading stops at
//! [`MAX_NODES`] values or [`MAX_DEPTH`] levels of nesting. JSON text goes through
//! `serde_json`, whose parser stops at 128 levels, and holds at most one value per byte.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// How deep a YAML document may nest (below `serde_json`'s 128, so what is read can be
/// written and read back as JSON).
pub const MAX_DEPTH: usize = 100;

/// How many values a YAML document may hold, counted after expanding its aliases.
pub const MAX_NODES: usize = 200_000;

/// How many values resolving the `$ref`s of one import may produce: the schemas of every
/// event type the document describes, together.
pub const MAX_REF_NODES: usize = 100_000;

/// How deep `$ref`s and the schemas they resolve to may nest before the document is taken to
/// be circular.
pub const REF_DEPTH: usize = 32;

/// Why a document cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("holds more than {MAX_NODES} values once its aliases are expanded")]
    TooLarge,
    #[error("is neither JSON nor YAML: {0}")]
    Syntax(String),
    #[error("is empty")]
    Empty,
    #[error("holds YAML that has no JSON form: {0}")]
    NoJsonForm(&'static str),
}

/// Why a schema's `$ref`s cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("its `$ref`s nest too deep (a cycle?)")]
    TooDeep,
    #[error("its `$ref`s expand to more than {MAX_REF_NODES} values")]
    TooLarge,
    #[error("`$ref` {0:?} points outside the document")]
    Outside(String),
    #[error("`$ref` {0:?} points at nothing")]
    Dangling(String),
}

/// `raw` as JSON, or else as YAML (its first document).
pub fn parse(raw: &str) -> Result<Value, DocumentError> {
    if let Ok(document) = serde_json::from_str(raw) {
        return Ok(document);
    }
    let mut parser = Parser::new_from_str(raw);
    let mut builder = Builder::default();
    loop {
        let (event, _) = parser
            .next_token()
            .map_err(|e| DocumentError::Syntax(e.to_string()))?;
        if event == Event::StreamEnd {
            return Err(DocumentError::Empty);
        }
        if let Some(document) = builder.take(event)? {
            return Ok(document);
        }
    }
}

/// A value being built from parser events: the containers still open, and the anchored values
/// aliases may repeat.
#[derive(Default)]
struct Builder {
    open: Vec<Open>,
    /// By anchor id: the value, how many values it holds and how deep it nests.
    anchors: HashMap<usize, (Value, usize, usize)>,
    /// Values produced so far, aliases' copies included.
    nodes: usize,
}

struct Open {
    anchor: usize,
    /// [`Builder::nodes`] when the container opened, to count what an anchor holds.
    nodes_before: usize,
    /// How deep the container's contents nest so far.
    depth: usize,
    container: Container,
}

enum Container {
    Sequence(Vec<Value>),
    /// The entries so far, and the key read whose value comes next.
    Mapping(Map<String, Value>, Option<String>),
}

impl Builder {
    /// Takes one event; the whole document once its last event is taken.
    fn take(&mut self, event: Event) -> Result<Option<Value>, DocumentError> {
        match event {
            Event::SequenceStart(anchor, _) => self.open(anchor, Container::Sequence(Vec::new())),
            Event::MappingStart(anchor, _) => {
                self.open(anchor, Container::Mapping(Map::new(), None))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let open = self.open.pop().expect("the parser balances containers");
                let value = match open.container {
                    Container::Sequence(items) => Value::Array(items),
                    Container::Mapping(entries, _) => Value::Object(entries),
                };
                let held = self.nodes - open.nodes_before;
                self.anchor(open.anchor, &value, held, open.depth + 1)?;
                self.insert(value, open.depth + 1)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = scalar(text, style, tag.as_ref())?;
                self.count(1)?;
                self.anchor(anchor, &value, 1, 0)?;
                self.insert(value, 0)
            }
            Event::Alias(anchor) => {
                let (value, held, depth) = self
                    .anchors
                    .get(&anchor)
                    .cloned()
                    .ok_or(DocumentError::Syntax("an alias to no anchor".into()))?;
                self.count(held)?;
                self.insert(value, depth)
            }
            _ => Ok(None),
        }
    }

    fn open(
        &mut self,
        anchor: usize,
        container: Container,
    ) -> Result<Option<Value>, DocumentError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(DocumentError::TooDeep);
        }
        self.count(1)?;
        self.open.push(Open {
            anchor,
            nodes_before: self.nodes - 1,
            depth: 0,
            container,
        });
        Ok(None)
    }

    fn count(&mut self, values: usize) -> Result<(), DocumentError> {
        self.nodes = self.nodes.saturating_add(values);
        if self.nodes > MAX_NODES {
            return Err(DocumentError::TooLarge);
        }
        Ok(())
    }

    /// Keeps `value` for the aliases of `anchor` (0: none); its copy counts as values too.
    fn anchor(
        &mut self,
        anchor: usize,
        value: &Value,
        held: usize,
        depth: usize,
    ) -> Result<(), DocumentError> {
        if anchor != 0 {
            self.count(held)?;
            self.anchors.insert(anchor, (value.clone(), held, depth));
        }
        Ok(())
    }

    /// Puts `value` (nesting `depth` levels) into the open container, or returns it as the
    /// document when none is open.
    fn insert(&mut self, value: Value, depth: usize) -> Result<Option<Value>, DocumentError> {
        let open_count = self.open.len();
        let Some(open) = self.open.last_mut() else {
            return Ok(Some(value));
        };
        if open_count + depth > MAX_DEPTH {
            return Err(DocumentError::TooDeep);
        }
        open.depth = open.depth.max(depth);
        match &mut open.container {
            Container::Sequence(items) => items.push(value),
            Container::Mapping(_, key @ None) => *key = Some(key_text(value)?),
            Container::Mapping(entries, key) => {
                entries.insert(key.take().expect("matched above"), value);
            }
        }
        Ok(None)
    }
}

/// A mapping key as JSON's string key.
fn key_text(key: Value) -> Result<String, DocumentError> {
    match key {
        Value::String(text) => Ok(text),
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        _ => Err(DocumentError::NoJsonForm("a key that is not text")),
    }
}

/// A scalar's value, by YAML's core schema (quoted scalars and `!!str` are text).
fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Result<Value, DocumentError> {
    let is_str = tag.is_some_and(|tag| tag.handle == "tag:yaml.org,2002:" && tag.suffix == "str");
    if style != TScalarStyle::Plain || is_str {
        return Ok(Value::String(text));
    }
    use yaml_rust2::Yaml;
    Ok(match Yaml::from_str(&text) {
        Yaml::Null => Value::Null,
        Yaml::Boolean(flag) => Value::Bool(flag),
        Yaml::Integer(integer) => Value::Number(integer.into()),
        real @ Yaml::Real(_) => real
            .as_f64()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or(DocumentError::NoJsonForm("a number JSON cannot hold"))?,
        _ => Value::String(text),
    })
}

/// Counts what `$ref` resolution produces across one import.
#[derive(Debug)]
pub struct RefBudget {
    left: usize,
}

impl Default for RefBudget {
    fn default() -> Self {
        Self {
            left: MAX_REF_NODES,
        }
    }
}

impl RefBudget {
    fn spend(&mut self) -> Result<(), RefError> {
        self.left = self.left.checked_sub(1).ok_or(RefError::TooLarge)?;
        Ok(())
    }
}

/// `value` with every `$ref` into `document` replaced by what it points at, each value
/// produced paid for from `budget`. What it would produce is counted first, which costs no
/// memory, so a document that fans out is refused before anything is built.
pub fn resolve(document: &Value, value: &Value, budget: &mut RefBudget) -> Result<Value, RefError> {
    count(document, value, REF_DEPTH, budget)?;
    Ok(build(document, value))
}

/// Pays for each value resolving `value` produces; checks every `$ref` on the way.
fn count(
    document: &Value,
    value: &Value,
    depth: usize,
    budget: &mut RefBudget,
) -> Result<(), RefError> {
    if depth == 0 {
        return Err(RefError::TooDeep);
    }
    if let Some(target) = target(document, value)? {
        return count(document, target, depth - 1, budget);
    }
    budget.spend()?;
    match value {
        Value::Object(fields) => fields
            .values()
            .try_for_each(|field| count(document, field, depth - 1, budget)),
        Value::Array(items) => items
            .iter()
            .try_for_each(|item| count(document, item, depth - 1, budget)),
        _ => Ok(()),
    }
}

/// `value` resolved, once [`count`] has found it within bounds.
fn build(document: &Value, value: &Value) -> Value {
    if let Ok(Some(target)) = target(document, value) {
        return build(document, target);
    }
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| (key.clone(), build(document, field)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| build(document, item)).collect())
        }
        other => other.clone(),
    }
}

/// What `value` points at, when it is a `$ref`.
fn target<'a>(document: &'a Value, value: &Value) -> Result<Option<&'a Value>, RefError> {
    let Some(target) = value.get("$ref").and_then(Value::as_str) else {
        return Ok(None);
    };
    let pointer = target
        .strip_prefix('#')
        .ok_or_else(|| RefError::Outside(target.to_owned()))?;
    let found = document
        .pointer(pointer)
        .ok_or_else(|| RefError::Dangling(target.to_owned()))?;
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The "billion laughs": each level's anchor holds ten aliases of the one before.
    fn alias_bomb(levels: usize) -> String {
        let mut text = String::from("a0: &a0 [x]\n");
        for level in 1..=levels {
            let aliases = vec![format!("*a{}", level - 1); 10].join(",");
            text.push_str(&format!("a{level}: &a{level} [{aliases}]\n"));
        }
        text
    }

    #[test]
    fn yaml_reads_as_the_json_it_means() {
        let yaml = "a: &x {b: [1, 2.5, true, ~, 'q', !!str 3]}\nc: *x\n4: d\n";
        let expected = json!({"a": {"b": [1, 2.5, true, null, "q", "3"]},
            "c": {"b": [1, 2.5, true, null, "q", "3"]}, "4": "d"});
        assert_eq!(parse(yaml), Ok(expected));
        assert_eq!(parse("{\"j\": 1}"), Ok(json!({"j": 1})));
        assert_eq!(parse(""), Err(DocumentError::Empty));
        assert!(matches!(parse("a: [1"), Err(DocumentError::Syntax(_))));
        assert!(matches!(
            parse("? [1]\n: 2\n"),
            Err(DocumentError::NoJsonForm(_))
        ));
    }

    #[test]
    fn aliases_are_counted_as_the_values_they_repeat() {
        assert!(parse(&alias_bomb(3)).is_ok(), "a thousand values are fine");
        assert_eq!(parse(&alias_bomb(9)), Err(DocumentError::TooLarge));
    }

    #[test]
    fn nesting_stops_at_the_limit_in_blocks_flows_and_aliases() {
        let block = |levels: usize| "- ".repeat(levels) + "x";
        assert!(parse(&block(MAX_DEPTH)).is_ok());
        assert_eq!(parse(&block(MAX_DEPTH + 1)), Err(DocumentError::TooDeep));
        assert_eq!(parse(&block(20_000)), Err(DocumentError::TooDeep));
        // Flows stop earlier, at the scanner's own limit.
        let flow = "[".repeat(20_000) + &"]".repeat(20_000);
        let error = parse(&flow).unwrap_err().to_string();
        assert!(error.contains("recursion limit"), "{error}");
        let deep = "[".repeat(60) + &"]".repeat(60);
        let aliased = format!("a: &d {deep}\nb: {}*d{}\n", "[".repeat(60), "]".repeat(60));
        assert_eq!(parse(&aliased), Err(DocumentError::TooDeep));
    }

    #[test]
    fn ref_expansion_is_paid_for_from_one_budget() {
        // Each level holds ten `$ref`s to the one below: 10^6 values from a few hundred bytes.
        let mut schemas = Map::new();
        schemas.insert("L0".into(), json!({"type": "string"}));
        for level in 1..=6 {
            let below = json!({"$ref": format!("#/s/L{}", level - 1)});
            schemas.insert(format!("L{level}"), json!({"allOf": vec![below; 10]}));
        }
        let document = json!({"s": schemas});
        let top = json!({"$ref": "#/s/L6"});
        let mut budget = RefBudget::default();
        assert_eq!(
            resolve(&document, &top, &mut budget),
            Err(RefError::TooLarge)
        );
        let small = json!({"$ref": "#/s/L2"});
        let resolved = resolve(&document, &small, &mut RefBudget::default()).unwrap();
        assert_eq!(resolved["allOf"][9]["allOf"][0], json!({"type": "string"}));
        let cycle = json!({"s": {"A": {"items": {"$ref": "#/s/A"}}}});
        let looped = resolve(&cycle, &json!({"$ref": "#/s/A"}), &mut RefBudget::default());
        assert_eq!(looped, Err(RefError::TooDeep));
    }
}
