//! Turning measurements into text: table cells, and the marked sections of
//! `docs/benchmarks.md` each benchmark owns.
//!
//! Each benchmark rewrites only the part of the file between its own
//! `<!-- NAME:begin -->` and `<!-- NAME:end -->` markers, so benchmarks can be rerun one at a
//! time and hand-written text around them survives.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

/// What `docs/benchmarks.md` starts with when it does not exist yet.
const INTRO: &str = "\
# Benchmarks

Speed is measured, not asserted in tests. Every table below is written by `hookd-bench` (the
`bench/` crate) with the command that reproduces it, the date, the machine and the commit of
hookd it measured. It runs the release binary `target/release/hookd` as a child process on a
fresh database and drives it over loopback HTTP from the same machine.

One command reruns them all and rewrites their sections:

```sh
cargo build --release -p hookd -p hookd-bench
target/release/hookd-bench suite --backend both --quiet-below 0.7 --write-docs
```
";

fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    )
}

/// `document` with the section `name` replaced by `body` (markers kept), or appended at the
/// end when the document has no such section yet.
pub fn replace_section(document: &str, name: &str, body: &str) -> anyhow::Result<String> {
    let (begin, end) = markers(name);
    let body = body.trim_matches('\n');
    let section = format!("{begin}\n{body}\n{end}");
    match (document.find(&begin), document.find(&end)) {
        (Some(start), Some(stop)) if start < stop => Ok(format!(
            "{}{section}{}",
            &document[..start],
            &document[stop + end.len()..]
        )),
        (None, None) => {
            let mut out = document.trim_end_matches('\n').to_owned();
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&section);
            out.push('\n');
            Ok(out)
        }
        _ => anyhow::bail!("the markers of section `{name}` are missing or out of order"),
    }
}

/// Rewrites section `name` of the Markdown file at `path`, creating the file (with the intro)
/// if it does not exist.
pub fn write_section(path: &Path, name: &str, body: &str) -> anyhow::Result<()> {
    let document = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => INTRO.to_owned(),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let updated = replace_section(&document, name, body)?;
    std::fs::write(path, updated).with_context(|| format!("cannot write {}", path.display()))
}

/// `docs/benchmarks.md` of the repository this harness was built from.
pub fn docs_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md")
}

/// Now, to the minute: `2026-11-30 05:47 UTC`.
pub fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year]-[month]-[day] [hour]:[minute] UTC"
        ))
        .unwrap_or_else(|_| "unknown".into())
}

/// The commit hookd was built from, when this is a git checkout: `git describe` of the
/// repository, `-dirty` when its crates have uncommitted changes.
pub fn revision() -> String {
    revision_of(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")))
}

/// As [`revision`], of the checkout holding `repo` (any directory inside it).
pub fn revision_of(repo: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "crates",
            ])
            .is_some_and(|changes| !changes.is_empty());
            format!(
                "built from commit {commit}{}",
                if dirty {
                    " with uncommitted changes"
                } else {
                    ""
                }
            )
        }
        None => "built from an unknown commit (not a git checkout)".into(),
    }
}

/// A latency in milliseconds with two decimals: `3.27 ms`.
pub fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// The change from `before` to `after` as a signed percentage: `+12 %`, `-3 %`.
pub fn change(before: f64, after: f64) -> String {
    if before <= 0.0 {
        return "no earlier figure".into();
    }
    format!("{:+.0} %", (after / before - 1.0) * 100.0)
}

/// A share as a whole percentage: `0.563` is `56 %`.
pub fn percent(share: f64) -> String {
    format!("{:.0} %", share * 100.0)
}

/// The record that opens every section's figures: the command that reproduces them (after the
/// release build), then the date, the machine and the commit hookd was built from.
pub fn provenance(command: &str, machine: &crate::machine::Machine) -> String {
    format!(
        "- Command: `cargo build --release -p hookd -p hookd-bench && {command}`\n\
         - Date: {}; machine: {}; hookd: {}\n",
        now(),
        machine.summary(),
        revision()
    )
}

/// A section that is a method, the run's provenance, then one table: `header` and a line per
/// row.
pub fn table_section(
    method: &str,
    command: &str,
    machine: &crate::machine::Machine,
    header: &str,
    rows: impl IntoIterator<Item = String>,
) -> String {
    let mut out = format!("{method}\n{}\n{header}\n", provenance(command, machine));
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
    out
}

/// A count that should be zero: `0`, or the count in bold, flagged.
pub fn flagged(n: u64) -> String {
    match n {
        0 => "0".to_owned(),
        n => format!("**{} (flagged)**", thousands(n)),
    }
}

/// Numbers joined by `separator`: `32,64` for a flag.
pub fn joined(values: &[usize], separator: &str) -> String {
    let texts: Vec<String> = values.iter().map(usize::to_string).collect();
    texts.join(separator)
}

/// Values as prose: `32`, `32 and 64`, `1, 100 and 10,000` (with `and` as `conjunction`).
pub fn listed(values: impl IntoIterator<Item = u64>, conjunction: &str) -> String {
    let shown: Vec<String> = values.into_iter().map(thousands).collect();
    match shown.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} {conjunction} {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The middle value (the mean of the two middle ones for an even count); `None` if empty.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[middle]),
        _ => Some((values[middle - 1] + values[middle]) / 2.0),
    }
}

/// An integer with thousands separators: `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A Markdown table row from its cells.
pub fn row<S: AsRef<str>>(cells: &[S]) -> String {
    let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
    format!("| {} |", cells.join(" | "))
}

/// A Markdown table header and its separator line.
pub fn header(cells: &[&str]) -> String {
    format!("{}\n|{}", row(cells), "---|".repeat(cells.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_replaced_and_the_rest_kept() {
        let doc = "# B\n\nintro\n\n<!-- publish:begin -->\nold\n<!-- publish:end -->\n\n\
                   <!-- fanout:begin -->\nother\n<!-- fanout:end -->\ntail\n";
        let out = replace_section(doc, "publish", "new\nlines\n").unwrap();
        assert_eq!(
            out,
            "# B\n\nintro\n\n<!-- publish:begin -->\nnew\nlines\n<!-- publish:end -->\n\n\
             <!-- fanout:begin -->\nother\n<!-- fanout:end -->\ntail\n"
        );
        // Rewriting is stable.
        assert_eq!(replace_section(&out, "publish", "new\nlines").unwrap(), out);
    }

    #[test]
    fn a_missing_section_is_appended() {
        let out = replace_section("# B\nintro\n", "publish", "body").unwrap();
        assert_eq!(
            out,
            "# B\nintro\n\n<!-- publish:begin -->\nbody\n<!-- publish:end -->\n"
        );
    }

    #[test]
    fn broken_markers_are_refused() {
        assert!(
            replace_section(
                "<!-- publish:end -->\n<!-- publish:begin -->",
                "publish",
                "x"
            )
            .is_err()
        );
        assert!(replace_section("<!-- publish:begin -->\n", "publish", "x").is_err());
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(millis(Duration::from_micros(3270)), "3.27 ms");
        assert_eq!(percent(0.563), "56 %");
        assert_eq!(header(&["a", "b"]), "| a | b |\n|---|---|");
        assert_eq!(listed([32], "and"), "32");
        assert_eq!(listed([32, 64], "or"), "32 or 64");
        assert_eq!(listed([32, 64, 128], "and"), "32, 64 and 128");
        assert_eq!(listed([1, 100, 10_000], "and"), "1, 100 and 10,000");
        let record = provenance(
            "target/release/hookd-bench x",
            &crate::machine::Machine::describe(),
        );
        let lines: Vec<&str> = record.lines().collect();
        assert_eq!(lines.len(), 2, "{record}");
        assert_eq!(
            lines[0],
            "- Command: `cargo build --release -p hookd -p hookd-bench && \
             target/release/hookd-bench x`"
        );
        assert!(lines[1].starts_with("- Date: "), "{record}");
        assert!(lines[1].contains("; machine: "), "{record}");
        assert!(lines[1].contains("; hookd: built from "), "{record}");
        assert_eq!(flagged(0), "0");
        assert_eq!(flagged(1_200), "**1,200 (flagged)**");
    }

    #[test]
    fn the_median_is_the_middle_value_in_order() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![7.0]), Some(7.0));
        assert_eq!(median(vec![9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}

/// The committed `docs/benchmarks.md`, for tests that check that each generator writes the
/// text its section shows.
#[cfg(test)]
pub mod page {
    /// Section `name` of the page, between its markers.
    pub fn section(name: &str) -> String {
        let document = std::fs::read_to_string(super::docs_path()).expect("docs/benchmarks.md");
        let (begin, end) = super::markers(name);
        let start = document.find(&begin).expect("the section's begin marker") + begin.len();
        let stop = document.find(&end).expect("the section's end marker");
        document[start..stop].trim_matches('\n').to_owned()
    }

    /// The `hookd-bench` command section `name` records (without the build before it).
    pub fn command(name: &str) -> String {
        let section = section(name);
        let start = section
            .find("target/release/hookd-bench ")
            .expect("the section records its command");
        let command = &section[start..];
        command[..command.find('`').expect("the command is in backticks")].to_owned()
    }

    /// `command` split into arguments as a shell would: at spaces, except inside single
    /// quotes.
    pub fn split(command: &str) -> Vec<String> {
        let (mut args, mut current, mut quoted, mut started) =
            (Vec::new(), String::new(), false, false);
        for c in command.chars() {
            match c {
                '\'' => (quoted, started) = (!quoted, true),
                ' ' if !quoted => {
                    if started {
                        args.push(std::mem::take(&mut current));
                    }
                    started = false;
                }
                c => {
                    current.push(c);
                    started = true;
                }
            }
        }
        if started {
            args.push(current);
        }
        args
    }

    /// Asserts that section `name` holds `text` (a generator's output for its figures).
    #[track_caller]
    pub fn assert_shows(name: &str, text: &str) {
        let section = section(name);
        assert!(
            section.contains(text.trim_matches('\n')),
            "the `{name}` section does not show\n{text}\n\nIt reads:\n{section}"
        );
    }

    /// Panics unless section `name` records `command` as its run and shows each of `texts`.
    pub fn assert_records(name: &str, command: &str, texts: &[&str]) {
        assert_eq!(
            self::command(name),
            command,
            "the `{name}` section's command"
        );
        for text in texts {
            assert_shows(name, text);
        }
    }

    /// Panics unless section `name` shows a line of `text`'s shape: the same words with any
    /// figures. For lines a rerun rewrites with new figures, built here from sample ones.
    pub fn assert_shows_shape(name: &str, text: &str) {
        let section = section(name);
        assert!(
            shape(&section).contains(&shape(text.trim_matches('\n'))),
            "the `{name}` section has no line shaped as\n{text}\n\nIt reads:\n{section}"
        );
    }

    /// `text` with every figure (digits, with their thousands commas and decimal point) as `#`.
    fn shape(text: &str) -> String {
        let mut shaped = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if !c.is_ascii_digit() {
                shaped.push(c);
                continue;
            }
            shaped.push('#');
            while let Some(&next) = chars.peek() {
                let inside = matches!(next, ',' | '.')
                    && chars
                        .clone()
                        .nth(1)
                        .is_some_and(|after| after.is_ascii_digit());
                if !next.is_ascii_digit() && !inside {
                    break;
                }
                chars.next();
            }
        }
        shaped
    }

    /// Every marked section of the page, by name.
    fn names() -> Vec<String> {
        let document = std::fs::read_to_string(super::docs_path()).expect("docs/benchmarks.md");
        document
            .match_indices("<!-- ")
            .filter_map(|(at, _)| {
                let name = document[at + 5..].split(':').next()?;
                // Lowercase, as the benchmarks' names are (the page also shows `NAME`).
                if !name.chars().all(|c| c.is_ascii_lowercase()) {
                    return None;
                }
                document[at..]
                    .starts_with(&format!("<!-- {name}:begin -->"))
                    .then(|| name.to_owned())
            })
            .collect()
    }

    #[test]
    fn a_shape_keeps_the_words_and_forgets_the_figures() {
        assert_eq!(
            shape("31,759 requests/s (best at 128 in flight); p99 0.25 ms, 1,024."),
            "# requests/s (best at # in flight); p# # ms, #."
        );
        assert_ne!(
            shape("7,494 deliveries/s"),
            shape("7,494 deliveries a second")
        );
    }

    #[test]
    fn every_section_records_its_run_and_its_tables_are_whole() {
        let names = names();
        assert!(names.len() >= 14, "{names:?}");
        for name in names {
            let section = section(&name);
            let lines: Vec<&str> = section.lines().collect();
            let command = lines
                .iter()
                .position(|l| l.starts_with("- Command: `cargo build --release -p hookd"))
                .unwrap_or_else(|| panic!("`{name}` records no command"));
            let run = lines.get(command + 1).copied().unwrap_or_default();
            assert!(
                run.starts_with("- Date: ") && run.contains("; machine: "),
                "`{name}` records no date and machine: {run}"
            );
            let mut columns = None;
            for line in lines.into_iter().filter(|l| !l.starts_with("|---")) {
                let cells = line.starts_with('|').then(|| line.matches(" | ").count());
                match (columns, cells) {
                    (None, Some(n)) => columns = Some(n),
                    (Some(header), Some(n)) => {
                        assert_eq!(n, header, "`{name}`: a row unlike its header: {line}")
                    }
                    (_, None) => columns = None,
                }
            }
        }
    }

    #[test]
    fn commands_split_as_a_shell_would() {
        assert_eq!(
            split("hookd-bench deliver --tuned '--workers 1024' --write-docs"),
            [
                "hookd-bench",
                "deliver",
                "--tuned",
                "--workers 1024",
                "--write-docs"
            ]
        );
        assert_eq!(split("a --tuned ''"), ["a", "--tuned", ""]);
    }
}

/// What every benchmark does around its measurement: wait for a quiet machine, and rewrite its
/// own section of the docs.
#[derive(Debug, clap::Args)]
pub struct Output {
    /// Before measuring, wait (up to 10 minutes) until the 1-minute load average is below this.
    #[arg(long)]
    pub quiet_below: Option<f64>,
    /// Rewrite this benchmark's section of docs/benchmarks.md with the results.
    #[arg(long)]
    pub write_docs: bool,
    /// The Markdown file `--write-docs` rewrites [default: docs/benchmarks.md of this repo].
    #[arg(long)]
    pub docs_file: Option<std::path::PathBuf>,
}

impl Output {
    /// These options as they appear in the recorded command.
    pub fn flags(&self) -> String {
        let mut flags = String::new();
        if let Some(load) = self.quiet_below {
            flags.push_str(&format!(" --quiet-below {load}"));
        }
        if self.write_docs {
            flags.push_str(" --write-docs");
        }
        flags
    }

    /// Rewrites `section` of the docs file when `--write-docs` was given.
    pub fn write(&self, section: &str, body: &str) -> anyhow::Result<()> {
        if self.write_docs {
            let path = self.docs_file.clone().unwrap_or_else(docs_path);
            write_section(&path, section, body)?;
            println!("wrote the `{section}` section of {}", path.display());
        }
        Ok(())
    }
}
