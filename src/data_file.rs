//! The files pg_snowflake keeps in the data directory (the state file, its copy, the registry's
//! lease cache), in plain Rust: how each is read and how each is replaced. Both go through here,
//! so that every file gets the same care.
//!
//! **Reading: only a regular file, and only as far as its format allows.** Whoever can write to
//! the data directory can put anything under these names. A FIFO there blocked the postmaster in
//! `open()` before it logged a line (`pg_ctl start` timed out; only SIGKILL stopped it), and a
//! symbolic link to `/dev/zero`, or a 3 GB sparse file, was read whole until memory ran out, at
//! every start and at every reset after a backend crash. So a file is opened without blocking
//! and without following a FIFO's wait for a writer (`O_NONBLOCK`), must be a regular file by
//! `fstat` of what was opened (a link to a regular file is followed: a data directory may be
//! assembled from links), must be no larger than its format, and is read at most one byte
//! further, whatever it grows to meanwhile.
//!
//! **Replacing: whole and durably.** The new content goes into a temporary file made afresh
//! (whatever was under its name is removed first, so a FIFO or a link planted there is never
//! opened for writing), is synced, and is renamed over the file; then the directory is synced,
//! without which a power cut could bring the old name back. A crash leaves the old file or the
//! new one, never a mix or nothing.

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The file at `path`, if there is one: at most `max_len` bytes, from a regular file. Anything
/// else is an error that says what is there instead.
pub fn read(path: &Path, max_len: usize) -> io::Result<Option<Vec<u8>>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "not a file"
        };
        return Err(invalid(format!("it is {what}, not a regular file")));
    }
    if meta.len() > max_len as u64 {
        return Err(invalid(format!(
            "it holds {} bytes, more than the {max_len} its format allows",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_len as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max_len {
        return Err(invalid(format!(
            "it grew past the {max_len} bytes its format allows while it was read"
        )));
    }
    Ok(Some(bytes))
}

fn invalid(why: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, why)
}

/// Writes `bytes` to a new regular file at `path` and syncs it; whatever was there is removed
/// first. Not yet in place: see `put_in_place`.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_data()
}

/// Renames `temp` over `name` in `dir`, then syncs `dir`.
pub fn put_in_place(dir: &Path, temp: &str, name: &str) -> io::Result<()> {
    std::fs::rename(dir.join(temp), dir.join(name))?;
    File::open(dir)?.sync_all()
}

/// Replaces `name` in `dir` with `bytes`, durably, through `temp`.
pub fn replace(dir: &Path, temp: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_new(&dir.join(temp), bytes)?;
    put_in_place(dir, temp, name)
}

/// Removes `name` from `dir` durably (nothing there is fine).
pub fn remove(dir: &Path, name: &str) -> io::Result<()> {
    match std::fs::remove_file(dir.join(name)) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    File::open(dir)?.sync_all()
}

/// CRC-32C (Castagnoli), bitwise: these files are written about once a second, so a table would
/// buy nothing.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pg_snowflake-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C for the ASCII digits 1..9.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn a_regular_file_within_its_size_is_read() {
        let dir = scratch("data-file-read");
        assert!(read(&dir.join("f"), 40).unwrap().is_none());
        replace(&dir, "f.tmp", "f", b"forty").unwrap();
        assert_eq!(read(&dir.join("f"), 40).unwrap().unwrap(), b"forty");
        assert_eq!(read(&dir.join("f"), 5).unwrap().unwrap(), b"forty");
        // A link to a regular file is followed.
        symlink(dir.join("f"), dir.join("link")).unwrap();
        assert_eq!(read(&dir.join("link"), 40).unwrap().unwrap(), b"forty");
        remove(&dir, "f").unwrap();
        remove(&dir, "f").unwrap();
        assert!(read(&dir.join("f"), 40).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Each of these hung the postmaster or ran it out of memory before.
    #[test]
    fn fifos_devices_and_huge_files_are_refused_without_blocking_or_reading_them() {
        let dir = scratch("data-file-refuse");
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo, 40).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        symlink("/dev/zero", dir.join("zero")).unwrap();
        let err = read(&dir.join("zero"), 40).unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
        let huge = File::create(dir.join("huge")).unwrap();
        huge.set_len(3 << 30).unwrap(); // sparse: no disk used
        let err = read(&dir.join("huge"), 40).unwrap_err();
        assert!(
            err.to_string()
                .contains("3221225472 bytes, more than the 40"),
            "{err}"
        );
        let err = read(&dir, 40).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        // A FIFO planted where the temporary file goes is removed, not written into.
        let c = std::ffi::CString::new(dir.join("f.tmp").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        replace(&dir, "f.tmp", "f", b"ok").unwrap();
        assert_eq!(read(&dir.join("f"), 40).unwrap().unwrap(), b"ok");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
