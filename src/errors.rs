//! Every error a user can meet, in one place: a real SQLSTATE (never XX000), a lower-case message
//! without a final period, and full-sentence detail and hint where the user can act.

use crate::gucs;
use crate::layout::Layout;
use crate::mark::Mark;
use crate::state_file::{Found, Loaded, Recovered, Source, WriteError, COPY_PATH, FILE_NAME};
use crate::text::{iso_unix, sentence};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

#[track_caller]
fn raise(report: ErrorReport) -> ! {
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

#[track_caller]
fn report(code: PgSqlErrorCode, message: String) -> ErrorReport {
    ErrorReport::new(code, message, "pg_snowflake")
}

#[cold]
#[track_caller]
pub fn not_preloaded() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "pg_snowflake must be loaded via shared_preload_libraries".into(),
        )
        .set_detail("The id generator lives in shared memory, which is set up at server start.")
        .set_hint(
            "Add pg_snowflake to shared_preload_libraries in postgresql.conf, set \
             snowflake.worker_id (or snowflake.registry, to lease one), and restart the server.",
        ),
    )
}

#[cold]
#[track_caller]
pub fn worker_id_unset() -> ! {
    let layout = gucs::layout();
    // On a Citus node a worker id set by hand is refused unless something compares it with the
    // other nodes' (gucs::resolve): the plain advice led a user from this error to that one.
    let hint = if gucs::citus_preloaded() {
        "This server preloads Citus: lease its worker id from the coordinator, with \
         snowflake.worker_id = -1 and snowflake.registry naming the coordinator's database, and \
         restart the server (docs/citus.md)."
            .to_string()
    } else {
        format!(
            "Pick a worker id between 0 and {} that no other server uses, run ALTER SYSTEM SET \
             snowflake.worker_id = <id>; and restart the server.",
            layout.max_worker_id()
        )
    };
    let report = match gucs::problem() {
        Some(problem) => report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake.worker_id is not in use: the snowflake settings were refused at server \
             start"
                .into(),
        )
        .set_detail(sentence(problem))
        .set_hint(
            "Correct the snowflake.* settings in postgresql.conf (see the server log) and \
             restart the server.",
        ),
        None => report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake.worker_id is not set".into(),
        )
        .set_detail(
            "Every server that generates snowflake ids needs a worker id of its own; two \
             servers with the same worker id can generate the same ids.",
        )
        .set_hint(hint),
    };
    raise(report)
}

#[cold]
#[track_caller]
pub fn registry_no_lease(problem: &str, hint: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "this server holds no worker id lease from the registry".into(),
        )
        .set_detail(sentence(problem))
        .set_hint(hint),
    )
}

#[cold]
#[track_caller]
pub fn registry_lease_ran_out(
    worker_id: u32,
    covered_until_ms: i64,
    problem: Option<&str>,
    hint: &str,
) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("the registry's lease of worker id {worker_id} ran out"),
        )
        .set_detail(format!(
            "It covered ids until {}, and could not be renewed since.{}",
            iso_unix(covered_until_ms),
            problem
                .map(|p| format!(" {}", sentence(p)))
                .unwrap_or_default()
        ))
        .set_hint(hint),
    )
}

#[cold]
#[track_caller]
pub fn registry_lease_lost(worker_id: u32, why: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("worker id {worker_id} was leased to another cluster"),
        )
        .set_detail(format!(
            "This server could not renew its lease before it ran out, and the registry gave the \
             worker id to another cluster. {}",
            sentence(why)
        ))
        .set_hint(
            "Restart the server: it then leases a free worker id (or, with snowflake.worker_id \
             set, waits for that one).",
        ),
    )
}

#[cold]
#[track_caller]
pub fn id_outside_layout(id: i64, layout: &Layout) -> ! {
    let bits = layout.time_bits + layout.worker_bits + layout.sequence_bits;
    raise(
        report(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("snowflake id {id} is out of range"),
        )
        .set_detail(if id < 0 {
            "Snowflake ids are never negative: their sign bit is always 0.".into()
        } else {
            format!(
                "Ids of the {} layout are below 2^{bits}.",
                layout.describe()
            )
        }),
    )
}

#[cold]
#[track_caller]
pub fn negative_id(id: i64) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("snowflake id {id} is out of range"),
        )
        .set_detail("Snowflake ids are never negative: their sign bit is always 0."),
    )
}

#[cold]
#[track_caller]
pub fn unknown_layout(name: &str) -> ! {
    let names = crate::layout::Preset::ALL
        .iter()
        .filter(|p| p.layout().is_some())
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(", ");
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("unknown snowflake layout \"{name}\""),
        )
        .set_hint(format!(
            "The layouts are {names}. A custom layout decodes on a server configured with it, \
             through snowflake_decode(id)."
        )),
    )
}

/// A worker id or sequence given to `snowflake_compose()` that the layout's bits cannot hold.
#[cold]
#[track_caller]
pub fn field_outside_layout(field: &str, value: i32, bits: u32, layout: &Layout) -> ! {
    let max = (1u64 << bits) - 1;
    raise(
        report(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!(
                "{field} {value} is out of range for the {} layout",
                layout.describe()
            ),
        )
        .set_detail(format!(
            "The {} layout has {bits} bits for the {field}: 0 to {max}.",
            layout.describe()
        ))
        .set_hint(format!("Pass a {field} from 0 to {max}.")),
    )
}

#[cold]
#[track_caller]
pub fn timestamp_outside_layout(layout: &Layout, last_unit: u64) -> ! {
    let end = layout.unix_ms(last_unit.min(layout.max_field_units())) + layout.unit_ms as i64 - 1;
    raise(
        report(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "timestamp out of range for snowflake ids".into(),
        )
        .set_detail(format!(
            "Ids of the {} layout hold times from {} to {}.",
            layout.describe(),
            iso_unix(layout.epoch_unix_ms),
            iso_unix(end)
        ))
        .set_hint("Give a time within that range."),
    )
}

/// A function for superusers only, called by another role (through a grant of EXECUTE, or
/// default privileges).
#[cold]
#[track_caller]
pub fn superuser_required(function: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied for function {function}"),
        )
        .set_detail(format!(
            "{function} is for superusers only, whatever privileges are granted on it."
        ))
        .set_hint("Run it as a superuser."),
    )
}

/// SPI refused a statement on `snowflake_claims` (PostgreSQL's own errors, such as a dropped
/// column, pass through with their SQLSTATE; this is what SPI itself reports).
#[cold]
#[track_caller]
pub fn claims_table_failed(action: &str, e: &pgrx::spi::SpiError) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("could not {action} the worker id claims in snowflake_claims: {e}"),
        )
        .set_hint(
            "Check that snowflake_claims has the columns CREATE EXTENSION pg_snowflake gave it.",
        ),
    )
}

/// The row type of `snowflake_decode()` was changed after `CREATE EXTENSION`.
#[cold]
#[track_caller]
pub fn altered_parts_type() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            "type snowflake_parts is not (ts timestamptz, worker_id integer, sequence integer)"
                .into(),
        )
        .set_detail("The type was altered after CREATE EXTENSION pg_snowflake.")
        .set_hint("Drop and create the extension again."),
    )
}

#[cold]
#[track_caller]
pub fn bad_strategy(strategy: i32) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{strategy} is not a comparison strategy of snowflake_id_bound"),
        )
        .set_detail("The planner calls it with 1 (<), 2 (<=), 4 (>=) or 5 (>)."),
    )
}

/// The configured layout differs from the one the cluster's ids were made with, and its ids
/// made now would not all be above the old ones.
#[cold]
#[track_caller]
pub fn layout_changed(configured: &Layout, recorded: &Layout) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "snowflake.layout is {}, but this cluster's ids were made with the {} layout",
                configured.describe(),
                recorded.describe()
            ),
        )
        .set_detail(format!(
            "Ids of the {} layout made now would not all be above the ids already handed out, \
             so they could repeat them or sort before them.",
            configured.describe()
        ))
        .set_hint(format!(
            "Set snowflake.layout back to {} and restart, or, if no table keeps the old ids or \
             they may mix, have a superuser run SELECT snowflake_reset_layout();",
            recorded.preset.name()
        )),
    )
}

/// Once per process when less than a year of the layout is left.
#[cold]
pub fn layout_ending(layout: &Layout) {
    report(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake ids of the {} layout run out at {}",
            layout.describe(),
            iso_unix(layout.end_unix_ms().unwrap_or(i64::MAX))
        ),
    )
    .set_detail("Less than a year of the layout's time field is left.")
    .set_hint(
        "Plan a move to a layout with a later end; ids are refused after it rather than wrap.",
    )
    .report(PgLogLevel::WARNING);
}

/// A text that is not 11 characters of `0-9A-Za-z`: `why` says what is wrong with it.
#[cold]
#[track_caller]
pub fn bad_base62(text: &str, why: String) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for a base62 snowflake id: \"{text}\""),
        )
        .set_detail(why),
    )
}

/// 11 base62 digits above the largest bigint: 22003, as PostgreSQL's own bigint input reports
/// a value out of range (not 22P02).
#[cold]
#[track_caller]
pub fn base62_out_of_range(text: &str, largest: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("base62 snowflake id \"{text}\" is out of range for type bigint"),
        )
        .set_detail(format!("The largest bigint is {largest} in base62.")),
    )
}

#[cold]
#[track_caller]
pub fn advance_too_far(id: i64, ahead_ms: u64, max_drift_ms: u64) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("snowflake id {id} is too far ahead of the clock"),
        )
        .set_detail(format!(
            "Ids above it would be {ahead_ms} ms ahead of the clock, and snowflake.max_drift \
             allows {max_drift_ms} ms: every later call would wait for the clock and fail."
        ))
        .set_hint(
            "Check where this id came from. If the clock of the server that made it was right, \
             raise snowflake.max_drift in postgresql.conf and reload.",
        ),
    )
}

#[cold]
#[track_caller]
pub fn clock_before_epoch(unix_ms: i64, layout: &Layout) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the system clock is set before the snowflake epoch".into(),
        )
        .set_detail(format!(
            "The clock reads {}; ids of the {} layout count from {}.",
            iso_unix(unix_ms),
            layout.describe(),
            iso_unix(layout.epoch_unix_ms)
        ))
        .set_hint("Set the system clock to the correct time."),
    )
}

#[cold]
#[track_caller]
pub fn layout_exhausted(layout: &Layout) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
            "snowflake ids are exhausted".into(),
        )
        .set_detail(format!(
            "{} bits of {} ms since {} end at {}.",
            layout.time_bits,
            layout.unit_ms,
            iso_unix(layout.epoch_unix_ms),
            iso_unix(layout.end_unix_ms().unwrap_or(i64::MAX))
        ))
        .set_hint("Ids are refused rather than wrap: move to a layout with a later end."),
    )
}

#[cold]
#[track_caller]
pub fn clock_too_far_behind(ahead_ms: u64, max_drift_ms: u64, waited_ms: u64) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the system clock is too far behind the last snowflake id".into(),
        )
        .set_detail(format!(
            "The next id would be {ahead_ms} ms ahead of the clock, more than \
             snowflake.max_drift ({max_drift_ms} ms), and the clock did not catch up within \
             snowflake.drift_wait ({waited_ms} ms)."
        ))
        .set_hint(
            "Ids resume once the clock catches up. If the clock was stepped back on purpose, \
             raise snowflake.max_drift in postgresql.conf and reload.",
        ),
    )
}

#[cold]
#[track_caller]
pub fn paced_too_long(waited_ms: u64, max_drift_ms: u64, layout: &Layout) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake_next() waited too long for its turn".into(),
        )
        .set_detail(format!(
            "Ids ran more than half of snowflake.max_drift ({max_drift_ms} ms) ahead of the \
             clock, where calls take turns at the layout's rate ({} per {} ms), and this call's \
             turn did not come within snowflake.drift_wait ({waited_ms} ms).",
            match layout.per_unit() {
                1 => "1 id".to_string(),
                n => format!("{n} ids"),
            },
            layout.unit_ms
        ))
        .set_hint(
            "Ids are being asked for faster than the clock makes them: retry, spread the load, \
             or use a layout with more sequence bits; snowflake_stats() counts paced waits.",
        ),
    )
}

#[cold]
#[track_caller]
pub fn standby() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "cannot generate snowflake ids on a standby server".into(),
        )
        .set_detail(
            "A standby shares its worker id with its primary, and the primary would not know \
             the ids the standby handed out.",
        )
        .set_hint("Call snowflake_next() on the primary. After promotion, this server can."),
    )
}

#[cold]
#[track_caller]
pub fn sync_standby_wait_cancelled(why: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            "canceling the wait for the synchronous standbys to flush the snowflake lease".into(),
        )
        .set_detail(format!(
            "{} No id was handed out under the new lease; the next call waits for it again.",
            sentence(why)
        ))
        .set_hint(
            "Check that the standbys named in synchronous_standby_names are running and \
             connected, or empty that setting to stop waiting for them.",
        ),
    )
}

#[cold]
#[track_caller]
pub fn upgrade_mark_not_carried() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the snowflake mark of the cluster this one was upgraded from is missing".into(),
        )
        .set_detail(
            "pg_upgrade made this cluster, and the old cluster did not pass on the time its ids \
             reached (its server did not load this version of pg_snowflake). New ids could \
             repeat old ones if the clock is behind them.",
        )
        .set_hint(format!(
            "Copy {0} from the old cluster's data directory over this cluster's {0} and \
             restart. If the old cluster never generated ids, or the clock is known to be ahead \
             of all of them, delete this cluster's {0} and restart.",
            FILE_NAME
        )),
    )
}

/// In the postmaster at start: the start fails rather than guess where ids continue.
#[cold]
pub fn state_file_unreadable(why: &str, corrupt: bool) -> ! {
    report(
        if corrupt {
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED
        } else {
            PgSqlErrorCode::ERRCODE_IO_ERROR
        },
        format!("could not read the snowflake state file \"{FILE_NAME}\": {why}"),
    )
    .set_detail(
        "The file records a time that every id this server handed out is below; without it, \
         new ids could repeat old ones if the clock is behind.",
    )
    .set_hint(format!(
        "Restore the file from a backup of this data directory, or delete it: the server then \
         goes on above the copy of its mark in \"{COPY_PATH}\", or, if that is gone too, \
         starts from the clock, which is safe only if the clock is ahead of every id this \
         server handed out."
    ))
    .report(PgLogLevel::FATAL);
    unreachable!("FATAL does not return")
}

/// In the postmaster at start (and after a crash reset shared memory): where the generator
/// goes on from, in the server log. A warning when a file was lost or damaged.
#[cold]
pub fn starting_state(r: &Recovered) {
    let at = |m: &Mark| {
        format!(
            "{}, {} layout",
            iso_unix(m.layout.unix_ms(m.units)),
            m.layout.describe()
        )
    };
    let what = |f: &Found| match f {
        Found::Missing => "missing".to_string(),
        Found::Empty => "empty".to_string(),
        Found::Damaged(why) => format!("damaged ({why})"),
        Found::Good(_) => "readable".to_string(),
    };
    let log = |message: String, detail: Option<String>| {
        let mut r = report(PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION, message);
        if let Some(detail) = detail {
            r = r.set_detail(detail);
        }
        r.report(PgLogLevel::LOG);
    };
    let lost_hint = lost_state_hint();
    match (r.state, r.source) {
        (Loaded::Mark(m), Source::StateFile) => log(
            format!(
                "snowflake ids continue above the mark in \"{FILE_NAME}\" ({})",
                at(&m)
            ),
            match &r.copy {
                Found::Good(_) => None,
                other => Some(format!(
                    "Its copy \"{COPY_PATH}\" is {}; the next renewal writes it again.",
                    what(other)
                )),
            },
        ),
        (Loaded::Mark(m), Source::Copy) if matches!(r.file, Found::Good(_)) => log(
            format!(
                "snowflake ids continue above the copy of the mark in \"{COPY_PATH}\" ({}), \
                 which is ahead of \"{FILE_NAME}\"",
                at(&m)
            ),
            None,
        ),
        (Loaded::Mark(m), _) => report(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "the snowflake state file \"{FILE_NAME}\" is {}: ids continue above the copy of \
                 its mark in \"{COPY_PATH}\" ({})",
                what(&r.file),
                at(&m)
            ),
        )
        .set_detail(
            "A restore or a copy of the data directory that skipped the file, a cleanup script \
             or a disk error may have lost it. The next renewal writes it again.",
        )
        .report(PgLogLevel::WARNING),
        (Loaded::NotCarried, _) => log(
            format!(
                "the snowflake state file \"{FILE_NAME}\" says that pg_upgrade made this \
                 cluster without the old cluster's mark: ids are refused until it is settled"
            ),
            None,
        ),
        (Loaded::Missing, _) => log(
            "no snowflake state file and no copy of it: this data directory has handed out no \
             ids, and they start from the clock"
                .into(),
            None,
        ),
        (Loaded::Lost, _) => report(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "the snowflake state file \"{FILE_NAME}\" is {} and its copy \"{COPY_PATH}\" is \
                 {}: ids are refused",
                what(&r.file),
                what(&r.copy)
            ),
        )
        .set_detail(
            "This data directory has handed out ids, and neither file says where they ended: new \
             ids could repeat them if the clock is behind them.",
        )
        .set_hint(lost_hint)
        .report(PgLogLevel::WARNING),
    }
}

fn lost_state_hint() -> String {
    format!(
        "Restore {FILE_NAME} from a backup of this data directory and restart the server, or, \
         with an id known to be at least as high as every id this server handed out (the \
         largest id in the tables it fills), run SELECT snowflake_advance_past(<that id>);"
    )
}

/// The state file and its copy were lost (see `starting_state`): no lease until an operator
/// says where ids may go on.
#[cold]
#[track_caller]
pub fn state_file_lost() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the ids this server handed out before its last start are not known".into(),
        )
        .set_detail(format!(
            "At server start the snowflake state file \"{FILE_NAME}\" was missing or empty, and \
             its copy \"{COPY_PATH}\" missing or damaged (the server log says which), although \
             this data directory has handed out ids: new ids could repeat them if the clock is \
             behind them."
        ))
        .set_hint(lost_state_hint()),
    )
}

/// A durable write of the mark failed: `retry_in_ms` says when the disk is tried again, for the
/// calls that renew the lease (see `generator::write_failure`).
#[cold]
#[track_caller]
pub fn state_file_write_failed(e: &WriteError, retry_in_ms: Option<u64>) -> ! {
    let mut r = report(
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!(
            "could not write the snowflake state file \"{}\": {}",
            e.place.path(),
            e.error
        ),
    )
    .set_hint(
        "Check the free space and permissions of the data directory, and that neither \
         pg_snowflake.state nor pg_snowflake/mark is immutable (lsattr).",
    );
    if let Some(ms) = retry_in_ms {
        r = r.set_detail(format!(
            "No id is handed out under a new lease until the file can be written. The disk is \
             tried again in {ms} ms, and at most once a second after that; the calls in between \
             fail at once, without writing to WAL."
        ));
    }
    raise(r)
}

/// In WAL redo: recovery stops rather than go on without the record's mark in the state file.
#[cold]
pub fn state_file_write_failed_in_recovery(e: &WriteError) -> ! {
    report(
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!(
            "could not write the snowflake state file \"{}\" during recovery: {}",
            e.place.path(),
            e.error
        ),
    )
    .set_detail(
        "Recovery stops here: without the replayed mark in the file, a later restart could \
         hand out ids below the ones made before.",
    )
    .set_hint(
        "Check the free space and permissions of the data directory and start the server \
         again; recovery replays the record once more.",
    )
    .report(PgLogLevel::FATAL);
    unreachable!("FATAL does not return")
}

/// A cancel or `statement_timeout` while the call waited for another session's renewal.
#[cold]
#[track_caller]
pub fn renewal_wait_cancelled(why: &str, renewing_ms: u64) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            "canceling the wait for another session's renewal of the snowflake lease".into(),
        )
        .set_detail(format!(
            "{} The renewing session has been making the next lease durable (the state file \
             and WAL) for {renewing_ms} ms; no id was handed out to this call.",
            sentence(why)
        ))
        .set_hint(
            "A renewal waits for the disk of the data directory: check it for a stalled or \
             failing device.",
        ),
    )
}

/// A background worker asked to stop while it waited for a renewal (a backend's wait ends
/// through its interrupts instead).
#[cold]
#[track_caller]
pub fn renewal_wait_stopped() -> ! {
    raise(report(
        PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN,
        "terminating the wait for the renewal of the snowflake lease: this process was asked \
         to stop"
            .into(),
    ))
}

#[cold]
pub fn clock_stepped_back(by_ms: u64, events: u64, max_drift_ms: u64) {
    report(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!("the system clock stepped back by {by_ms} ms"),
    )
    .set_detail(format!(
        "Backward step number {events} since the server started. New ids continue above the \
         last one, ahead of the clock until it catches up; past snowflake.max_drift \
         ({max_drift_ms} ms) snowflake_next() waits and then fails."
    ))
    .set_hint("Check the time synchronisation (NTP) of this server.")
    .report(PgLogLevel::WARNING);
}

#[cold]
pub fn clock_behind_recovered_mark(by_ms: u64, events: u64) {
    report(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!("the system clock is {by_ms} ms behind the ids handed out before the restart"),
    )
    .set_detail(format!(
        "Backward step number {events} since the server started. New ids continue above the \
         ids of the previous run."
    ))
    .set_hint("Check the time synchronisation (NTP) of this server.")
    .report(PgLogLevel::WARNING);
}

/// In WAL redo (startup process): recovery stops rather than move the generator to a time no id
/// of the record's layout can have.
#[cold]
pub fn wal_mark_corrupt(why: &str) -> ! {
    report(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("snowflake mark in WAL is corrupt: {why}"),
    )
    .set_detail(
        "The record was not written by this version of pg_snowflake, or the WAL is damaged.",
    )
    .set_hint("Restore this server from a base backup, or rebuild the standby from its primary.")
    .report(PgLogLevel::FATAL);
    unreachable!("FATAL does not return")
}

#[cold]
pub fn wal_record_unknown() -> ! {
    report(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        "unknown pg_snowflake WAL record".into(),
    )
    .set_detail(
        "The record was not written by this version of pg_snowflake, or the WAL is damaged.",
    )
    .set_hint(
        "Install the pg_snowflake version that wrote this WAL, or restore from a base backup.",
    )
    .report(PgLogLevel::PANIC);
    unreachable!("PANIC does not return")
}

#[cold]
#[track_caller]
pub fn adopt_not_a_table(table: &str) -> ! {
    raise(report(
        PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
        format!("{table} is not a table"),
    ))
}

#[cold]
#[track_caller]
pub fn adopt_not_owner(table: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("must be owner of table {table}"),
        )
        .set_hint("Run snowflake_adopt() as the owner of the table, or as a superuser."),
    )
}

#[cold]
#[track_caller]
pub fn adopt_no_column(column: &str, table: &str) -> ! {
    raise(report(
        PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
        format!("column \"{column}\" of relation {table} does not exist"),
    ))
}

#[cold]
#[track_caller]
pub fn adopt_not_bigint(column: &str, table: &str, type_name: &str, alter: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!("column \"{column}\" of {table} is {type_name}, not bigint"),
        )
        .set_detail("Snowflake ids need all 64 bits of a bigint.")
        .set_hint(format!("Change the type first: {alter}")),
    )
}

#[cold]
#[track_caller]
pub fn adopt_other_default(column: &str, table: &str, default: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "column \"{column}\" of {table} has a default that is not a sequence: {default}"
            ),
        )
        .set_hint(format!(
            "If ids from snowflake_next() should replace it, drop it first: ALTER TABLE {table} \
             ALTER COLUMN \"{column}\" DROP DEFAULT;"
        )),
    )
}

/// `snowflake_adopt()` moves the generator as `snowflake_advance_past()` does, and needs the
/// right to call it as 0.3.0 did (it called it through SQL).
#[cold]
#[track_caller]
pub fn adopt_needs_advance_past() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "permission denied for function snowflake_advance_past".into(),
        )
        .set_detail("snowflake_adopt() moves the generator above the column's largest value.")
        .set_hint("Grant EXECUTE on snowflake_advance_past(bigint) too, or run it as a superuser."),
    )
}

#[cold]
#[track_caller]
pub fn adopt_function_missing(name: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION,
            format!("function {name}() of pg_snowflake does not exist"),
        )
        .set_hint("Run ALTER EXTENSION pg_snowflake UPDATE."),
    )
}

/// A statement that PostgreSQL takes by name changed something else than the table and column
/// `snowflake_adopt()` was given (checked by OID afterwards): everything rolls back.
#[cold]
#[track_caller]
pub fn adopt_redirected(table: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("the column of {table} did not end as snowflake_adopt() left it"),
        )
        .set_detail(
            "A statement by name reached another object: a schema was renamed, or the column \
             changed, while snowflake_adopt() ran. Nothing was changed.",
        )
        .set_hint("Find out who renames the schema, then run snowflake_adopt() again."),
    )
}

/// The query for a relation's largest id found another relation or a view under its name.
#[cold]
#[track_caller]
pub fn query_redirected() -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the table's name leads to another relation".into(),
        )
        .set_detail(
            "A schema was renamed while snowflake_adopt() ran; nothing of what the name now \
             leads to was run, and nothing was changed.",
        )
        .set_hint("Find out who renames the schema, then run snowflake_adopt() again."),
    )
}

#[cold]
#[track_caller]
pub fn adopt_row_security(table: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("row-level security hides rows of {table} from its owner"),
        )
        .set_detail(
            "snowflake_adopt() reads the largest id of every row with the rights of the table's \
             owner, and moves the generator above it; it would miss the ids of the rows the \
             owner cannot see.",
        )
        .set_hint(
            "ALTER TABLE ... NO FORCE ROW LEVEL SECURITY while adopting, or give the table's \
             owner BYPASSRLS.",
        ),
    )
}

/// `snowflake_adopt()` on the distribution column of a Citus table: Citus changes no default
/// of a distribution column (it raises XX000), so this says what to do first.
#[cold]
#[track_caller]
pub fn adopt_distribution_column(column: &str, table: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("column \"{column}\" is the distribution column of Citus table {table}"),
        )
        .set_detail(
            "Citus changes no default of a distribution column on a distributed table; nothing \
             was changed.",
        )
        .set_hint({
            // As SQL literals: a name with a quote in it must not make the hint's statements,
            // pasted, run something else.
            let (t, c) = (table.replace('\'', "''"), column.replace('\'', "''"));
            format!(
                "Make the table local first, adopt, and distribute it again: SELECT \
                 undistribute_table('{t}'); SELECT snowflake_adopt('{t}', '{c}'); SELECT \
                 create_distributed_table('{t}', '{c}');"
            )
        }),
    )
}

/// `snowflake_adopt()` on a Citus table could not move the generator of every node.
#[cold]
#[track_caller]
pub fn adopt_citus_nodes(table: &str, failures: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("snowflake_adopt() could not move the generator of every node of the Citus cluster of {table}"),
        )
        .set_detail(format!(
            "Every node may make ids for a Citus table; {failures}. Nothing was changed (the \
             generators it moved only moved up)."
        ))
        .set_hint(
            "Every node needs pg_snowflake preloaded, a worker id, and the extension created \
             (CREATE EXTENSION on the coordinator reaches them); then run snowflake_adopt() \
             again.",
        ),
    )
}

/// The schema `snowflake` cannot be trusted (see own_schema.rs).
#[cold]
#[track_caller]
pub fn own_schema_untrusted(why: &str) -> ! {
    raise(
        report(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("pg_snowflake's schema snowflake cannot be used: {why}"),
        )
        .set_detail(
            "Code that runs with a superuser's rights reaches its objects by the schema's name, \
             which the schema's owner could change between a lookup and its use.",
        )
        .set_hint(
            "Run ALTER EXTENSION pg_snowflake UPDATE, or ALTER SCHEMA snowflake OWNER TO a \
             superuser.",
        ),
    )
}
