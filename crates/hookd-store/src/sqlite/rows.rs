//! Decoding SQLite rows into domain records, by position against the shared column lists in
//! [`crate::columns`].

use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message, SealedKeys,
    TriggerType,
};
use hookd_core::{AppId, AttemptId, EndpointId, MessageId, Timestamp};
use rusqlite::Row;

pub use crate::columns::{
    APP_COLUMNS, ATTEMPT_COLUMNS, DELIVERY_COLUMNS, DELIVERY_WIDTH, ENDPOINT_COLUMNS,
    ENDPOINT_WIDTH, EVENT_TYPE_COLUMNS, MESSAGE_COLUMNS, MESSAGE_WIDTH, TOKEN_COLUMNS,
};
use crate::json::{decode, decode_opt};
use crate::{ApiToken, ClaimedDelivery, StoreError};

/// A decoded record, or why the row did not decode.
pub type Decoded<T> = Result<T, StoreError>;

pub fn app(row: &Row<'_>) -> Decoded<Application> {
    let metadata: String = row.get(3)?;
    Ok(Application {
        id: AppId::from_stored(row.get(0)?),
        uid: row.get(1)?,
        name: row.get(2)?,
        metadata: decode(&metadata)?,
        throttle_rate: row.get(4)?,
        created_at: Timestamp::from_millis(row.get(5)?),
        updated_at: Timestamp::from_millis(row.get(6)?),
    })
}

pub fn endpoint(row: &Row<'_>) -> Decoded<Endpoint> {
    endpoint_at(row, 0)
}

/// An endpoint whose columns start at `offset` (after other records', in a join).
pub fn endpoint_at(row: &Row<'_>, offset: usize) -> Decoded<Endpoint> {
    let at = |i: usize| offset + i;
    let event_types: Option<String> = row.get(at(5))?;
    let channels: Option<String> = row.get(at(6))?;
    let metadata: String = row.get(at(9))?;
    let headers: String = row.get(at(10))?;
    Ok(Endpoint {
        id: EndpointId::from_stored(row.get(at(0))?),
        app_id: AppId::from_stored(row.get(at(1))?),
        uid: row.get(at(2))?,
        url: row.get(at(3))?,
        description: row.get(at(4))?,
        event_types: decode_opt(event_types)?,
        channels: decode_opt(channels)?,
        disabled: row.get(at(7))?,
        throttle_rate: row.get(at(8))?,
        metadata: decode(&metadata)?,
        headers: decode(&headers)?,
        keys: SealedKeys::from_stored(row.get(at(11))?),
        created_at: Timestamp::from_millis(row.get(at(12))?),
        updated_at: Timestamp::from_millis(row.get(at(13))?),
        disabled_reason: row.get(at(14))?,
        disabled_at: row
            .get::<_, Option<i64>>(at(15))?
            .map(Timestamp::from_millis),
        timeout_secs: row.get(at(16))?,
        max_concurrency: row.get(at(17))?,
        ordering: crate::columns::ordering(row.get(at(18))?),
    })
}

pub fn event_type(row: &Row<'_>) -> Decoded<EventType> {
    let schemas: Option<String> = row.get(2)?;
    Ok(EventType {
        name: row.get(0)?,
        description: row.get(1)?,
        schemas: decode_opt(schemas)?,
        archived: row.get(3)?,
        deprecated: row.get(4)?,
        feature_flag: row.get(5)?,
        created_at: Timestamp::from_millis(row.get(6)?),
        updated_at: Timestamp::from_millis(row.get(7)?),
        group_name: row.get(8)?,
        feature_flags: decode_opt(row.get(9)?)?,
    })
}

pub fn message(row: &Row<'_>) -> Decoded<Message> {
    message_at(row, 0)
}

/// A message whose columns start at `offset` (after another record's, in a join).
pub fn message_at(row: &Row<'_>, offset: usize) -> Decoded<Message> {
    let channels: Option<String> = row.get(offset + 4)?;
    Ok(Message {
        id: MessageId::from_stored(row.get(offset)?),
        app_id: AppId::from_stored(row.get(offset + 1)?),
        event_type: row.get(offset + 2)?,
        event_id: row.get(offset + 3)?,
        channels: decode_opt(channels)?,
        payload: row.get(offset + 5)?,
        created_at: Timestamp::from_millis(row.get(offset + 6)?),
        ordering_key: row.get(offset + 7)?,
        tags: decode_opt(row.get(offset + 8)?)?,
        deliver_at: row
            .get::<_, Option<i64>>(offset + 9)?
            .map(Timestamp::from_millis),
    })
}

/// A delivery whose columns start at `offset`.
pub fn delivery_at(row: &Row<'_>, offset: usize) -> Decoded<Delivery> {
    Ok(Delivery {
        message_id: MessageId::from_stored(row.get(offset)?),
        endpoint_id: EndpointId::from_stored(row.get(offset + 1)?),
        status: DeliveryStatus::from_code(row.get(offset + 2)?),
        attempt_count: row.get(offset + 3)?,
        next_attempt_at: row
            .get::<_, Option<i64>>(offset + 4)?
            .map(Timestamp::from_millis),
        updated_at: Timestamp::from_millis(row.get(offset + 5)?),
        ordering_key: row.get(offset + 6)?,
    })
}

pub fn attempt(row: &Row<'_>) -> Decoded<Attempt> {
    Ok(Attempt {
        id: AttemptId::from_stored(row.get(0)?),
        message_id: MessageId::from_stored(row.get(1)?),
        endpoint_id: EndpointId::from_stored(row.get(2)?),
        url: row.get(3)?,
        response_status_code: row.get(4)?,
        response: row.get(5)?,
        response_duration_ms: row.get(6)?,
        status: DeliveryStatus::from_code(row.get(7)?),
        trigger_type: TriggerType::from_code(row.get(8)?),
        created_at: Timestamp::from_millis(row.get(9)?),
        response_head: row.get(10)?,
    })
}

/// A row of [`TOKEN_COLUMNS`].
pub fn token(row: &Row<'_>) -> Decoded<ApiToken> {
    Ok(ApiToken {
        id: row.get(0)?,
        token_hash: row.get(1)?,
        app_id: row.get::<_, Option<String>>(2)?.map(AppId::from_stored),
        created_at: Timestamp::from_millis(row.get(3)?),
        expires_at: row.get::<_, Option<i64>>(4)?.map(Timestamp::from_millis),
        name: row.get(5)?,
        revoked_at: row.get::<_, Option<i64>>(6)?.map(Timestamp::from_millis),
        rate_limit: row.get(7)?,
        read_only: row.get(8)?,
    })
}

/// A row of `{DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS}, {ENDPOINT_COLUMNS}`.
pub fn claimed(row: &Row<'_>) -> Decoded<ClaimedDelivery> {
    Ok(ClaimedDelivery {
        delivery: delivery_at(row, 0)?,
        manual: row.get(DELIVERY_WIDTH)?,
        message: message_at(row, DELIVERY_WIDTH + 1)?,
        endpoint: endpoint_at(row, DELIVERY_WIDTH + 1 + MESSAGE_WIDTH)?,
    })
}

/// Runs a prepared query and decodes every row.
pub fn collect<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
    decode_row: impl Fn(&Row<'_>) -> Decoded<T>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode_row(row)?);
    }
    Ok(out)
}
