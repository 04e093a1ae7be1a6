//! The text log lines' fields, written as tracing-subscriber's default formatter writes them
//! but without its formatting machinery for the common case.
//!
//! Every API request opens a span whose fields are formatted when it opens, whether or not
//! anything is logged inside it: the default formatter styles each name and escapes each text
//! value character by character, which makes up most of a request span's cost. A text value
//! of plain visible ASCII needs no escaping, so it is copied as it is; anything else (colours,
//! messages, errors, escaped text) is the default formatter's, so every line reads the same.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};

/// [`DefaultFields`]' output, with plain names and values copied rather than formatted.
#[derive(Debug, Default)]
pub struct PlainFields {
    default: DefaultFields,
}

impl<'writer> FormatFields<'writer> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        if writer.has_ansi_escapes() {
            return self.default.format_fields(writer, fields);
        }
        let mut visitor = PlainVisitor {
            writer,
            is_empty: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.finish()
    }
}

/// Writes `name=value` pairs, space-separated, as [`DefaultVisitor`] does without colours.
struct PlainVisitor<'writer> {
    writer: Writer<'writer>,
    is_empty: bool,
    result: fmt::Result,
}

impl PlainVisitor<'_> {
    /// Whether `field` is written as `name=value` with its name as it is: the message, raw
    /// identifiers (`r#type`) and `log.` metadata are written otherwise, by the default.
    fn plain_name(field: &Field) -> bool {
        let name = field.name();
        name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
    }

    /// `name=` after the separating space.
    fn begin(&mut self, field: &Field) -> fmt::Result {
        if self.is_empty {
            self.is_empty = false;
        } else {
            self.writer.write_char(' ')?;
        }
        self.writer.write_str(field.name())?;
        self.writer.write_char('=')
    }

    /// Has the default visitor write `field`, which this one does not.
    fn by_default(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut visitor);
        self.result = visitor.finish();
        // It skips `log.` metadata, writing nothing; anything else it writes.
        self.is_empty = self.is_empty && field.name().starts_with("log.");
    }
}

/// Whether `{:?}` writes `text` as it is between quotes: visible ASCII but quotes and
/// backslashes, which it escapes.
fn needs_no_escaping(text: &str) -> bool {
    text.bytes()
        .all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\')
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        if !Self::plain_name(field) || !needs_no_escaping(value) {
            return self.by_default(field, |visitor| visitor.record_str(field, value));
        }
        self.result = self.begin(field).and_then(|()| {
            self.writer.write_char('"')?;
            self.writer.write_str(value)?;
            self.writer.write_char('"')
        });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_err() {
            return;
        }
        self.by_default(field, |visitor| visitor.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        if !Self::plain_name(field) {
            return self.by_default(field, |visitor| visitor.record_debug(field, value));
        }
        self.result = self
            .begin(field)
            .and_then(|()| write!(self.writer, "{value:?}"));
    }
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Lines written, kept for the test to read.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Lines {
        type Writer = Self;

        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    /// An error with a source, which the formatter lists after it.
    #[derive(Debug)]
    struct Outer(io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the outer error")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Spans and events with every kind of field the formatter treats apart.
    fn log_everything() {
        let id = "0123456789abcdef";
        let span = tracing::info_span!("request", request_id = %id, method = "POST", route = "/api/v1/app/{app_id}/msg");
        let _entered = span.enter();
        let inner =
            tracing::info_span!("inner", r#type = "x", text = "say \"hi\"\\", count = 3_u64);
        let _inner = inner.enter();
        tracing::info!(
            quoted = "a \"b\"",
            unicode = "é\u{301}",
            control = "tab\there",
            ansi = "\u{1b}[31mred",
            empty = "",
            number = -4_i64,
            float = 1.5_f64,
            flag = true,
            debugged = ?vec!["a"],
            shown = %"plain shown",
            "a message with \"quotes\" and \u{1b}[1m escapes"
        );
        let error = Outer(io::Error::other("the source"));
        tracing::warn!(
            error = &error as &(dyn std::error::Error + 'static),
            "failed"
        );
        tracing::info!(r#type = "raw", "log.target" = "skipped", after = "kept");
        inner.record("count", 4_u64);
        tracing::info!("only a message");
        tracing::info!(plain = "no message");
    }

    fn written<N>(fields: N, ansi: bool) -> String
    where
        N: for<'w> FormatFields<'w> + Send + Sync + 'static,
    {
        let lines = Lines::default();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(fields)
            .with_ansi(ansi)
            .without_time()
            .with_writer(lines.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log_everything);
        let bytes = lines.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn lines_read_as_the_default_formatter_writes_them() {
        for ansi in [false, true] {
            let plain = written(PlainFields::default(), ansi);
            assert_eq!(plain, written(DefaultFields::new(), ansi));
            assert_eq!(plain.lines().count(), 5, "{plain}");
        }
    }
}
