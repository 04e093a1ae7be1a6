//! Decoding PostgreSQL rows into domain records, by position against the shared column lists
//! in [`crate::columns`].
//!
//! Integers are stored as BIGINT and narrowed here; a value that does not fit is corrupt data,
//! not a reason to wrap around.

use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message, SealedKeys,
    TriggerType,
};
use hookd_core::{AppId, AttemptId, EndpointId, MessageId, Timestamp};
use sqlx::postgres::PgRow;
use sqlx::{Decode, Postgres, Row, Type};

use crate::columns::{DELIVERY_WIDTH, MESSAGE_WIDTH};
use crate::json::{decode, decode_opt};
use crate::{ApiToken, ClaimedDelivery, StoreError, StoredResponse};

/// A decoded record, or why the row did not decode.
pub type Decoded<T> = Result<T, StoreError>;

/// Column `index` of `row`; a missing column or a wrong type is corrupt data (or a bug).
fn get<'r, T: Decode<'r, Postgres> + Type<Postgres>>(row: &'r PgRow, index: usize) -> Decoded<T> {
    row.try_get(index)
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// A BIGINT column narrowed to `T`.
fn int<T: TryFrom<i64>>(row: &PgRow, index: usize) -> Decoded<T> {
    narrow(get(row, index)?)
}

/// A nullable BIGINT column narrowed to `T`.
fn opt_int<T: TryFrom<i64>>(row: &PgRow, index: usize) -> Decoded<Option<T>> {
    get::<Option<i64>>(row, index)?.map(narrow).transpose()
}

fn narrow<T: TryFrom<i64>>(value: i64) -> Decoded<T> {
    T::try_from(value).map_err(|_| {
        StoreError::Corrupt(format!(
            "{value} does not fit in {}",
            std::any::type_name::<T>()
        ))
    })
}

fn time(row: &PgRow, index: usize) -> Decoded<Timestamp> {
    Ok(Timestamp::from_millis(get(row, index)?))
}

fn opt_time(row: &PgRow, index: usize) -> Decoded<Option<Timestamp>> {
    Ok(get::<Option<i64>>(row, index)?.map(Timestamp::from_millis))
}

pub fn app(row: &PgRow) -> Decoded<Application> {
    Ok(Application {
        id: AppId::from_stored(get(row, 0)?),
        uid: get(row, 1)?,
        name: get(row, 2)?,
        metadata: decode(get(row, 3)?)?,
        throttle_rate: opt_int(row, 4)?,
        created_at: time(row, 5)?,
        updated_at: time(row, 6)?,
    })
}

pub fn endpoint(row: &PgRow) -> Decoded<Endpoint> {
    endpoint_at(row, 0)
}

/// An endpoint whose columns start at `offset` (after other records', in a join).
pub fn endpoint_at(row: &PgRow, offset: usize) -> Decoded<Endpoint> {
    let at = |i: usize| offset + i;
    Ok(Endpoint {
        id: EndpointId::from_stored(get(row, at(0))?),
        app_id: AppId::from_stored(get(row, at(1))?),
        uid: get(row, at(2))?,
        url: get(row, at(3))?,
        description: get(row, at(4))?,
        event_types: decode_opt(get(row, at(5))?)?,
        channels: decode_opt(get(row, at(6))?)?,
        disabled: get(row, at(7))?,
        throttle_rate: opt_int(row, at(8))?,
        metadata: decode(get(row, at(9))?)?,
        headers: decode(get(row, at(10))?)?,
        keys: SealedKeys::from_stored(get(row, at(11))?),
        created_at: time(row, at(12))?,
        updated_at: time(row, at(13))?,
        disabled_reason: get(row, at(14))?,
        disabled_at: opt_time(row, at(15))?,
        timeout_secs: opt_int(row, at(16))?,
        max_concurrency: opt_int(row, at(17))?,
        ordering: crate::columns::ordering(get(row, at(18))?),
    })
}

pub fn event_type(row: &PgRow) -> Decoded<EventType> {
    Ok(EventType {
        name: get(row, 0)?,
        description: get(row, 1)?,
        schemas: decode_opt(get(row, 2)?)?,
        archived: get(row, 3)?,
        deprecated: get(row, 4)?,
        feature_flag: get(row, 5)?,
        created_at: time(row, 6)?,
        updated_at: time(row, 7)?,
        group_name: get(row, 8)?,
        feature_flags: decode_opt(get(row, 9)?)?,
    })
}

pub fn message(row: &PgRow) -> Decoded<Message> {
    message_at(row, 0)
}

/// A message whose columns start at `offset` (after other records', in a join).
pub fn message_at(row: &PgRow, offset: usize) -> Decoded<Message> {
    let at = |i: usize| offset + i;
    Ok(Message {
        id: MessageId::from_stored(get(row, at(0))?),
        app_id: AppId::from_stored(get(row, at(1))?),
        event_type: get(row, at(2))?,
        event_id: get(row, at(3))?,
        channels: decode_opt(get(row, at(4))?)?,
        payload: get(row, at(5))?,
        created_at: time(row, at(6))?,
        ordering_key: get(row, at(7))?,
        tags: decode_opt(get(row, at(8))?)?,
        deliver_at: opt_time(row, at(9))?,
    })
}

/// A delivery whose columns start at `offset` (after another record's, in a join).
pub fn delivery_at(row: &PgRow, offset: usize) -> Decoded<Delivery> {
    Ok(Delivery {
        message_id: MessageId::from_stored(get(row, offset)?),
        endpoint_id: EndpointId::from_stored(get(row, offset + 1)?),
        status: DeliveryStatus::from_code(get(row, offset + 2)?),
        attempt_count: int(row, offset + 3)?,
        next_attempt_at: opt_time(row, offset + 4)?,
        updated_at: time(row, offset + 5)?,
        ordering_key: get(row, offset + 6)?,
    })
}

pub fn attempt(row: &PgRow) -> Decoded<Attempt> {
    Ok(Attempt {
        id: AttemptId::from_stored(get(row, 0)?),
        message_id: MessageId::from_stored(get(row, 1)?),
        endpoint_id: EndpointId::from_stored(get(row, 2)?),
        url: get(row, 3)?,
        response_status_code: int(row, 4)?,
        response: get(row, 5)?,
        response_duration_ms: get(row, 6)?,
        status: DeliveryStatus::from_code(get(row, 7)?),
        trigger_type: TriggerType::from_code(get(row, 8)?),
        created_at: time(row, 9)?,
        response_head: get(row, 10)?,
    })
}

/// A row of `{DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS}, {ENDPOINT_COLUMNS}`.
pub fn claimed(row: &PgRow) -> Decoded<ClaimedDelivery> {
    Ok(ClaimedDelivery {
        delivery: delivery_at(row, 0)?,
        manual: get(row, DELIVERY_WIDTH)?,
        message: message_at(row, DELIVERY_WIDTH + 1)?,
        endpoint: endpoint_at(row, DELIVERY_WIDTH + 1 + MESSAGE_WIDTH)?,
    })
}

pub fn token(row: &PgRow) -> Decoded<ApiToken> {
    Ok(ApiToken {
        id: get(row, 0)?,
        token_hash: get(row, 1)?,
        app_id: get::<Option<String>>(row, 2)?.map(AppId::from_stored),
        created_at: time(row, 3)?,
        expires_at: opt_time(row, 4)?,
        name: get(row, 5)?,
        revoked_at: opt_time(row, 6)?,
        rate_limit: opt_int(row, 7)?,
        read_only: get(row, 8)?,
    })
}

/// A `status, body` row of `idempotent_responses`.
pub fn stored_response(row: &PgRow) -> Decoded<StoredResponse> {
    Ok(StoredResponse {
        status: int(row, 0)?,
        body: get(row, 1)?,
    })
}
