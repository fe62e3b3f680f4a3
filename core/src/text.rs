//! Text for people, in plain Rust (messages are also made where no PostgreSQL function may be
//! called: in the postmaster at start, and in WAL redo): the ISO 8601 form of a Unix
//! millisecond in messages, settings and `snowflake_stats()`, messages as sentences, what a
//! peer sent made fit for a log line, and the ISO 8601 time a peer's JSON holds.

/// ISO 8601 in UTC with milliseconds.
pub fn iso_unix(unix_ms: i64) -> String {
    let (days, ms_of_day) = (unix_ms.div_euclid(86_400_000), unix_ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, ms) =
        (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{ms:03}Z")
}

/// A message (lower case, no final period) as a full sentence for a DETAIL: a capital first
/// letter and a final period, except where the message starts with a setting's or another
/// identifier's name, which keeps its case (`snowflake.time_bits must be at least 1.`,
/// `pg_snowflake is not installed ...`), as PostgreSQL's own details do.
pub fn sentence(message: &str) -> String {
    let first_word = message.split(' ').next().unwrap_or_default();
    let mut chars = message.chars();
    let first = match chars.next() {
        Some(c) if !first_word.contains(['.', '_']) => c.to_uppercase().collect(),
        Some(c) => c.to_string(),
        None => String::new(),
    };
    let rest = chars.as_str();
    // A message quoted from elsewhere (libpq's) may end in its own punctuation.
    let end = if rest.ends_with(['.', '?', '!']) { "" } else { "." };
    format!("{first}{rest}{end}")
}

/// At most 200 characters of what a peer sent (another server's error, a Citus node's answer),
/// for a message or a log line: control characters (a newline would start a line of the peer's
/// own in the log), the format characters that reorder or hide text, and invalid UTF-8 replaced.
pub fn printable(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.chars().take(200);
    mutant!(printable, { text.map(|c| if unseen(c) { '?' } else { c }).collect() }, {
        text.collect()
    })
}

/// A character that does not show as itself where a log is read: control characters, and the
/// format characters that reorder or hide text (U+202E turns `ok 7` into `7 ko` on a terminal,
/// U+2028 starts a line in some viewers, U+200B is invisible). 0.6.0's review found a Citus
/// node's answer could carry them into the log.
fn unseen(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0001}' | '\u{E0020}'..='\u{E007F}')
}

/// What a peer said (libpq's message, the registry's error and detail) on one line: each run of
/// line breaks and tabs (libpq's "...failed: Connection refused\n\tIs the server running...")
/// becomes one space, any other control or hiding format character a `?`. Not cut: the caller
/// bounds it.
pub fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    let mut in_break = false;
    for c in text.trim_end().chars() {
        if matches!(c, '\n' | '\r' | '\t') {
            if !in_break {
                line.push(' ');
            }
            in_break = true;
        } else {
            line.push(if unseen(c) { '?' } else { c });
            in_break = false;
        }
    }
    line
}

/// The Unix microsecond of a time as PostgreSQL's JSON writes a `timestamptz`
/// (`2026-12-06T06:18:08.123456+00:00`: a four-digit year, seconds, up to six digits of
/// fraction, an offset of hours, minutes and seconds, or `Z`); `None` for any other text,
/// `infinity` and `-infinity` among them. Strict on purpose: it reads what another node claims.
pub fn parse_iso_us(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = b.get(from..from + n)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (y, mo, d) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (h, mi, s) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let mut i = 19;
    let mut micros = 0;
    if at(i, b'.') {
        let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=6).contains(&n) {
            return None;
        }
        micros = digits(i + 1, n)? * 10i64.pow(6 - n as u32);
        i += 1 + n;
    }
    let offset_s = match b.get(i) {
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let rest = &text[i + 1..];
            let fields: Vec<&str> = rest.split(':').collect();
            if fields.is_empty()
                || fields.len() > 3
                || fields.iter().any(|f| f.len() != 2 || !f.bytes().all(|c| c.is_ascii_digit()))
            {
                return None;
            }
            let hms: Vec<i64> = fields.iter().map(|f| f.parse().unwrap_or(0)).collect();
            let secs = hms[0] * 3600 + hms.get(1).unwrap_or(&0) * 60 + hms.get(2).unwrap_or(&0);
            if secs > 16 * 3600 {
                return None;
            }
            if sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        _ => return None,
    };
    let days_in_month = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&d) || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let seconds = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + s;
    Some((seconds - offset_s) * 1_000_000 + micros)
}

/// A proleptic Gregorian date to days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso_unix(1_288_834_974_657), "2010-11-04T01:42:54.657Z");
        assert_eq!(iso_unix(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_unix(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_unix(1_577_836_800_000), "2020-01-01T00:00:00.000Z");
        assert_eq!(iso_unix(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso_unix(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn printable_replaces_control_characters_and_cuts_at_200() {
        assert_eq!(printable(b"a\nb\rc\x1b[31m"), "a?b?c?[31m");
        assert_eq!(printable(&[0xff, b'x']), "\u{fffd}x");
        assert_eq!(printable("ok\u{202e}7\u{2028}x\u{200b}".as_bytes()), "ok?7?x?");
        assert_eq!(printable("\u{e9}".repeat(300).as_bytes()).chars().count(), 200);
    }

    #[test]
    fn one_line_joins_lines_and_replaces_control_characters() {
        assert_eq!(
            one_line("failed: Connection refused\n\tIs the server running?\n"),
            "failed: Connection refused Is the server running?"
        );
        assert_eq!(one_line("a\u{1b}[2Jb\u{7f}"), "a?[2Jb?");
        assert_eq!(one_line("a\u{2066}b\u{feff}"), "a?b?");
    }

    #[test]
    fn iso_times_as_postgresql_writes_them_in_json() {
        let base = 1_288_834_974_657_000; // 2010-11-04T01:42:54.657Z
        assert_eq!(parse_iso_us("2010-11-04T01:42:54.657+00:00"), Some(base));
        assert_eq!(parse_iso_us("2010-11-04T01:42:54.657Z"), Some(base));
        assert_eq!(parse_iso_us("2010-11-04T02:42:54.657+01:00"), Some(base));
        assert_eq!(parse_iso_us("2010-11-03T20:12:54.657-05:30"), Some(base));
        assert_eq!(parse_iso_us("2010-11-04T01:42:54.657001+00"), Some(base + 1));
        assert_eq!(parse_iso_us("1970-01-01T00:00:00+00:00"), Some(0));
        assert_eq!(parse_iso_us("2000-02-29T00:00:00+00:00"), Some(951_782_400_000_000));
        assert_eq!(parse_iso_us("1969-12-31T23:59:59.999999+00:00"), Some(-1));
        for ms in [0i64, 951_782_400_000, 1_577_836_800_000, -1, 253_402_300_799_999] {
            assert_eq!(parse_iso_us(&iso_unix(ms)), Some(ms * 1000), "{}", iso_unix(ms));
        }
        for bad in [
            "infinity",
            "-infinity",
            "",
            "2010-11-04 01:42:54+00",
            "2010-11-04T01:42:54",
            "2010-11-04T01:42:54.+00",
            "2010-11-04T01:42:54.1234567+00",
            "2010-02-30T01:42:54+00",
            "2011-02-29T00:00:00+00",
            "2010-13-01T00:00:00+00",
            "2010-11-04T24:00:00+00",
            "2010-11-04T01:42:54+00:00:00:00",
            "2010-11-04T01:42:54+0",
            "2010-11-04T01:42:54+17",
            "12010-11-04T01:42:54+00",
            "2010-11-04T01:42:54 BC",
            "2010-11-04T01:42:54Z ",
            "2010-11-04T01:42:54+00\n",
            "+010-11-04T01:42:54+00",
        ] {
            assert_eq!(parse_iso_us(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sentences_keep_the_case_of_a_setting_they_start_with() {
        assert_eq!(
            sentence("snowflake.time_bits must be at least 1"),
            "snowflake.time_bits must be at least 1."
        );
        assert_eq!(sentence("the widths add up to 64 bits"), "The widths add up to 64 bits.");
        assert_eq!(sentence(""), ".");
    }
}
