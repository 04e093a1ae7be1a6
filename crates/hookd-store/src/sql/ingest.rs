//! [`IngestStore`] on both databases: every call is one shared statement but a rejection's,
//! which is two (the record, then forgetting the source's oldest beyond the bound).

use async_trait::async_trait;
use hookd_core::{AppId, MessageId, RejectionId, SourceId, Timestamp};

use super::rows::{self, opt_int, opt_time, text, time};
use super::{Arg, Database, ListQuery, Refusals, Statement, args, sql};
use crate::json::{decode, encode};
use crate::store::ingest::REJECTIONS_KEPT;
use crate::{
    IngestRejection, IngestRequest, IngestSource, IngestStore, Page, PageRequest, StoreError,
};

/// The columns [`source`] decodes, in order.
const SOURCE_COLUMNS: &str = "id, uid, name, kind, sealed, metadata, app_id, token_hash, \
     previous_token_hash, previous_until, max_body_bytes, rate_limit, ordering_pointer, created_at, \
     updated_at";

/// The columns [`request`] decodes, in order.
const REQUEST_COLUMNS: &str =
    "message_id, source_id, event_type, event_id, headers, remote_addr, received_at";

/// The columns [`rejection`] decodes, in order.
const REJECTION_COLUMNS: &str =
    "id, source_id, reason, detail, header_names, remote_addr, received_at";

#[async_trait]
impl<D: Database> IngestStore for D {
    async fn create_source(&self, source: &IngestSource) -> Result<(), StoreError> {
        let sql = sql!(
            "INSERT INTO ingest_sources (id, uid, name, kind, sealed, metadata, app_id,
                 token_hash, previous_token_hash, previous_until, max_body_bytes, rate_limit,
                 ordering_pointer, updated_at, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
        );
        let mut args = fields(source);
        args.extend(args![source.created_at]);
        self.write(Statement::new(sql, args), Some(uid_taken(source)))
            .await?;
        Ok(())
    }

    async fn get_source(&self, id_or_uid: &str) -> Result<Option<IngestSource>, StoreError> {
        let sql = sql!(
            "SELECT ",
            SOURCE_COLUMNS,
            " FROM ingest_sources WHERE id = ?1 OR uid = ?1 ORDER BY id = ?1 DESC LIMIT 1"
        );
        self.read_one(Statement::new(sql, args![id_or_uid]), source)
            .await
    }

    async fn source_by_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<IngestSource>, StoreError> {
        let sql = sql!(
            "SELECT ",
            SOURCE_COLUMNS,
            " FROM ingest_sources WHERE token_hash = ?1
              UNION ALL SELECT ",
            SOURCE_COLUMNS,
            " FROM ingest_sources WHERE previous_token_hash = ?1 AND previous_until > ?2"
        );
        self.read_one(Statement::new(sql, args![token_hash, now]), source)
            .await
    }

    async fn source_of_app(&self, app: &AppId) -> Result<Option<IngestSource>, StoreError> {
        let sql = sql!(
            "SELECT ",
            SOURCE_COLUMNS,
            " FROM ingest_sources WHERE app_id = ?1"
        );
        self.read_one(Statement::new(sql, args![app.as_str()]), source)
            .await
    }

    async fn list_sources(&self, page: &PageRequest) -> Result<Page<IngestSource>, StoreError> {
        let select = sql!("SELECT ", SOURCE_COLUMNS, " FROM ingest_sources WHERE TRUE");
        let query = ListQuery::new(D::DIALECT, select, args![]).page("id", false, page);
        self.read_page(query, source).await
    }

    async fn update_source(&self, source: &IngestSource) -> Result<(), StoreError> {
        let sql = sql!(
            "UPDATE ingest_sources SET uid = ?2, name = ?3, kind = ?4, sealed = ?5,
                 metadata = ?6, token_hash = ?8, previous_token_hash = ?9,
                 previous_until = ?10, max_body_bytes = ?11, rate_limit = ?12,
                 ordering_pointer = ?13, updated_at = ?14
             WHERE id = ?1 AND app_id = ?7"
        );
        let statement = Statement::new(sql, fields(source));
        let changed = self.write(statement, Some(uid_taken(source))).await?;
        crate::error::touched(changed, "ingest source")
    }

    async fn replace_source_sealed(
        &self,
        id: &SourceId,
        old: &str,
        new: &str,
    ) -> Result<bool, StoreError> {
        let sql = sql!("UPDATE ingest_sources SET sealed = ?3 WHERE id = ?1 AND sealed = ?2");
        let statement = Statement::new(sql, args![id.as_str(), old, new]);
        Ok(self.write(statement, None).await? == 1)
    }

    async fn record_ingest_request(&self, request: &IngestRequest) -> Result<(), StoreError> {
        let sql = sql!(
            "INSERT INTO ingest_requests (",
            REQUEST_COLUMNS,
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        );
        let args = args![
            request.message_id.as_str(),
            request.source_id.as_str(),
            request.event_type.as_str(),
            request.event_id.as_deref(),
            encode(&request.headers),
            request.remote_addr.as_deref(),
            request.received_at,
        ];
        self.write(Statement::new(sql, args), None).await?;
        Ok(())
    }

    async fn list_ingest_requests(
        &self,
        source: &SourceId,
        page: &PageRequest,
    ) -> Result<Page<IngestRequest>, StoreError> {
        let select = sql!(
            "SELECT ",
            REQUEST_COLUMNS,
            " FROM ingest_requests WHERE source_id = ?1"
        );
        let query = ListQuery::new(D::DIALECT, select, args![source.as_str()]);
        self.read_page(query.page("message_id", true, page), request)
            .await
    }

    async fn record_rejection(&self, rejection: &IngestRejection) -> Result<(), StoreError> {
        let sql = sql!(
            "INSERT INTO ingest_rejections (",
            REJECTION_COLUMNS,
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        );
        let args = args![
            rejection.id.as_str(),
            rejection.source_id.as_str(),
            rejection.reason.as_str(),
            rejection.detail.as_str(),
            encode(&rejection.header_names),
            rejection.remote_addr.as_deref(),
            rejection.received_at,
        ];
        self.write(Statement::new(sql, args), None).await?;
        self.write(forget_oldest(&rejection.source_id), None)
            .await?;
        Ok(())
    }

    async fn list_rejections(
        &self,
        source: &SourceId,
        page: &PageRequest,
    ) -> Result<Page<IngestRejection>, StoreError> {
        let select = sql!(
            "SELECT ",
            REJECTION_COLUMNS,
            " FROM ingest_rejections WHERE source_id = ?1"
        );
        let query = ListQuery::new(D::DIALECT, select, args![source.as_str()]);
        self.read_page(query.page("id", true, page), rejection)
            .await
    }
}

/// Deletes `source`'s rejections older than its newest [`REJECTIONS_KEPT`].
fn forget_oldest(source: &SourceId) -> Statement<'_> {
    let sql = sql!(
        "DELETE FROM ingest_rejections WHERE source_id = ?1 AND id < (
             SELECT MIN(id) FROM (SELECT id FROM ingest_rejections WHERE source_id = ?1
                                  ORDER BY id DESC LIMIT ?2) AS kept)"
    );
    Statement::new(sql, args![source.as_str(), REJECTIONS_KEPT as i64])
}

/// A source's id, then every field an update writes too, as `?1` to `?14`.
fn fields(source: &IngestSource) -> Vec<Arg<'_>> {
    args![
        source.id.as_str(),
        source.uid.as_deref(),
        source.name.as_str(),
        source.kind.as_str(),
        source.sealed.as_str(),
        encode(&source.metadata),
        source.app_id.as_str(),
        source.token_hash.as_str(),
        source.previous_token_hash.as_deref(),
        source.previous_until,
        source
            .max_body_bytes
            .map(|max| i64::try_from(max).unwrap_or(i64::MAX)),
        source.rate_limit,
        source.ordering_pointer.as_deref(),
        source.updated_at,
    ]
}

fn uid_taken(source: &IngestSource) -> Refusals {
    Refusals::taken(format!(
        "an ingest source with uid {:?} already exists",
        source.uid.as_deref().unwrap_or_default()
    ))
}

/// A row of [`SOURCE_COLUMNS`].
fn source(row: &dyn rows::Columns) -> rows::Decoded<IngestSource> {
    Ok(IngestSource {
        id: SourceId::from_stored(text(row, 0)?),
        uid: row.opt_text(1)?,
        name: text(row, 2)?,
        kind: text(row, 3)?,
        sealed: text(row, 4)?,
        metadata: decode(&text(row, 5)?)?,
        app_id: AppId::from_stored(text(row, 6)?),
        token_hash: text(row, 7)?,
        previous_token_hash: row.opt_text(8)?,
        previous_until: opt_time(row, 9)?,
        max_body_bytes: opt_int(row, 10)?,
        rate_limit: opt_int(row, 11)?,
        ordering_pointer: row.opt_text(12)?,
        created_at: time(row, 13)?,
        updated_at: time(row, 14)?,
    })
}

/// A row of [`REQUEST_COLUMNS`].
fn request(row: &dyn rows::Columns) -> rows::Decoded<IngestRequest> {
    Ok(IngestRequest {
        message_id: MessageId::from_stored(text(row, 0)?),
        source_id: SourceId::from_stored(text(row, 1)?),
        event_type: text(row, 2)?,
        event_id: row.opt_text(3)?,
        headers: decode(&text(row, 4)?)?,
        remote_addr: row.opt_text(5)?,
        received_at: time(row, 6)?,
    })
}

/// A row of [`REJECTION_COLUMNS`].
fn rejection(row: &dyn rows::Columns) -> rows::Decoded<IngestRejection> {
    Ok(IngestRejection {
        id: RejectionId::from_stored(text(row, 0)?),
        source_id: SourceId::from_stored(text(row, 1)?),
        reason: text(row, 2)?,
        detail: text(row, 3)?,
        header_names: decode(&text(row, 4)?)?,
        remote_addr: row.opt_text(5)?,
        received_at: time(row, 6)?,
    })
}
