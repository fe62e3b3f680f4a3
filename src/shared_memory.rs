//! Structs in PostgreSQL's shared memory, set up the one way both owners of one (the generator
//! and the registry) need: under `AddinShmemInitLock`, found again after a crash reset, aligned.

use pgrx::pg_sys;

/// `AddinShmemInitLock` held: it serialises `ShmemInitStruct` between processes, so that the
/// process that creates a struct also fills it before any other finds it. Released on drop.
pub struct InitLock(*mut pg_sys::LWLock);

impl InitLock {
    /// # Safety
    /// Only from `shmem_startup_hook` (pgrx's `on_shmem_startup`), where the lock exists and no
    /// other lock of this process is held.
    pub unsafe fn acquire() -> Self {
        // SAFETY: AddinShmemInitLock is MainLWLockArray[21] in 15 to 19 (lwlocklist.h; pgrx's
        // own PgAtomic takes it the same way); the array exists from the postmaster's start.
        // 19 keeps ShmemInitStruct beside its new RegisterShmemCallbacks, as "legacy"
        // (storage/shmem.h).
        unsafe {
            let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
            pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            InitLock(lock)
        }
    }

    /// The struct of type `T` named `name` (its size requested in `shmem_request_hook`), and
    /// whether it was there already: when not, the caller fills it before dropping the lock.
    ///
    /// # Safety
    /// `name` names a struct of type `T` only, in every process.
    pub unsafe fn struct_named<T>(&self, name: &std::ffi::CStr) -> (*mut T, bool) {
        let mut found = false;
        // SAFETY: the lock is held (self), and the size is T's, as requested.
        let ptr = unsafe { pg_sys::ShmemInitStruct(name.as_ptr(), size_of::<T>(), &mut found) }
            .cast::<T>();
        // ShmemInitStruct aligns every struct to a cache line (shmem.c), more than any here
        // needs; checked, for a write through a misaligned pointer would be undefined.
        assert!(ptr.is_aligned(), "shared memory is not aligned for {name:?}");
        (ptr, found)
    }
}

impl InitLock {
    /// As [`InitLock::struct_named`], and the struct is set to `value` when it was not there.
    ///
    /// # Safety
    /// As [`InitLock::struct_named`].
    pub unsafe fn struct_set_once<T>(&self, name: &std::ffi::CStr, value: T) -> (*mut T, bool) {
        // SAFETY: see above; a struct not found is this process's alone until the lock goes.
        unsafe {
            let (ptr, found) = self.struct_named::<T>(name);
            if !found {
                ptr.write(value);
            }
            (ptr, found)
        }
    }
}

impl Drop for InitLock {
    fn drop(&mut self) {
        // SAFETY: acquired by this process in `acquire`.
        unsafe { pg_sys::LWLockRelease(self.0) }
    }
}
