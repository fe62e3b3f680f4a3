//! Where the generator lives: its struct, its renewal lock and what waiters of the lock sleep on,
//! in shared memory, set up once at server start (and again after a crash resets shared
//! memory), from the state file.

use super::problems;
use super::Generator;
use crate::shared_memory::InitLock;
use crate::{gucs, state_file};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgSharedMemoryInitialization};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

// SAFETY: atomics only, no pointers: valid at the same address in every process.
unsafe impl PGRXSharedMemory for Generator {}

/// Beside the renewal lock (see `renewal_lock`): the condition variable its waiters sleep on,
/// and since when the lock is held.
#[repr(C)]
pub(super) struct Renewal {
    done: std::cell::UnsafeCell<pg_sys::ConditionVariable>,
    /// `clock::monotonic_ms()` when the renewer took the lock.
    held_since_ms: AtomicU64,
}

impl Renewal {
    /// Broadcast when the renewer lets go of the lock.
    pub(super) fn done(&self) -> *mut pg_sys::ConditionVariable {
        self.done.get()
    }

    pub(super) fn held_since(&self, ms: u64) {
        self.held_since_ms.store(ms, Ordering::Relaxed);
    }

    pub(super) fn since(&self) -> u64 {
        self.held_since_ms.load(Ordering::Relaxed)
    }
}

/// This process's view of the generator, the renewal lock and its condition variable; null
/// until shared memory is set up, which only happens when the library is in
/// `shared_preload_libraries`.
pub struct GeneratorSlot {
    generator: AtomicPtr<Generator>,
    lock: AtomicPtr<pg_sys::LWLock>,
    renewal: AtomicPtr<Renewal>,
}

static SLOT: GeneratorSlot = GeneratorSlot {
    generator: AtomicPtr::new(std::ptr::null_mut()),
    lock: AtomicPtr::new(std::ptr::null_mut()),
    renewal: AtomicPtr::new(std::ptr::null_mut()),
};

const TRANCHE: &std::ffi::CStr = c"pg_snowflake";

impl PgSharedMemoryInitialization for GeneratorSlot {
    type Value = Generator;

    /// # Safety
    /// Called by pgrx from PostgreSQL's `shmem_request_hook`, the only place where adding shared
    /// memory and LWLock tranches is allowed.
    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: see above.
        unsafe {
            pg_sys::RequestAddinShmemSpace(size_of::<Generator>() + size_of::<Renewal>());
            pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
        }
    }

    /// # Safety
    /// Called by pgrx from PostgreSQL's `shmem_startup_hook`, in the postmaster (and in each
    /// backend on platforms without fork, which PostgreSQL on Linux is not).
    unsafe fn on_shmem_startup(&'static self, value: Generator) {
        // SAFETY: called where InitLock may be taken (see above); each name stands for one
        // type.
        unsafe {
            let init = InitLock::acquire();
            let (ptr, _) = init.struct_set_once(c"pg_snowflake", value);
            self.generator.store(ptr, Ordering::Release);
            let (renewal, found) = init.struct_named::<Renewal>(c"pg_snowflake renewal");
            if !found {
                pg_sys::ConditionVariableInit(std::cell::UnsafeCell::raw_get(
                    &raw const (*renewal).done,
                ));
                (&raw mut (*renewal).held_since_ms).write(AtomicU64::new(0));
            }
            self.renewal.store(renewal, Ordering::Release);
            let lock = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
            self.lock.store(lock, Ordering::Release);
        }
    }
}

/// Sets up shared memory, starting from the state file's mark. Only call while
/// `shared_preload_libraries` is being processed.
pub fn init() {
    pgrx::pg_shmem_init!(SLOT = Generator::starting_from(recovered_state(), gucs::layout()));
}

/// The state of the previous run, read in the postmaster at every setup of shared memory (at
/// start, and again after a backend crashed), from the state file or its copy; the server log
/// says which. Neither file means this data directory never handed out an id. An unreadable or
/// corrupt state file stops the start: the ids of the previous run are unknown, and guessing
/// could repeat them.
fn recovered_state() -> state_file::Contents {
    match state_file::recover(Path::new(mutant!(state_file, { "." }, { "/nonexistent" }))) {
        Ok(recovered) => {
            problems::starting_state(recovered.account());
            recovered.state
        }
        Err(e) => problems::state_file_unreadable(
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
        problems::not_preloaded();
    }
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster.
    unsafe { &*ptr }
}

/// The lock that serialises durable writes of the mark (never taken on the hot path).
pub(super) fn renewal_lock() -> *mut pg_sys::LWLock {
    SLOT.lock.load(Ordering::Acquire)
}

/// What waiters of the renewal lock sleep on.
pub(super) fn renewal() -> &'static Renewal {
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster; the lock
    // (and so this) is used only once the generator exists.
    unsafe { &*SLOT.renewal.load(Ordering::Acquire) }
}
