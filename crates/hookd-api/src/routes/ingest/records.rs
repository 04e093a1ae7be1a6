//! `…/source/{source_id}/request` and `…/rejection` (hookd additions): what a source accepted,
//! with the headers kept (each links to its message, whose attempts show the forwarding), and
//! the bounded record of what it refused. The portal of the source's application shows them.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use hookd_core::model::Metadata;
use hookd_store::{IngestRejection, IngestRequest};
use serde::Serialize;

use super::source::visible;
use crate::extract::QueryParams;
use crate::list::{ListOut, page_request};
use crate::{ApiError, ApiState, Principal};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestOut {
    /// The message it became, in the source's application (`appId`).
    msg_id: String,
    app_id: String,
    event_type: String,
    event_id: Option<String>,
    headers: Metadata,
    remote_addr: Option<String>,
    timestamp: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RejectionOut {
    id: String,
    reason: String,
    detail: String,
    header_names: Vec<String>,
    remote_addr: Option<String>,
    timestamp: String,
}

pub(super) async fn requests(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(source_id): Path<String>,
    query: QueryParams,
) -> Result<Json<ListOut<RequestOut>>, ApiError> {
    let source = visible(&state, &principal, &source_id).await?;
    let page = state
        .store()
        .list_ingest_requests(&source.id, &page_request(&query)?)
        .await?;
    let out = |request: IngestRequest| RequestOut {
        msg_id: request.message_id.to_string(),
        app_id: source.app_id.to_string(),
        event_type: request.event_type,
        event_id: request.event_id,
        headers: request.headers,
        remote_addr: request.remote_addr,
        timestamp: request.received_at.to_rfc3339(),
    };
    Ok(Json(ListOut::from_page(
        page,
        |request| request.message_id.to_string(),
        out,
    )))
}

pub(super) async fn rejections(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(source_id): Path<String>,
    query: QueryParams,
) -> Result<Json<ListOut<RejectionOut>>, ApiError> {
    let source = visible(&state, &principal, &source_id).await?;
    let page = state
        .store()
        .list_rejections(&source.id, &page_request(&query)?)
        .await?;
    let out = |rejection: IngestRejection| RejectionOut {
        id: rejection.id.to_string(),
        reason: rejection.reason,
        detail: rejection.detail,
        header_names: rejection.header_names,
        remote_addr: rejection.remote_addr,
        timestamp: rejection.received_at.to_rfc3339(),
    };
    Ok(Json(ListOut::from_page(
        page,
        |rejection| rejection.id.to_string(),
        out,
    )))
}
