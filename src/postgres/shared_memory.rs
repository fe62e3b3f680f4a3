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

/// Text in shared memory that one process writes and any reads: `WORDS` words of 8 bytes
/// behind a sequence lock (odd while the one writer writes), cut at a character boundary with at
/// least one NUL left. Atomics only, so valid at the same address in every process.
#[repr(C)]
pub struct Text<const WORDS: usize> {
    seq: std::sync::atomic::AtomicU64,
    words: [std::sync::atomic::AtomicU64; WORDS],
}

impl<const WORDS: usize> Text<WORDS> {
    pub const fn empty() -> Self {
        Text {
            seq: std::sync::atomic::AtomicU64::new(0),
            words: [const { std::sync::atomic::AtomicU64::new(0) }; WORDS],
        }
    }

    /// The part of `text` that is kept: `WORDS * 8 - 1` bytes (a NUL left), cut at a character
    /// boundary. A caller that compares a new text with the kept one compares this.
    pub fn kept<'a>(&self, text: &'a str) -> &'a str {
        let mut end = text.len().min(WORDS * 8 - 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    }

    /// Only from the one process that writes it.
    pub fn set(&self, text: &str) {
        use std::sync::atomic::Ordering;
        let text = self.kept(text);
        let mut bytes = vec![0u8; WORDS * 8];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        self.seq.fetch_add(1, Ordering::AcqRel);
        for (word, chunk) in self.words.iter().zip(bytes.chunks(8)) {
            word.store(u64::from_le_bytes(chunk.try_into().unwrap()), Ordering::Release);
        }
        self.seq.fetch_add(1, Ordering::AcqRel);
    }

    /// The text, or `None` while it is empty.
    pub fn get(&self) -> Option<String> {
        use std::sync::atomic::Ordering;
        loop {
            let before = self.seq.load(Ordering::Acquire);
            let mut bytes = Vec::with_capacity(WORDS * 8);
            for word in &self.words {
                bytes.extend_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
            }
            if before.is_multiple_of(2) && self.seq.load(Ordering::Acquire) == before {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                let text = String::from_utf8_lossy(&bytes[..end]).into_owned();
                return (!text.is_empty()).then_some(text);
            }
            std::hint::spin_loop();
        }
    }
}
