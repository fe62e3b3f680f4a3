//! What the generator reports, beside the checks that find it (`problems::x` is called where the
//! rule it keeps is checked): its refusals (no preloading, a standby, a clock before the epoch or
//! too far behind, the state file lost or not writable, a layout whose ids would go below the
//! old ones), its warnings (a clock stepped back, a layout that ends within a year), and the
//! recovery's report at start.

use crate::errors::{self, Code};
use crate::layout::Layout;
use crate::state_file::{self, Account, WriteError, COPY_PATH, FILE_NAME};
use crate::text::{iso_unix, sentence};

#[cold]
#[track_caller]
pub fn not_preloaded() -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "pg_snowflake must be loaded via shared_preload_libraries",
        "Add pg_snowflake to shared_preload_libraries in postgresql.conf, set \
         snowflake.worker_id (or snowflake.registry, to lease one), and restart the server.",
    )
    .detail("The id generator lives in shared memory, which is set up at server start.")
    .raise()
}

#[cold]
#[track_caller]
pub fn layout_changed(configured: &Layout, recorded: &Layout) -> ! {
    // The configured layout differs from the one the cluster's ids were made with, and its ids
    // made now would not all be above the old ones.
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "snowflake.layout is {}, but this cluster's ids were made with the {} layout",
            configured.describe(),
            recorded.describe()
        ),
        format!(
            "Set snowflake.layout back to {} and restart, or, if no table keeps the old ids or \
             they may mix, have a superuser run SELECT snowflake_reset_layout(), which forgets \
             them.",
            recorded.preset.name()
        ),
    )
    .detail(format!(
        "Ids of the {} layout made now would not all be above the ids already handed out, so \
         they could repeat them or sort before them.",
        configured.describe()
    ))
    .raise()
}

/// Once per process when less than a year of the layout is left.
#[cold]
pub fn layout_ending(layout: &Layout) {
    errors::report(
        Code::ERRCODE_WARNING,
        format!(
            "snowflake ids of the {} layout run out at {}",
            layout.describe(),
            iso_unix(layout.end_unix_ms().unwrap_or(i64::MAX))
        ),
        "Plan a move to a layout with a later end; ids are refused after it rather than wrap.",
    )
    .detail("Less than a year of the layout's time field is left.")
    .warn();
}

#[cold]
#[track_caller]
pub fn advance_too_far(id: i64, ahead_ms: u64, max_drift_ms: u64) -> ! {
    errors::report(
        Code::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("snowflake id {id} is too far ahead of the clock"),
        "Check where this id came from. If the clock of the server that made it was right, raise \
         snowflake.max_drift in postgresql.conf and reload.",
    )
    .detail(format!(
        "Ids above it would be {ahead_ms} ms ahead of the clock, and snowflake.max_drift allows \
         {max_drift_ms} ms: every later call would wait for the clock and fail."
    ))
    .raise()
}

#[cold]
#[track_caller]
pub fn clock_before_epoch(unix_ms: i64, layout: &Layout) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the system clock is set before the snowflake epoch",
        "Set the system clock to the correct time.",
    )
    .detail(format!(
        "The clock reads {}; ids of the {} layout count from {}.",
        iso_unix(unix_ms),
        layout.describe(),
        iso_unix(layout.epoch_unix_ms)
    ))
    .raise()
}

#[cold]
#[track_caller]
pub fn layout_exhausted(layout: &Layout) -> ! {
    errors::report(
        Code::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        "snowflake ids are exhausted",
        "Ids are refused rather than wrap: move to a layout with a later end.",
    )
    .detail(format!(
        "{} bits of {} ms since {} end at {}.",
        layout.time_bits,
        layout.unit_ms,
        iso_unix(layout.epoch_unix_ms),
        iso_unix(layout.end_unix_ms().unwrap_or(i64::MAX))
    ))
    .raise()
}

/// Why the ids run ahead of the clock, when a module above the generator knows: the registry, whose
/// worker id may come with the coverage of its previous holder to start above (a lease given
/// back while that holder's ids ran ahead of its clock). Set once at start.
static AHEAD_BECAUSE: std::sync::OnceLock<fn() -> Option<String>> = std::sync::OnceLock::new();

/// Sets what explains ids ahead of the clock. Only call from `_PG_init`.
pub fn on_ahead(explain: fn() -> Option<String>) {
    let _ = AHEAD_BECAUSE.set(explain);
}

#[cold]
#[track_caller]
pub fn clock_too_far_behind(ahead_ms: u64, max_drift_ms: u64, waited_ms: u64) -> ! {
    let numbers = format!(
        "The next id would be {ahead_ms} ms ahead of the clock, more than snowflake.max_drift \
         ({max_drift_ms} ms), and the clock did not catch up within snowflake.drift_wait \
         ({waited_ms} ms)."
    );
    if let Some(why) =
        mutant!(ahead_because, { AHEAD_BECAUSE.get().and_then(|explain| explain()) }, {
            None::<String>
        })
    {
        errors::report(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "this server's worker id starts above its previous holder's ids, ahead of the clock",
            "Ids resume once the clock gets there (the detail says when); nothing needs doing.",
        )
        .detail(format!("{} {numbers}", sentence(&why)))
        .raise()
    }
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the system clock is too far behind the last snowflake id",
        "Ids resume once the clock catches up. If the clock was stepped back on purpose, raise \
         snowflake.max_drift in postgresql.conf and reload.",
    )
    .detail(numbers)
    .raise()
}

#[cold]
#[track_caller]
pub fn address_gone(why: &str) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the address this server's worker id came from is no longer its own",
        "Restart the server: it then takes the worker id of the address it has (see \
         snowflake.worker_id_network).",
    )
    .detail(sentence(why))
    .raise()
}

#[cold]
#[track_caller]
pub fn paced_too_long(waited_ms: u64, max_drift_ms: u64, layout: &Layout) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_next() waited too long for its turn",
        "Ids are being asked for faster than the clock makes them: retry, spread the load, or \
         use a layout with more sequence bits; snowflake_stats() counts paced waits.",
    )
    .detail(format!(
        "Ids ran more than half of snowflake.max_drift ({max_drift_ms} ms) ahead of the clock, \
         where calls take turns at the layout's rate ({} per {} ms), and this call's turn did not \
         come within snowflake.drift_wait ({waited_ms} ms).",
        match layout.per_unit() {
            1 => "1 id".to_string(),
            n => format!("{n} ids"),
        },
        layout.unit_ms
    ))
    .raise()
}

#[cold]
#[track_caller]
pub fn standby() -> ! {
    errors::report(
        Code::ERRCODE_READ_ONLY_SQL_TRANSACTION,
        "cannot generate snowflake ids on a standby server",
        "Call snowflake_next() on the primary. After promotion, this server can.",
    )
    .detail(
        "A standby shares its worker id with its primary, and the primary would not know the ids \
         the standby handed out.",
    )
    .raise()
}

#[cold]
#[track_caller]
pub fn upgrade_mark_not_carried() -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the snowflake mark of the cluster this one was upgraded from is missing",
        format!(
            "Copy {0} from the old cluster's data directory over this cluster's {0} and restart. \
             If the old cluster never generated ids, or the clock is known to be ahead of all of \
             them, delete this cluster's {0} and restart.",
            FILE_NAME
        ),
    )
    .detail(
        "pg_upgrade made this cluster, and the old cluster did not pass on the time its ids \
         reached (its server did not load this version of pg_snowflake). New ids could repeat \
         old ones if the clock is behind them.",
    )
    .raise()
}

/// In the postmaster at start: the start fails rather than guess where ids continue.
#[cold]
pub fn state_file_unreadable(why: &str, corrupt: bool) -> ! {
    errors::report(
        if corrupt { Code::ERRCODE_DATA_CORRUPTED } else { Code::ERRCODE_IO_ERROR },
        format!("could not read the snowflake state file \"{FILE_NAME}\": {why}"),
        format!(
            "Restore the file from a backup of this data directory, or delete it: the server then \
             goes on above the copy of its mark in \"{COPY_PATH}\", or, if that is gone too, \
             starts from the clock, which is safe only if the clock is ahead of every id this \
             server handed out."
        ),
    )
    .detail(
        "The file records a time that every id this server handed out is below; without it, new \
         ids could repeat old ones if the clock is behind.",
    )
    .fatal()
}

/// In the postmaster at start (and after a crash reset shared memory): where the generator goes
/// on from, in the server log (see `state_file::Recovered::account`).
#[cold]
pub fn starting_state(account: Account) {
    match account {
        Account::Log { message, detail } => {
            let note = errors::note(message);
            match detail {
                Some(detail) => note.detail(detail).log(),
                None => note.log(),
            }
        }
        Account::Warning { message, detail, hint } => {
            errors::report(Code::ERRCODE_WARNING, message, hint).detail(detail).warn()
        }
    }
}

/// The state file and its copy were lost (see `starting_state`): no lease until an operator
/// says where ids may go on.
#[cold]
#[track_caller]
pub fn state_file_lost() -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the ids this server handed out before its last start are not known",
        state_file::lost_hint(),
    )
    .detail(format!(
        "At server start the snowflake state file \"{FILE_NAME}\" was missing or empty, and its \
         copy \"{COPY_PATH}\" missing or damaged (the server log says which), although this data \
         directory has handed out ids: new ids could repeat them if the clock is behind them."
    ))
    .raise()
}

/// A durable write of the mark failed: `retry_in_ms` says when the disk is tried again, for the
/// calls that renew the lease (see `write_failure`).
#[cold]
#[track_caller]
pub fn state_file_write_failed(e: &WriteError, retry_in_ms: Option<u64>) -> ! {
    let report = errors::report(
        Code::ERRCODE_IO_ERROR,
        format!("could not write the snowflake state file \"{}\": {}", e.place.path(), e.error),
        "Check the free space and permissions of the data directory, and that neither \
         pg_snowflake.state nor pg_snowflake/mark is immutable (lsattr).",
    );
    match retry_in_ms {
        Some(ms) => report
            .detail(format!(
                "No id is handed out under a new lease until the file can be written. The disk is \
                 tried again in {ms} ms, and at most once a second after that; the calls in \
                 between fail at once, without writing to WAL."
            ))
            .raise(),
        None => report.raise(),
    }
}

/// In WAL redo: recovery stops rather than go on without the record's mark in the state file.
#[cold]
pub fn state_file_write_failed_in_recovery(e: &WriteError) -> ! {
    errors::report(
        Code::ERRCODE_IO_ERROR,
        format!(
            "could not write the snowflake state file \"{}\" during recovery: {}",
            e.place.path(),
            e.error
        ),
        "Check the free space and permissions of the data directory and start the server again; \
         recovery replays the record once more.",
    )
    .detail(
        "Recovery stops here: without the replayed mark in the file, a later restart could hand \
         out ids below the ones made before.",
    )
    .fatal()
}

/// A cancel or `statement_timeout` while the call waited for another session's renewal.
#[cold]
#[track_caller]
pub fn renewal_wait_cancelled(why: &str, renewing_ms: u64) -> ! {
    errors::report(
        Code::ERRCODE_QUERY_CANCELED,
        "canceling the wait for another session's renewal of the snowflake lease",
        "A renewal waits for the disk of the data directory: check it for a stalled or failing \
         device.",
    )
    .detail(format!(
        "{} The renewing session has been making the next lease durable (the state file and WAL) \
         for {renewing_ms} ms; no id was handed out to this call.",
        sentence(why)
    ))
    .raise()
}

/// A background worker asked to stop while it waited for a renewal (a backend's wait ends
/// through its interrupts instead).
#[cold]
#[track_caller]
pub fn renewal_wait_stopped() -> ! {
    errors::report(
        Code::ERRCODE_ADMIN_SHUTDOWN,
        "terminating the wait for the renewal of the snowflake lease: this process was asked to \
         stop",
        "Nothing is needed: the process ends without having handed out an id, and the server \
         starts it again if it is to run.",
    )
    .raise()
}

#[cold]
pub fn clock_stepped_back(by_ms: u64, events: u64, max_drift_ms: u64) {
    errors::report(
        Code::ERRCODE_WARNING,
        format!("the system clock stepped back by {by_ms} ms"),
        "Check the time synchronisation (NTP) of this server.",
    )
    .detail(format!(
        "Backward step number {events} since the server started. New ids continue above the last \
         one, ahead of the clock until it catches up; past snowflake.max_drift ({max_drift_ms} \
         ms) snowflake_next() waits and then fails."
    ))
    .warn();
}

#[cold]
pub fn clock_behind_recovered_mark(by_ms: u64, events: u64) {
    errors::report(
        Code::ERRCODE_WARNING,
        format!("the system clock is {by_ms} ms behind the ids handed out before the restart"),
        "Check the time synchronisation (NTP) of this server.",
    )
    .detail(format!(
        "Backward step number {events} since the server started. New ids continue above the ids \
         of the previous run."
    ))
    .warn();
}
