//! The generator's state in shared memory, one per cluster, and how it is set up at server start.

use crate::layout::Layout;
use crate::state_file::Mark;
use crate::{errors, gucs, state_file};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgSharedMemoryInitialization};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Everything is an atomic: the hot path takes no lock. The first cache line holds the three
/// fields every call reads (and `tick`, which every call writes); the second holds what the
/// lease renewal writes, about once a second, so that a renewal does not take the hot line away
/// from the other CPUs.
///
/// Times are in time units of the configured layout (milliseconds for Twitter's), except the
/// clock readings, which are in milliseconds since 1970 whatever the layout.
#[repr(C, align(64))]
pub struct Shared {
    /// The last tick handed out (`units << sequence_bits | sequence`, see `layout`).
    pub tick: AtomicU64,
    /// The highest clock reading seen, in Unix ms: a reading far below it is a backward clock
    /// step. Written about once a millisecond.
    pub clock_high_ms: AtomicU64,
    /// Ids below this time unit need no lease work: `lease` minus the renewal headroom.
    pub renew_at: AtomicU64,
    _end_of_hot_line: [u64; 5],

    /// Ids below this time unit are covered by a durable mark (WAL and state file, and the
    /// synchronous standbys). 0 until the first renewal after start or promotion.
    pub lease: AtomicU64,
    /// The newest mark written to WAL and the state file; ahead of `lease` while its
    /// renewer waits for synchronous standbys. Written under the renewal lock by renewers, and
    /// raised by WAL replay in the startup process, when no backend can renew.
    pub mark: AtomicU64,
    /// End of the WAL record of `mark`.
    pub mark_lsn: AtomicU64,
    /// The mark recovered at start from the state file and raised by WAL replay, converted to
    /// the configured layout: ids after a restart or promotion start here.
    pub floor: AtomicU64,
    /// The state file's directory entry has been synced since start.
    pub state_file_synced: AtomicBool,
    /// The state file says this cluster was made by pg_upgrade without the old cluster's mark:
    /// no lease is granted until an operator settles it (see `upgrade`).
    pub not_carried: AtomicBool,
    /// The recovered mark was made with another layout than the configured one (kept in
    /// `recorded_layout`): the first renewal checks that the configured layout's ids can
    /// continue above the old ones (see `lease::settle_layout`).
    pub layout_differs: AtomicBool,
    /// `Layout::to_bytes` of that layout, in two words.
    pub recorded_layout: [AtomicU64; 2],

    /// Counters for `snowflake_stats()`, all written on cold paths.
    /// Durable writes of a new mark since start.
    pub renewals: AtomicU64,
    /// Backward clock steps seen since start (including a clock behind the recovered mark).
    pub clock_steps_back: AtomicU64,
    pub largest_step_back_ms: AtomicU64,
    /// 1 ms naps of callers that found the ids more than `max_drift` ahead of the clock.
    pub clock_waits: AtomicU64,
    /// Calls that failed after `drift_wait` of such naps.
    pub clock_failures: AtomicU64,
    /// 1 ms naps of paced backends (see `layout::Pacer`).
    pub paced_waits: AtomicU64,
    /// Ids handed out, added by each backend at the end of each transaction (see `stats`).
    pub ids: AtomicU64,
    /// When this struct was set up (start, or crash recovery), in Unix ms.
    pub started_unix_ms: AtomicU64,
}

const _: () = assert!(std::mem::offset_of!(Shared, lease) == 64);

// SAFETY: atomics only, no pointers: valid at the same address in every process.
unsafe impl PGRXSharedMemory for Shared {}

impl Shared {
    fn starting_from(state: state_file::Loaded, layout: &Layout) -> Shared {
        let s = Shared {
            // 0, not the floor: the first renewal raises it (lease::raise_to_floor), and warns
            // if the clock is behind the floor.
            tick: AtomicU64::new(0),
            clock_high_ms: AtomicU64::new(0),
            renew_at: AtomicU64::new(0),
            _end_of_hot_line: [0; 5],
            lease: AtomicU64::new(0),
            mark: AtomicU64::new(0),
            mark_lsn: AtomicU64::new(0),
            floor: AtomicU64::new(0),
            state_file_synced: AtomicBool::new(false),
            not_carried: AtomicBool::new(state == state_file::Loaded::NotCarried),
            layout_differs: AtomicBool::new(false),
            recorded_layout: [AtomicU64::new(0), AtomicU64::new(0)],
            renewals: AtomicU64::new(0),
            clock_steps_back: AtomicU64::new(0),
            largest_step_back_ms: AtomicU64::new(0),
            clock_waits: AtomicU64::new(0),
            clock_failures: AtomicU64::new(0),
            paced_waits: AtomicU64::new(0),
            ids: AtomicU64::new(0),
            started_unix_ms: AtomicU64::new(crate::clock::now_unix_ms().max(0) as u64),
        };
        if let state_file::Loaded::Mark(mark) = state {
            s.raise_floor(mark, layout);
        }
        s
    }

    /// Raises the floor to a recovered mark, converted to the configured layout, and notes a
    /// mark of another layout. Returns whether the floor moved.
    pub fn raise_floor(&self, mark: Mark, layout: &Layout) -> bool {
        let units = mark.units_in(layout).min(layout.end_mark());
        if !mark.layout.same_ids(layout) {
            self.note_recorded_layout(&mark.layout);
        }
        let moved = units > self.floor.load(Ordering::Acquire);
        if moved {
            self.floor.store(units, Ordering::Release);
            self.mark.fetch_max(units, Ordering::AcqRel);
        }
        moved
    }

    pub fn note_recorded_layout(&self, recorded: &Layout) {
        let bytes = recorded.to_bytes();
        for (word, half) in self.recorded_layout.iter().zip(bytes.chunks(8)) {
            word.store(
                u64::from_le_bytes(half.try_into().unwrap()),
                Ordering::Release,
            );
        }
        self.layout_differs.store(true, Ordering::Release);
    }

    /// The layout of the recovered mark, when it differs from the configured one.
    pub fn recorded_layout(&self) -> Option<Layout> {
        if !self.layout_differs.load(Ordering::Acquire) {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (word, half) in self.recorded_layout.iter().zip(bytes.chunks_mut(8)) {
            half.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
        }
        Layout::from_bytes(&bytes).ok()
    }
}

/// This process's view of the struct and of the renewal lock; null until shared memory is set
/// up, which only happens when the library is in `shared_preload_libraries`.
pub struct Slot {
    shared: AtomicPtr<Shared>,
    lock: AtomicPtr<pg_sys::LWLock>,
}

static SLOT: Slot = Slot {
    shared: AtomicPtr::new(std::ptr::null_mut()),
    lock: AtomicPtr::new(std::ptr::null_mut()),
};

const TRANCHE: &std::ffi::CStr = c"pg_snowflake";

impl PgSharedMemoryInitialization for Slot {
    type Value = Shared;

    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: called from shmem_request_hook, where adding shared memory is allowed.
        unsafe {
            pg_sys::RequestAddinShmemSpace(size_of::<Shared>());
            pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
        }
    }

    unsafe fn on_shmem_startup(&'static self, value: Shared) {
        // SAFETY: called from shmem_startup_hook; AddinShmemInitLock (MainLWLockArray[21], as
        // pgrx's own PgAtomic uses it) serialises ShmemInitStruct between processes, and the
        // struct is written only by the process that created it.
        unsafe {
            let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
            pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
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
            self.shared.store(ptr, Ordering::Release);
            let lock = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
            self.lock.store(lock, Ordering::Release);
            pg_sys::LWLockRelease(init_lock);
        }
    }
}

/// Sets up shared memory, starting from the state file's mark. Only call while
/// `shared_preload_libraries` is being processed.
pub fn init() {
    pgrx::pg_shmem_init!(SLOT = Shared::starting_from(recovered_state(), gucs::layout()));
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

/// The shared struct, if the library was preloaded.
pub fn try_get() -> Option<&'static Shared> {
    let ptr = SLOT.shared.load(Ordering::Relaxed);
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster.
    (!ptr.is_null()).then(|| unsafe { &*ptr })
}

/// The shared struct; errors if the library was not preloaded.
#[inline]
pub fn get() -> &'static Shared {
    let ptr = SLOT.shared.load(Ordering::Relaxed);
    if ptr.is_null() {
        errors::not_preloaded();
    }
    // SAFETY: set once at shmem startup to a struct that lives as long as the cluster.
    unsafe { &*ptr }
}

/// The lock that serialises durable writes of the mark (never taken on the hot path).
pub fn renewal_lock() -> *mut pg_sys::LWLock {
    SLOT.lock.load(Ordering::Acquire)
}
