//! Decoding rows of either database into domain records, by position against the shared
//! column lists in [`crate::columns`].
//!
//! A decoder is written once over [`Columns`], which each backend implements for its own row
//! type: so the two cannot read a record differently. Integers are stored as 64 bits and
//! narrowed here; a value that does not fit is corrupt data, not a reason to wrap around.

use std::collections::HashMap;

use hookd_core::destination::Destination;
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message, SealedKeys,
    TriggerType,
};
use hookd_core::{AppId, AttemptId, EndpointId, MessageId, Timestamp};

pub use crate::columns::{DELIVERY_WIDTH, ENDPOINT_COLUMNS, ENDPOINT_WIDTH, MESSAGE_WIDTH};
use crate::json::{decode, decode_opt};
use crate::{ApiToken, ClaimedDelivery, StoreError, StoredResponse};

/// A decoded record, or why the row did not decode.
pub type Decoded<T> = Result<T, StoreError>;

/// A row of either database, read by column index. A column that is missing or of another
/// type is [`StoreError::Corrupt`].
pub trait Columns {
    fn opt_i64(&self, index: usize) -> Decoded<Option<i64>>;
    fn opt_text(&self, index: usize) -> Decoded<Option<String>>;
    fn opt_bytes(&self, index: usize) -> Decoded<Option<Vec<u8>>>;
    fn bool(&self, index: usize) -> Decoded<bool>;
}

/// A NOT NULL column found NULL.
fn null(index: usize) -> StoreError {
    StoreError::Corrupt(format!("column {index} is NULL"))
}

/// A text column.
pub fn text<R: Columns + ?Sized>(row: &R, index: usize) -> Decoded<String> {
    row.opt_text(index)?.ok_or_else(|| null(index))
}

/// An integer column narrowed to `T`.
pub fn int<T: TryFrom<i64>, R: Columns + ?Sized>(row: &R, index: usize) -> Decoded<T> {
    narrow(row.opt_i64(index)?.ok_or_else(|| null(index))?)
}

/// A nullable integer column narrowed to `T`.
pub fn opt_int<T: TryFrom<i64>, R: Columns + ?Sized>(row: &R, index: usize) -> Decoded<Option<T>> {
    row.opt_i64(index)?.map(narrow).transpose()
}

fn narrow<T: TryFrom<i64>>(value: i64) -> Decoded<T> {
    T::try_from(value).map_err(|_| {
        StoreError::Corrupt(format!(
            "{value} does not fit in {}",
            std::any::type_name::<T>()
        ))
    })
}

pub fn time<R: Columns + ?Sized>(row: &R, index: usize) -> Decoded<Timestamp> {
    Ok(Timestamp::from_millis(int(row, index)?))
}

pub fn opt_time<R: Columns + ?Sized>(row: &R, index: usize) -> Decoded<Option<Timestamp>> {
    Ok(row.opt_i64(index)?.map(Timestamp::from_millis))
}

/// A row of [`APP_COLUMNS`].
pub fn app(row: &dyn Columns) -> Decoded<Application> {
    Ok(Application {
        id: AppId::from_stored(text(row, 0)?),
        uid: row.opt_text(1)?,
        name: text(row, 2)?,
        metadata: decode(&text(row, 3)?)?,
        throttle_rate: opt_int(row, 4)?,
        created_at: time(row, 5)?,
        updated_at: time(row, 6)?,
        envelope: row.bool(7)?,
    })
}

/// A row of [`ENDPOINT_COLUMNS`].
pub fn endpoint(row: &dyn Columns) -> Decoded<Endpoint> {
    endpoint_at(row, 0)
}

/// An endpoint whose columns start at `offset` (after other records', in a join).
pub fn endpoint_at(row: &dyn Columns, offset: usize) -> Decoded<Endpoint> {
    let at = |i: usize| offset + i;
    Ok(Endpoint {
        id: EndpointId::from_stored(text(row, at(0))?),
        app_id: AppId::from_stored(text(row, at(1))?),
        uid: row.opt_text(at(2))?,
        url: text(row, at(3))?,
        description: text(row, at(4))?,
        event_types: decode_opt(row.opt_text(at(5))?)?,
        channels: decode_opt(row.opt_text(at(6))?)?,
        disabled: row.bool(at(7))?,
        throttle_rate: opt_int(row, at(8))?,
        metadata: decode(&text(row, at(9))?)?,
        headers: decode(&text(row, at(10))?)?,
        keys: SealedKeys::from_stored(text(row, at(11))?),
        created_at: time(row, at(12))?,
        updated_at: time(row, at(13))?,
        disabled_reason: row.opt_text(at(14))?,
        disabled_at: opt_time(row, at(15))?,
        timeout_secs: opt_int(row, at(16))?,
        max_concurrency: opt_int(row, at(17))?,
        ordering: crate::columns::ordering(row.bool(at(18))?),
        destination: Destination::from_stored(
            &text(row, at(19))?,
            row.opt_text(at(20))?.as_deref(),
        )
        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        batch_size: int(row, at(21))?,
        max_wait_secs: int(row, at(22))?,
    })
}

/// A row of [`EVENT_TYPE_COLUMNS`].
pub fn event_type(row: &dyn Columns) -> Decoded<EventType> {
    Ok(EventType {
        name: text(row, 0)?,
        description: text(row, 1)?,
        schemas: decode_opt(row.opt_text(2)?)?,
        archived: row.bool(3)?,
        deprecated: row.bool(4)?,
        feature_flag: row.opt_text(5)?,
        created_at: time(row, 6)?,
        updated_at: time(row, 7)?,
        group_name: row.opt_text(8)?,
        feature_flags: decode_opt(row.opt_text(9)?)?,
        envelope: row.bool(10)?,
    })
}

/// A row of [`MESSAGE_COLUMNS`].
pub fn message(row: &dyn Columns) -> Decoded<Message> {
    message_at(row, 0)
}

/// A message whose columns start at `offset` (after other records', in a join).
pub fn message_at(row: &dyn Columns, offset: usize) -> Decoded<Message> {
    let at = |i: usize| offset + i;
    Ok(Message {
        id: MessageId::from_stored(text(row, at(0))?),
        app_id: AppId::from_stored(text(row, at(1))?),
        event_type: text(row, at(2))?,
        event_id: row.opt_text(at(3))?,
        channels: decode_opt(row.opt_text(at(4))?)?,
        payload: row.opt_bytes(at(5))?,
        created_at: time(row, at(6))?,
        ordering_key: row.opt_text(at(7))?,
        tags: decode_opt(row.opt_text(at(8))?)?,
        deliver_at: opt_time(row, at(9))?,
    })
}

/// A delivery whose columns start at `offset` (after another record's, in a join).
pub fn delivery_at(row: &dyn Columns, offset: usize) -> Decoded<Delivery> {
    let at = |i: usize| offset + i;
    Ok(Delivery {
        message_id: MessageId::from_stored(text(row, at(0))?),
        endpoint_id: EndpointId::from_stored(text(row, at(1))?),
        status: DeliveryStatus::from_code(int(row, at(2))?),
        attempt_count: int(row, at(3))?,
        next_attempt_at: opt_time(row, at(4))?,
        updated_at: time(row, at(5))?,
        ordering_key: row.opt_text(at(6))?,
    })
}

/// A row of [`ATTEMPT_COLUMNS`].
pub fn attempt(row: &dyn Columns) -> Decoded<Attempt> {
    Ok(Attempt {
        id: AttemptId::from_stored(text(row, 0)?),
        message_id: MessageId::from_stored(text(row, 1)?),
        endpoint_id: EndpointId::from_stored(text(row, 2)?),
        url: text(row, 3)?,
        response_status_code: int(row, 4)?,
        response: text(row, 5)?,
        response_duration_ms: int(row, 6)?,
        status: DeliveryStatus::from_code(int(row, 7)?),
        trigger_type: TriggerType::from_code(int(row, 8)?),
        created_at: time(row, 9)?,
        response_head: text(row, 10)?,
    })
}

/// A row of `{DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS}`: a claimed delivery to
/// `endpoint`.
pub fn claimed(row: &dyn Columns, endpoint: Endpoint) -> Decoded<ClaimedDelivery> {
    Ok(ClaimedDelivery {
        delivery: delivery_at(row, 0)?,
        manual: row.bool(DELIVERY_WIDTH)?,
        message: message_at(row, DELIVERY_WIDTH + 1)?,
        endpoint,
    })
}

/// Decodes the rows of one claim, `{DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS},
/// {ENDPOINT_COLUMNS}`, each endpoint once: a claim's rows share a few endpoints, and an
/// endpoint's columns (four of them JSON) cost several times more to decode than to clone.
#[derive(Default)]
pub struct ClaimedRows {
    endpoints: HashMap<EndpointId, Endpoint>,
}

impl ClaimedRows {
    /// One row.
    pub fn decode(&mut self, row: &dyn Columns) -> Decoded<ClaimedDelivery> {
        let endpoint = self.endpoint(row, DELIVERY_WIDTH + 1 + MESSAGE_WIDTH)?;
        claimed(row, endpoint)
    }

    fn endpoint(&mut self, row: &dyn Columns, offset: usize) -> Decoded<Endpoint> {
        let id = EndpointId::from_stored(text(row, offset)?);
        if let Some(endpoint) = self.endpoints.get(&id) {
            return Ok(endpoint.clone());
        }
        let endpoint = endpoint_at(row, offset)?;
        self.endpoints.insert(id, endpoint.clone());
        Ok(endpoint)
    }
}

/// A row of [`TOKEN_COLUMNS`].
pub fn token(row: &dyn Columns) -> Decoded<ApiToken> {
    Ok(ApiToken {
        id: text(row, 0)?,
        token_hash: text(row, 1)?,
        app_id: row.opt_text(2)?.map(AppId::from_stored),
        created_at: time(row, 3)?,
        expires_at: opt_time(row, 4)?,
        name: text(row, 5)?,
        revoked_at: opt_time(row, 6)?,
        rate_limit: opt_int(row, 7)?,
        read_only: row.bool(8)?,
        endpoint_id: row.opt_text(9)?.map(EndpointId::from_stored),
    })
}

/// A `status, body` row of `idempotent_responses`.
pub fn stored_response(row: &dyn Columns) -> Decoded<StoredResponse> {
    Ok(StoredResponse {
        status: int(row, 0)?,
        body: row.opt_bytes(1)?.ok_or_else(|| null(1))?,
    })
}
