//! The wall clock, in milliseconds since the Unix epoch.
//!
//! `SystemTime::now()` is `clock_gettime(CLOCK_REALTIME)`, which Linux answers from the vDSO
//! without a system call. It is the clock that NTP steps and that libfaketime intercepts, which is
//! what the clock-step tests need. A monotonic clock would hide steps instead of surviving them:
//! ids must agree with the time of other servers, so the generator reads the real time and
//! handles steps itself (see `layout::advance`).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since 1970-01-01 UTC; negative if the clock is set before 1970.
#[inline]
pub fn now_unix_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        // Seconds and sub-second millis instead of `as_millis()`, which divides a u128.
        Ok(d) => d.as_secs() as i64 * 1000 + d.subsec_millis() as i64,
        Err(e) => {
            let d = e.duration();
            -(d.as_secs() as i64 * 1000 + d.subsec_millis() as i64)
        }
    }
}
