//! The wall clock, in milliseconds since the Unix epoch.
//!
//! `clock_gettime(CLOCK_REALTIME)`, which Linux answers from the vDSO without a system call. It
//! is the clock that NTP steps and that libfaketime intercepts, which is what the clock-step
//! tests need. A monotonic clock would hide steps instead of surviving them: ids must agree with
//! the time of other servers, so the generator reads the real time and handles steps itself
//! (see `layout::advance`).
//!
//! Called directly rather than through `SystemTime::now().duration_since(UNIX_EPOCH)`: callgrind
//! counted 64 of the 230 instructions per id in `SystemTime::now` and its checked subtraction.
//! With this and the direct GUC reads (`gucs::hot`), an id costs 147.5 instructions over an empty
//! `generate_series` row, against 51 for a pgrx function that returns a constant, 107 for
//! `random()` and 2517 for `nextval()`.

/// Milliseconds since 1970-01-01 UTC; negative if the clock is set before 1970.
#[inline]
pub fn now_unix_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_REALTIME always exists, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    // tv_nsec is in 0..1e9 also before 1970 (tv_sec is then negative): this floors.
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}
