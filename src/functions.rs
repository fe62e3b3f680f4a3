//! The SQL API: `snowflake_next()` and `snowflake_decode(bigint)`.

use crate::layout::Parts;
use crate::{errors, generator};
use pgrx::heap_tuple::PgHeapTuple;
use pgrx::prelude::*;
use pgrx::{PgSqlErrorCode, PgTupleDesc};

/// 2000-01-01 00:00:00 UTC, PostgreSQL's timestamp epoch, in Unix milliseconds.
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// The next id of this cluster.
///
/// VOLATILE, as every generator. PARALLEL SAFE on purpose: the state lives in shared memory,
/// not in the backend as a sequence cache does (which is why `nextval()` is PARALLEL UNSAFE), so
/// a parallel worker draws from the same counter as its leader and its ids are just as unique.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_next() -> i64 {
    generator::next_id()
}

extension_sql!(
    r#"
CREATE TYPE snowflake_parts AS (
    ts timestamptz,
    worker_id integer,
    sequence integer
);
COMMENT ON TYPE snowflake_parts IS 'The fields of a snowflake id, as returned by snowflake_decode()';
"#,
    name = "snowflake_parts",
    bootstrap
);

/// Splits an id into its time, worker id and sequence.
///
/// IMMUTABLE STRICT PARALLEL SAFE and returning one composite value (not a set), so that
/// `(snowflake_decode(id)).ts` can go into an expression index and `.worker_id` into a WHERE.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_decode(
    id: i64,
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "snowflake_parts") {
    let Some(parts) = Parts::of(id) else {
        errors::negative_id(id)
    };
    let ts_us = (parts.unix_ms() - PG_EPOCH_UNIX_MS) * 1000;
    let datums = [
        Some(pg_sys::Datum::from(ts_us)),
        Some(pg_sys::Datum::from(parts.worker_id as i32)),
        Some(pg_sys::Datum::from(parts.sequence as i32)),
    ];
    // SAFETY: `result_tupdesc` checked that the row type is (timestamptz, int4, int4), which is
    // what the three datums are.
    unsafe { PgHeapTuple::from_datums(result_tupdesc(fcinfo), datums) }
        .unwrap_or_else(|e| unreachable!("row type was checked: {e}"))
}

/// The declared row type of the calling function, looked up once per call site and kept in
/// `fn_extra`. Taking it from the function's own declaration (instead of looking the type up by
/// name) keeps decode working when the extension lives in a schema outside the search_path.
fn result_tupdesc(fcinfo: pg_sys::FunctionCallInfo) -> PgTupleDesc<'static> {
    // SAFETY: fcinfo comes from PostgreSQL for this call; fn_extra belongs to this function and
    // lives in fn_mcxt as long as the FmgrInfo; the cached TupleDesc is never freed or changed.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if !flinfo.is_null() && !(*flinfo).fn_extra.is_null() {
            return PgTupleDesc::from_pg_unchecked((*flinfo).fn_extra.cast());
        }
        let mut found: pg_sys::TupleDesc = std::ptr::null_mut();
        let kind = pg_sys::get_call_result_type(fcinfo, std::ptr::null_mut(), &mut found);
        if kind != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE || !is_parts_row(found) {
            altered_parts_type();
        }
        let tupdesc = if flinfo.is_null() {
            pg_sys::BlessTupleDesc(found)
        } else {
            let old = pg_sys::MemoryContextSwitchTo((*flinfo).fn_mcxt);
            let copy = pg_sys::BlessTupleDesc(pg_sys::CreateTupleDescCopy(found));
            pg_sys::MemoryContextSwitchTo(old);
            (*flinfo).fn_extra = copy.cast();
            copy
        };
        PgTupleDesc::from_pg_unchecked(tupdesc)
    }
}

/// Whether a row type is exactly `(timestamptz, integer, integer)`.
///
/// # Safety
/// `tupdesc` must be a valid TupleDesc.
unsafe fn is_parts_row(tupdesc: pg_sys::TupleDesc) -> bool {
    let expected = [pg_sys::TIMESTAMPTZOID, pg_sys::INT4OID, pg_sys::INT4OID];
    let desc = unsafe { PgTupleDesc::from_pg_unchecked(tupdesc) };
    desc.len() == expected.len()
        && desc
            .iter()
            .zip(expected)
            .all(|(att, oid)| !att.attisdropped && att.atttypid == oid)
}

#[cold]
fn altered_parts_type() -> ! {
    pgrx::ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        "type snowflake_parts is not (ts timestamptz, worker_id integer, sequence integer)",
        "The type was altered after CREATE EXTENSION pg_snowflake; recreate the extension."
    );
}
