//! Reading ids: `snowflake_decode()` into time, worker id and sequence, the time inside an id,
//! and the id bounds of a time (`snowflake_min_id`, `snowflake_max_id`, and
//! `snowflake_id_bound`, which the planner hook puts into time-range queries).

use crate::clock::{pg_timestamp, unix_ms_of, PG_EPOCH_UNIX_MS};
use crate::errors::{self, Code};
use crate::gucs;
use crate::layout::{Layout, Preset};
use crate::text::iso_unix;
use crate::text_arg::TextArg;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::heap_tuple::PgHeapTuple;
use pgrx::prelude::*;
use pgrx::PgTupleDesc;

extension_sql!(
    r#"
CREATE TYPE @extschema@.snowflake_parts AS (
    ts timestamptz,
    worker_id integer,
    sequence integer
);
COMMENT ON TYPE @extschema@.snowflake_parts IS 'The fields of a snowflake id, as returned by snowflake_decode()';
"#,
    name = "snowflake_parts",
    requires = ["pin_schema"]
);

// First of the install script, before anything is created in the extension's schema.
extension_sql_file!("../../sql/pin_schema.sql", name = "pin_schema", bootstrap);

/// Splits an id of this server's layout into its time, worker id and sequence.
///
/// IMMUTABLE STRICT PARALLEL SAFE and returning one composite value (not a set), so that
/// `(snowflake_decode(id)).ts` can go into an expression index and `.worker_id` into a WHERE.
/// IMMUTABLE holds while the server keeps its layout (a change needs a restart, and is refused
/// while it would make ids below the old ones): after a change, REINDEX what depends on it.
#[pg_extern(immutable, strict, parallel_safe, requires = ["snowflake_parts"])]
fn snowflake_decode(
    id: i64,
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "@extschema@.snowflake_parts") {
    decode(id, gucs::layout(), fcinfo)
}

/// Splits an id of the named layout: for ids that come from another system (a Discord id, a
/// Sonyflake id) or from a server with another layout.
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_decode", requires = ["snowflake_parts"])]
fn snowflake_decode_layout(
    id: i64,
    layout: TextArg,
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "@extschema@.snowflake_parts") {
    decode(id, &preset(&layout.as_str()), fcinfo)
}

/// The layout of a preset's name; 22023 for another name.
pub(crate) fn preset(name: &str) -> Layout {
    match Preset::parse(name).and_then(Preset::layout) {
        Some(layout) => layout,
        None => unknown_layout(name),
    }
}

fn decode(
    id: i64,
    layout: &Layout,
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "@extschema@.snowflake_parts") {
    let Some(parts) = layout.parts(id) else { id_outside_layout(id, layout) };
    let datums = [
        Some(pg_sys::Datum::from(pg_timestamp(layout.unix_ms(parts.units)))),
        Some(pg_sys::Datum::from(parts.worker_id as i32)),
        Some(pg_sys::Datum::from(parts.sequence as i32)),
    ];
    // SAFETY: `result_tupdesc` checked that the row type is (timestamptz, int4, int4), which is
    // what the three datums are.
    unsafe { PgHeapTuple::from_datums(result_tupdesc(fcinfo), datums) }
        .unwrap_or_else(|e| unreachable!("row type was checked: {e}"))
}

/// The Unix millisecond of a timestamp (rounded down); `None` for infinity.
pub(crate) fn finite_unix_ms(ts: TimestampWithTimeZone) -> Option<i64> {
    if ts.is_infinity() || ts.is_neg_infinity() {
        return None;
    }
    Some(unix_ms_of(ts.into_inner()))
}

/// The time unit of `layout` that holds `ts`; 22008 outside the layout.
pub(crate) fn units_of(ts: TimestampWithTimeZone, layout: &Layout) -> u64 {
    match finite_unix_ms(ts).and_then(|ms| layout.units_at(ms)) {
        Some(units) if units <= layout.max_units() => units,
        _ => timestamp_outside_layout(layout, layout.max_units()),
    }
}

/// The time inside an id of this server's layout: the start of its time unit. NULL for a
/// bigint the layout cannot hold (a negative one, or one above its bits, such as 2^53 in
/// `js53`): it carries no time, as `uuid_extract_timestamp()` is NULL for a uuid without one.
/// That keeps the planner's rewrite (see `planner`) exact: a comparison with NULL selects no
/// row, and neither does the id range it becomes. `snowflake_decode()` of such an id is an
/// error (22003): it is the function that asks what an id is.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_timestamp(id: i64) -> Option<TimestampWithTimeZone> {
    let layout = gucs::layout();
    let parts = mutant!(timestamp_null, { layout.parts(id)? }, {
        match layout.parts(id) {
            Some(parts) => parts,
            None => id_outside_layout(id, layout),
        }
    });
    Some(
        TimestampWithTimeZone::try_from(pg_timestamp(layout.unix_ms(parts.units)))
            .unwrap_or_else(|_| timestamp_outside_layout(layout, layout.max_units())),
    )
}

/// The smallest id any worker can make in the time unit that holds `ts`: `id >=
/// snowflake_min_id(a)` is "made at `a` or later", a range on the primary key index.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_min_id(ts: TimestampWithTimeZone) -> i64 {
    let layout = gucs::layout();
    layout.first_id(units_of(ts, layout)) as i64
}

/// The largest id any worker can make in the time unit that holds `ts`.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_max_id(ts: TimestampWithTimeZone) -> i64 {
    let layout = gucs::layout();
    (layout.first_id(units_of(ts, layout) + 1) - 1) as i64
}

/// For the planner (see `planner`): the bound on ids equivalent to comparing their
/// `snowflake_timestamp` with `ts`, by B-tree strategy: `id <= bound` for `<` (1) and `<=` (2),
/// `id >= bound` for `>=` (4) and `>` (5). The time of an id is the start of its time unit,
/// and `ts` has microseconds. No timestamp is an error (infinity included): outside the layout
/// the bound still selects exactly the ids that compare true (NULL, which selects none, for a
/// lower bound past the end). Another strategy, which the planner never passes, is 22023.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_id_bound(ts: TimestampWithTimeZone, strategy: i32) -> Option<i64> {
    let layout = gucs::layout();
    let us = if ts.is_infinity() {
        i128::MAX / 4
    } else if ts.is_neg_infinity() {
        i128::MIN / 4
    } else {
        ts.into_inner() as i128
    };
    // Microseconds since the layout's epoch, and the time units it falls in or after.
    let unit_us = layout.unit_ms as i128 * 1000;
    let offset = us + (PG_EPOCH_UNIX_MS as i128 - layout.epoch_unix_ms as i128) * 1000;
    let floor = offset.div_euclid(unit_us);
    let ceil = floor + i128::from(offset.rem_euclid(unit_us) != 0);
    // The first id of a time unit, for units from before the epoch (0) to past the end (the
    // last id + 1, which may be 2^63).
    let first_id = |units: i128| -> i128 {
        let units = units.clamp(0, layout.end_mark() as i128);
        layout.first_id(units as u64) as i128
    };
    let bound = match strategy {
        1 => first_id(ceil) - 1,      // start < ts: units <= ceil - 1
        2 => first_id(floor + 1) - 1, // start <= ts: units <= floor
        4 => first_id(ceil),          // start >= ts: units >= ceil
        5 => first_id(floor + 1),     // start > ts: units >= floor + 1
        _ => errors::report(
            Code::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{strategy} is not a comparison strategy of snowflake_id_bound"),
            "Pass 1, 2, 4 or 5; the planner hook (snowflake.time_ranges) writes these calls itself.",
        )
        .detail("The planner calls it with 1 (<), 2 (<=), 4 (>=) or 5 (>).")
        .raise(),
    };
    // An upper bound is at least -1 (no id) and at most the largest bigint; a lower bound past
    // the largest bigint selects nothing, which only NULL says.
    i64::try_from(bound.max(-1)).ok()
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
            // The row type of `snowflake_decode()` was changed after `CREATE EXTENSION`.
            errors::report(
                Code::ERRCODE_DATATYPE_MISMATCH,
                "type snowflake_parts is not (ts timestamptz, worker_id integer, sequence integer)",
                "Drop and create the extension again.",
            )
            .detail("The type was altered after CREATE EXTENSION pg_snowflake.")
            .raise();
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
    // SAFETY: the caller's promise, a valid TupleDesc.
    let desc = unsafe { PgTupleDesc::from_pg_unchecked(tupdesc) };
    desc.len() == expected.len()
        && desc.iter().zip(expected).all(|(att, oid)| !att.attisdropped && att.atttypid == oid)
}

#[cold]
#[track_caller]
fn unknown_layout(name: &str) -> ! {
    let names = Preset::ALL
        .iter()
        .filter(|p| p.layout().is_some())
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(", ");
    errors::report(
        Code::ERRCODE_INVALID_PARAMETER_VALUE,
        // Escaped: a control character in the argument starts no line of its own.
        format!("unknown snowflake layout \"{}\"", name.escape_debug()),
        format!(
            "The layouts are {names}. A custom layout decodes on a server configured with it, \
             through snowflake_decode(id)."
        ),
    )
    .raise()
}

/// A bigint that is no id of `layout`: negative, or above its bits.
#[cold]
#[track_caller]
pub(crate) fn id_outside_layout(id: i64, layout: &Layout) -> ! {
    if id < 0 {
        negative_id(id)
    }
    let bits = layout.time_bits + layout.worker_bits + layout.sequence_bits;
    errors::report(
        Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!("snowflake id {id} is out of range"),
        format!(
            "Pass an id made with the {} layout, or name the layout it was made with: \
             snowflake_decode(id, 'name').",
            layout.describe()
        ),
    )
    .detail(format!("Ids of the {} layout are below 2^{bits}.", layout.describe()))
    .raise()
}

/// A negative bigint where a snowflake id is expected (`snowflake_to_base62`,
/// `snowflake_advance_past`, `snowflake_decode`).
#[cold]
#[track_caller]
pub(crate) fn negative_id(id: i64) -> ! {
    errors::report(
        Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!("snowflake id {id} is out of range"),
        "Pass an id from 0 up: check where this one came from.",
    )
    .detail("Snowflake ids are never negative: their sign bit is always 0.")
    .raise()
}

/// A time the layout's ids cannot hold: before its epoch, or after its last unit.
#[cold]
#[track_caller]
pub(crate) fn timestamp_outside_layout(layout: &Layout, last_unit: u64) -> ! {
    let end = layout.unix_ms(last_unit.min(layout.max_field_units())) + layout.unit_ms as i64 - 1;
    errors::report(
        Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
        "timestamp out of range for snowflake ids",
        "Give a time within that range.",
    )
    .detail(format!(
        "Ids of the {} layout hold times from {} to {}.",
        layout.describe(),
        iso_unix(layout.epoch_unix_ms),
        iso_unix(end)
    ))
    .raise()
}
