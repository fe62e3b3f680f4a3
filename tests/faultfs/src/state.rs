//! The file system as running processes see it (the volatile state), and the steps that
//! make parts of it durable.
//!
//! Every operation changes the volatile state at once. Only two steps write the store:
//!
//! * [`State::fsync`]: a file's current data and size become durable (for the inode,
//!   whatever its names);
//! * [`State::fsyncdir`]: a directory's current entries become durable: its durable entry
//!   map becomes a copy of its volatile one, and the durable tree is saved.
//!
//! Each directory therefore keeps two entry maps, `entries` (volatile) and `durable` (as
//! of its last fsync). The saved tree is what is reachable from the root through the
//! durable maps, so a file whose directory was never fsynced has no durable name: after a
//! power cut it is gone, like an orphan inode on a real disk. Metadata (mode, owner,
//! times) is saved with the tree, and a chmod, chown or utimens of a durable inode saves
//! it at once.
//!
//! With `journal` set (`--journal`), faultfs models a journaling file system such as ext4
//! or xfs instead: any successful fsync or fsyncdir also makes every pending directory
//! change durable (creates, unlinks and renames anywhere), as a journal commit does. File
//! data still needs the file's own fsync. PostgreSQL relies on this: it creates relation
//! files without ever fsyncing their directory.
//!
//! One rule goes beyond per-directory snapshots: a directory has at most one durable name.
//! When its new name becomes durable (fsync of the destination directory), its old durable
//! entry is removed, as a journaling file system commits a rename as a whole. Without it a
//! renamed directory could have two durable parents. Files may have several durable names
//! (a cross-directory rename with only the destination fsynced leaves both, each showing
//! the inode's durable data), which is a hard link, not invented data.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::time::SystemTime;

use crate::overlay::FileData;
use crate::store::{Kind, Meta, Namespace, Record, Store, ROOT};

/// Results carry a positive errno on failure.
pub type Res<T> = Result<T, i32>;

/// Largest file offset accepted (16 TiB); past it writes fail with EFBIG.
const MAX_FILE_SIZE: u64 = 1 << 44;
const NAME_MAX: usize = 255;

/// What `stat` shows.
#[derive(Clone, Debug)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

#[derive(Clone, Copy, Debug)]
pub enum SetTime {
    Now,
    At(SystemTime),
}

/// The changes of a setattr request; `None` leaves a field alone.
#[derive(Debug, Default)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
}

/// A directory listing entry.
pub type DirEntry = (u64, Kind, OsString);

#[derive(Debug)]
struct Inode {
    meta: Meta,
    /// The names processes see: (parent directory, name). A directory has at most one.
    links: Vec<(u64, OsString)>,
    /// The kernel's references, given by lookup and create, returned by forget.
    lookups: u64,
    /// Open file handles.
    opens: u32,
    /// Entries in the durable maps of directories that name this inode.
    durable_refs: u32,
    body: Body,
}

#[derive(Debug)]
enum Body {
    File {
        data: FileData,
        /// The durable data file, open while the file is open (or being synced).
        backing: Option<File>,
    },
    Dir(Dir),
    Symlink(OsString),
}

#[derive(Debug, Default)]
struct Dir {
    /// What processes see.
    entries: BTreeMap<OsString, u64>,
    /// As of this directory's last fsync.
    durable: BTreeMap<OsString, u64>,
    /// Subdirectories among `entries`, for st_nlink.
    subdirs: u32,
    /// The one durable entry that names this directory, if any.
    durable_at: Option<(u64, OsString)>,
}

#[derive(Debug)]
pub struct State {
    store: Store,
    inodes: HashMap<u64, Inode>,
    /// Inode numbers are never reused within one run, so the kernel cannot confuse a stale
    /// reference with a new inode.
    next_ino: u64,
    /// Open directory handles: a listing taken when reading starts, so that entries added
    /// or removed meanwhile cannot make a reader skip or repeat the others.
    dir_handles: HashMap<u64, Vec<DirEntry>>,
    next_fh: u64,
    /// Model a journaling file system (see the module comment).
    journal: bool,
    /// In journal mode, directories (paths from the root) whose entries only their own fsync
    /// makes durable: what a program must not leave to another program's journal commit.
    strict: Vec<Vec<OsString>>,
    /// Directories whose entries changed since they were last made durable.
    pending_dirs: BTreeSet<u64>,
}

fn now() -> SystemTime {
    SystemTime::now()
}

fn eio(e: io::Error) -> i32 {
    eprintln!("faultfs: store error: {e}");
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl State {
    /// The volatile state right after mounting: exactly the durable state.
    pub fn load(
        store: Store,
        ns: Namespace,
        journal: bool,
        strict: Vec<Vec<OsString>>,
    ) -> io::Result<State> {
        let mut inodes = HashMap::new();
        for (ino, rec) in ns.inodes {
            let body = match rec.meta.kind {
                Kind::File => {
                    Body::File { data: FileData::new(store.data_len(ino)?), backing: None }
                }
                Kind::Dir => Body::Dir(Dir::default()),
                Kind::Symlink => Body::Symlink(rec.target.unwrap_or_default()),
            };
            inodes.insert(
                ino,
                Inode {
                    meta: rec.meta,
                    links: Vec::new(),
                    lookups: 0,
                    opens: 0,
                    durable_refs: 0,
                    body,
                },
            );
        }
        let next_ino = inodes.keys().max().copied().unwrap_or(ROOT) + 1;
        let mut st = State {
            store,
            inodes,
            next_ino,
            dir_handles: HashMap::new(),
            next_fh: 1,
            journal,
            strict,
            pending_dirs: BTreeSet::new(),
        };
        for (parent, name, child) in ns.entries {
            st.add_entry(parent, name.clone(), child);
            let child_inode = st.inodes.get_mut(&child).expect("store checked the entry");
            child_inode.durable_refs += 1;
            if let Body::Dir(d) = &mut child_inode.body {
                d.durable_at = Some((parent, name.clone()));
            }
            st.dir_mut(parent).expect("store checked the parent").durable.insert(name, child);
        }
        st.pending_dirs.clear();
        Ok(st)
    }

    fn inode(&self, ino: u64) -> Res<&Inode> {
        self.inodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn inode_mut(&mut self, ino: u64) -> Res<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(libc::ENOENT)
    }

    fn dir(&self, ino: u64) -> Res<&Dir> {
        match &self.inode(ino)?.body {
            Body::Dir(d) => Ok(d),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> Res<&mut Dir> {
        match &mut self.inode_mut(ino)?.body {
            Body::Dir(d) => Ok(d),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn is_dir(&self, ino: u64) -> bool {
        self.dir(ino).is_ok()
    }

    pub fn attr(&self, ino: u64) -> Res<Attr> {
        let i = self.inode(ino)?;
        let (size, nlink) = match &i.body {
            Body::File { data, .. } => (data.size(), i.links.len() as u32),
            // A removed directory shows st_nlink 0, as on Linux.
            Body::Dir(_) if i.links.is_empty() && ino != ROOT => (4096, 0),
            Body::Dir(d) => (4096, 2 + d.subdirs),
            Body::Symlink(t) => (t.len() as u64, i.links.len() as u32),
        };
        let m = &i.meta;
        Ok(Attr {
            ino,
            kind: m.kind,
            size,
            perm: m.perm,
            nlink,
            uid: m.uid,
            gid: m.gid,
            atime: m.atime,
            mtime: m.mtime,
            ctime: m.ctime,
        })
    }

    // ----- names -----

    pub fn lookup(&mut self, parent: u64, name: &OsStr) -> Res<Attr> {
        let child = match name.as_bytes() {
            b"." => parent,
            b".." => self.parent_of(parent)?,
            _ => *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?,
        };
        self.inode_mut(child)?.lookups += 1;
        self.attr(child)
    }

    fn parent_of(&self, dir: u64) -> Res<u64> {
        self.dir(dir)?;
        Ok(self.inode(dir)?.links.first().map(|(p, _)| *p).unwrap_or(ROOT))
    }

    pub fn forget(&mut self, ino: u64, n: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.lookups = i.lookups.saturating_sub(n);
            self.maybe_free(ino);
        }
    }

    /// Checks that `name` can be created in `parent`.
    fn check_new_name(&self, parent: u64, name: &OsStr) -> Res<()> {
        let d = self.dir(parent)?;
        if parent != ROOT && self.inode(parent)?.links.is_empty() {
            return Err(libc::ENOENT); // the directory was removed
        }
        if name.len() > NAME_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        if name.is_empty() || name == "." || name == ".." || d.entries.contains_key(name) {
            return Err(libc::EEXIST);
        }
        Ok(())
    }

    fn add_entry(&mut self, parent: u64, name: OsString, child: u64) {
        let child_is_dir = self.is_dir(child);
        let d = self.dir_mut(parent).expect("parent is a directory");
        d.entries.insert(name.clone(), child);
        if child_is_dir {
            d.subdirs += 1;
        }
        self.pending_dirs.insert(parent);
        self.inodes.get_mut(&child).expect("child exists").links.push((parent, name));
    }

    fn remove_entry(&mut self, parent: u64, name: &OsStr) -> u64 {
        let d = self.dir_mut(parent).expect("parent is a directory");
        let child = d.entries.remove(name).expect("entry exists");
        let child_is_dir = self.is_dir(child);
        if child_is_dir {
            self.dir_mut(parent).expect("parent is a directory").subdirs -= 1;
        }
        self.pending_dirs.insert(parent);
        let links = &mut self.inodes.get_mut(&child).expect("child exists").links;
        if let Some(pos) = links.iter().position(|(p, n)| *p == parent && n == name) {
            links.remove(pos);
        }
        child
    }

    fn touch_dir(&mut self, dir: u64) {
        if let Ok(i) = self.inode_mut(dir) {
            let t = now();
            i.meta.mtime = t;
            i.meta.ctime = t;
        }
    }

    fn new_node(&mut self, parent: u64, name: &OsStr, mut meta: Meta, body: Body) -> Res<Attr> {
        self.check_new_name(parent, name)?;
        let p = &self.inode(parent)?.meta;
        // BSD group semantics in a setgid directory, as Linux does.
        if p.perm & libc::S_ISGID != 0 {
            meta.gid = p.gid;
            if meta.kind == Kind::Dir {
                meta.perm |= libc::S_ISGID;
            }
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(
            ino,
            Inode { meta, links: Vec::new(), lookups: 1, opens: 0, durable_refs: 0, body },
        );
        self.add_entry(parent, name.to_os_string(), ino);
        self.touch_dir(parent);
        self.attr(ino)
    }

    fn new_meta(kind: Kind, perm: u32, uid: u32, gid: u32) -> Meta {
        let t = now();
        Meta { kind, perm: perm & 0o7777, uid, gid, atime: t, mtime: t, ctime: t }
    }

    /// Creates an empty regular file (create and mknod).
    pub fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Res<Attr> {
        let body = Body::File { data: FileData::new(0), backing: None };
        self.new_node(parent, name, Self::new_meta(Kind::File, perm, uid, gid), body)
    }

    pub fn mkdir(&mut self, parent: u64, name: &OsStr, perm: u32, uid: u32, gid: u32) -> Res<Attr> {
        self.new_node(
            parent,
            name,
            Self::new_meta(Kind::Dir, perm, uid, gid),
            Body::Dir(Dir::default()),
        )
    }

    pub fn symlink(
        &mut self,
        parent: u64,
        name: &OsStr,
        target: &OsStr,
        uid: u32,
        gid: u32,
    ) -> Res<Attr> {
        let body = Body::Symlink(target.to_os_string());
        self.new_node(parent, name, Self::new_meta(Kind::Symlink, 0o777, uid, gid), body)
    }

    pub fn readlink(&self, ino: u64) -> Res<Vec<u8>> {
        match &self.inode(ino)?.body {
            Body::Symlink(t) => Ok(t.as_bytes().to_vec()),
            _ => Err(libc::EINVAL),
        }
    }

    pub fn link(&mut self, ino: u64, parent: u64, name: &OsStr) -> Res<Attr> {
        if self.is_dir(ino) {
            return Err(libc::EPERM);
        }
        self.check_new_name(parent, name)?;
        let i = self.inode_mut(ino)?;
        if i.links.is_empty() {
            return Err(libc::ENOENT); // linkat of an unlinked open file
        }
        i.lookups += 1;
        i.meta.ctime = now();
        self.add_entry(parent, name.to_os_string(), ino);
        self.touch_dir(parent);
        self.attr(ino)
    }

    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> Res<()> {
        let child = *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?;
        if self.is_dir(child) {
            return Err(libc::EISDIR);
        }
        self.remove_entry(parent, name);
        self.inode_mut(child)?.meta.ctime = now();
        self.touch_dir(parent);
        self.maybe_free(child);
        Ok(())
    }

    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> Res<()> {
        if name == "." {
            return Err(libc::EINVAL);
        }
        let child = *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?;
        if !self.dir(child)?.entries.is_empty() {
            return Err(libc::ENOTEMPTY);
        }
        self.remove_entry(parent, name);
        self.touch_dir(parent);
        self.maybe_free(child);
        Ok(())
    }

    /// `rename(2)`, and `renameat2` with RENAME_NOREPLACE.
    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        noreplace: bool,
    ) -> Res<()> {
        let src = *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?;
        let dst = self.dir(new_parent)?.entries.get(new_name).copied();
        if new_parent != ROOT && self.inode(new_parent)?.links.is_empty() {
            return Err(libc::ENOENT);
        }
        if new_name.len() > NAME_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        if new_name.is_empty() || new_name == "." || new_name == ".." {
            return Err(libc::EINVAL);
        }
        let src_is_dir = self.is_dir(src);
        if let Some(dst) = dst {
            if noreplace {
                return Err(libc::EEXIST);
            }
            if dst == src {
                return Ok(()); // two names of one inode: POSIX says do nothing
            }
            match (src_is_dir, self.is_dir(dst)) {
                (true, false) => return Err(libc::ENOTDIR),
                (false, true) => return Err(libc::EISDIR),
                (true, true) if !self.dir(dst)?.entries.is_empty() => return Err(libc::ENOTEMPTY),
                _ => {}
            }
        }
        if src_is_dir {
            // A directory cannot move below itself.
            let mut d = new_parent;
            while d != ROOT {
                if d == src {
                    return Err(libc::EINVAL);
                }
                d = self.parent_of(d)?;
            }
        }
        if let Some(dst) = dst {
            self.remove_entry(new_parent, new_name);
            self.inode_mut(dst)?.meta.ctime = now();
        }
        self.remove_entry(parent, name);
        self.add_entry(new_parent, new_name.to_os_string(), src);
        self.inode_mut(src)?.meta.ctime = now();
        self.touch_dir(parent);
        self.touch_dir(new_parent);
        if let Some(dst) = dst {
            self.maybe_free(dst);
        }
        Ok(())
    }

    // ----- attributes -----

    /// Returns the new attributes. Mode, owner and times of a durable inode are saved at
    /// once; a size change is file data, durable at the next fsync.
    pub fn setattr(&mut self, ino: u64, set: &SetAttr) -> Res<Attr> {
        let i = self.inode_mut(ino)?;
        if let Some(size) = set.size {
            match &mut i.body {
                Body::File { data, .. } => {
                    if size > MAX_FILE_SIZE {
                        return Err(libc::EFBIG);
                    }
                    data.truncate(size);
                    i.meta.mtime = now();
                    i.meta.ctime = i.meta.mtime;
                }
                Body::Dir(_) => return Err(libc::EISDIR),
                Body::Symlink(_) => return Err(libc::EINVAL),
            }
        }
        let before = i.meta.clone();
        let m = &mut i.meta;
        if let Some(p) = set.perm {
            m.perm = p & 0o7777;
        }
        if let Some(u) = set.uid {
            m.uid = u;
        }
        if let Some(g) = set.gid {
            m.gid = g;
        }
        let at = |t: SetTime| match t {
            SetTime::Now => now(),
            SetTime::At(t) => t,
        };
        if let Some(t) = set.atime {
            m.atime = at(t);
        }
        if let Some(t) = set.mtime {
            m.mtime = at(t);
        }
        if set.perm.is_some()
            || set.uid.is_some()
            || set.gid.is_some()
            || set.atime.is_some()
            || set.mtime.is_some()
        {
            m.ctime = now();
        }
        let durable = i.durable_refs > 0 || ino == ROOT;
        if durable && i.meta != before {
            self.save_namespace().map_err(eio)?;
        }
        self.attr(ino)
    }

    // ----- file data -----

    pub fn open(&mut self, ino: u64) -> Res<()> {
        let i = self.inode_mut(ino)?;
        match i.body {
            Body::File { .. } => {
                i.opens += 1;
                Ok(())
            }
            Body::Dir(_) => Err(libc::EISDIR),
            Body::Symlink(_) => Err(libc::ELOOP),
        }
    }

    pub fn release(&mut self, ino: u64) {
        if let Ok(i) = self.inode_mut(ino) {
            i.opens = i.opens.saturating_sub(1);
            self.close_if_unused(ino);
            self.maybe_free(ino);
        }
    }

    /// The file's data and its data file, opened (or created) when needed.
    fn file(
        &mut self,
        ino: u64,
        need_backing: impl Fn(&FileData) -> bool,
        create: bool,
    ) -> Res<(&mut FileData, Option<&File>, &mut Meta)> {
        let store = &self.store;
        let i = self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        match &mut i.body {
            Body::File { data, backing } => {
                if backing.is_none() && need_backing(data) {
                    *backing = store.open_data(ino, create).map_err(eio)?;
                }
                Ok((data, backing.as_ref(), &mut i.meta))
            }
            Body::Dir(_) => Err(libc::EISDIR),
            Body::Symlink(_) => Err(libc::EINVAL),
        }
    }

    pub fn read(&mut self, ino: u64, off: u64, len: u32) -> Res<Vec<u8>> {
        let (data, backing, _) = self.file(ino, |d| d.needs_backing(), false)?;
        let out = data.read(off, len, backing).map_err(eio);
        self.close_if_unused(ino);
        out
    }

    pub fn write(&mut self, ino: u64, off: u64, buf: &[u8]) -> Res<u32> {
        if off.checked_add(buf.len() as u64).is_none_or(|end| end > MAX_FILE_SIZE) {
            return Err(libc::EFBIG);
        }
        let (data, backing, meta) = self.file(ino, |d| d.needs_backing(), false)?;
        let out = data.write(off, buf, backing).map_err(eio);
        if out.is_ok() {
            meta.mtime = now();
            meta.ctime = meta.mtime;
        }
        self.close_if_unused(ino);
        out.map(|()| buf.len() as u32)
    }

    /// `fallocate(2)`: mode 0 (allocate, growing the size), KEEP_SIZE, PUNCH_HOLE and
    /// ZERO_RANGE. Space is not reserved: the host's free space is what there is.
    pub fn fallocate(&mut self, ino: u64, off: u64, len: u64, mode: i32) -> Res<()> {
        let end = off.checked_add(len).filter(|e| *e <= MAX_FILE_SIZE).ok_or(libc::EFBIG)?;
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let (data, backing, meta) = self.file(ino, |d| d.needs_backing(), false)?;
        match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 => {}
            libc::FALLOC_FL_PUNCH_HOLE if keep_size => {
                data.zero_range(off, len, backing).map_err(eio)?
            }
            libc::FALLOC_FL_ZERO_RANGE => data.zero_range(off, len, backing).map_err(eio)?,
            _ => return Err(libc::EOPNOTSUPP),
        }
        if !keep_size && end > data.size() {
            data.truncate(end); // grows: the new bytes read as zeros
        }
        if mode != libc::FALLOC_FL_KEEP_SIZE {
            meta.mtime = now();
            meta.ctime = meta.mtime;
        }
        Ok(())
    }

    /// Makes the file's current data and size durable. Returns the bytes written.
    pub fn fsync(&mut self, ino: u64) -> Res<u64> {
        if !matches!(self.inode(ino)?.body, Body::File { .. }) {
            return Ok(0);
        }
        let (data, backing, _) = self.file(ino, |d| d.is_dirty(), true)?;
        let written = match backing {
            Some(b) => data.sync(b).map_err(eio),
            None => Ok(0), // nothing changed since the last fsync
        };
        self.close_if_unused(ino);
        let written = written?;
        if self.journal && !self.pending_dirs.is_empty() {
            let strict = self.strict_dirs();
            let dirs = self.pending_dirs.iter().copied().filter(|d| !strict.contains(d));
            self.commit_dirs(dirs.collect())?;
        }
        Ok(written)
    }

    /// Closes the data file of a file that is not open (read, written or synced through a
    /// memory mapping or by `sync`), to keep host descriptors proportional to open files.
    fn close_if_unused(&mut self, ino: u64) {
        if let Some(Inode { opens: 0, body: Body::File { backing, .. }, .. }) =
            self.inodes.get_mut(&ino)
        {
            *backing = None;
        }
    }

    // ----- directories -----

    /// Makes the directory's current entries durable (in journal mode: every directory's).
    pub fn fsyncdir(&mut self, ino: u64) -> Res<()> {
        self.dir(ino)?;
        let mut dirs = vec![ino];
        if self.journal {
            let strict = self.strict_dirs();
            dirs.extend(
                self.pending_dirs.iter().copied().filter(|d| *d != ino && !strict.contains(d)),
            );
        }
        self.commit_dirs(dirs)
    }

    /// The inodes of the `--strict-dir` directories that exist now.
    fn strict_dirs(&self) -> BTreeSet<u64> {
        self.strict
            .iter()
            .filter_map(|path| {
                path.iter().try_fold(ROOT, |dir, name| {
                    let Body::Dir(d) = &self.inodes.get(&dir)?.body else {
                        return None;
                    };
                    d.entries.get(name).copied()
                })
            })
            .collect()
    }

    /// Makes the entries of these directories durable and saves the tree once.
    fn commit_dirs(&mut self, dirs: Vec<u64>) -> Res<()> {
        let mut dropped = Vec::new();
        for d in dirs {
            // A pending directory may have been freed since; skip it.
            if self.is_dir(d) {
                dropped.extend(self.commit_dir(d)?);
            }
        }
        self.save_namespace().map_err(eio)?;
        self.drop_durable_refs(dropped);
        Ok(())
    }

    /// Copies the directory's volatile entries into its durable map; returns the inodes
    /// that lost a durable reference (to release once the tree is saved, not before: a
    /// data file must not be deleted while the saved tree still names it).
    fn commit_dir(&mut self, d: u64) -> Res<Vec<u64>> {
        let dir = self.dir_mut(d)?;
        let new = dir.entries.clone();
        let old = std::mem::replace(&mut dir.durable, new.clone());
        self.pending_dirs.remove(&d);
        let mut dropped = Vec::new();
        for (name, &c) in &old {
            if new.get(name) != Some(&c) {
                dropped.push(c);
                if let Ok(cd) = self.dir_mut(c) {
                    if cd.durable_at.as_ref().is_some_and(|(p, n)| *p == d && n == name) {
                        cd.durable_at = None;
                    }
                }
            }
        }
        for (name, &c) in &new {
            if old.get(name) == Some(&c) {
                continue;
            }
            self.inode_mut(c)?.durable_refs += 1;
            if let Ok(cd) = self.dir_mut(c) {
                if let Some((p0, n0)) = cd.durable_at.replace((d, name.clone())) {
                    // The directory's old durable name goes with the new one (see the
                    // module comment).
                    if let Ok(pd) = self.dir_mut(p0) {
                        if pd.durable.get(&n0) == Some(&c) {
                            pd.durable.remove(&n0);
                            dropped.push(c);
                        }
                    }
                }
            }
        }
        Ok(dropped)
    }

    fn drop_durable_refs(&mut self, inodes: Vec<u64>) {
        for c in inodes {
            if let Some(i) = self.inodes.get_mut(&c) {
                i.durable_refs = i.durable_refs.saturating_sub(1);
            }
            self.maybe_free(c);
        }
    }

    /// Makes everything durable, as `sync(2)` would on a real disk (the `sync` command).
    pub fn sync_all(&mut self) -> Res<u64> {
        let mut inos: Vec<u64> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        let mut written = 0;
        for &ino in &inos {
            written += self.fsync(ino)?;
        }
        self.commit_dirs(inos.into_iter().filter(|&i| self.is_dir(i)).collect())?;
        Ok(written)
    }

    pub fn opendir(&mut self, ino: u64) -> Res<u64> {
        self.dir(ino)?;
        let fh = self.next_fh;
        self.next_fh += 1;
        self.dir_handles.insert(fh, Vec::new());
        Ok(fh)
    }

    /// Entries from `offset` on; offset 0 (re)takes the listing.
    pub fn readdir(&mut self, fh: u64, ino: u64, offset: u64) -> Res<&[DirEntry]> {
        if offset == 0 || !self.dir_handles.contains_key(&fh) {
            let d = self.dir(ino)?;
            let mut list = vec![
                (ino, Kind::Dir, OsString::from(".")),
                (self.parent_of(ino)?, Kind::Dir, OsString::from("..")),
            ];
            for (name, &c) in &d.entries {
                list.push((c, self.inode(c)?.meta.kind, name.clone()));
            }
            self.dir_handles.insert(fh, list);
        }
        let list = &self.dir_handles[&fh];
        Ok(&list[(offset as usize).min(list.len())..])
    }

    pub fn releasedir(&mut self, fh: u64) {
        self.dir_handles.remove(&fh);
    }

    // ----- bookkeeping -----

    /// Frees an inode that nothing refers to any more: no name, no open handle, no kernel
    /// reference, no durable entry. Its data file goes with it; a directory's durable
    /// entries go too, which may free more.
    fn maybe_free(&mut self, ino: u64) {
        let mut work = vec![ino];
        while let Some(ino) = work.pop() {
            let Some(i) = self.inodes.get(&ino) else {
                continue;
            };
            if ino == ROOT
                || !i.links.is_empty()
                || i.opens > 0
                || i.lookups > 0
                || i.durable_refs > 0
            {
                continue;
            }
            let i = self.inodes.remove(&ino).expect("checked above");
            self.pending_dirs.remove(&ino);
            match i.body {
                Body::File { .. } => {
                    if let Err(e) = self.store.remove_data(ino) {
                        eprintln!("faultfs: cannot remove data of inode {ino}: {e}");
                    }
                }
                Body::Dir(d) => {
                    for (name, c) in d.durable {
                        if let Some(ci) = self.inodes.get_mut(&c) {
                            ci.durable_refs = ci.durable_refs.saturating_sub(1);
                            if let Body::Dir(cd) = &mut ci.body {
                                if cd
                                    .durable_at
                                    .as_ref()
                                    .is_some_and(|(p, n)| *p == ino && *n == name)
                                {
                                    cd.durable_at = None;
                                }
                            }
                        }
                        work.push(c);
                    }
                }
                Body::Symlink(_) => {}
            }
        }
    }

    /// Saves what is reachable from the root through durable entries, with the current
    /// metadata of each inode.
    fn save_namespace(&self) -> io::Result<()> {
        let mut ns = Namespace::default();
        let mut seen = HashSet::from([ROOT]);
        let mut queue = VecDeque::from([ROOT]);
        let record = |i: &Inode| Record {
            meta: i.meta.clone(),
            target: match &i.body {
                Body::Symlink(t) => Some(t.clone()),
                _ => None,
            },
        };
        ns.inodes.insert(ROOT, record(&self.inodes[&ROOT]));
        while let Some(d) = queue.pop_front() {
            let Ok(dir) = self.dir(d) else { continue };
            for (name, &c) in &dir.durable {
                let Some(ci) = self.inodes.get(&c) else {
                    continue;
                };
                ns.entries.push((d, name.clone(), c));
                if seen.insert(c) {
                    ns.inodes.insert(c, record(ci));
                    if ci.meta.kind == Kind::Dir {
                        queue.push_back(c);
                    }
                }
            }
        }
        self.store.save_namespace(&ns)
    }

    /// The paths (relative to the root, `.` for the root) that name an inode, for fault
    /// rules. An unlinked file has none.
    pub fn paths_of(&self, ino: u64) -> Vec<String> {
        if ino == ROOT {
            return vec![".".into()];
        }
        match self.inodes.get(&ino) {
            Some(i) => i.links.iter().filter_map(|(p, n)| self.path_in(*p, n)).collect(),
            None => Vec::new(),
        }
    }

    /// The path of `name` in directory `parent`.
    pub fn path_in(&self, parent: u64, name: &OsStr) -> Option<String> {
        let mut parts = vec![name.to_string_lossy().into_owned()];
        let mut d = parent;
        let mut depth = 0;
        while d != ROOT {
            let (p, n) = self.inodes.get(&d)?.links.first()?;
            parts.push(n.to_string_lossy().into_owned());
            d = *p;
            depth += 1;
            if depth > 4096 {
                return None;
            }
        }
        parts.reverse();
        Some(parts.join("/"))
    }

    /// Bytes of unsynced file data held in memory.
    pub fn dirty_bytes(&self) -> u64 {
        self.inodes
            .values()
            .map(|i| match &i.body {
                Body::File { data, .. } => data.dirty_bytes(),
                _ => 0,
            })
            .sum()
    }

    pub fn inode_count(&self) -> usize {
        self.inodes.len()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}
