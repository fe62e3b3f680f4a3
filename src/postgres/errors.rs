//! How pg_snowflake reports, not what: each module raises its own errors at the check that finds
//! them (as PostgreSQL and pgvector do), through the builder here, which keeps the house style:
//! a real SQLSTATE (never XX000, which is what pgrx's `error!()` reports), a lower-case message
//! without a final period, for an error or a warning a hint (a full sentence that says what to
//! do), and a detail where it helps. A test (`tests::the_house_style`) reads the crate's sources
//! and checks every literal given here.
//!
//! It uses no other module of the crate, so that every module, `gucs` and `registry` included,
//! can report through it without an import cycle.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::PgLogLevel;
pub use pgrx::PgSqlErrorCode as Code;

/// What `ErrorReport` calls the function: shown as the LOCATION of a verbose report, beside the
/// file and line of the check that raised it.
const FUNCTION: &str = "pg_snowflake";

/// A problem to report: an error (`raise`, `fatal`, `panic`) or a warning (`warn`).
#[must_use = "a report says nothing until it is raised or logged"]
pub struct Report(ErrorReport);

/// A problem with its SQLSTATE, message and hint. The location the server log shows is the
/// caller's.
#[track_caller]
pub fn report(code: Code, message: impl Into<String>, hint: impl Into<String>) -> Report {
    Report(ErrorReport::new(code, message.into(), FUNCTION).set_hint(hint.into()))
}

impl Report {
    /// Full sentences on what happened, for the user who wonders why.
    pub fn detail(self, detail: impl Into<String>) -> Report {
        Report(self.0.set_detail(detail))
    }

    /// An ERROR: the statement (and its transaction) ends here.
    #[cold]
    pub fn raise(self) -> ! {
        self.0.report(PgLogLevel::ERROR);
        unreachable!("ERROR does not return")
    }

    /// A FATAL: the process ends (in the postmaster at start, the server does not start).
    #[cold]
    pub fn fatal(self) -> ! {
        self.0.report(PgLogLevel::FATAL);
        unreachable!("FATAL does not return")
    }

    /// A PANIC: every process of the server ends, and recovery starts from the last checkpoint.
    #[cold]
    pub fn panic(self) -> ! {
        self.0.report(PgLogLevel::PANIC);
        unreachable!("PANIC does not return")
    }

    /// A WARNING: the client (if any) and the server log hear of it, and the work goes on.
    #[cold]
    pub fn warn(self) {
        self.0.report(PgLogLevel::WARNING);
    }
}

/// What was done or found, when it is not a problem: no hint, SQLSTATE 00000.
#[must_use = "a note says nothing until it is logged"]
pub struct Note(ErrorReport);

/// A note of `message`; the location the server log shows is the caller's.
#[track_caller]
pub fn note(message: impl Into<String>) -> Note {
    Note(ErrorReport::new(Code::ERRCODE_SUCCESSFUL_COMPLETION, message.into(), FUNCTION))
}

impl Note {
    pub fn detail(self, detail: impl Into<String>) -> Note {
        Note(self.0.set_detail(detail))
    }

    /// A NOTICE, to the client.
    pub fn notice(self) {
        self.0.report(PgLogLevel::NOTICE);
    }

    /// A LOG line, to the server log only.
    pub fn log(self) {
        self.0.report(PgLogLevel::LOG);
    }
}

/// A plain LOG line.
#[track_caller]
pub fn log(message: impl Into<String>) {
    note(message).log();
}

#[cfg(test)]
mod tests {
    //! The house style, read from the sources: every message literal given to `report` or
    //! `note` starts with a lower-case letter (or a lower-case identifier such as
    //! `snowflake.worker_id`, or a `{}` placeholder) and has no final period; every hint literal,
    //! and every literal of a function whose name says it makes a hint, starts with a capital
    //! and ends with a period; and nothing outside this file reports by hand.

    use std::path::{Path, PathBuf};

    fn sources() -> Vec<(PathBuf, String)> {
        let mut files = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
        let mut out = Vec::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                // Tests may say anything.
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                out.push((path, code.to_string()));
            }
        }
        out
    }

    /// The top-level arguments of the call whose `(` ends `text`'s prefix at `open`.
    fn arguments(text: &str, open: usize) -> Vec<String> {
        let mut args = vec![String::new()];
        let mut depth = 0;
        let mut chars = text[open + 1..].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    let arg = args.last_mut().unwrap();
                    arg.push(c);
                    while let Some(s) = chars.next() {
                        arg.push(s);
                        if s == '\\' {
                            arg.extend(chars.next());
                        } else if s == '"' {
                            break;
                        }
                    }
                    continue;
                }
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(String::new());
                    continue;
                }
                _ => {}
            }
            args.last_mut().unwrap().push(c);
        }
        args.into_iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect()
    }

    /// The text of every string literal in `code`, continuation lines joined as Rust joins them.
    fn literals(code: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut chars = code.chars().peekable();
        let mut previous = ' ';
        while let Some(c) = chars.next() {
            // A char literal such as '"' is not the start of a string.
            if c == '"' && previous != '\'' {
                let mut text = String::new();
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => match chars.next() {
                            Some('\n') => {
                                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                                    chars.next();
                                }
                            }
                            Some(e) => {
                                text.push('\\');
                                text.push(e);
                            }
                            None => {}
                        },
                        '"' => break,
                        s => text.push(s),
                    }
                }
                out.push(text);
                previous = '"';
                continue;
            }
            previous = c;
        }
        out
    }

    /// The literal an argument is made of: `"..."`, `"...".into()`, `format!("...", ...)`.
    fn literal_of(arg: &str) -> Option<String> {
        let arg = arg.trim();
        let starts = arg.starts_with('"') || arg.starts_with("format!(");
        starts.then(|| literals(arg).into_iter().next()).flatten()
    }

    fn message_problem(message: &str) -> Option<&'static str> {
        let first = message.chars().next()?;
        if !(first.is_ascii_lowercase() || first == '{') {
            return Some("does not start with a lower-case letter");
        }
        message.ends_with('.').then_some("ends with a period")
    }

    fn hint_problem(hint: &str) -> Option<&'static str> {
        let first = hint.chars().next()?;
        if !(first.is_ascii_uppercase() || first == '{') {
            return Some("does not start with a capital");
        }
        (!hint.ends_with('.')).then_some("does not end with a period")
    }

    #[test]
    fn the_house_style() {
        let mut found = Vec::new();
        let (mut messages, mut hints) = (0, 0);
        for (path, code) in sources() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            for (at, call) in code
                .match_indices("errors::report(")
                .chain(code.match_indices("errors::note("))
                .chain(code.match_indices("errors::log("))
            {
                let args = arguments(&code, at + call.len() - 1);
                let (message, hint) = match call {
                    "errors::report(" => (args.get(1), args.get(2)),
                    _ => (args.first(), None),
                };
                if let Some(m) = message.and_then(|m| literal_of(m)) {
                    messages += 1;
                    if let Some(why) = message_problem(&m) {
                        found.push(format!("{name}: message \"{m}\" {why}"));
                    }
                }
                if let Some(h) = hint.and_then(|h| literal_of(h)) {
                    hints += 1;
                    if let Some(why) = hint_problem(&h) {
                        found.push(format!("{name}: hint \"{h}\" {why}"));
                    }
                }
            }
            // Hints chosen elsewhere: every literal of a function that makes one.
            for (at, _) in code.match_indices("fn ") {
                let rest = &code[at + 3..];
                let fn_name: String =
                    rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !fn_name.contains("hint") {
                    continue;
                }
                let body = &rest[rest.find('{').unwrap()..];
                let end = body.find("\n}\n").or(body.find("\n    }\n")).unwrap();
                for h in literals(&body[..end]) {
                    hints += 1;
                    if let Some(why) = hint_problem(&h) {
                        found.push(format!("{name}: hint \"{h}\" in {fn_name} {why}"));
                    }
                }
            }
            if name != "errors.rs" {
                for by_hand in [
                    "pgrx::warning!",
                    "pgrx::error!",
                    "pgrx::log!",
                    "pgrx::notice!",
                    "ereport!",
                    "ErrorReport::new",
                    ".report(PgLogLevel",
                ] {
                    if code.contains(by_hand) {
                        found.push(format!("{name} reports by hand: {by_hand}"));
                    }
                }
            }
        }
        assert!(found.is_empty(), "{}", found.join("\n"));
        assert!(
            messages > 50 && hints > 50,
            "the calls were not found ({messages} messages, {hints} hints)"
        );
    }

    #[test]
    fn the_checks_see_what_they_should() {
        let code = r#"errors::report(Code::X, format!("a {b}, c", d = (1, 2)), "Do it.")"#;
        let args = arguments(code, "errors::report".len());
        assert_eq!(args.len(), 3, "{args:?}");
        assert_eq!(literal_of(&args[1]).as_deref(), Some("a {b}, c"));
        assert_eq!(literal_of(&args[2]).as_deref(), Some("Do it."));
        assert_eq!(literals("\"one \\\n     two\" '\"' \"three\""), ["one two", "three"]);
        assert!(message_problem("snowflake.worker_id is not set").is_none());
        assert!(message_problem("Snowflake ids").is_some());
        assert!(message_problem("ids are refused.").is_some());
        assert!(hint_problem("Restart the server.").is_none());
        assert!(hint_problem("restart the server.").is_some());
        assert!(hint_problem("Restart the server").is_some());
    }
}
