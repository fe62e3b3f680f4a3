//! The cluster-wide generator: one [`Shared`] struct in shared memory, drawn from by every
//! backend and parallel worker without a lock.
//!
//! The hot path is one clock read, two atomic loads and one compare-and-swap: the last tick
//! handed out lives in one `AtomicU64`, and a call moves it to `layout::advance(prev, now)`.
//! Because every id of the cluster is a successful CAS on that one word, ids are unique and
//! strictly increasing in the order they are handed out, across all backends.

use crate::layout::{self, Advance, Tick};
use crate::{clock, errors, gucs};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgSharedMemoryInitialization};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// The state shared by all backends of the cluster.
#[repr(C)]
pub struct Shared {
    /// The last tick handed out (`ms << 12 | sequence`, see `layout`).
    tick: AtomicU64,
    /// Ticks whose millisecond is below this may be handed out. `u64::MAX`: no limit.
    lease_ms: AtomicU64,
}

// SAFETY: only atomics, no pointers: valid at the same address in every process.
unsafe impl PGRXSharedMemory for Shared {}

impl Shared {
    fn new() -> Shared {
        Shared {
            tick: AtomicU64::new(0),
            lease_ms: AtomicU64::new(u64::MAX),
        }
    }

    /// The next tick: the CAS loop of the hot path, with everything rare moved out of line.
    #[inline]
    fn next_tick(&self) -> Tick {
        let max_drift = gucs::max_drift_ms();
        let mut now = now_ms();
        let mut naps = 0;
        let mut prev = self.tick.load(Ordering::Acquire);
        loop {
            match layout::advance(Tick(prev), now, max_drift) {
                Advance::To(next) if next.ms() < self.lease_ms.load(Ordering::Acquire) => {
                    match self.tick.compare_exchange_weak(
                        prev,
                        next.0,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return next,
                        Err(current) => prev = current,
                    }
                }
                Advance::To(_) => unreachable!("the lease is unlimited until it is made durable"),
                Advance::TooFarAhead { ahead_ms } => {
                    nap_for_clock(&mut naps, ahead_ms, max_drift);
                    now = now_ms();
                    prev = self.tick.load(Ordering::Acquire);
                }
                Advance::Exhausted => errors::layout_exhausted(),
            }
        }
    }
}

/// This process's view of the shared struct; null until shared memory is set up, which only
/// happens when the library is in `shared_preload_libraries`.
static SHARED: SharedSlot = SharedSlot(AtomicPtr::new(std::ptr::null_mut()));

pub struct SharedSlot(AtomicPtr<Shared>);

impl PgSharedMemoryInitialization for SharedSlot {
    type Value = Shared;

    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: called from shmem_request_hook, where adding shared memory is allowed.
        unsafe { pg_sys::RequestAddinShmemSpace(size_of::<Shared>()) };
    }

    unsafe fn on_shmem_startup(&'static self, value: Shared) {
        // SAFETY: called from shmem_startup_hook; AddinShmemInitLock (MainLWLockArray[21], as
        // pgrx's own PgAtomic uses it) serialises ShmemInitStruct between processes, and the
        // struct is written only by the process that created it.
        unsafe {
            let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
            pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let mut found = false;
            let ptr =
                pg_sys::ShmemInitStruct(c"pg_snowflake".as_ptr(), size_of::<Shared>(), &mut found)
                    .cast::<Shared>();
            assert!(
                ptr.is_aligned(),
                "shared memory is not aligned for the generator"
            );
            if !found {
                ptr.write(value);
            }
            self.0.store(ptr, Ordering::Release);
            pg_sys::LWLockRelease(lock);
        }
    }
}

/// Sets up shared memory. Only call while `shared_preload_libraries` is being processed.
pub fn init() {
    pgrx::pg_shmem_init!(SHARED = Shared::new());
}

#[inline]
fn shared() -> &'static Shared {
    let ptr = SHARED.0.load(Ordering::Relaxed);
    if ptr.is_null() {
        errors::not_preloaded();
    }
    // SAFETY: set once in shmem startup to a struct that lives as long as the cluster.
    unsafe { &*ptr }
}

/// The clock in milliseconds since the snowflake epoch.
#[inline]
fn now_ms() -> u64 {
    let unix_ms = clock::now_unix_ms();
    match layout::ms_since_epoch(unix_ms) {
        Some(ms) => ms,
        None => errors::clock_before_epoch(unix_ms),
    }
}

/// Sleeps one millisecond, holding no lock, while the next id would run more than
/// `snowflake.max_drift` ahead of the clock; fails once `snowflake.drift_wait` naps are used up.
/// Naps are counted instead of timed so that a clock that steps during the wait cannot stretch
/// or cut it.
#[cold]
fn nap_for_clock(naps: &mut u64, ahead_ms: u64, max_drift: u64) {
    let limit = gucs::drift_wait_ms();
    if *naps >= limit {
        errors::clock_too_far_behind(ahead_ms, max_drift, limit);
    }
    *naps += 1;
    // 1 ms is the resolution of the id's time: a burst above 4096 ids/ms needs one such nap.
    // SAFETY: a plain sleep; interrupts are served right after it.
    unsafe { pg_sys::pg_usleep(1_000) };
    pgrx::check_for_interrupts!();
}

/// The next id of the cluster. Errors if the library is not preloaded, the worker id is unset,
/// or the clock is too far behind.
#[inline]
pub fn next_id() -> i64 {
    let shared = shared();
    let Some(worker_id) = gucs::worker_id() else {
        errors::worker_id_unset()
    };
    shared.next_tick().id(worker_id)
}
