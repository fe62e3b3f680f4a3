//! A custom WAL resource manager (PostgreSQL 15+) whose records carry the durable mark.
//!
//! Through WAL the mark reaches every streaming standby and survives crash recovery. Replaying a
//! record raises the floor of the standby's (or recovering primary's) generator and writes its
//! state file, so that a promoted standby continues above every id the old primary handed out.
//!
//! The cost of a custom rmgr: a server must load pg_snowflake to replay WAL that contains these
//! records. PostgreSQL then refuses to start with "resource manager with ID 147 not registered"
//! and a hint to preload the library. After a clean shutdown nothing needs replaying.

use crate::errors::{self, Code};
use crate::layout::TWITTER;
use crate::mark::{Mark, MARK_BYTES};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::OnceLock;

/// Custom rmgr ids are 128..=255; 128 is for development, and the PostgreSQL wiki page
/// CustomWALResourceManagers lists the ids taken (129-139, 241 when this was written). 147 is
/// not on that list yet (TODO(release): register it before 1.0), so another extension may use
/// it: `PG_SNOWFLAKE_RMGR_ID=N` at build time picks another (README, "The WAL resource manager
/// id"; `make test-rmgr-id` builds with 200 and replays its WAL).
pub const RM_ID: pg_sys::RmgrId = rmgr_id(option_env!("PG_SNOWFLAKE_RMGR_ID"));

/// The id `PG_SNOWFLAKE_RMGR_ID` asks for, 147 without it; anything but a number in 128..=255
/// stops the build.
const fn rmgr_id(asked: Option<&str>) -> pg_sys::RmgrId {
    let Some(text) = asked else { return 147 };
    let (digits, mut i, mut id) = (text.as_bytes(), 0, 0u32);
    while i < digits.len() {
        assert!(
            digits[i].is_ascii_digit() && i < 3,
            "PG_SNOWFLAKE_RMGR_ID must be a number from 128 to 255"
        );
        id = id * 10 + (digits[i] - b'0') as u32;
        i += 1;
    }
    assert!(
        id >= 128 && id <= 255,
        "PG_SNOWFLAKE_RMGR_ID must be a number from 128 to 255 (custom WAL resource managers)"
    );
    id as pg_sys::RmgrId
}
/// The high four bits of xl_info belong to the rmgr. 0.1.0 wrote the mark alone, in Twitter's
/// milliseconds (8 bytes); 0.2.0 writes it with its layout (8 + 16 bytes), and replays both.
const XLOG_SNOWFLAKE_MARK_V1: u8 = 0x10;
const XLOG_SNOWFLAKE_MARK: u8 = 0x20;
/// `snowflake_reset_layout()`: the same payload, but the floor becomes the mark instead of
/// rising to it.
const XLOG_SNOWFLAKE_RESET: u8 = 0x30;

/// The method table; static, as PostgreSQL's own test_custom_rmgrs module keeps it.
static mut RMGR: pg_sys::RmgrData = pg_sys::RmgrData {
    rm_name: c"pg_snowflake".as_ptr(),
    rm_redo: Some(redo),
    rm_desc: Some(desc),
    rm_identify: Some(identify),
    rm_startup: None,
    rm_cleanup: None,
    rm_mask: None,
    rm_decode: None,
};

/// What redo does with the records: the owner of the state they change (the generator) says,
/// so that this module only encodes, logs and decodes.
pub struct Replay {
    /// A mark: raise the floor to it.
    pub mark: fn(Mark),
    /// A layout reset: the floor becomes the mark.
    pub reset: fn(Mark),
}

static REPLAY: OnceLock<Replay> = OnceLock::new();

/// Registers the resource manager, with what its redo does. Only call while
/// `shared_preload_libraries` is processed.
pub fn register(replay: Replay) {
    let _ = REPLAY.set(replay);
    // SAFETY: called once from _PG_init; RMGR is never written after.
    unsafe { pg_sys::RegisterCustomRmgr(RM_ID, &raw mut RMGR) };
}

/// Writes a mark to WAL and flushes it; returns the end of the record.
pub fn log_mark(mark: Mark) -> pg_sys::XLogRecPtr {
    log(mark, XLOG_SNOWFLAKE_MARK)
}

/// Writes the mark of a layout reset to WAL and flushes it.
pub fn log_reset(mark: Mark) -> pg_sys::XLogRecPtr {
    log(mark, XLOG_SNOWFLAKE_RESET)
}

fn log(mark: Mark, info: u8) -> pg_sys::XLogRecPtr {
    let mut data = mutant!(standby_refusal, { mark.to_bytes() }, {
        // SAFETY: a read of shared state PostgreSQL keeps.
        if unsafe { pg_sys::RecoveryInProgress() } {
            return 0;
        }
        mark.to_bytes()
    });
    // SAFETY: the standard insert protocol; `data` outlives XLogInsert, which copies it. An
    // error between Begin and Insert is cleaned up by XLogResetInsertion at abort.
    unsafe {
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(data.as_mut_ptr().cast(), data.len() as _);
        let lsn = pg_sys::XLogInsert(RM_ID, info);
        mutant!(
            wal_flush,
            {
                pg_sys::XLogFlush(lsn);
                lsn
            },
            { lsn }
        )
    }
}

/// What a record holds: a mark, or why it cannot be read.
enum Record {
    Mark(Mark),
    Reset(Mark),
    /// A mark past the end of its layout, or a layout that is not one: a damaged record.
    Corrupt(String),
    Unknown,
}

/// The record of this rmgr that `record` holds.
///
/// # Safety
/// `record` must be a record of this rmgr that PostgreSQL decoded, as it passes to `rm_redo`
/// and `rm_desc`: valid for the duration of the call.
unsafe fn record_of(record: *mut pg_sys::XLogReaderState) -> Record {
    // SAFETY: `record` and its decoded record are valid during redo/desc.
    let decoded = unsafe { &*(*record).record };
    // SAFETY: main_data holds main_data_len bytes.
    let data = unsafe {
        std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), decoded.main_data_len as usize)
    };
    let info = decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
    let mark = match (info, data.len()) {
        (XLOG_SNOWFLAKE_MARK_V1, 8) => {
            Mark::checked(u64::from_le_bytes(data.try_into().unwrap()), TWITTER)
        }
        (XLOG_SNOWFLAKE_MARK | XLOG_SNOWFLAKE_RESET, MARK_BYTES) => {
            Mark::from_bytes(data.try_into().unwrap())
        }
        _ => return Record::Unknown,
    };
    match mark {
        Ok(mark) if info == XLOG_SNOWFLAKE_RESET => Record::Reset(mark),
        Ok(mark) => Record::Mark(mark),
        Err(why) => Record::Corrupt(why),
    }
}

/// `rm_redo`.
///
/// # Safety
/// Called by PostgreSQL's startup process with a record of this rmgr being replayed.
#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    let replay = REPLAY.get().expect("registered with its replay");
    // SAFETY: PostgreSQL passes the record being replayed.
    match unsafe { record_of(record) } {
        Record::Mark(mark) => mutant!(wal_redo, { (replay.mark)(mark) }, {
            let _ = mark;
        }),
        Record::Reset(mark) => (replay.reset)(mark),
        Record::Corrupt(why) => mark_corrupt(&why),
        Record::Unknown => record_unknown(),
    }
}

/// `rm_desc`: the record's description where the server describes a record it reads (the
/// context of an error in redo, `wal_debug`, pg_walinspect). Not pg_waldump's: a frontend
/// program cannot load the extension, so it prints `desc: UNKNOWN (20) rmid: 147` for these
/// records (`tests/durability/wal_rmgr.rs` reads them so).
///
/// # Safety
/// Called by PostgreSQL with a valid string buffer and a record of this rmgr.
#[pg_guard]
unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL passes a valid buffer and record.
    unsafe {
        if let Record::Mark(mark) | Record::Reset(mark) = record_of(record) {
            let text =
                std::ffi::CString::new(format!("mark {} ({})", mark.units, mark.layout.describe()))
                    .unwrap();
            pg_sys::appendStringInfoString(buf, text.as_ptr());
        }
    }
}

/// `rm_identify`: the name of a record type.
///
/// # Safety
/// Called by PostgreSQL with the `xl_info` of a record of this rmgr; returns a static string.
#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    let info = info & !(pg_sys::XLR_INFO_MASK as u8);
    if info == XLOG_SNOWFLAKE_MARK || info == XLOG_SNOWFLAKE_MARK_V1 {
        c"MARK".as_ptr()
    } else if info == XLOG_SNOWFLAKE_RESET {
        c"RESET".as_ptr()
    } else {
        std::ptr::null()
    }
}

/// In WAL redo (startup process): recovery stops rather than move the generator to a time no id
/// of the record's layout can have.
#[cold]
fn mark_corrupt(why: &str) -> ! {
    errors::report(
        Code::ERRCODE_DATA_CORRUPTED,
        format!("snowflake mark in WAL is corrupt: {why}"),
        "Restore this server from a base backup, or rebuild the standby from its primary.",
    )
    .detail("The record was not written by this version of pg_snowflake, or the WAL is damaged.")
    .fatal()
}

#[cold]
fn record_unknown() -> ! {
    errors::report(
        Code::ERRCODE_DATA_CORRUPTED,
        "unknown pg_snowflake WAL record",
        "Install the pg_snowflake version that wrote this WAL, or restore from a base backup.",
    )
    .detail("The record was not written by this version of pg_snowflake, or the WAL is damaged.")
    .panic()
}
