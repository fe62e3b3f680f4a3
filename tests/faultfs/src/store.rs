//! The durable store: what a disk holds after a power cut.
//!
//! A backing directory holds:
//!
//! * `faultfs-store`: a marker, so that faultfs never serves (or garbage-collects) a
//!   directory that is not one of its stores;
//! * `namespace`: the durable tree, as text: one record per inode reachable from the root
//!   (kind, mode, owner, times, symlink target) and one line per durable directory entry.
//!   It is replaced atomically (write a temporary file, rename it) whenever a directory is
//!   fsynced or the metadata of a durable inode changes;
//! * `inodes/<n>`: the durable data of regular file `n`; its length is the durable size.
//!   It is written only when file `n` is fsynced.
//!
//! Nothing else is written here, so killing the daemon at any moment leaves exactly the
//! durable state. The host's own page cache is trusted: the host does not lose power in
//! the tests (killing the daemon is the power cut), so the daemon never fsyncs these files.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The root directory's inode number (FUSE's FUSE_ROOT_ID).
pub const ROOT: u64 = 1;

const MARKER: &str = "faultfs-store";
const NAMESPACE: &str = "namespace";
const NAMESPACE_TMP: &str = "namespace.tmp";
const HEADER: &str = "faultfs-namespace 1";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// An inode's metadata: what `chmod`, `chown` and `utimens` change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Permission bits with setuid, setgid and sticky (`mode & 0o7777`).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

#[derive(Clone, Debug)]
pub struct Record {
    pub meta: Meta,
    /// The target of a symbolic link; `None` for other kinds.
    pub target: Option<OsString>,
}

/// The durable tree as stored in `namespace`.
#[derive(Debug, Default)]
pub struct Namespace {
    pub inodes: BTreeMap<u64, Record>,
    /// `(parent directory, name, child)`.
    pub entries: Vec<(u64, OsString, u64)>,
}

#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Creates an empty store whose root directory has the given metadata.
    pub fn init(dir: &Path, root: Meta) -> io::Result<Store> {
        let store = Store::create_layout(dir)?;
        let mut ns = Namespace::default();
        ns.inodes.insert(ROOT, Record { meta: root, target: None });
        store.save_namespace(&ns)?;
        Ok(store)
    }

    fn create_layout(dir: &Path) -> io::Result<Store> {
        fs::create_dir_all(dir)?;
        if dir.join(MARKER).exists() || dir.join(NAMESPACE).exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already holds a faultfs store", dir.display()),
            ));
        }
        if fs::read_dir(dir)?.next().is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is not empty", dir.display()),
            ));
        }
        fs::create_dir(dir.join("inodes"))?;
        fs::write(dir.join(MARKER), "faultfs store, format 1\n")?;
        Ok(Store { dir: dir.to_path_buf() })
    }

    /// Opens an existing store: reads the durable tree, keeps only what is reachable from
    /// the root, and deletes data files that no durable name reaches any more (the orphans
    /// a real disk would reclaim at its next mount).
    pub fn open(dir: &Path) -> io::Result<(Store, Namespace)> {
        if !dir.join(MARKER).is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a faultfs store (run faultfs --init or --import first)",
                    dir.display()
                ),
            ));
        }
        let store = Store { dir: dir.to_path_buf() };
        let ns = reachable(read_namespace(&dir.join(NAMESPACE))?)?;
        let _ = fs::remove_file(dir.join(NAMESPACE_TMP));
        for entry in fs::read_dir(dir.join("inodes"))? {
            let entry = entry?;
            let keep = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok())
                .and_then(|n| ns.inodes.get(&n))
                .is_some_and(|r| r.meta.kind == Kind::File);
            if !keep {
                fs::remove_file(entry.path())?;
            }
        }
        Ok((store, ns))
    }

    pub fn data_path(&self, ino: u64) -> PathBuf {
        self.dir.join("inodes").join(ino.to_string())
    }

    /// The durable size of file `ino`: the length of its data file (none yet: empty).
    pub fn data_len(&self, ino: u64) -> io::Result<u64> {
        match fs::metadata(self.data_path(ino)) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Opens the data file of `ino` for reading and writing; `None` if it does not exist
    /// and `create` is false.
    pub fn open_data(&self, ino: u64, create: bool) -> io::Result<Option<File>> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(create).mode(0o600);
        match opts.open(self.data_path(ino)) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn remove_data(&self, ino: u64) -> io::Result<()> {
        match fs::remove_file(self.data_path(ino)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The host's file system numbers for the backing directory.
    pub fn statvfs(&self) -> io::Result<libc::statvfs> {
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes())?;
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is a valid C string and `s` a valid out-pointer.
        if unsafe { libc::statvfs(path.as_ptr(), &mut s) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(s)
    }

    /// Replaces the durable tree atomically: a daemon killed during this call leaves
    /// either the old or the new tree, never a mix.
    pub fn save_namespace(&self, ns: &Namespace) -> io::Result<()> {
        let tmp = self.dir.join(NAMESPACE_TMP);
        {
            let mut w = BufWriter::new(File::create(&tmp)?);
            writeln!(w, "{HEADER}")?;
            for (ino, r) in &ns.inodes {
                let m = &r.meta;
                let kind = match m.kind {
                    Kind::File => 'f',
                    Kind::Dir => 'd',
                    Kind::Symlink => 'l',
                };
                write!(
                    w,
                    "i {ino} {kind} {:o} {} {} {} {} {}",
                    m.perm,
                    m.uid,
                    m.gid,
                    time_to_text(m.atime),
                    time_to_text(m.mtime),
                    time_to_text(m.ctime)
                )?;
                if let Some(t) = &r.target {
                    write!(w, " {}", escape(t))?;
                }
                writeln!(w)?;
            }
            for (parent, name, child) in &ns.entries {
                writeln!(w, "e {parent} {child} {}", escape(name))?;
            }
            w.flush()?;
        }
        fs::rename(&tmp, self.dir.join(NAMESPACE))
    }
}

/// Initialises a store whose durable state is a copy of the plain directory tree `src`:
/// data, modes, owners, times, symbolic links and hard links.
pub fn import(src: &Path, dir: &Path) -> io::Result<()> {
    let store = Store::create_layout(dir)?;
    let mut ns = Namespace::default();
    // Hard links: one inode per (device, inode) of the source.
    let mut seen: HashMap<(u64, u64), u64> = HashMap::new();
    let mut next = ROOT;
    let mut queue = VecDeque::from([(src.to_path_buf(), None::<(u64, OsString)>)]);
    while let Some((path, link)) = queue.pop_front() {
        let md = fs::symlink_metadata(&path)?;
        let ft = md.file_type();
        let ino = match seen.get(&(md.dev(), md.ino())) {
            Some(&ino) if !ft.is_dir() => ino,
            _ => {
                let kind = if ft.is_dir() {
                    Kind::Dir
                } else if ft.is_file() {
                    Kind::File
                } else if ft.is_symlink() {
                    Kind::Symlink
                } else {
                    eprintln!(
                        "faultfs: import skips {} (not a file, directory or symlink)",
                        path.display()
                    );
                    continue;
                };
                let ino = next;
                next += 1;
                seen.insert((md.dev(), md.ino()), ino);
                let target = match kind {
                    Kind::Symlink => Some(fs::read_link(&path)?.into_os_string()),
                    _ => None,
                };
                if kind == Kind::File {
                    fs::copy(&path, store.data_path(ino))?;
                }
                if kind == Kind::Dir {
                    let mut children: Vec<_> = fs::read_dir(&path)?.collect::<io::Result<_>>()?;
                    children.sort_by_key(|e| e.file_name());
                    for c in children {
                        queue.push_back((c.path(), Some((ino, c.file_name()))));
                    }
                }
                let meta = Meta {
                    kind,
                    perm: md.mode() & 0o7777,
                    uid: md.uid(),
                    gid: md.gid(),
                    atime: time_from_parts(md.atime(), md.atime_nsec()),
                    mtime: time_from_parts(md.mtime(), md.mtime_nsec()),
                    ctime: time_from_parts(md.ctime(), md.ctime_nsec()),
                };
                ns.inodes.insert(ino, Record { meta, target });
                ino
            }
        };
        if let Some((parent, name)) = link {
            ns.entries.push((parent, name, ino));
        }
    }
    match ns.inodes.get(&ROOT) {
        Some(r) if r.meta.kind == Kind::Dir => {}
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", src.display()),
            ))
        }
    }
    store.save_namespace(&ns)
}

fn read_namespace(path: &Path) -> io::Result<Namespace> {
    let bad = |line: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}:{}: {what}", path.display(), line + 1),
        )
    };
    let mut ns = Namespace::default();
    let reader = BufReader::new(File::open(path)?);
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        let f: Vec<&str> = line.split(' ').collect();
        if n == 0 {
            if line != HEADER {
                return Err(bad(n, "unknown namespace format"));
            }
            continue;
        }
        match f.as_slice() {
            ["i", ino, kind, perm, uid, gid, at, mt, ct, rest @ ..] => {
                let num = |s: &str| s.parse::<u32>().map_err(|_| bad(n, "bad number"));
                let kind = match *kind {
                    "f" => Kind::File,
                    "d" => Kind::Dir,
                    "l" => Kind::Symlink,
                    _ => return Err(bad(n, "bad kind")),
                };
                let target = match (kind, rest) {
                    (Kind::Symlink, [t]) => Some(unescape(t).ok_or_else(|| bad(n, "bad escape"))?),
                    (Kind::Symlink, _) => return Err(bad(n, "symlink without target")),
                    (_, []) => None,
                    _ => return Err(bad(n, "extra fields")),
                };
                let meta = Meta {
                    kind,
                    perm: u32::from_str_radix(perm, 8).map_err(|_| bad(n, "bad mode"))?,
                    uid: num(uid)?,
                    gid: num(gid)?,
                    atime: time_from_text(at).ok_or_else(|| bad(n, "bad time"))?,
                    mtime: time_from_text(mt).ok_or_else(|| bad(n, "bad time"))?,
                    ctime: time_from_text(ct).ok_or_else(|| bad(n, "bad time"))?,
                };
                let ino = ino.parse().map_err(|_| bad(n, "bad inode"))?;
                ns.inodes.insert(ino, Record { meta, target });
            }
            ["e", parent, child, name] => {
                let parent = parent.parse().map_err(|_| bad(n, "bad inode"))?;
                let child = child.parse().map_err(|_| bad(n, "bad inode"))?;
                let name = unescape(name).ok_or_else(|| bad(n, "bad escape"))?;
                ns.entries.push((parent, name, child));
            }
            _ => return Err(bad(n, "unknown record")),
        }
    }
    Ok(ns)
}

/// Keeps what is reachable from the root, a directory reachable once only. The daemon
/// only saves reachable trees with one name per directory, so this is a guard against a
/// hand-edited or foreign file rather than part of the durability model.
fn reachable(ns: Namespace) -> io::Result<Namespace> {
    match ns.inodes.get(&ROOT) {
        Some(r) if r.meta.kind == Kind::Dir => {}
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "namespace has no root directory",
            ))
        }
    }
    let mut children: HashMap<u64, Vec<(OsString, u64)>> = HashMap::new();
    for (p, name, c) in ns.entries {
        children.entry(p).or_default().push((name, c));
    }
    let mut out = Namespace::default();
    let mut seen = HashSet::from([ROOT]);
    let mut queue = VecDeque::from([ROOT]);
    while let Some(d) = queue.pop_front() {
        let mut names = HashSet::new();
        for (name, c) in children.remove(&d).unwrap_or_default() {
            let Some(rec) = ns.inodes.get(&c) else {
                continue;
            };
            let valid_name =
                !name.is_empty() && name != "." && name != ".." && !name.as_bytes().contains(&b'/');
            if !valid_name
                || !names.insert(name.clone())
                || (rec.meta.kind == Kind::Dir && seen.contains(&c))
            {
                continue;
            }
            if seen.insert(c) && rec.meta.kind == Kind::Dir {
                queue.push_back(c);
            }
            out.entries.push((d, name, c));
        }
    }
    out.inodes = ns.inodes.into_iter().filter(|(ino, _)| seen.contains(ino)).collect();
    Ok(out)
}

/// Names are bytes: every byte outside a plain set is written `%XX`, so a record stays
/// one line of space-separated fields.
fn escape(s: &OsStr) -> String {
    let mut out = String::new();
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"._-+,:=@~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        // An empty symlink target cannot be created, but keep the field non-empty anyway.
        out.push('%');
    }
    out
}

fn unescape(s: &str) -> Option<OsString> {
    if s == "%" {
        return Some(OsString::new());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(OsString::from_vec(out))
}

fn time_to_text(t: SystemTime) -> String {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => format!("{}.{:09}", d.as_secs(), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            format!("-{}.{:09}", d.as_secs(), d.subsec_nanos())
        }
    }
}

fn time_from_text(s: &str) -> Option<SystemTime> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (secs, nanos) = s.split_once('.')?;
    let d = Duration::new(secs.parse().ok()?, nanos.parse().ok()?);
    if neg {
        UNIX_EPOCH.checked_sub(d)
    } else {
        UNIX_EPOCH.checked_add(d)
    }
}

pub fn time_from_parts(secs: i64, nanos: i64) -> SystemTime {
    let nanos = nanos.clamp(0, 999_999_999) as u32;
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nanos)
    } else {
        UNIX_EPOCH - Duration::new(secs.unsigned_abs(), 0) + Duration::new(0, nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_any_bytes() {
        for s in [&b"plain.name"[..], b"with space", b"%percent", b"\xff\x00\n", b"a/b"] {
            let os = OsStr::from_bytes(s);
            let e = escape(os);
            assert!(!e.contains(' ') && !e.contains('\n'));
            assert_eq!(unescape(&e).unwrap(), os);
        }
    }

    #[test]
    fn times_round_trip() {
        for t in [
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::new(1_700_000_000, 123),
            UNIX_EPOCH - Duration::new(5, 0),
        ] {
            assert_eq!(time_from_text(&time_to_text(t)), Some(t));
        }
    }

    #[test]
    fn namespace_round_trips_and_drops_unreachable() {
        let dir = std::env::temp_dir().join(format!("faultfs-store-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let meta = |kind| Meta {
            kind,
            perm: 0o700,
            uid: 1,
            gid: 2,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
        };
        let store = Store::init(&dir, meta(Kind::Dir)).unwrap();
        let mut ns = Namespace::default();
        ns.inodes.insert(ROOT, Record { meta: meta(Kind::Dir), target: None });
        ns.inodes.insert(2, Record { meta: meta(Kind::File), target: None });
        ns.inodes.insert(3, Record { meta: meta(Kind::Symlink), target: Some("x y".into()) });
        ns.inodes.insert(4, Record { meta: meta(Kind::File), target: None }); // unreachable
        ns.entries.push((ROOT, "f".into(), 2));
        ns.entries.push((ROOT, "hard link".into(), 2));
        ns.entries.push((ROOT, "l".into(), 3));
        store.save_namespace(&ns).unwrap();
        fs::write(store.data_path(2), b"kept").unwrap();
        fs::write(store.data_path(4), b"orphan").unwrap();
        let (store, back) = Store::open(&dir).unwrap();
        assert_eq!(back.inodes.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(back.entries.len(), 3);
        assert_eq!(back.inodes[&3].target.as_deref(), Some(OsStr::new("x y")));
        assert_eq!(store.data_len(2).unwrap(), 4);
        assert!(!store.data_path(4).exists(), "orphan data is collected at open");
        fs::remove_dir_all(&dir).unwrap();
    }
}
