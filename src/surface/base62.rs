//! Short text ids that sort like the numbers: base62 over `0-9A-Za-z`, in that (ASCII) order,
//! always 11 characters, so that comparing two texts byte by byte (`COLLATE "C"`) compares the
//! ids. 11 digits are the fewest that hold every non-negative bigint: 62^10 < 2^63 - 1 < 62^11.
//! The encoding is pure Rust (its unit tests need no PostgreSQL); the two SQL functions below
//! wrap it.

use crate::decode;
use crate::errors::{self, Code};
use crate::text_arg::TextArg;
use pgrx::prelude::*;

pub const WIDTH: usize = 11;
const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Why a text is not a base62 id.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not 11 characters (counted as characters, not bytes).
    Length(usize),
    /// The first character outside `0-9A-Za-z`, and its position (1-based).
    Character(char, usize),
    /// 11 valid digits whose value is above the largest bigint.
    OutOfRange,
}

/// The 11 digits of a non-negative id.
pub fn encode(id: u64) -> [u8; WIDTH] {
    let mut out = [b'0'; WIDTH];
    let mut rest = id;
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(rest % 62) as usize];
        rest /= 62;
    }
    debug_assert_eq!(rest, 0, "11 digits hold every u64 below 62^11");
    out
}

/// The id of 11 base62 digits.
pub fn decode(text: &str) -> Result<i64, ParseError> {
    let chars = text.chars().count();
    if chars != WIDTH {
        return Err(ParseError::Length(chars));
    }
    let mut value: u64 = 0;
    for (i, c) in text.chars().enumerate() {
        let digit = match c {
            '0'..='9' => c as u64 - '0' as u64,
            'A'..='Z' => c as u64 - 'A' as u64 + 10,
            'a'..='z' => c as u64 - 'a' as u64 + 36,
            _ => return Err(ParseError::Character(c, i + 1)),
        };
        // 62^11 exceeds u64 too: checked arithmetic catches what does not fit either type.
        value = value
            .checked_mul(62)
            .and_then(|v| v.checked_add(digit))
            .ok_or(ParseError::OutOfRange)?;
    }
    i64::try_from(value).map_err(|_| ParseError::OutOfRange)
}

/// The id as 11 base62 characters (`0-9A-Za-z`) whose text order under `COLLATE "C"` is the
/// numeric order: short, URL-safe and still sortable by time.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_to_base62(id: i64) -> String {
    let Ok(unsigned) = u64::try_from(id) else { decode::negative_id(id) };
    String::from_utf8(encode(unsigned).to_vec()).expect("base62 digits are ASCII")
}

/// The id of 11 base62 characters, as `snowflake_to_base62` writes them.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_from_base62(base62: TextArg) -> i64 {
    let base62 = &*base62.as_str();
    let syntax = || format!("invalid input syntax for a base62 snowflake id: \"{base62}\"");
    let (code, message, detail) = match decode(base62) {
        Ok(id) => return id,
        Err(ParseError::Length(n)) => (
            Code::ERRCODE_INVALID_TEXT_REPRESENTATION,
            syntax(),
            format!("It has {n} characters; a base62 snowflake id has exactly {WIDTH}."),
        ),
        Err(ParseError::Character(c, at)) => (
            Code::ERRCODE_INVALID_TEXT_REPRESENTATION,
            syntax(),
            format!("Character \"{c}\" at position {at} is not one of 0-9, A-Z and a-z."),
        ),
        // 11 base62 digits above the largest bigint: 22003, as PostgreSQL's own bigint input
        // reports a value out of range (not 22P02).
        Err(ParseError::OutOfRange) => (
            Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("base62 snowflake id \"{base62}\" is out of range for type bigint"),
            format!(
                "The largest bigint is {} in base62.",
                std::str::from_utf8(&encode(i64::MAX as u64)).expect("base62 digits are ASCII")
            ),
        ),
    };
    errors::report(code, message, "Pass the 11 characters snowflake_to_base62() wrote.")
        .detail(detail)
        .raise()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(id: u64) -> String {
        String::from_utf8(encode(id).to_vec()).unwrap()
    }

    #[test]
    fn the_edges() {
        assert_eq!(text(0), "00000000000");
        assert_eq!(text(61), "0000000000z");
        assert_eq!(text(62), "00000000010");
        assert_eq!(text(i64::MAX as u64), "AzL8n0Y58m7");
        assert_eq!(decode("00000000000"), Ok(0));
        assert_eq!(decode("AzL8n0Y58m7"), Ok(i64::MAX));
        assert_eq!(decode("AzL8n0Y58m8"), Err(ParseError::OutOfRange));
        assert_eq!(decode("zzzzzzzzzzz"), Err(ParseError::OutOfRange));
    }

    #[test]
    fn bad_texts_say_what_is_wrong() {
        assert_eq!(decode(""), Err(ParseError::Length(0)));
        assert_eq!(decode("0000000000"), Err(ParseError::Length(10)));
        assert_eq!(decode("000000000000"), Err(ParseError::Length(12)));
        assert_eq!(decode("00000-00000"), Err(ParseError::Character('-', 6)));
        assert_eq!(decode("0000000000 "), Err(ParseError::Character(' ', 11)));
        // Eleven characters, not eleven bytes.
        assert_eq!(decode("0000000000é"), Err(ParseError::Character('é', 11)));
    }

    #[test]
    fn round_trip_and_order_on_random_ids() {
        // Every bit random (xorshift64, seed printed on failure).
        let seed: u64 = 0x0b5e_62ba_5e62_0001;
        let mut x = seed;
        let mut ids: Vec<u64> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x >> 1
            })
            .collect();
        ids.extend([0, 1, 61, 62, i64::MAX as u64, i64::MAX as u64 - 1]);
        for &id in &ids {
            assert_eq!(decode(&text(id)), Ok(id as i64), "seed {seed:#x}, id {id}");
        }
        let mut by_number = ids.clone();
        by_number.sort_unstable();
        let mut by_text = ids.clone();
        by_text.sort_unstable_by_key(|&id| encode(id));
        assert_eq!(by_number, by_text, "seed {seed:#x}");
    }
}
