//! `POST /event-type/import/openapi` (Svix's `eventType.importOpenapi`): the event types an
//! OpenAPI document's webhooks describe, created or updated in the catalog.
//!
//! Each webhook of the document's `webhooks` (OpenAPI 3.1) or `x-webhooks` section is an event
//! type named by its key; its operation's description (or summary), `deprecated`,
//! `x-svix-group-name` and `x-svix-feature-flags` carry over, and its JSON request body's
//! schema, with every `$ref` into the document resolved, becomes the event type's schema
//! version 1. `dryRun` says what would change without changing it; `replaceAll` also archives
//! the catalog's event types the document does not describe (never hookd's own operational
//! ones). The document may come parsed
//! (`spec`) or as text (`specRaw`, JSON or YAML). A schema that breaks receivers of the one
//! stored is refused as the event-type routes refuse it (`?allow_breaking=true` to make it).

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use hookd_core::model::EventType;
use hookd_core::openapi::{self, RefBudget};
use hookd_store::PageRequest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::extract::{JsonBody, QueryParams};
use crate::routes::event_type::only_adds;
use crate::validate;
use crate::{ApiError, ApiState};

pub fn routes() -> Router<ApiState> {
    Router::new().route(v1!("/event-type/import/openapi"), post(import))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ImportIn {
    spec: Option<Value>,
    spec_raw: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    replace_all: bool,
}

/// An event type as the document describes it: Svix's `EventTypeFromOpenApi`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FromOpenApi {
    name: String,
    description: String,
    schemas: Option<Value>,
    deprecated: bool,
    group_name: Option<String>,
    feature_flags: Option<Vec<String>>,
}

#[derive(Serialize)]
pub(crate) struct ImportOut {
    data: ImportedData,
}

#[derive(Serialize)]
pub(crate) struct ImportedData {
    /// The event types changed (none on a dry run).
    modified: Vec<String>,
    /// What a dry run would change.
    to_modify: Option<Vec<FromOpenApi>>,
}

async fn import(
    State(state): State<ApiState>,
    query: QueryParams,
    JsonBody(input): JsonBody<ImportIn>,
) -> Result<Json<ImportOut>, ApiError> {
    let spec = match (input.spec, input.spec_raw) {
        (Some(spec), None) => spec,
        (None, Some(raw)) => parse_raw(&raw)?,
        _ => {
            return Err(ApiError::body_field(
                "spec",
                "give the document as exactly one of `spec` and `specRaw`",
            ));
        }
    };
    // Resolving `$ref`s and compiling each schema is bounded but not cheap: off the async workers.
    let described = tokio::task::spawn_blocking(move || event_types(&spec))
        .await
        .map_err(|e| ApiError::Internal(format!("the import's reading ended abnormally: {e}")))??;
    let mut changes = Vec::new();
    for event_type in &described {
        let stored = state.store().get_event_type(&event_type.name).await?;
        if stored
            .as_ref()
            .is_none_or(|stored| !event_type.matches(stored))
        {
            let stored_schemas = stored.as_ref().and_then(|et| et.schemas.as_ref());
            only_adds(&query, stored_schemas, event_type.schemas.as_ref())?;
            changes.push(Change::Describe(event_type.clone(), stored));
        }
    }
    if input.replace_all {
        for stored in all_event_types(&state).await? {
            let described_here = described.iter().any(|d| d.name == stored.name);
            if !stored.archived && !described_here && !is_operational(&stored.name) {
                changes.push(Change::Archive(stored));
            }
        }
    }
    if input.dry_run {
        let to_modify = changes.iter().map(Change::shown).collect();
        let data = ImportedData {
            modified: Vec::new(),
            to_modify: Some(to_modify),
        };
        return Ok(Json(ImportOut { data }));
    }
    let mut modified = Vec::with_capacity(changes.len());
    for change in changes {
        modified.push(change.apply(&state).await?);
    }
    state.forget_event_types();
    let data = ImportedData {
        modified,
        to_modify: None,
    };
    Ok(Json(ImportOut { data }))
}

/// One change to the catalog.
enum Change {
    /// Create the event type, or update the stored one to what the document says.
    Describe(FromOpenApi, Option<EventType>),
    /// Archive a stored event type the document does not describe.
    Archive(EventType),
}

impl Change {
    fn shown(&self) -> FromOpenApi {
        match self {
            Self::Describe(described, _) => described.clone(),
            Self::Archive(stored) => FromOpenApi::from(stored),
        }
    }

    /// Makes the change; returns the event type's name.
    async fn apply(self, state: &ApiState) -> Result<String, ApiError> {
        let now = state.clock().now();
        match self {
            Self::Describe(described, None) => {
                let name = described.name.clone();
                state
                    .store()
                    .create_event_type(&described.into_new(now))
                    .await?;
                Ok(name)
            }
            Self::Describe(described, Some(mut stored)) => {
                described.update(&mut stored);
                stored.updated_at = now;
                state.store().update_event_type(&stored).await?;
                Ok(stored.name)
            }
            Self::Archive(mut stored) => {
                stored.archived = true;
                stored.updated_at = now;
                state.store().update_event_type(&stored).await?;
                Ok(stored.name)
            }
        }
    }
}

impl FromOpenApi {
    /// Whether `stored` already says what the document says (and is not archived).
    fn matches(&self, stored: &EventType) -> bool {
        let mut updated = stored.clone();
        self.update(&mut updated);
        updated == *stored
    }

    fn update(&self, stored: &mut EventType) {
        stored.description = self.description.clone();
        stored.schemas = self.schemas.clone();
        stored.deprecated = self.deprecated;
        stored.group_name = self.group_name.clone();
        stored.feature_flags = self.feature_flags.clone();
        stored.archived = false;
    }

    fn into_new(self, now: hookd_core::Timestamp) -> EventType {
        EventType {
            name: self.name,
            description: self.description,
            schemas: self.schemas,
            archived: false,
            deprecated: self.deprecated,
            feature_flag: None,
            group_name: self.group_name,
            feature_flags: self.feature_flags,
            envelope: false,
            created_at: now,
            updated_at: now,
        }
    }
}

impl From<&EventType> for FromOpenApi {
    fn from(stored: &EventType) -> Self {
        Self {
            name: stored.name.clone(),
            description: stored.description.clone(),
            schemas: stored.schemas.clone(),
            deprecated: stored.deprecated,
            group_name: stored.group_name.clone(),
            feature_flags: stored.feature_flags.clone(),
        }
    }
}

/// Whether `name` is one of hookd's own operational event types, which no document replaces.
fn is_operational(name: &str) -> bool {
    hookd_core::operations::EVENT_TYPES
        .iter()
        .any(|(operational, _)| *operational == name)
}

/// Every stored event type, archived ones too.
async fn all_event_types(state: &ApiState) -> Result<Vec<EventType>, ApiError> {
    let mut all = Vec::new();
    let mut page = PageRequest {
        limit: 250,
        cursor: None,
    };
    loop {
        let found = state.store().list_event_types(&page, true).await?;
        let last = found.items.last().map(|et| et.name.clone());
        all.extend(found.items);
        match last {
            Some(last) if found.has_more => page.cursor = Some(hookd_store::Cursor::After(last)),
            _ => return Ok(all),
        }
    }
}

/// `specRaw` as JSON, or else as YAML, within hookd's bounds on size and nesting.
fn parse_raw(raw: &str) -> Result<Value, ApiError> {
    openapi::parse(raw).map_err(|why| ApiError::body_field("specRaw", why.to_string()))
}

/// The event types `spec`'s webhooks describe, by name.
fn event_types(spec: &Value) -> Result<Vec<FromOpenApi>, ApiError> {
    let webhooks = spec
        .get("webhooks")
        .or_else(|| spec.get("x-webhooks"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ApiError::body_field(
                "spec",
                "has no `webhooks` (OpenAPI 3.1) or `x-webhooks` section",
            )
        })?;
    // One budget for the whole document: `$ref`s shared between webhooks cost each time.
    let mut budget = RefBudget::default();
    webhooks
        .iter()
        .map(|(name, item)| described(spec, name, item, &mut budget))
        .collect()
}

/// The event type webhook `name` (its path item `item`) describes.
fn described(
    spec: &Value,
    name: &str,
    item: &Value,
    budget: &mut RefBudget,
) -> Result<FromOpenApi, ApiError> {
    let field = format!("spec.webhooks.{name}");
    validate::name(&field, name)?;
    let operation = item
        .get("post")
        .or_else(|| item.as_object()?.values().find(|v| v.is_object()))
        .ok_or_else(|| ApiError::body_field(&field, "has no operation"))?;
    let text = |key: &str| operation.get(key).and_then(Value::as_str);
    let schema = operation
        .pointer("/requestBody/content/application~1json/schema")
        .map(|schema| openapi::resolve(spec, schema, budget))
        .transpose()
        .map_err(|why| ApiError::body_field(&field, why.to_string()))?;
    if let Some(schema) = &schema {
        hookd_core::schema::check_schema(schema)
            .map_err(|why| ApiError::body_field(&field, format!("its schema: {why}")))?;
    }
    let feature_flags = match operation.get("x-svix-feature-flags") {
        Some(Value::Array(flags)) => Some(
            flags
                .iter()
                .filter_map(|flag| flag.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => text("x-svix-feature-flag").map(|flag| vec![flag.to_owned()]),
    };
    let description = text("description")
        .or_else(|| text("summary"))
        .unwrap_or(name);
    hookd_core::validate::multi_line(description)
        .map_err(|why| ApiError::body_field(&field, format!("its description {why}")))?;
    Ok(FromOpenApi {
        name: name.to_owned(),
        description: description.to_owned(),
        schemas: schema.map(|schema| json!({ "1": schema })),
        deprecated: operation
            .get("deprecated")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        group_name: text("x-svix-group-name").map(str::to_owned),
        feature_flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "
openapi: 3.1.0
info: {title: Shop, version: '1'}
webhooks:
  order.shipped:
    post:
      summary: An order left the warehouse
      x-svix-group-name: orders
      x-svix-feature-flags: [beta]
      requestBody:
        content:
          application/json:
            schema:
              $ref: '#/components/schemas/Order'
  order.cancelled:
    post:
      description: An order was cancelled
      deprecated: true
components:
  schemas:
    Order:
      type: object
      required: [orderId]
      properties:
        orderId: {type: integer}
        lines: {type: array, items: {$ref: '#/components/schemas/Line'}}
    Line:
      type: object
      properties: {sku: {type: string}}
";

    #[test]
    fn webhooks_become_event_types_with_their_schemas_resolved() {
        let spec = parse_raw(YAML).unwrap();
        let found = event_types(&spec).unwrap();
        assert_eq!(found.len(), 2);
        let (cancelled, shipped) = (&found[0], &found[1]);
        assert_eq!(shipped.name, "order.shipped");
        assert_eq!(shipped.description, "An order left the warehouse");
        assert_eq!(shipped.group_name.as_deref(), Some("orders"));
        assert_eq!(shipped.feature_flags, Some(vec!["beta".to_owned()]));
        let schema = &shipped.schemas.as_ref().unwrap()["1"];
        assert_eq!(
            schema["properties"]["lines"]["items"]["properties"]["sku"]["type"],
            "string"
        );
        assert!(cancelled.deprecated && cancelled.schemas.is_none());
        assert_eq!(cancelled.description, "An order was cancelled");
    }

    #[test]
    fn a_document_without_webhooks_or_with_a_dangling_ref_is_refused_by_name() {
        let error = |spec: Value| event_types(&spec).err().unwrap().to_string();
        assert!(error(json!({"openapi": "3.1.0"})).contains("webhooks"));
        let dangling = json!({"webhooks": {"a.b": {"post": {"requestBody": {"content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Gone"}}}}}}}});
        assert!(error(dangling).contains("points at nothing"));
        let cycle = json!({"components": {"schemas": {"A": {"$ref": "#/components/schemas/A"}}},
            "webhooks": {"a.b": {"post": {"requestBody": {"content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}}}}});
        assert!(error(cycle).contains("cycle"));
    }

    #[test]
    fn a_description_may_break_lines_but_hold_no_other_control_character() {
        let spec = |text: &str| json!({"webhooks": {"a.b": {"post": {"description": text}}}});
        assert!(event_types(&spec("# A\n\n\tb")).is_ok());
        let error = event_types(&spec("ring\u{7}")).err().unwrap().to_string();
        assert!(error.contains("a.b") && error.contains("U+0007"), "{error}");
    }

    #[test]
    fn the_import_reads_and_shows_what_the_document_describes() {
        use crate::routes::described::{assert_reads_as_described, assert_shows_as_described};
        assert_reads_as_described::<ImportIn>("EventTypeImportOpenApiIn");
        let shipped = FromOpenApi {
            name: "a.b".into(),
            description: "d".into(),
            schemas: Some(json!({})),
            deprecated: false,
            group_name: Some("g".into()),
            feature_flags: Some(vec![]),
        };
        assert_shows_as_described("EventTypeFromOpenApi", &shipped);
        let data = ImportedData {
            modified: vec![],
            to_modify: Some(vec![shipped]),
        };
        assert_shows_as_described("EventTypeImportOpenApiOutData", &data);
    }
}
