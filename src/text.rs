//! Text for people, in plain Rust (messages are also made where no PostgreSQL function may be
//! called: in the postmaster at start, and in WAL redo): the ISO 8601 form of a Unix
//! millisecond in messages, settings and `snowflake_stats()`, and messages as sentences.

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
    fn sentences_keep_the_case_of_a_setting_they_start_with() {
        assert_eq!(
            sentence("snowflake.time_bits must be at least 1"),
            "snowflake.time_bits must be at least 1."
        );
        assert_eq!(sentence("the widths add up to 64 bits"), "The widths add up to 64 bits.");
        assert_eq!(sentence(""), ".");
    }
}
