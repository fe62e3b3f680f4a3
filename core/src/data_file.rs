//! The files pg_snowflake keeps in the data directory (the state file, its copy, the registry's
//! lease cache), in plain Rust: how each is read and how each is replaced. Both go through here,
//! so that every file gets the same care.
//!
//! **A directory is opened once, and used by its handle.** [`Dir`] opens a directory without
//! following a symbolic link and without blocking (`O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK`), and
//! every file operation after that is relative to that handle (`openat`, `renameat`, `fsync` of
//! the handle). Whoever owns the data directory could otherwise swap the copy's directory
//! between two uses of its name: a symbolic link there had the copy written outside the data
//! directory, and a FIFO swapped in after the rename blocked the renewing backend in `open()`,
//! holding the renewal lock, past `pg_terminate_backend` and a fast shutdown.
//!
//! **Reading: only a regular file, and only as far as its format allows.** Whoever can write to
//! the data directory can put anything under these names. A FIFO there blocked the postmaster in
//! `open()` before it logged a line (`pg_ctl start` timed out; only SIGKILL stopped it), and a
//! symbolic link to `/dev/zero`, or a 3 GB sparse file, was read whole until memory ran out, at
//! every start and at every reset after a backend crash. So a file is opened without blocking
//! (`O_NONBLOCK`: a FIFO then opens at once), must be a regular file by `fstat` of what was
//! opened (a link to a regular file is followed: it is only read), must be no larger than its
//! format, and is read at most one byte further, whatever it grows to meanwhile.
//!
//! **Replacing: whole and durably.** The new content goes into a temporary file made afresh
//! (whatever was under its name is removed first, so a FIFO or a link planted there is never
//! opened for writing), is synced, and is renamed over the file; then the directory is synced,
//! without which a power cut could bring the old name back. A crash leaves the old file or the
//! new one, never a mix or nothing.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A directory, open; every operation is relative to it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// For messages only.
    path: PathBuf,
}

impl Dir {
    /// Opens the directory at `path`: never a symbolic link, and never a wait (a FIFO under the
    /// name is refused at once).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = open_dir_at(libc::AT_FDCWD, path)?;
        Ok(Dir { fd, path: path.to_path_buf() })
    }

    /// Opens the directory `name` in this one, making it first (mode 0700, as the data
    /// directory, its name made durable by a sync of this one) if it is not there. Whatever
    /// else stands under the name (a symbolic link, which would lead the writes outside the
    /// data directory; a file or a FIFO, which would fail every write for good) is removed
    /// first: the name is this program's.
    pub fn open_or_make(&self, name: &str) -> io::Result<Dir> {
        let c = c_name(name)?;
        // SAFETY: an out-buffer for fstatat of a name relative to a directory this handle holds
        // open, the name itself (a link is not followed).
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above: the handle's descriptor, a NUL-terminated name, the buffer.
        let stat = unsafe {
            libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW)
        };
        if mutant!(data_dir_replace, { stat == 0 && st.st_mode & libc::S_IFMT != libc::S_IFDIR }, {
            false
        }) {
            self.unlink(&c)?;
        }
        // SAFETY: a NUL-terminated name relative to a directory this handle holds open.
        if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o700) } == 0 {
            self.sync()?;
        } else {
            let e = io::Error::last_os_error();
            if e.kind() != ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
        self.open_dir(name)
    }

    /// Opens the directory `name` in this one (see `open`).
    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        let fd = open_dir_at(self.fd.as_raw_fd(), Path::new(name)).map_err(|e| {
            // The data directory is the server's working directory: its files by their names.
            let path = match self.path.as_os_str().to_str() {
                Some(".") => name.to_string(),
                _ => self.path.join(name).display().to_string(),
            };
            io::Error::new(e.kind(), format!("{path}: {e}"))
        })?;
        Ok(Dir { fd, path: self.path.join(name) })
    }

    /// The file `name`, if there is one: at most `max_len` bytes, from a regular file. Anything
    /// else is an error that says what is there instead.
    pub fn read(&self, name: &str, max_len: usize) -> io::Result<Option<Vec<u8>>> {
        let c = c_name(name)?;
        // SAFETY: a NUL-terminated name relative to a directory this handle holds open.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                ErrorKind::NotFound => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: a descriptor openat just returned, owned from here on.
        let file = unsafe { File::from_raw_fd(fd) };
        let meta = file.metadata()?;
        let kind = meta.file_type();
        if mutant!(data_file_type, { !kind.is_file() }, { false }) {
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

    /// Writes `bytes` to a new regular file `temp` and syncs it; whatever was under that name is
    /// removed first. Not yet in place: see `put_in_place`.
    pub fn write_new(&self, temp: &str, bytes: &[u8]) -> io::Result<()> {
        let c = c_name(temp)?;
        self.unlink(&c)?;
        // SAFETY: a NUL-terminated name relative to a directory this handle holds open;
        // O_EXCL makes a new file, never one planted under the name meanwhile.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o666 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor openat just returned, owned from here on.
        let mut file = unsafe { File::from_raw_fd(fd) };
        mutant!(
            state_file_sync,
            {
                file.write_all(bytes)?;
                file.sync_data()
            },
            { file.write_all(bytes) }
        )
    }

    /// Renames `temp` over `name`, then syncs this directory.
    pub fn put_in_place(&self, temp: &str, name: &str) -> io::Result<()> {
        let (t, n) = (c_name(temp)?, c_name(name)?);
        let dir = self.fd.as_raw_fd();
        // SAFETY: NUL-terminated names relative to a directory this handle holds open.
        if unsafe { libc::renameat(dir, t.as_ptr(), dir, n.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        mutant!(state_dir_sync, { self.sync() }, { Ok(()) })
    }

    /// Replaces `name` with `bytes`, durably, through `temp`.
    pub fn replace(&self, temp: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_new(temp, bytes)?;
        self.put_in_place(temp, name)
    }

    /// Removes `name` durably (nothing there is fine).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        self.unlink(&c_name(name)?)?;
        self.sync()
    }

    /// Makes the directory's entries durable.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: fsync of a descriptor this handle owns.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn unlink(&self, name: &CString) -> io::Result<()> {
        // SAFETY: a NUL-terminated name relative to a directory this handle holds open.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != ErrorKind::NotFound {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// `openat` of a directory: no link followed, no wait, and words for what is there instead.
fn open_dir_at(at: libc::c_int, path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| invalid("the path holds a NUL byte".into()))?;
    let flags = mutant!(
        data_dir_open,
        {
            libc::O_RDONLY
                | libc::O_DIRECTORY
                | libc::O_NOFOLLOW
                | libc::O_NONBLOCK
                | libc::O_CLOEXEC
        },
        { libc::O_RDONLY | libc::O_CLOEXEC }
    );
    // SAFETY: a NUL-terminated path, relative to `at` (a directory or AT_FDCWD).
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => {
                // SAFETY: an out-buffer for fstatat, of the name just tried.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: as above: an open descriptor, a NUL-terminated name, the buffer.
                let link = unsafe {
                    libc::fstatat(at, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
                        && st.st_mode & libc::S_IFMT == libc::S_IFLNK
                };
                invalid(if link {
                    "it is a symbolic link, not a directory".into()
                } else {
                    "it is not a directory".into()
                })
            }
            _ => e,
        });
    }
    // SAFETY: a descriptor openat just returned, owned from here on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A file name of this directory: no `/`, no NUL.
fn c_name(name: &str) -> io::Result<CString> {
    if name.contains('/') {
        return Err(invalid(format!("{name} is not a name in one directory")));
    }
    CString::new(name).map_err(|_| invalid("the name holds a NUL byte".into()))
}

fn invalid(why: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, why)
}

/// CRC-32C (Castagnoli), bitwise: these files are written about once a second, so a table would
/// buy nothing.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pg_snowflake-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C for the ASCII digits 1..9.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn a_regular_file_within_its_size_is_read() {
        let path = scratch("data-file-read");
        let dir = Dir::open(&path).unwrap();
        assert!(dir.read("f", 40).unwrap().is_none());
        dir.replace("f.tmp", "f", b"forty").unwrap();
        assert_eq!(dir.read("f", 40).unwrap().unwrap(), b"forty");
        assert_eq!(dir.read("f", 5).unwrap().unwrap(), b"forty");
        // A link to a regular file is followed: it is only read.
        symlink(path.join("f"), path.join("link")).unwrap();
        assert_eq!(dir.read("link", 40).unwrap().unwrap(), b"forty");
        dir.remove("f").unwrap();
        dir.remove("f").unwrap();
        assert!(dir.read("f", 40).unwrap().is_none());
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// Each of these hung the postmaster or ran it out of memory before.
    #[test]
    fn fifos_devices_and_huge_files_are_refused_without_blocking_or_reading_them() {
        let path = scratch("data-file-refuse");
        let dir = Dir::open(&path).unwrap();
        mkfifo(&path.join("fifo"));
        let err = dir.read("fifo", 40).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        symlink("/dev/zero", path.join("zero")).unwrap();
        let err = dir.read("zero", 40).unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
        let huge = File::create(path.join("huge")).unwrap();
        huge.set_len(3 << 30).unwrap(); // sparse: no disk used
        let err = dir.read("huge", 40).unwrap_err();
        assert!(err.to_string().contains("3221225472 bytes, more than the 40"), "{err}");
        std::fs::create_dir(path.join("sub")).unwrap();
        let err = dir.read("sub", 40).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        // A FIFO planted where the temporary file goes is removed, not written into.
        mkfifo(&path.join("f.tmp"));
        dir.replace("f.tmp", "f", b"ok").unwrap();
        assert_eq!(dir.read("f", 40).unwrap().unwrap(), b"ok");
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// A directory is never a link (written through, the copy went outside the data directory)
    /// nor a FIFO (a blocking open of it hung the renewing backend).
    #[test]
    fn a_directory_is_opened_without_following_a_link_or_waiting_on_a_fifo() {
        let path = scratch("data-file-dirs");
        let outside = scratch("data-file-outside");
        let dir = Dir::open(&path).unwrap();
        symlink(&outside, path.join("linked")).unwrap();
        let err = dir.open_dir("linked").unwrap_err();
        assert!(err.to_string().contains("a symbolic link"), "{err}");
        mkfifo(&path.join("fifo"));
        let err = dir.open_dir("fifo").unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        // To write, the name is made a directory of its own again.
        for name in ["linked", "fifo"] {
            dir.open_or_make(name).unwrap().replace("m.tmp", "m", b"x").unwrap();
            assert!(std::fs::symlink_metadata(path.join(name)).unwrap().is_dir());
        }
        let sub = dir.open_or_make("sub").unwrap();
        sub.replace("m.tmp", "m", b"x").unwrap();
        assert_eq!(std::fs::read(path.join("sub/m")).unwrap(), b"x", "written inside");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::remove_dir_all(&path).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}
