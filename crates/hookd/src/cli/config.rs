//! `--config FILE`: `serve`'s options from a TOML file, and `hookd config show`.
//!
//! Operators keep configuration in files under version control. A file's keys are `serve`'s
//! long option names (`workers = 512`, `allow-subnet = ["10.0.0.0/8"]`), and a value counts
//! only where neither the command line nor the option's environment variable gave one: flag,
//! then environment, then file, then default. The file's values are handed to clap as if
//! typed, so each is checked by its flag's own parser, and a key that names no option is an
//! error naming the key and its line. [`Sources`] remembers where every value came from, for
//! `hookd config show`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, ValueHint};
use hookd_sources::source::redacted;

/// The options of `serve` (and of `config show`, which takes the same ones).
const CONFIG: &str = "config";
/// Options a file cannot set: the file itself, and clap's own.
const NOT_IN_FILES: [&str; 3] = [CONFIG, "help", "version"];

/// A parsed configuration file: each key with the line it is on.
struct ConfigFile {
    path: PathBuf,
    entries: Vec<Entry>,
}

struct Entry {
    key: String,
    line: usize,
    value: toml::Value,
}

impl ConfigFile {
    fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--config {}: {e}", path.display()))?;
        let table: HashMap<toml::Spanned<String>, toml::Value> =
            toml::from_str(&text).map_err(|e| format!("--config {}: {e}", path.display()))?;
        let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
        let mut entries: Vec<Entry> = table
            .into_iter()
            .map(|(key, value)| Entry {
                line: line_of(key.span().start),
                key: key.into_inner(),
                value,
            })
            .collect();
        entries.sort_by_key(|entry| entry.line);
        Ok(Self {
            path: path.to_owned(),
            entries,
        })
    }

    fn place(&self, entry: &Entry) -> String {
        format!("{}:{}", self.path.display(), entry.line)
    }

    /// The file's values, as arguments, for the options `matches` got from neither the
    /// command line nor the environment.
    fn arguments(&self, options: &Command, matches: &ArgMatches) -> Result<Vec<FileValue>, String> {
        let mut values = Vec::new();
        for entry in &self.entries {
            let arg = options
                .get_arguments()
                .find(|arg| arg.get_long() == Some(entry.key.as_str()))
                .filter(|arg| !NOT_IN_FILES.contains(&arg.get_id().as_str()))
                .ok_or_else(|| {
                    format!(
                        "{}: unknown key `{}` (the keys are `hookd serve`'s option names, \
                         such as `listen` or `workers`)",
                        self.place(entry),
                        entry.key
                    )
                })?;
            let given = matches!(
                matches.value_source(arg.get_id().as_str()),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            if given {
                continue;
            }
            let place = self.place(entry);
            let arguments = as_arguments(arg, &entry.value)
                .map_err(|why| format!("{place}: `{}`: {why}", entry.key))?;
            values.push(FileValue {
                id: arg.get_id().to_string(),
                key: entry.key.clone(),
                place,
                arguments,
            });
        }
        Ok(values)
    }
}

/// One option's value from the file, as the arguments that give it.
struct FileValue {
    id: String,
    key: String,
    /// `FILE:LINE`.
    place: String,
    arguments: Vec<OsString>,
}

/// `value` as the arguments that would give `arg` that value on the command line.
fn as_arguments(arg: &Arg, value: &toml::Value) -> Result<Vec<OsString>, String> {
    let long = arg.get_long().expect("file keys are long options");
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![format!("--{long}").into()]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            _ => Err("expected true or false".to_owned()),
        };
    }
    let values = match value {
        toml::Value::Array(values) if matches!(arg.get_action(), ArgAction::Append) => {
            values.iter().collect()
        }
        toml::Value::Array(_) => return Err("takes one value, not a list".to_owned()),
        value => vec![value],
    };
    values
        .into_iter()
        .map(|value| {
            let text = match value {
                toml::Value::String(text) => text.clone(),
                toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                    value.to_string()
                }
                _ => return Err(format!("expected a string or a number, not {value}")),
            };
            Ok(format!("--{long}={text}").into())
        })
        .collect()
}

/// Parses the command line, with the `--config` file's values added where the command
/// line and the environment gave none; and where each option's value came from.
pub fn parse<C: clap::CommandFactory + clap::FromArgMatches>(
    mut argv: Vec<OsString>,
) -> Result<(C, Sources), String> {
    let command = C::command();
    let matches = command
        .clone()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| exit(e));
    let mut from_file = HashMap::new();
    let mut file_path = None;
    if let Some((options, option_matches)) = options_of(&command, &matches)
        && let Some(path) = option_matches.get_one::<PathBuf>(CONFIG)
    {
        let file = ConfigFile::read(path)?;
        for value in file.arguments(options, option_matches)? {
            // Checked one by one, so an error names the value's line.
            let with_value = argv.iter().chain(&value.arguments);
            if let Err(error) = command.clone().try_get_matches_from(with_value) {
                return Err(format!(
                    "{}: `{}`: {}",
                    value.place,
                    value.key,
                    first_line(&error)
                ));
            }
            // `false` or `[]` adds no argument: the option keeps its default, and says so.
            if !value.arguments.is_empty() {
                argv.extend(value.arguments);
                from_file.insert(value.id, value.place);
            }
        }
        file_path = Some(file.path);
    }
    let matches = command
        .clone()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| exit(e));
    let cli = C::from_arg_matches(&matches).unwrap_or_else(|e| exit(e));
    let sources = match options_of(&command, &matches) {
        Some((options, option_matches)) => {
            Sources::new(options, option_matches, &from_file, file_path)
        }
        None => Sources::default(),
    };
    Ok((cli, sources))
}

/// Exits as clap does on `error`, but with the secrets of any URL in an error masked: clap
/// quotes the value it refused (`--database`, `--outbox-source`).
fn exit(error: clap::Error) -> ! {
    if !error.use_stderr() {
        error.exit();
    }
    eprint!(
        "{}",
        hookd_core::redact::urls_in(&error.render().to_string())
    );
    std::process::exit(error.exit_code())
}

fn first_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

/// The subcommand (and its matches) that takes `serve`'s options, if one was invoked: `serve`
/// or `config show`.
fn options_of<'a>(
    command: &'a Command,
    matches: &'a ArgMatches,
) -> Option<(&'a Command, &'a ArgMatches)> {
    let (mut name, mut sub_matches) = matches.subcommand()?;
    let mut sub = command.find_subcommand(name)?;
    while let Some((inner, inner_matches)) = sub_matches.subcommand() {
        (name, sub_matches) = (inner, inner_matches);
        sub = sub.find_subcommand(name)?;
    }
    sub.get_arguments()
        .any(|arg| arg.get_id() == CONFIG)
        .then_some((sub, sub_matches))
}

/// Where each of `serve`'s options got its value.
#[derive(Default)]
pub struct Sources {
    file: Option<PathBuf>,
    options: Vec<OptionValue>,
}

struct OptionValue {
    key: String,
    /// The value as TOML, or `None` when the option has none.
    value: Option<String>,
    origin: String,
}

impl Sources {
    fn new(
        options: &Command,
        matches: &ArgMatches,
        from_file: &HashMap<String, String>,
        file: Option<PathBuf>,
    ) -> Self {
        let options = options
            .get_arguments()
            .filter(|arg| !NOT_IN_FILES.contains(&arg.get_id().as_str()))
            .filter_map(|arg| {
                let id = arg.get_id().as_str();
                let origin = match (from_file.get(id), matches.value_source(id)) {
                    (Some(place), _) => format!("file {place}"),
                    (None, Some(ValueSource::CommandLine)) => "command line".to_owned(),
                    (None, Some(ValueSource::EnvVariable)) => format!(
                        "environment {}",
                        arg.get_env()
                            .map(|e| e.to_string_lossy())
                            .unwrap_or_default()
                    ),
                    (None, Some(ValueSource::DefaultValue)) => "default".to_owned(),
                    (None, _) => "not set".to_owned(),
                };
                Some(OptionValue {
                    key: arg.get_long()?.to_owned(),
                    value: toml_value(arg, matches),
                    origin,
                })
            })
            .collect();
        Self { file, options }
    }

    /// The effective configuration as a TOML file (usable as `--config`), each line saying
    /// where its value came from; secrets masked.
    pub fn show(&self) -> String {
        let mut out = String::from("# hookd serve: the effective configuration");
        if let Some(file) = &self.file {
            let _ = write!(out, " (--config {})", file.display());
        }
        out.push_str("\n# precedence: command line, then environment, then file, then default\n");
        let width = self
            .options
            .iter()
            .map(|o| o.key.len() + o.value.as_ref().map_or(0, |v| v.len() + 3))
            .max()
            .unwrap_or(0);
        for option in &self.options {
            let setting = match &option.value {
                Some(value) => format!("{} = {value}", option.key),
                None => format!("# {}", option.key),
            };
            let _ = writeln!(out, "{setting:<width$}  # {}", option.origin);
        }
        out
    }
}

/// `arg`'s value in `matches` as TOML: booleans and integers bare, lists as arrays, secrets
/// masked: whole for an option whose environment value `--help` hides, but for a URL (an
/// option hinted `ValueHint::Url`, hidden from `--help` for its password) only the password
/// and secret parameters; passwords in other URLs too.
fn toml_value(arg: &Arg, matches: &ArgMatches) -> Option<String> {
    let id = arg.get_id().as_str();
    let raw: Vec<String> = matches
        .get_raw(id)?
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let secret = arg.is_hide_env_values_set() && arg.get_value_hint() != ValueHint::Url;
    let one = |text: &String| {
        if secret {
            return "\"********\"".to_owned();
        }
        if matches!(arg.get_action(), ArgAction::SetTrue) || text.parse::<i64>().is_ok() {
            return text.clone();
        }
        toml::Value::String(redacted(text)).to_string()
    };
    match arg.get_action() {
        ArgAction::Append => Some(format!(
            "[{}]",
            raw.iter().map(one).collect::<Vec<_>>().join(", ")
        )),
        _ => raw.first().map(one),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted as without_password;

    #[test]
    fn passwords_in_urls_are_masked_and_the_rest_kept() {
        assert_eq!(
            without_password("postgres://hookd:s3cret@db:5432/hookd"),
            "postgres://hookd:********@db:5432/hookd"
        );
        assert_eq!(
            without_password("postgres://hookd@db/x"),
            "postgres://hookd@db/x"
        );
        assert_eq!(without_password("0.0.0.0:8071"), "0.0.0.0:8071");
    }
}
