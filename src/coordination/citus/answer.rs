//! One Citus node's answer to the claims gathering (the claims in its own table, as
//! `json_agg` writes them), checked in plain Rust before anything of it is written: a node is a
//! peer, and a superuser there decides what it answers (0.5.0's audit shadowed
//! `pg_catalog.json_agg(snowflake.snowflake_claims)` on one worker with an aggregate of its own).
//!
//! What is checked is what is written: the values are parsed here, once, and handed to the
//! write as typed arrays. In 0.5.0 the checks read the JSON one way (a system identifier that is
//! a JSON string was no number, so it escaped "one cluster a node"), and the write read it
//! another (`json_populate_recordset` took the string as a bigint): one answer wrote 64 claims of
//! 64 clusters that do not exist, and one in another real node's name.

use crate::text::{parse_iso_us, printable};
use serde_json::{Map, Value};

/// The most claims one node's answer may hold: a node writes one a layout and worker id it
/// used, a handful in a node's life.
pub const MAX_CLAIMS: usize = 64;

/// How far ahead of this node's clock a claim's `since` and `last_seen` may be: the clocks of
/// two nodes differ, by milliseconds under NTP. A claim seen later than that was never seen
/// (0.5.0 took `last_seen = 'infinity'`: the row then replaced the real one, and nothing could
/// replace it again).
pub const AHEAD_ALLOWED_US: i64 = 60 * 1_000_000;

/// How far ahead a claim's `expires` is taken: an hour at most, whatever the node says (its
/// own claims expire three intervals after their last renewal, 30 s at the default).
pub const EXPIRES_CAPPED_US: i64 = 3600 * 1_000_000;

/// Past the widest worker id of any layout: `custom` allows 31 worker bits, which the claims
/// table's integer column holds. (0.5.0 took 22 bits here, and passed over the claims of a
/// custom layout's larger worker ids without a word.)
const WORKER_ID_LIMIT: i64 = 1 << 31;

/// One claim, as parsed: times in Unix microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub system_identifier: i64,
    pub worker_id: i32,
    pub layout: String,
    pub node_name: String,
    pub since_us: i64,
    pub last_seen_us: i64,
    pub expires_us: i64,
    /// Where the node's data directory runs ('' from a node of 0.5.0, which names none).
    pub place: String,
}

/// A node's answer that passed every check: the claims of one cluster (none: a node that has
/// claimed nothing yet).
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub claims: Vec<Claim>,
}

impl Answer {
    /// The one cluster the answer speaks for.
    pub fn system_identifier(&self) -> Option<i64> {
        self.claims.first().map(|c| c.system_identifier)
    }
}

/// Reads a node's answer at `now_us` (this node's clock, Unix microseconds). `Err` says, for
/// the log, why the whole answer is refused: one bad claim makes every claim of the answer
/// suspect.
pub fn read(bytes: &[u8], now_us: i64) -> Result<Answer, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("what is not UTF-8: {}", printable(bytes)))?;
    let parsed: Value = serde_json::from_str(text)
        .map_err(|e| format!("what is no JSON ({e}): {}", printable(text.as_bytes())))?;
    let Value::Array(items) = parsed else {
        return Err(format!("what is no list of claims: {}", printable(text.as_bytes())));
    };
    if items.len() > MAX_CLAIMS {
        return Err(format!("{} claims, more than the {MAX_CLAIMS} of one node", items.len()));
    }
    let claims = items
        .iter()
        .enumerate()
        .map(|(i, item)| claim(item, now_us).map_err(|why| format!("claim {}: {why}", i + 1)))
        .collect::<Result<Vec<Claim>, String>>()?;
    if let Some(first) = claims.first() {
        if let Some(other) = claims.iter().find(|c| {
            mutant!(claims_one_cluster, { true }, { false })
                && c.system_identifier != first.system_identifier
        }) {
            return Err(format!(
                "claims of two clusters ({} and {}), where a node has one",
                first.system_identifier, other.system_identifier
            ));
        }
    }
    Ok(Answer { claims })
}

/// One claim of the answer: every field present and of its JSON type, within its bounds.
fn claim(item: &Value, now_us: i64) -> Result<Claim, String> {
    let Value::Object(fields) = item else {
        return Err(format!("{} is no object", kind(item)));
    };
    let system_identifier = integer(fields, "system_identifier", i64::MIN, i64::MAX)?;
    let worker_id = integer(fields, "worker_id", 0, WORKER_ID_LIMIT - 1)? as i32;
    let layout = string(fields, "layout")?;
    let node_name = string(fields, "node_name")?;
    let since_us = time(fields, "since")?;
    let last_seen_us = time(fields, "last_seen")?;
    let expires_us = time(fields, "expires")?;
    let place = match fields.get("place") {
        None => String::new(),
        Some(_) => string(fields, "place")?,
    };
    if mutant!(claims_future, { last_seen_us > now_us + AHEAD_ALLOWED_US }, { false }) {
        return Err(format!(
            "last_seen {} s ahead of this node's clock (at most {} s)",
            (last_seen_us - now_us) / 1_000_000,
            AHEAD_ALLOWED_US / 1_000_000
        ));
    }
    if !(since_us <= last_seen_us && last_seen_us <= expires_us) {
        return Err("since, last_seen and expires are not in order".to_string());
    }
    Ok(Claim {
        system_identifier,
        worker_id,
        layout,
        node_name,
        since_us,
        last_seen_us,
        expires_us: expires_us.min(now_us + EXPIRES_CAPPED_US),
        place,
    })
}

/// A JSON number that is an integer within `low..=high`: not a string of digits, not 1.5 or
/// 1e3.
fn integer(fields: &Map<String, Value>, name: &str, low: i64, high: i64) -> Result<i64, String> {
    let value = field(fields, name)?;
    let number = mutant!(claims_types, { value.as_i64() }, {
        value.as_i64().or_else(|| value.as_str().and_then(|s| s.parse().ok()))
    });
    match number {
        Some(n) if mutant!(claims_types, { value.is_i64() || value.is_u64() }, { true }) => {
            if (low..=high).contains(&n) {
                Ok(n)
            } else {
                Err(format!("{name} {n} is outside {low} to {high}"))
            }
        }
        _ => Err(format!("{name} is {}, not an integer", kind(value))),
    }
}

/// A JSON string, at most 200 characters kept, control characters replaced.
fn string(fields: &Map<String, Value>, name: &str) -> Result<String, String> {
    match field(fields, name)? {
        Value::String(s) => Ok(printable(s.as_bytes())),
        other => Err(format!("{name} is {}, not a string", kind(other))),
    }
}

/// A JSON string that is a finite time as PostgreSQL's JSON writes one.
fn time(fields: &Map<String, Value>, name: &str) -> Result<i64, String> {
    match field(fields, name)? {
        Value::String(s) => parse_iso_us(s)
            .ok_or_else(|| format!("{name} {:?} is not a time", printable(s.as_bytes()))),
        other => Err(format!("{name} is {}, not a time", kind(other))),
    }
}

fn field<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    fields.get(name).ok_or_else(|| format!("no {name}"))
}

/// What a JSON value is, for a message (its text only where it is short).
fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {}", printable(n.to_string().as_bytes())),
        Value::String(s) => format!("the string {:?}", printable(s.as_bytes())),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000_000;

    fn iso(us: i64) -> String {
        crate::text::iso_unix(us / 1000)
    }

    fn one(sysid: Value, worker: Value, since: Value, seen: Value, expires: Value) -> String {
        serde_json::json!([{
            "system_identifier": sysid, "worker_id": worker, "layout": "twitter",
            "node_name": "n1", "since": since, "last_seen": seen, "expires": expires
        }])
        .to_string()
    }

    fn good() -> String {
        one(
            7.into(),
            1.into(),
            iso(NOW - 60_000_000).into(),
            iso(NOW).into(),
            iso(NOW + 30_000_000).into(),
        )
    }

    #[test]
    fn a_nodes_own_claims_are_read_with_their_values() {
        let answer = read(good().as_bytes(), NOW).unwrap();
        assert_eq!(answer.system_identifier(), Some(7));
        assert_eq!(answer.claims[0].worker_id, 1);
        assert_eq!(answer.claims[0].last_seen_us, NOW);
        assert_eq!(read(b"[]", NOW).unwrap().system_identifier(), None);
    }

    #[test]
    fn values_of_another_json_type_refuse_the_whole_answer() {
        let t = |us: i64| Value::from(iso(us));
        for (bad, why) in [
            (one("7".into(), 1.into(), t(NOW), t(NOW), t(NOW)), "system_identifier is the string"),
            (one(7.5.into(), 1.into(), t(NOW), t(NOW), t(NOW)), "not an integer"),
            (one(7.into(), "1".into(), t(NOW), t(NOW), t(NOW)), "worker_id is the string"),
            (one(7.into(), (-1).into(), t(NOW), t(NOW), t(NOW)), "worker_id -1 is outside"),
            (one(7.into(), (1u64 << 31).into(), t(NOW), t(NOW), t(NOW)), "outside 0 to 2147483647"),
            (one(7.into(), 1.into(), 5.into(), t(NOW), t(NOW)), "since is the number 5"),
            (one(7.into(), 1.into(), "infinity".into(), t(NOW), t(NOW)), "is not a time"),
            (one(7.into(), 1.into(), t(NOW), "infinity".into(), t(NOW)), "is not a time"),
            (one(7.into(), 1.into(), t(NOW), t(NOW), Value::Null), "expires is null"),
        ] {
            let err = read(bad.as_bytes(), NOW).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let err = read(br#"[{"system_identifier": 7}]"#, NOW).unwrap_err();
        assert!(err.contains("no worker_id"), "{err}");
        for bad in [&b"{}"[..], b"[1]", b"nope", b"\xff"] {
            assert!(read(bad, NOW).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn times_ahead_of_the_clock_or_out_of_order_refuse_the_answer() {
        let t = |us: i64| Value::from(iso(us));
        let ahead = one(7.into(), 1.into(), t(NOW), t(NOW + 61_000_000), t(NOW + 90_000_000));
        assert!(read(ahead.as_bytes(), NOW).unwrap_err().contains("ahead of this node's clock"));
        let within = one(7.into(), 1.into(), t(NOW), t(NOW + 59_000_000), t(NOW + 90_000_000));
        assert!(read(within.as_bytes(), NOW).is_ok());
        let since_late = one(7.into(), 1.into(), t(NOW + 1000), t(NOW), t(NOW + 1000));
        assert!(read(since_late.as_bytes(), NOW).unwrap_err().contains("not in order"));
        let far = one(7.into(), 1.into(), t(NOW), t(NOW), t(NOW + 86_400_000_000));
        let capped = read(far.as_bytes(), NOW).unwrap();
        assert_eq!(capped.claims[0].expires_us, NOW + EXPIRES_CAPPED_US);
    }

    #[test]
    fn an_answer_speaks_for_one_cluster_and_holds_a_bounded_number_of_claims() {
        let claim = |sysid: i64| {
            serde_json::json!({
                "system_identifier": sysid, "worker_id": 1, "layout": "twitter",
                "node_name": "n", "since": iso(NOW), "last_seen": iso(NOW),
                "expires": iso(NOW + 1)
            })
        };
        let two = Value::Array(vec![claim(7), claim(8)]).to_string();
        assert!(read(two.as_bytes(), NOW).unwrap_err().contains("claims of two clusters"));
        let many = Value::Array((0..65).map(|_| claim(7)).collect()).to_string();
        assert!(read(many.as_bytes(), NOW).unwrap_err().contains("65 claims, more than the 64"));
        let most = Value::Array((0..64).map(|_| claim(7)).collect()).to_string();
        assert_eq!(read(most.as_bytes(), NOW).unwrap().claims.len(), 64);
    }

    #[test]
    fn names_are_cut_and_made_printable() {
        let mut v: Value = serde_json::from_str(&good()).unwrap();
        v[0]["node_name"] = Value::from(format!("a\nb{}", "x".repeat(300)));
        let answer = read(v.to_string().as_bytes(), NOW).unwrap();
        let name = &answer.claims[0].node_name;
        assert!(name.starts_with("a?b") && name.chars().count() == 200, "{name}");
    }
}
