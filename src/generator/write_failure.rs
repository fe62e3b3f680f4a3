//! A durable write of the mark that failed, remembered in shared memory, so that a disk that
//! keeps failing (a state file that cannot be replaced, a full disk, EIO) is tried again at a
//! bounded rate instead of by every call.
//!
//! A renewal that fails after its WAL record (the rename of the state file or of its copy, or
//! the sync of their directory) has written that record: if every call that needs a lease
//! tried again, each would write and flush one more, and an error storm would become a WAL and
//! fsync storm (0.3.0: 2,000 failing calls, 112 KB of WAL). Instead, once a write failed, the
//! calls that need the disk within `RETRY_MS` fail at once with the same error, without
//! touching the disk or WAL; the first call after that tries again, and ids resume as soon as a
//! try succeeds. Read and written only under the renewal lock.

use crate::clock;
use crate::state_file::{Place, WriteError};
use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

/// How often a failing disk is tried: as often as renewals come under load (one a second, see
/// `lease`), so that a failing disk costs no more WAL than a working one.
pub const RETRY_MS: u64 = 1_000;

pub struct WriteFailure {
    /// The errno of the last failure; 0 once a write succeeded.
    errno: AtomicI32,
    /// Where it failed: 0 the state file, 1 its copy.
    place: AtomicU32,
    /// When the disk may be tried again, in `clock::monotonic_ms()`.
    retry_at_ms: AtomicU64,
}

impl WriteFailure {
    pub const fn new() -> WriteFailure {
        WriteFailure {
            errno: AtomicI32::new(0),
            place: AtomicU32::new(0),
            retry_at_ms: AtomicU64::new(0),
        }
    }

    /// Whether the disk may be tried now: no failure since the last success, or the time to try
    /// again has come. Otherwise the last failure, as it was, and how long until the next try.
    pub fn may_write(&self) -> Result<(), (WriteError, u64)> {
        let errno = self.errno.load(Ordering::Relaxed);
        let now = clock::monotonic_ms();
        let retry_at = self.retry_at_ms.load(Ordering::Relaxed);
        if mutant!(write_retry, { errno == 0 || now >= retry_at }, { true }) {
            return Ok(());
        }
        let place = match self.place.load(Ordering::Relaxed) {
            0 => Place::StateFile,
            _ => Place::Copy,
        };
        let error = io::Error::from_raw_os_error(errno);
        Err((WriteError { place, error }, retry_at - now))
    }

    /// Remembers how a write went.
    pub fn note<T>(&self, result: &Result<T, WriteError>) {
        match result {
            Ok(_) => self.errno.store(0, Ordering::Relaxed),
            Err(e) => {
                // Errors without an errno (a short write) are kept as EIO.
                let errno = e.error.raw_os_error().unwrap_or(libc::EIO);
                self.errno.store(errno, Ordering::Relaxed);
                self.place.store(e.place as u32, Ordering::Relaxed);
                self.retry_at_ms.store(clock::monotonic_ms() + RETRY_MS, Ordering::Relaxed);
            }
        }
    }
}
