//! Naming rules shared by the API (which rejects bad names) and anything that creates records.
//!
//! uids, event ids, event-type names and channels follow Svix's pattern
//! `^[a-zA-Z0-9\-_.]+$`, at most 256 characters (channels at most 128).

/// Why a name was refused; the message is shown to API callers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most {max} characters")]
    TooLong { max: usize },
    #[error("may contain only letters, digits, '-', '_' and '.'")]
    BadCharacter,
}

fn check(text: &str, max: usize) -> Result<(), NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    if text.len() > max {
        return Err(NameError::TooLong { max });
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(NameError::BadCharacter);
    }
    Ok(())
}

/// A caller-chosen uid, event id or event-type name.
pub fn name(text: &str) -> Result<(), NameError> {
    check(text, 256)
}

/// A channel name.
pub fn channel(text: &str) -> Result<(), NameError> {
    check(text, 128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_dotted_names() {
        assert_eq!(name("order.shipped_v2-eu"), Ok(()));
    }

    #[test]
    fn refuses_empty_long_and_odd_names() {
        assert_eq!(name(""), Err(NameError::Empty));
        assert_eq!(name(&"a".repeat(257)), Err(NameError::TooLong { max: 256 }));
        assert_eq!(name("order shipped"), Err(NameError::BadCharacter));
        assert_eq!(name("ordér"), Err(NameError::BadCharacter));
        assert_eq!(
            channel(&"c".repeat(129)),
            Err(NameError::TooLong { max: 128 })
        );
    }
}
