//! Typed ids.
//!
//! Every id is a short type prefix, `_`, and 22 base62 characters encoding the creation time in
//! milliseconds followed by 80 random bits. Ids of one kind therefore sort by creation time as
//! plain strings (those one process makes in one millisecond in the order it made them), which
//! is what the API's cursor pagination relies on, and a typo'd id of the
//! wrong kind is recognisable at a glance. Ids never contain `.` (the signature scheme's
//! separator).

use std::fmt;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Base62 in ASCII order, so that fixed-width encodings compare like the numbers they encode.
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const ENCODED_LEN: usize = 22;

/// The newest millisecond this process has made an id in, and the low 80 bits of its last id.
static LAST: Mutex<(i64, u128)> = Mutex::new((i64::MIN, 0));

/// One id's base62 characters.
type Suffix = [u8; ENCODED_LEN];

/// Encodes `created_ms` (high 48 bits) and 80 low bits as 22 base62 characters. The low bits
/// are random, except within the newest millisecond this process has made ids in: there they
/// are the last id's plus a random step, so the ids made in one millisecond (a batch of
/// publishes) sort in the order they were made, and are still not guessable from each other.
fn sortable_suffix(created: Timestamp) -> Suffix {
    let mut suffix = [0; ENCODED_LEN];
    sortable_run(created, 1, |made| suffix = made);
    suffix
}

/// `count` suffixes for `created`, each handed to `each` in turn and sorting above the one
/// before, whatever other threads make meanwhile (an older millisecond than the newest gets
/// random low bits per id, so ids made one by one there would not keep their order).
fn sortable_run(created: Timestamp, count: usize, mut each: impl FnMut(Suffix)) {
    let ms = created.as_millis();
    let step = || u128::from(u32::from_be_bytes(random_bytes())) + 1;
    // Room for the whole run above its first id: steps are below 2^32 + 1.
    let room = (count as u128 + 1) << 33;
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    let mut low = if ms == last.0 && last.1 < (1 << 80) - room {
        last.1 + step()
    } else {
        // The lower half, leaving the upper for the steps of this millisecond's later ids.
        let mut bytes = [0u8; 16];
        bytes[6..].copy_from_slice(&random_bytes::<10>());
        bytes[6] &= 0x7f;
        u128::from_be_bytes(bytes)
    };
    for i in 0..count {
        if i > 0 {
            low += step();
        }
        each(encode(created, low));
    }
    if ms >= last.0 {
        *last = (ms, low);
    }
}

/// `prefix`, `_` and `suffix`: an id's text.
fn id_text(prefix: &str, suffix: &Suffix) -> String {
    let mut text = String::with_capacity(prefix.len() + 1 + ENCODED_LEN);
    text.push_str(prefix);
    text.push('_');
    text.push_str(std::str::from_utf8(suffix).expect("the alphabet is ASCII"));
    text
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::Rng::fill_bytes(&mut rand::rng(), &mut bytes);
    bytes
}

/// Encodes `created_ms` (high 48 bits) and the low 80 bits of `low` as 22 base62 characters.
fn encode(created: Timestamp, low: u128) -> Suffix {
    let value = ((created.as_millis().max(0) as u128 & 0xFFFF_FFFF_FFFF) << 80) | (low & LOW_BITS);
    let mut out = [b'0'; ENCODED_LEN];
    // Two 128-bit divisions (library calls) cut the value into chunks of ten digits, whose
    // digits then take 64-bit ones, rather than 22 of each.
    let (upper, lowest) = (value / CHUNK, (value % CHUNK) as u64);
    let chunks = [lowest, (upper % CHUNK) as u64, (upper / CHUNK) as u64];
    for (slots, mut chunk) in out.rchunks_mut(10).zip(chunks) {
        for slot in slots.iter_mut().rev() {
            *slot = ALPHABET[(chunk % 62) as usize];
            chunk /= 62;
        }
    }
    out
}

/// The bits of an id below its creation time.
const LOW_BITS: u128 = (1 << 80) - 1;

/// 62^10, the largest power of 62 below 2^64.
const CHUNK: u128 = 62u128.pow(10);

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new id for something created at `created`.
            pub fn new(created: Timestamp) -> Self {
                Self(id_text($prefix, &sortable_suffix(created)))
            }

            /// `count` new ids for things created at `created`, in the order they sort: for a
            /// batch whose order matters (messages relayed from an outbox in row order).
            pub fn run(created: Timestamp, count: usize) -> Vec<Self> {
                let mut ids = Vec::with_capacity(count);
                sortable_run(created, count, |suffix| ids.push(Self(id_text($prefix, &suffix))));
                ids
            }

            /// The smallest id of this kind made at `at` or later: every id made before `at`
            /// sorts below it, every id made at or after it sorts at or above it. Turns a time
            /// bound into an id bound, so a time range is an index range on the id.
            pub fn lowest_at(at: Timestamp) -> Self {
                Self(id_text($prefix, &encode(at, 0)))
            }

            /// Wraps a stored id; callers vouch that it came from [`Self::new`].
            pub fn from_stored(id: String) -> Self {
                Self(id)
            }

            /// Whether `text` has this kind's prefix, i.e. is an id rather than a uid.
            pub fn looks_like(text: &str) -> bool {
                text.strip_prefix($prefix).is_some_and(|rest| rest.starts_with('_'))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

typed_id!(
    /// An application: one customer of the producer, owning endpoints and messages.
    AppId,
    "app"
);
typed_id!(
    /// An endpoint: one URL of an application that receives webhooks.
    EndpointId,
    "ep"
);
typed_id!(
    /// A message: one event published to an application; it is the `webhook-id` on the wire.
    MessageId,
    "msg"
);
typed_id!(
    /// One HTTP attempt to deliver a message to an endpoint.
    AttemptId,
    "atmpt"
);
typed_id!(
    /// A background task (Svix's shape for recover), reported as finished when answered.
    TaskId,
    "qtask"
);
typed_id!(
    /// An ingest source: a URL that receives one provider's webhooks and forwards them.
    SourceId,
    "src"
);
typed_id!(
    /// A request an ingest source refused, as its bounded record keeps it.
    RejectionId,
    "rej"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_creation_time() {
        let earlier = MessageId::new(Timestamp::from_millis(1_700_000_000_000));
        let later = MessageId::new(Timestamp::from_millis(1_700_000_000_001));
        assert!(earlier < later, "{earlier} should sort before {later}");
    }

    #[test]
    fn ids_made_in_one_millisecond_sort_in_the_order_they_were_made() {
        // Later than any other test's ids: theirs, made meanwhile, cannot interleave.
        let at = Timestamp::from_millis(4_000_000_000_000);
        let ids: Vec<MessageId> = (0..1_000).map(|_| MessageId::new(at)).collect();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(ids.iter().all(|id| *id >= MessageId::lowest_at(at)));
    }

    #[test]
    fn a_run_of_ids_sorts_in_order_even_below_the_newest_millisecond() {
        let older = Timestamp::from_millis(3_900_000_000_000);
        let newer = MessageId::new(Timestamp::from_millis(3_900_000_000_001));
        for _ in 0..100 {
            let run = MessageId::run(older, 50);
            assert_eq!(run.len(), 50);
            assert!(run.windows(2).all(|pair| pair[0] < pair[1]), "{run:?}");
            assert!(run.iter().all(|id| *id < newer));
        }
    }

    #[test]
    fn ids_have_prefix_fixed_length_and_no_dots() {
        let id = AppId::new(Timestamp::from_millis(1_700_000_000_000));
        assert!(AppId::looks_like(id.as_str()));
        assert!(!EndpointId::looks_like(id.as_str()));
        assert_eq!(id.as_str().len(), "app_".len() + ENCODED_LEN);
        assert!(!id.as_str().contains('.'));
    }

    #[test]
    fn lowest_at_bounds_the_ids_of_its_millisecond() {
        let at = Timestamp::from_millis(1_700_000_000_000);
        let bound = MessageId::lowest_at(at);
        assert!(MessageId::new(Timestamp::from_millis(1_699_999_999_999)) < bound);
        assert!(MessageId::new(at) >= bound);
        assert!(
            MessageId::new(at) < MessageId::lowest_at(Timestamp::from_millis(1_700_000_000_001))
        );
    }

    #[test]
    fn encoding_is_the_base62_digits_of_time_and_low_bits() {
        // Digit by digit, as every stored id was written.
        let reference = |created: i64, low: u128| {
            let mut value = (created as u128) << 80 | low;
            let mut out = [b'0'; ENCODED_LEN];
            for slot in out.iter_mut().rev() {
                *slot = ALPHABET[(value % 62) as usize];
                value /= 62;
            }
            String::from_utf8(out.to_vec()).unwrap()
        };
        let mut cases = vec![(0, 0), (0xFFFF_FFFF_FFFF, LOW_BITS), (1, 0)];
        for _ in 0..1_000 {
            let created = i64::from(u32::from_be_bytes(random_bytes())) << 12;
            cases.push((created, u128::from_be_bytes(random_bytes()) & LOW_BITS));
        }
        for (created, low) in cases {
            let encoded = encode(Timestamp::from_millis(created), low);
            assert_eq!(
                encoded,
                reference(created, low).as_bytes(),
                "{created} {low:?}"
            );
        }
    }

    #[test]
    fn ids_made_in_the_same_millisecond_differ() {
        let at = Timestamp::from_millis(1_700_000_000_000);
        assert_ne!(MessageId::new(at), MessageId::new(at));
    }
}
