//! The wall clock, in milliseconds since the Unix epoch (and a monotonic clock for intervals).
//!
//! `clock_gettime(CLOCK_REALTIME)`, which Linux answers from the vDSO without a system call. It
//! is the clock that NTP steps and that libfaketime intercepts, which is what the clock-step
//! tests need. A monotonic clock would hide steps instead of surviving them: ids must agree with
//! the time of other servers, so the generator reads the real time and handles steps itself
//! (see `layout::advance`).
//!
//! Called directly rather than through `SystemTime::now().duration_since(UNIX_EPOCH)`, which
//! callgrind showed to be a large part of an id's instructions (the thread-local lookup and the
//! checked subtraction). What an id costs now, against `random()` and `nextval()`, is in
//! docs/benchmarks.json (`make bench-hotpath`), and `make test` holds it to the budget in
//! scripts/hotpath-budget.

/// Milliseconds since 1970-01-01 UTC; negative if the clock is set before 1970.
#[inline]
pub fn now_unix_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_REALTIME always exists, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    // tv_nsec is in 0..1e9 also before 1970 (tv_sec is then negative): this floors.
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

/// Milliseconds of `CLOCK_MONOTONIC`, for intervals that clock steps must not stretch or cut
/// (how long a renewal has waited for the disk, when a failed disk is tried again). The same
/// clock in every process of the machine, so its readings may be kept in shared memory.
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// 2000-01-01 00:00:00 UTC, PostgreSQL's timestamp epoch, in Unix milliseconds.
pub const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// PostgreSQL's timestamp (microseconds since 2000-01-01) of a Unix millisecond. Every time a
/// layout holds ends by the year 9999 (see `Layout::check`), well inside both ranges.
pub const fn pg_timestamp(unix_ms: i64) -> i64 {
    (unix_ms - PG_EPOCH_UNIX_MS) * 1000
}

/// The Unix millisecond of a PostgreSQL timestamp, rounded down (towards the past).
pub const fn unix_ms_of(pg_us: i64) -> i64 {
    pg_us.div_euclid(1000) + PG_EPOCH_UNIX_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_conversions_round_down_and_agree() {
        assert_eq!(pg_timestamp(PG_EPOCH_UNIX_MS), 0);
        assert_eq!(unix_ms_of(0), PG_EPOCH_UNIX_MS);
        assert_eq!(unix_ms_of(-1), PG_EPOCH_UNIX_MS - 1);
        assert_eq!(unix_ms_of(1999), PG_EPOCH_UNIX_MS + 1);
        for ms in [0, 1, 1_288_834_974_657, 253_402_300_799_999] {
            assert_eq!(unix_ms_of(pg_timestamp(ms)), ms);
        }
    }
}
