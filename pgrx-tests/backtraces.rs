//! No Rust backtrace reaches a client. Since pgrx 0.19, a PostgreSQL error that passes through
//! Rust (a cancel, an error inside SPI) is rethrown as it was, so the black-box test of those
//! (`tests/ids/configuration.rs`) no longer sees a backtrace either way; what pgrx still writes
//! into the DETAIL is the backtrace of a Rust panic (a bug). No client can make the shipped
//! library panic, so this test panics on purpose, in the test build.

#[pgrx::pg_schema]
mod tests {
    use pgrx::pg_sys::panic::CaughtError;
    use pgrx::prelude::*;

    /// A Rust panic becomes an error whose DETAIL holds no backtrace, even with RUST_BACKTRACE
    /// set (as a server started from a developer's shell may have it): `_PG_init` sets
    /// RUST_LIB_BACKTRACE=0 in the postmaster, which every backend inherits.
    #[pg_test]
    fn a_rust_panic_shows_no_backtrace() {
        assert_eq!(std::env::var("RUST_LIB_BACKTRACE").as_deref(), Ok("0"));
        // SAFETY: a backend runs the test on its only thread.
        unsafe { std::env::set_var("RUST_BACKTRACE", "full") };
        let detail = PgTryBuilder::new(|| -> Option<String> { panic!("a bug") })
            .catch_others(|e| match e {
                CaughtError::RustPanic { ereport, .. } => ereport.detail_with_backtrace(),
                other => panic!("not a Rust panic: {other:?}"),
            })
            .execute();
        let detail = detail.unwrap_or_default();
        assert!(!detail.contains("backtrace") && !detail.contains("pgrx"), "{detail}");
    }
}
