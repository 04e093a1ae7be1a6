//! Naming rules shared by the API (which rejects bad names) and anything that creates records.
//!
//! uids, event ids, event-type names and channels follow Svix's pattern
//! `^[a-zA-Z0-9\-_.]+$`, at most 256 characters (channels at most 128).
//!
//! Free text (names, descriptions, URLs, metadata) may hold any character but those that
//! change how text around it reads: control characters, line and paragraph separators and
//! bidirectional overrides ([`one_line`]). Such text is shown in the portal and quoted in
//! e-mail notices, where a line break would let a customer write lines that read as the
//! provider's.

/// Why a name was refused; the message is shown to API callers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most {max} characters")]
    TooLong { max: usize },
    #[error("may contain only letters, digits, '-', '_' and '.'")]
    BadCharacter,
    #[error("must not contain control characters")]
    ControlCharacter,
    #[error("may contain only letters, digits, '-', '_', '.', '/', '\\' and '#'")]
    BadTagCharacter,
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

/// A message tag, as Svix allows: 1 to 128 letters, digits and `-_./\#`.
pub fn tag(text: &str) -> Result<(), NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    if text.len() > 128 {
        return Err(NameError::TooLong { max: 128 });
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./\\#".contains(&b))
    {
        return Err(NameError::BadTagCharacter);
    }
    Ok(())
}

/// A message's ordering key: any text of 1 to 256 bytes without control characters (order
/// ids, customer ids and URLs all fit).
pub fn ordering_key(text: &str) -> Result<(), NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    if text.len() > 256 {
        return Err(NameError::TooLong { max: 256 });
    }
    if text.chars().any(char::is_control) {
        return Err(NameError::ControlCharacter);
    }
    Ok(())
}

/// A character free text may not hold, and where: shown to API callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must not contain control characters (U+{:04X} at character {at})", code_point(.found))]
pub struct ControlCharacter {
    pub found: char,
    /// Its position, counting characters from 1.
    pub at: usize,
}

fn code_point(c: &char) -> u32 {
    u32::from(*c)
}

/// Whether `c` changes how the text around it reads rather than being read itself: C0
/// controls (TAB, CR and LF included), DEL, C1 controls, the Unicode line and paragraph
/// separators, and the bidirectional embeddings, overrides and isolates (which can show text
/// in another order than it is stored).
pub fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// One line of free text: no [`is_control`] character at all. TAB is refused too: a
/// one-line value (a name, a URL, a metadata value) has no use for it, and it shows as
/// blank space of varying width, in a terminal as in a mail.
pub fn one_line(text: &str) -> Result<(), ControlCharacter> {
    first_control(text, |_, _| false)
}

/// Several lines of documentation (an event type's description, often Markdown from an
/// OpenAPI document): line breaks (LF, or CR LF) and TAB allowed, other control characters
/// not.
pub fn multi_line(text: &str) -> Result<(), ControlCharacter> {
    first_control(text, |c, next| {
        c == '\n' || c == '\t' || (c == '\r' && next == Some('\n'))
    })
}

/// The first control character in `text` that `allowed` (given it and the next character)
/// does not let through.
fn first_control(
    text: &str,
    allowed: impl Fn(char, Option<char>) -> bool,
) -> Result<(), ControlCharacter> {
    let mut chars = text.chars().peekable();
    let mut at = 0;
    while let Some(c) = chars.next() {
        at += 1;
        if is_control(c) && !allowed(c, chars.peek().copied()) {
            return Err(ControlCharacter { found: c, at });
        }
    }
    Ok(())
}

/// Why a message to publish was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// A field breaks its rule; `field` is its API (camelCase) name.
    #[error("{field}: {reason}")]
    Field { field: &'static str, reason: String },
    /// The payload is larger than the server accepts.
    #[error("the payload is {size} bytes; this server accepts at most {limit}")]
    TooLarge { size: usize, limit: usize },
}

/// The rules every published message follows, whether it came through the API or the
/// outbox: valid names and ordering key, at most 10 valid channels, and a payload that is a JSON object of at
/// most `max_payload` bytes. `payload` is the payload's JSON text, already known to be JSON.
pub fn message(
    event_type: &str,
    event_id: Option<&str>,
    channels: Option<&[String]>,
    ordering_key: Option<&str>,
    payload: &str,
    max_payload: usize,
) -> Result<(), MessageError> {
    let field = |field: &'static str| {
        move |e: NameError| MessageError::Field {
            field,
            reason: e.to_string(),
        }
    };
    name(event_type).map_err(field("eventType"))?;
    event_id.map_or(Ok(()), name).map_err(field("eventId"))?;
    ordering_key
        .map_or(Ok(()), self::ordering_key)
        .map_err(field("orderingKey"))?;
    let channels = channels.unwrap_or_default();
    if channels.len() > 10 {
        return Err(MessageError::Field {
            field: "channels",
            reason: "at most 10 channels".into(),
        });
    }
    for value in channels {
        channel(value).map_err(field("channels"))?;
    }
    if !payload.starts_with('{') {
        return Err(MessageError::Field {
            field: "payload",
            reason: "must be a JSON object".into(),
        });
    }
    if payload.len() > max_payload {
        return Err(MessageError::TooLarge {
            size: payload.len(),
            limit: max_payload,
        });
    }
    if nests_deeper(payload, MAX_PAYLOAD_DEPTH) {
        return Err(MessageError::Field {
            field: "payload",
            reason: format!("nests deeper than {MAX_PAYLOAD_DEPTH} levels"),
        });
    }
    Ok(())
}

/// How deep a payload may nest: every part of hookd that reads a payload as a JSON value (its
/// schema check, notices) and most receivers' JSON parsers stop at 128 levels.
pub const MAX_PAYLOAD_DEPTH: usize = 100;

/// Whether the JSON text `json` nests arrays and objects more than `limit` deep.
fn nests_deeper(json: &str, limit: usize) -> bool {
    // A document with no more opening brackets than `limit` cannot nest deeper. Counting them
    // is one vectorised pass, so the byte-by-byte walk through strings and escapes below runs
    // only for the rare payload with many brackets.
    openings(json.as_bytes()) > limit && depth_exceeds(json, limit)
}

/// How many `[` and `{` `json` holds. Counted in byte-wide lanes, a chunk of at most 255 bytes
/// at a time so no lane overflows: that is what the compiler vectorises 16 or 32 bytes a step
/// (`[` is `{` with bit 5 clear, and no other byte ORs to `{`).
fn openings(json: &[u8]) -> usize {
    json.chunks(255)
        .map(|chunk| {
            let count = chunk
                .iter()
                .fold(0u8, |count, &byte| count + u8::from(byte | 0x20 == b'{'));
            usize::from(count)
        })
        .sum()
}

/// Whether `json` opens more than `limit` brackets at once, brackets inside strings aside.
fn depth_exceeds(json: &str, limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for byte in json.bytes() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'[' | b'{' if !in_string => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' if !in_string => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_nesting_past_the_limit_is_refused_whatever_its_strings_hold() {
        let nested =
            |levels: usize| format!("{{\"a\":{}{}}}", "[".repeat(levels), "]".repeat(levels));
        let check = |payload: &str| message("a.b", None, None, None, payload, 1 << 20);
        assert_eq!(check(&nested(MAX_PAYLOAD_DEPTH - 1)), Ok(()));
        let refused = check(&nested(MAX_PAYLOAD_DEPTH)).unwrap_err();
        assert!(refused.to_string().contains("nests deeper"), "{refused}");
        assert!(check(&nested(20_000)).is_err());
        let brackets_in_text = format!("{{\"a\":\"\\\"{}\"}}", "[".repeat(500));
        assert_eq!(check(&brackets_in_text), Ok(()));
        let many_shallow = format!("{{\"a\":[{}{{}}]}}", "{},".repeat(500));
        assert_eq!(check(&many_shallow), Ok(()));
    }

    #[test]
    fn openings_counts_brackets_only_whatever_the_length() {
        let every_byte: Vec<u8> = (0..=255u8).cycle().take(256 * 7 + 3).collect();
        let naive = every_byte
            .iter()
            .filter(|b| matches!(b, b'[' | b'{'))
            .count();
        assert_eq!(openings(&every_byte), naive);
        assert_eq!(openings(&[b'['; 1000]), 1000);
        assert_eq!(openings(b""), 0);
    }

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

    #[test]
    fn a_message_needs_an_object_payload_within_the_limit() {
        assert_eq!(message("a.b", Some("e1"), None, None, "{}", 2), Ok(()));
        assert!(matches!(
            message("a.b", None, None, None, "[1]", 10),
            Err(MessageError::Field {
                field: "payload",
                ..
            })
        ));
        assert_eq!(
            message("a.b", None, None, None, "{\"a\":1}", 4),
            Err(MessageError::TooLarge { size: 7, limit: 4 })
        );
        let eleven: Vec<String> = (0..11).map(|n| n.to_string()).collect();
        assert!(matches!(
            message("a.b", None, Some(&eleven), None, "{}", 10),
            Err(MessageError::Field {
                field: "channels",
                ..
            })
        ));
        assert!(matches!(
            message("a b", None, None, None, "{}", 10),
            Err(MessageError::Field {
                field: "eventType",
                ..
            })
        ));
    }

    #[test]
    fn one_line_text_refuses_every_control_character_and_says_where() {
        for fine in [
            "Bookstore",
            "Café Ünïcode ✓",
            "a b",
            "https://x.example/p?q=1#f",
        ] {
            assert_eq!(one_line(fine), Ok(()), "{fine}");
        }
        for (text, found, at) in [
            ("a\nb", '\n', 2),
            ("a\r\nb", '\r', 2),
            ("tab\there", '\t', 4),
            ("\0", '\0', 1),
            ("del\u{7f}", '\u{7f}', 4),
            ("c1\u{85}", '\u{85}', 3),
            ("ls\u{2028}", '\u{2028}', 3),
            ("rlo\u{202E}gnp.exe", '\u{202E}', 4),
            ("isolate\u{2066}", '\u{2066}', 8),
        ] {
            assert_eq!(
                one_line(text),
                Err(ControlCharacter { found, at }),
                "{text:?}"
            );
        }
        let error = one_line("a\nb").unwrap_err().to_string();
        assert_eq!(
            error,
            "must not contain control characters (U+000A at character 2)"
        );
    }

    #[test]
    fn multi_line_text_allows_line_breaks_and_tabs_only() {
        assert_eq!(multi_line("# Order\n\nShipped.\r\n\t- id"), Ok(()));
        assert_eq!(
            multi_line("bare\rcarriage return"),
            Err(ControlCharacter { found: '\r', at: 5 })
        );
        assert!(multi_line("bell\u{7}").is_err());
        assert!(multi_line("\u{202E}").is_err());
    }

    #[test]
    fn an_ordering_key_is_any_short_text_without_control_characters() {
        for key in [
            "C-4471",
            "customer 17 / order 9",
            "https://shop.example/o/1",
            "ü",
        ] {
            assert_eq!(ordering_key(key), Ok(()), "{key}");
        }
        assert_eq!(ordering_key(""), Err(NameError::Empty));
        assert_eq!(
            ordering_key(&"k".repeat(257)),
            Err(NameError::TooLong { max: 256 })
        );
        assert_eq!(ordering_key("a\nb"), Err(NameError::ControlCharacter));
        assert_eq!(tag("project/7#eu"), Ok(()));
        assert_eq!(tag("a b"), Err(NameError::BadTagCharacter));
        assert_eq!(tag(&"t".repeat(129)), Err(NameError::TooLong { max: 128 }));
        assert!(matches!(
            message("a.b", None, None, Some(""), "{}", 10),
            Err(MessageError::Field {
                field: "orderingKey",
                ..
            })
        ));
    }
}
