//! Files that the harness, as root, reads and writes in directories the user `postgres` owns
//! (a cluster's directory and data directory, the base directory under /tmp): opened without
//! following a link, at every component of the path, and a new file is made only where no name
//! was (`O_EXCL`). In 0.5.0 the harness followed whatever it found: a root-owned file of mode
//! 600 linked as `TRAP` by `postgres` was emptied by the harness's write, and a link in place of
//! `server.log` would have printed any file into a failed test's output.
//!
//! Every path is absolute and walked from `/` (`openat` at each step): a link is followed only
//! where no one but root could have made it (in a directory of root's that no one else may
//! write: a checkout under a linked home, say), so a directory swapped for a link between two
//! calls is refused too, not only a last component.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn last_error(what: &str, path: &Path) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// The directory that holds `path`'s last component, opened component by component from `/`
/// without following a link, and that last component.
fn parent_of(path: &Path) -> std::io::Result<(OwnedFd, CString)> {
    if !path.is_absolute() {
        return Err(std::io::Error::other(format!("{} is not absolute", path.display())));
    }
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let root =
        unsafe { libc::open(c"/".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if root < 0 {
        return Err(last_error("open", Path::new("/")));
    }
    // SAFETY: a descriptor just opened, owned once.
    let mut dir = unsafe { OwnedFd::from_raw_fd(root) };
    let parent = path.parent().unwrap_or(Path::new("/"));
    for part in parent.components().skip(1) {
        let part = CString::new(part.as_os_str().as_bytes())?;
        let here = std::os::fd::AsRawFd::as_raw_fd(&dir);
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let follow = mutant!(
            no_follow,
            {
                if only_root_writes(here)? {
                    0
                } else {
                    libc::O_NOFOLLOW
                }
            },
            { 0 }
        );
        // SAFETY: a directory descriptor and a NUL-terminated name.
        let next = unsafe { libc::openat(here, part.as_ptr(), flags | follow) };
        if next < 0 {
            return Err(last_error("open (no link followed)", path));
        }
        // SAFETY: as above.
        dir = unsafe { OwnedFd::from_raw_fd(next) };
    }
    Ok((dir, CString::new(name.as_bytes())?))
}

/// Whether only root may make names in the directory `dir`: root's, and no one else may write.
fn only_root_writes(dir: RawFd) -> std::io::Result<bool> {
    // SAFETY: a zeroed stat filled by fstat of an open descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(dir, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.st_uid == 0 && st.st_mode & 0o022 == 0)
}

/// Opens `path` with `flags` (and `O_NOFOLLOW`), making it with `mode` where `flags` say so.
fn open(path: &Path, flags: i32, mode: libc::mode_t) -> std::io::Result<File> {
    let (dir, name) = parent_of(path)?;
    let flags =
        mutant!(no_follow, { flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK }, {
            flags | libc::O_CLOEXEC | libc::O_NONBLOCK
        });
    // SAFETY: a directory descriptor and a NUL-terminated name; the file is owned below.
    let fd: RawFd =
        unsafe { libc::openat(std::os::fd::AsRawFd::as_raw_fd(&dir), name.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(last_error("open (no link followed)", path));
    }
    // SAFETY: a descriptor just opened, owned once.
    let file = unsafe { File::from_raw_fd(fd) };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!("{} is not a regular file", path.display())));
    }
    // A second name is a hard link someone made to a file of theirs or, where the kernel's
    // protected_hardlinks is off, of anyone's: no file the harness or the server makes has one.
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(std::io::Error::other(format!("{} has another name", path.display())));
    }
    Ok(file)
}

/// The whole of a regular file.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path, libc::O_RDONLY, 0)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole of a regular file as text (invalid UTF-8 replaced); empty if it cannot be read.
pub fn read_text(path: &Path) -> String {
    read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

/// The whole of a regular file, as UTF-8 text.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read(path)?).map_err(std::io::Error::other)
}

/// Writes a file whole (`replace`): as `std::fs::write`, but never through a link.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    replace(path, bytes.as_ref())
}

/// Appends to an existing regular file.
pub fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open(path, libc::O_WRONLY | libc::O_APPEND, 0)?.write_all(bytes)
}

/// Makes a new file with `bytes`, where nothing of that name is, owned by the owner of its
/// directory (a file root makes in `postgres`'s data directory is `postgres`'s, as one the server
/// made would be).
pub fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_new_mode(path, bytes, 0o644)
}

/// `create_new`, with the file's mode (0755 for a script).
pub fn create_new_mode(path: &Path, bytes: &[u8], mode: libc::mode_t) -> std::io::Result<()> {
    let mut file = open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)?;
    // The umask may have taken bits away.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    let (dir, _) = parent_of(path)?;
    let owner = File::from(dir).metadata()?;
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: a descriptor of the file just made; ids of an existing directory.
        if unsafe { libc::geteuid() } == 0
            // SAFETY: as above.
            && unsafe {
                libc::fchown(std::os::fd::AsRawFd::as_raw_fd(&file), owner.uid(), owner.gid())
            } != 0
        {
            return Err(last_error("chown", path));
        }
    }
    file.write_all(bytes)
}

/// At most the first `max` bytes of a regular file, opened without waiting (a FIFO swapped in
/// under the name would wait for a writer for good).
pub fn read_head(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path, libc::O_RDONLY, 0)?.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Replaces `path` whole: a new file of a name no one can guess, renamed over it within the same
/// directory (a link in `path`'s place is replaced, never followed).
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut nonce = [0u8; 8];
    File::open("/dev/urandom")?.read_exact(&mut nonce)?;
    let nonce = u64::from_le_bytes(nonce);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let new = path.with_file_name(format!(".{name}.new-{}-{nonce:016x}", std::process::id()));
    create_new(&new, bytes)?;
    let (dir, from) = parent_of(&new)?;
    let (_, to) = parent_of(path)?;
    let dir = std::os::fd::AsRawFd::as_raw_fd(&dir);
    // SAFETY: one directory descriptor for both names, NUL-terminated.
    if unsafe { libc::renameat(dir, from.as_ptr(), dir, to.as_ptr()) } != 0 {
        return Err(last_error("rename over", path));
    }
    Ok(())
}
