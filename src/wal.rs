//! A custom WAL resource manager (PostgreSQL 15+) whose records carry the durable mark.
//!
//! Through WAL the mark reaches every streaming standby and survives crash recovery. Replaying a
//! record raises the floor of the standby's (or recovering primary's) generator and writes its
//! state file, so that a promoted standby continues above every id the old primary handed out.
//!
//! The cost of a custom rmgr: a server must load pg_snowflake to replay WAL that contains these
//! records. PostgreSQL then refuses to start with "resource manager with ID 147 not registered"
//! and a hint to preload the library. After a clean shutdown nothing needs replaying.

use crate::layout::{Layout, TWITTER};
use crate::state_file::Mark;
use crate::{errors, lease};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Custom rmgr ids are 128..=255; 128 is for development, and the PostgreSQL wiki page
/// CustomWALResourceManagers lists the ids taken (129-139, 241 when this was written).
/// TODO(release): register 147 for pg_snowflake on that page before 1.0.
pub const RM_ID: pg_sys::RmgrId = 147;
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

/// Registers the resource manager. Only call while `shared_preload_libraries` is processed.
pub fn register() {
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
    let mut data = [0u8; 24];
    data[..8].copy_from_slice(&mark.units.to_le_bytes());
    data[8..].copy_from_slice(&mark.layout.to_bytes());
    // SAFETY: the standard insert protocol; `data` outlives XLogInsert, which copies it. An
    // error between Begin and Insert is cleaned up by XLogResetInsertion at abort.
    unsafe {
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(data.as_mut_ptr().cast(), data.len() as _);
        let lsn = pg_sys::XLogInsert(RM_ID, info);
        pg_sys::XLogFlush(lsn);
        lsn
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

/// # Safety
/// Called by PostgreSQL's recovery with a decoded record of this rmgr.
unsafe fn record_of(record: *mut pg_sys::XLogReaderState) -> Record {
    // SAFETY: `record` and its decoded record are valid during redo/desc.
    let decoded = unsafe { &*(*record).record };
    // SAFETY: main_data holds main_data_len bytes.
    let data = unsafe {
        std::slice::from_raw_parts(
            decoded.main_data.cast::<u8>(),
            decoded.main_data_len as usize,
        )
    };
    let info = decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
    let (units, layout) = match (info, data.len()) {
        (XLOG_SNOWFLAKE_MARK_V1, 8) => (data, Ok(TWITTER)),
        (XLOG_SNOWFLAKE_MARK | XLOG_SNOWFLAKE_RESET, 24) => (
            &data[..8],
            Layout::from_bytes(data[8..].try_into().unwrap()),
        ),
        _ => return Record::Unknown,
    };
    let units = u64::from_le_bytes(units.try_into().unwrap());
    match layout {
        Ok(layout) if units <= layout.end_mark() => {
            let mark = Mark { units, layout };
            if info == XLOG_SNOWFLAKE_RESET {
                Record::Reset(mark)
            } else {
                Record::Mark(mark)
            }
        }
        Ok(layout) => Record::Corrupt(format!(
            "mark {units} lies past the end of the {} layout ({})",
            layout.describe(),
            layout.end_mark()
        )),
        Err(e) => Record::Corrupt(format!("its layout is invalid: {}", e.0)),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL passes the record being replayed.
    match unsafe { record_of(record) } {
        Record::Mark(mark) => lease::replay_mark(mark),
        Record::Reset(mark) => lease::replay_reset(mark),
        Record::Corrupt(why) => errors::wal_mark_corrupt(&why),
        Record::Unknown => errors::wal_record_unknown(),
    }
}

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
