//! `text` arguments read as bytes, so that no input can raise XX000.
//!
//! pgrx turns a `text` argument into `&str` by checking that it is UTF-8, and panics (SQLSTATE
//! XX000, "datums converted to &str should be valid UTF-8") when it is not: in a database whose
//! encoding is not UTF-8 (LATIN1, SQL_ASCII, ...) that is any value with a non-ASCII character.
//! Every text this extension reads (a layout's name, a base62 id) is ASCII when it is valid, so
//! such a value is only bad input, which the function reports with its own SQLSTATE like any
//! other: `TextArg` takes the bytes and hands the function a `&str` without checking them first.

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::nullable::Nullable;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use std::borrow::Cow;

/// A `text` argument, as the bytes the database holds.
pub struct TextArg<'a>(&'a [u8]);

impl<'a> TextArg<'a> {
    /// The text as it is in a UTF-8 database, else with every non-ASCII byte replaced by `?`,
    /// which no function here accepts. In another encoding, bytes that happen to be valid UTF-8
    /// are not the characters they stand for there: counted or quoted as UTF-8, an error message
    /// would miscount them or cut one in two.
    pub fn as_str(&self) -> Cow<'a, str> {
        // SAFETY: a plain read of the database's encoding, set before any function runs.
        let utf8 =
            unsafe { pgrx::pg_sys::GetDatabaseEncoding() } == pgrx::pg_sys::pg_enc::PG_UTF8 as i32;
        self.decoded(utf8)
    }

    fn decoded(&self, utf8_database: bool) -> Cow<'a, str> {
        match mutant!(text_arg, { std::str::from_utf8(self.0) }, {
            Ok(std::str::from_utf8(self.0).expect("datums converted to &str should be valid UTF-8"))
        }) {
            Ok(text) if utf8_database || text.is_ascii() => Cow::Borrowed(text),
            _ => Cow::Owned(
                self.0.iter().map(|&b| if b.is_ascii() { b as char } else { '?' }).collect(),
            ),
        }
    }
}

// SAFETY: declared as `text` (below), whose datum is a varlena; pgrx reads a varlena's bytes
// as `&[u8]` whatever its type, without checking an encoding.
unsafe impl<'fcx> ArgAbi<'fcx> for TextArg<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: the caller's contract, passed on.
        TextArg(unsafe { <&'fcx [u8] as ArgAbi<'fcx>>::unbox_arg_unchecked(arg) })
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        // SAFETY: the caller's contract, passed on.
        let bytes: Option<&'fcx [u8]> =
            unsafe { <&'fcx [u8] as ArgAbi<'fcx>>::unbox_nullable_arg(arg) }.into();
        bytes.map(TextArg).into()
    }
}

// SAFETY: the SQL type is `text`, whose values are varlenas (see ArgAbi above).
unsafe impl SqlTranslatable for TextArg<'_> {
    const TYPE_IDENT: &'static str = "pg_snowflake::postgres::text_arg::TextArg";
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("TEXT"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        Ok(ReturnsRef::One(SqlMappingRef::literal("TEXT")));
}

#[cfg(test)]
mod tests {
    use super::TextArg;

    #[test]
    fn utf8_is_kept_in_utf8_databases_and_other_bytes_become_question_marks() {
        for utf8 in [true, false] {
            assert_eq!(TextArg(b"twitter").decoded(utf8), "twitter");
        }
        assert_eq!(TextArg("caf\u{e9}".as_bytes()).decoded(true), "caf\u{e9}");
        // The same two bytes in a LATIN1 database are two characters of their own.
        assert_eq!(TextArg("caf\u{e9}".as_bytes()).decoded(false), "caf??");
        // LATIN1's e-acute alone is not UTF-8.
        assert_eq!(TextArg(b"caf\xe9").decoded(false), "caf?");
    }
}
