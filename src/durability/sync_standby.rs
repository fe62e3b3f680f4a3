//! Waiting until the synchronous standbys have flushed a mark's WAL, before the lease it carries
//! is published: a promoted synchronous standby then always starts above the old primary.
//!
//! What decides whether to wait is the cluster's configuration (`synchronous_standby_names`, as
//! the checkpointer publishes it in shared memory), never the renewing session's
//! `synchronous_commit`: one session with `synchronous_commit = off` must not switch the guarantee
//! off for every other session, since the lease it renews covers their ids too. The wait is for
//! `remote_flush`, the level of `synchronous_commit = on`: a promoting standby replays all the WAL
//! it has flushed before it accepts writes.
//!
//! PostgreSQL's `SyncRepWaitForLSN()` is not used: it takes its mode from the session's setting,
//! and on a cancel or a terminate it returns as if the wait had completed (a commit cannot be
//! undone, so it can only warn). A lease can be withheld, so this wait is an ordinary cancellable
//! loop: a cancel or `statement_timeout` raises an error that says what was being waited for,
//! `pg_terminate_backend` ends the session as usual, and either way nothing is published.

use crate::errors::{self, Code};
use crate::text::sentence;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::pg_sys::PgTryBuilder;
use pgrx::PgSqlErrorCode;
use std::ffi::CStr;

/// Flags of `WalSndCtlData.sync_standbys_status` (walsender_private.h, PostgreSQL 15.13, 16.9,
/// 17.5 and later): the checkpointer has initialised the flag, and standbys are defined.
const SYNC_STANDBY_INIT: u8 = 1 << 0;
const SYNC_STANDBY_DEFINED: u8 = 1 << 1;
/// The index of `remote_flush` in `WalSndCtlData.lsn` (syncrep.h).
const SYNC_REP_WAIT_FLUSH: usize = 1;
/// `SyncRepLock` is `MainLWLockArray[32]` in PostgreSQL 15 to 19 (lwlocknames.h, lwlocklist.h).
const SYNC_REP_LOCK: usize = 32;
/// Polls start at 1 ms (a loopback standby answers within that) and back off to 16 ms while a
/// standby is away, so that many waiting backends do not wake a thousand times a second each.
const FIRST_NAP_MS: i64 = 1;
const LONGEST_NAP_MS: i64 = 16;

/// How the shared flag byte is read. Before the minor releases of May 2025 it was a `bool`
/// (`sync_standbys_defined`); since then it holds the two flags above. The byte is at the same
/// place in both, so the running server's version decides how to read it. (19 declares it
/// `uint8`, not `bits8`: the same byte right after `lsn`, with the same two flags.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagFormat {
    Bool,
    Bits,
}

impl FlagFormat {
    /// The format of a server with this `server_version_num`.
    pub fn of_server(version_num: u32) -> FlagFormat {
        let first_with_bits = match version_num / 10_000 {
            15 => 150_013,
            16 => 160_009,
            17 => 170_005,
            _ => 0, // 18 and later have always had the bits
        };
        if version_num >= first_with_bits {
            FlagFormat::Bits
        } else {
            FlagFormat::Bool
        }
    }
}

/// Whether synchronous standbys are defined, as `SyncRepWaitForLSN()` decides it: the shared
/// flag, or, before the checkpointer has initialised it just after start, this backend's own
/// `synchronous_standby_names`.
pub fn standbys_defined(flag: u8, format: FlagFormat, names_configured: bool) -> bool {
    match format {
        FlagFormat::Bool => {
            mutant!(flag_format_bool, { flag != 0 }, { flag & SYNC_STANDBY_DEFINED != 0 })
        }
        FlagFormat::Bits if flag & SYNC_STANDBY_INIT == 0 => names_configured,
        FlagFormat::Bits => flag & SYNC_STANDBY_DEFINED != 0,
    }
}

/// Returns once the synchronous standbys (if the cluster has any) have flushed WAL up to `lsn`.
/// Errors out on a cancel or terminate, like any other wait. Hold no lock while calling this:
/// the wait has no upper bound while a synchronous standby is away.
pub fn wait_for_flush(lsn: pg_sys::XLogRecPtr) {
    let format = FlagFormat::of_server(server_version_num());
    mutant!(
        sync_wait,
        {
            if acknowledged(lsn, format) {
                return;
            }
        },
        {
            return;
        }
    );
    let mut nap_ms = FIRST_NAP_MS;
    loop {
        // SAFETY: MyLatch is this process's latch; WL_EXIT_ON_PM_DEATH ends the process if the
        // postmaster dies, as every other wait of a backend does.
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                nap_ms,
                pg_sys::WaitEventIPC::WAIT_EVENT_SYNC_REP,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        serve_interrupts();
        if acknowledged(lsn, format) {
            return;
        }
        nap_ms = (nap_ms * 2).min(LONGEST_NAP_MS);
    }
}

/// Serves a pending cancel or terminate. A cancel (or `statement_timeout`) is re-raised as an
/// error that says which wait it ended: PostgreSQL's error context would say so, but it does not
/// survive the way pgrx carries an error through Rust code.
fn serve_interrupts() {
    PgTryBuilder::new(|| {
        pgrx::check_for_interrupts!();
    })
    .catch_when(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, |cancel| {
        let why = match &cancel {
            CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => {
                report.message().to_string()
            }
            CaughtError::RustPanic { .. } => cancel.rethrow(),
        };
        wait_cancelled(&why)
    })
    .execute();
}

/// Whether no wait is needed: no synchronous standbys are defined, or they have flushed `lsn`.
fn acknowledged(lsn: pg_sys::XLogRecPtr, format: FlagFormat) -> bool {
    // SAFETY: WalSndCtl is set up in shared memory before any backend starts (max_wal_senders
    // may be 0; the struct exists anyway). Both fields are read under SyncRepLock, as syncrep.c
    // reads them.
    let (flag, flushed) = unsafe {
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(SYNC_REP_LOCK)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED);
        let ctl = &*pg_sys::WalSndCtl;
        let flag = flag_byte(ctl);
        let flushed = ctl.lsn[SYNC_REP_WAIT_FLUSH];
        pg_sys::LWLockRelease(lock);
        (flag, flushed)
    };
    !standbys_defined(flag, format, names_configured()) || flushed >= lsn
}

/// The flag byte of `ctl`, whichever name the headers this was built with give it
/// (`sync_standbys_defined` in 16.2, `sync_standbys_status` in 15.13+, 16.9+, 17.5+ and 18): in
/// every version it is the member right after the `lsn` array (walsender_private.h), so it is read
/// by that position rather than by a name that one build or the other lacks.
///
/// # Safety
/// `ctl` is `*WalSndCtl`, read under `SyncRepLock`.
unsafe fn flag_byte(ctl: &pg_sys::WalSndCtlData) -> u8 {
    let offset = std::mem::offset_of!(pg_sys::WalSndCtlData, lsn) + std::mem::size_of_val(&ctl.lsn);
    // SAFETY: the offset is inside the struct (a bool or bits8 member follows `lsn`, and a
    // ConditionVariable after it), and any byte is a valid u8.
    unsafe { *(ctl as *const pg_sys::WalSndCtlData as *const u8).add(offset) }
}

/// This backend's `synchronous_standby_names` is not empty.
fn names_configured() -> bool {
    // SAFETY: a GUC string variable: NULL or a NUL-terminated string owned by guc.c.
    unsafe {
        let names = pg_sys::SyncRepStandbyNames;
        !names.is_null() && *names != 0
    }
}

/// `server_version_num` of the running server (not of the headers this was built with: a minor
/// release changed the flag's format).
fn server_version_num() -> u32 {
    // SAFETY: a built-in GUC that always exists; the result is a NUL-terminated string.
    let value = unsafe {
        CStr::from_ptr(pg_sys::GetConfigOption(c"server_version_num".as_ptr(), false, false))
    };
    value.to_str().ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[cold]
#[track_caller]
fn wait_cancelled(why: &str) -> ! {
    errors::report(
        Code::ERRCODE_QUERY_CANCELED,
        "canceling the wait for the synchronous standbys to flush the snowflake lease",
        "Check that the standbys named in synchronous_standby_names are running and connected, \
         or empty that setting to stop waiting for them.",
    )
    .detail(format!(
        "{} No id was handed out under the new lease; the next call waits for it again.",
        sentence(why)
    ))
    .raise()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_format_follows_the_minor_release() {
        assert_eq!(FlagFormat::of_server(150_012), FlagFormat::Bool);
        assert_eq!(FlagFormat::of_server(150_013), FlagFormat::Bits);
        assert_eq!(FlagFormat::of_server(150_020), FlagFormat::Bits);
        assert_eq!(FlagFormat::of_server(160_008), FlagFormat::Bool);
        assert_eq!(FlagFormat::of_server(170_004), FlagFormat::Bool);
        assert_eq!(FlagFormat::of_server(170_011), FlagFormat::Bits);
        assert_eq!(FlagFormat::of_server(180_000), FlagFormat::Bits);
        assert_eq!(FlagFormat::of_server(180_006), FlagFormat::Bits);
    }

    #[test]
    fn standbys_are_defined_as_postgresql_decides_it() {
        use FlagFormat::*;
        // Old servers: a bool.
        assert!(!standbys_defined(0, Bool, true));
        assert!(standbys_defined(1, Bool, false));
        // New servers: initialised flags win over this backend's setting.
        assert!(!standbys_defined(SYNC_STANDBY_INIT, Bits, true));
        assert!(standbys_defined(SYNC_STANDBY_INIT | SYNC_STANDBY_DEFINED, Bits, false));
        // Not yet initialised (just after start): this backend's setting decides.
        assert!(standbys_defined(0, Bits, true));
        assert!(!standbys_defined(0, Bits, false));
    }
}
