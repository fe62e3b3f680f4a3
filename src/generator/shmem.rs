//! Where the generator lives: its struct and its renewal lock in shared memory, set up once at
//! server start (and again after a crash resets shared memory), from the state file.

use super::Generator;
use crate::{errors, gucs, state_file};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgSharedMemoryInitialization};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};

// SAFETY: atomics only, no pointers: valid at the same address in every process.
unsafe impl PGRXSharedMemory for Generator {}

/// This process's view of the generator and of the renewal lock; null until shared memory is
/// set up, which only happens when the library is in `shared_preload_libraries`.
pub struct Slot {
    generator: AtomicPtr<Generator>,
    lock: AtomicPtr<pg_sys::LWLock>,
}

static SLOT: Slot = Slot {
    generator: AtomicPtr::new(std::ptr::null_mut()),
    lock: AtomicPtr::new(std::ptr::null_mut()),
};

const TRANCHE: &std::ffi::CStr = c"pg_snowflake";

impl PgSharedMemoryInitialization for Slot {
    type Value = Generator;

    /// # Safety
    /// Called by pgrx from PostgreSQL's `shmem_request_hook`, the only place where adding shared
    /// memory and LWLock tranches is allowed.
    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: see above.
        unsafe {
            pg_sys::RequestAddinShmemSpace(size_of::<Generator>());
            pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
        }
    }

    /// # Safety
    /// Called by pgrx from PostgreSQL's `shmem_startup_hook`, in the postmaster (and in each
    /// backend on platforms without fork, which PostgreSQL on Linux is not).
    unsafe fn on_shmem_startup(&'static self, value: Generator) {
        // SAFETY: AddinShmemInitLock (MainLWLockArray[21], as pgrx's own PgAtomic uses it)
        // serialises ShmemInitStruct between processes, and the struct is written only by the
        // process that created it.
        unsafe {
            let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
            pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let mut found = false;
            let ptr = pg_sys::ShmemInitStruct(
                c"pg_snowflake".as_ptr(),
                size_of::<Generator>(),
                &mut found,
            )
            .cast::<Generator>();
            assert!(
                ptr.is_aligned(),
                "shared memory is not aligned for the generator"
            );
            if !found {
                ptr.write(value);
            }
            self.generator.store(ptr, Ordering::Release);
            let lock = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
            self.lock.store(lock, Ordering::Release);
            pg_sys::LWLockRelease(init_lock);
        }
    }
}

/// Sets up shared memory, starting from the state file's mark. Only call while
/// `shared_preload_libraries` is being processed.
pub fn init() {
    pgrx::pg_shmem_init!(SLOT = Generator::starting_from(recovered_state(), gucs::layout()));
}

/// The state of the previous run, read in the postmaster at every setup of shared memory (at
/// start, and again after a backend crashed). A missing file means this data directory never
/// handed out an id. An unreadable or corrupt one stops the start: the ids of the previous run
/// are unknown, and guessing could repeat them.
fn recovered_state() -> state_file::Loaded {
    match state_file::read(Path::new(".")) {
        Ok(state) => state,
        Err(e) => errors::state_file_unreadable(
            &e.to_string(),
            matches!(e, state_file::ReadError::Corrupt(_)),
        ),
    }
}

/// The generator, if the library was preloaded.
pub fn try_get() -> Option<&'static Generator> {
    let ptr = SLOT.generator.load(Ordering::Relaxed);
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster.
    (!ptr.is_null()).then(|| unsafe { &*ptr })
}

/// The generator; errors if the library was not preloaded.
#[inline]
pub fn get() -> &'static Generator {
    let ptr = SLOT.generator.load(Ordering::Relaxed);
    if ptr.is_null() {
        errors::not_preloaded();
    }
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster.
    unsafe { &*ptr }
}

/// The lock that serialises durable writes of the mark (never taken on the hot path).
pub(super) fn renewal_lock() -> *mut pg_sys::LWLock {
    SLOT.lock.load(Ordering::Acquire)
}
