//! A custom WAL resource manager (PostgreSQL 15+) whose one record type carries the durable mark.
//!
//! Through WAL the mark reaches every streaming standby and survives crash recovery. Replaying a
//! record raises the floor of the standby's (or recovering primary's) generator and writes its
//! state file, so that a promoted standby continues above every id the old primary handed out.
//!
//! The cost of a custom rmgr: a server must load pg_snowflake to replay WAL that contains these
//! records. PostgreSQL then refuses to start with "resource manager with ID 147 not registered"
//! and a hint to preload the library. After a clean shutdown nothing needs replaying.

use crate::layout::END_MARK;
use crate::{errors, lease};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Custom rmgr ids are 128..=255; 128 is for development, and the PostgreSQL wiki page
/// CustomWALResourceManagers lists the ids taken (129-139, 241 when this was written).
/// TODO(release): register 147 for pg_snowflake on that page before 1.0.
pub const RM_ID: pg_sys::RmgrId = 147;
/// The high four bits of xl_info belong to the rmgr.
const XLOG_SNOWFLAKE_MARK: u8 = 0x10;

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

/// Writes `mark_ms` to WAL and flushes it; returns the end of the record.
pub fn log_mark(mark_ms: u64) -> pg_sys::XLogRecPtr {
    let mut data = mark_ms.to_le_bytes();
    // SAFETY: the standard insert protocol; `data` outlives XLogInsert, which copies it. An
    // error between Begin and Insert is cleaned up by XLogResetInsertion at abort.
    unsafe {
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(data.as_mut_ptr().cast(), data.len() as _);
        let lsn = pg_sys::XLogInsert(RM_ID, XLOG_SNOWFLAKE_MARK);
        pg_sys::XLogFlush(lsn);
        lsn
    }
}

/// # Safety
/// Called by PostgreSQL's recovery with a decoded record of this rmgr.
unsafe fn mark_of(record: *mut pg_sys::XLogReaderState) -> Option<u64> {
    // SAFETY: `record` and its decoded record are valid during redo/desc.
    let decoded = unsafe { &*(*record).record };
    if decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8) != XLOG_SNOWFLAKE_MARK
        || decoded.main_data_len != 8
    {
        return None;
    }
    // SAFETY: main_data holds main_data_len bytes.
    let bytes = unsafe { std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), 8) };
    Some(u64::from_le_bytes(bytes.try_into().unwrap()))
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL passes the record being replayed.
    match unsafe { mark_of(record) } {
        Some(mark_ms) if mark_ms <= END_MARK => lease::replay_mark(mark_ms),
        Some(mark_ms) => errors::wal_mark_corrupt(mark_ms),
        None => errors::wal_record_unknown(),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL passes a valid buffer and record.
    unsafe {
        if let Some(mark_ms) = mark_of(record) {
            let text = std::ffi::CString::new(format!("mark {mark_ms} ms")).unwrap();
            pg_sys::appendStringInfoString(buf, text.as_ptr());
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    if info & !(pg_sys::XLR_INFO_MASK as u8) == XLOG_SNOWFLAKE_MARK {
        c"MARK".as_ptr()
    } else {
        std::ptr::null()
    }
}
