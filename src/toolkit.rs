//! The SQL API of the toolkit (0.2.0): sortable short text ids, generator stats, a durable floor,
//! and adopting serial and identity columns.

use crate::{base62, errors, floor, stats};
use pgrx::prelude::*;
use pgrx::JsonB;

/// The id as 11 base62 characters (`0-9A-Za-z`) whose text order under `COLLATE "C"` is the
/// numeric order: short, URL-safe and still sortable by time.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_to_base62(id: i64) -> String {
    let Ok(unsigned) = u64::try_from(id) else {
        errors::negative_id(id)
    };
    String::from_utf8(base62::encode(unsigned).to_vec()).expect("base62 digits are ASCII")
}

/// The id of 11 base62 characters, as `snowflake_to_base62` writes them.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_from_base62(base62: &str) -> i64 {
    match base62::decode(base62) {
        Ok(id) => id,
        Err(e) => errors::bad_base62(base62, e),
    }
}

/// What the generator is doing: worker id, layout, last id, ids since start, how far ahead of
/// the clock, clock steps and waits, the lease. Readable by `pg_monitor` (granted below), as
/// PostgreSQL's own monitoring functions are.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_stats() -> JsonB {
    JsonB(serde_json::to_value(stats::collect()).expect("the stats serialize"))
}

/// Moves the generator durably above `id`: every later id of this cluster is larger, also after
/// a crash right after the call. For ids that came from elsewhere (a restored dump, an import,
/// a worker id moved between servers). Superuser only, unless EXECUTE is granted.
#[pg_extern(volatile, strict, parallel_unsafe)]
fn snowflake_advance_past(id: i64) {
    floor::advance_past(id)
}

extension_sql!(
    r#"
REVOKE ALL ON FUNCTION snowflake_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_stats() TO pg_monitor;
REVOKE ALL ON FUNCTION snowflake_advance_past(bigint) FROM PUBLIC;
"#,
    name = "toolkit_privileges",
    requires = [snowflake_stats, snowflake_advance_past],
);

extension_sql_file!(
    "adopt.sql",
    name = "snowflake_adopt",
    requires = [snowflake_advance_past],
);
