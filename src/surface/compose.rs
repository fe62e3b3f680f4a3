//! Making the id of given fields: `snowflake_compose()`, the inverse of `snowflake_decode()`,
//! for ids that must sort by a time other than now (historical rows given ids by their
//! original creation time; see the README's backfill recipe).

use crate::decode::{finite_unix_ms, preset, timestamp_outside_layout};
use crate::errors::{self, Code};
use crate::gucs;
use crate::layout::{Layout, Parts};
use crate::text_arg::TextArg;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

/// The id with time `ts` (rounded down to its time unit), `worker_id` and `sequence` in this
/// server's layout: `snowflake_compose(d.ts, d.worker_id, d.sequence)` of `d =
/// snowflake_decode(id)` is `id` for every id. It makes no id of this cluster's generator and
/// does not move it: only a worker id no server generates with keeps such ids apart from
/// generated ones.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_compose(ts: TimestampWithTimeZone, worker_id: i32, sequence: i32) -> i64 {
    compose(ts, worker_id, sequence, gucs::layout())
}

/// The same in the named preset layout.
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_compose")]
fn snowflake_compose_layout(
    ts: TimestampWithTimeZone,
    worker_id: i32,
    sequence: i32,
    layout: TextArg,
) -> i64 {
    compose(ts, worker_id, sequence, &preset(&layout.as_str()))
}

fn compose(ts: TimestampWithTimeZone, worker_id: i32, sequence: i32, layout: &Layout) -> i64 {
    let worker_id = match u32::try_from(worker_id) {
        Ok(w) if w <= layout.max_worker_id() => w,
        _ => field_outside_layout("worker id", worker_id, layout.worker_bits, layout),
    };
    let sequence = match u32::try_from(sequence) {
        Ok(s) if u64::from(s) < layout.per_unit() => s,
        _ => field_outside_layout("sequence", sequence, layout.sequence_bits, layout),
    };
    // The whole time field, as `snowflake_decode` reads it: a 64-bit layout's ids with the sign
    // bit set (Instagram's from 2046) come back from their fields too.
    let units = match finite_unix_ms(ts).and_then(|ms| layout.units_at(ms)) {
        Some(units) if units <= layout.max_field_units() => units,
        _ => timestamp_outside_layout(layout, layout.max_field_units()),
    };
    layout.compose(Parts { units, worker_id, sequence })
}

/// A worker id or sequence given to `snowflake_compose()` that the layout's bits cannot hold.
#[cold]
#[track_caller]
fn field_outside_layout(field: &str, value: i32, bits: u32, layout: &Layout) -> ! {
    let max = (1u64 << bits) - 1;
    errors::report(
        Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{field} {value} is out of range for the {} layout", layout.describe()),
        format!("Pass a {field} from 0 to {max}."),
    )
    .detail(format!(
        "The {} layout has {bits} bits for the {field}: 0 to {max}.",
        layout.describe()
    ))
    .raise()
}
