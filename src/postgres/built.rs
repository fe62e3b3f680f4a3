//! Text that PostgreSQL builds (`format()`, `regclass` output) read byte for byte: names in any
//! database encoding stay what they are, where a Rust `String` from SPI would have to be UTF-8.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use std::ffi::CString;

/// The text that SQL expression `builder` makes, as the bytes of a C string.
pub fn built(builder: &str, args: &[DatumWithOid]) -> CString {
    let bytes =
        Spi::get_one_with_args::<Vec<u8>>(&format!("SELECT pg_catalog.textsend({builder})"), args)
            .ok()
            .flatten()
            .unwrap_or_default();
    CString::new(bytes).expect("PostgreSQL text holds no NUL byte")
}

/// Text for a message: a name or a type, as PostgreSQL prints it.
pub fn text_of(expression: &str, args: &[DatumWithOid]) -> String {
    String::from_utf8_lossy(built(expression, args).as_bytes()).into_owned()
}
