//! The FUSE glue: each kernel request checks the fault rules, then calls the state under
//! one lock (so concurrent requests from many processes apply one at a time), then counts
//! what happened.
//!
//! Caching is the kernel's usual one (attributes and entries for a second, page cache
//! without direct_io, so that mmap works). Within one mount every change goes through the
//! kernel, so its caches stay right; a new mount after a power cut starts with empty ones.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::faults::{Faults, Op};
use crate::state::{Attr, SetAttr, SetTime, State};
use crate::stats::Stats;
use crate::store::Kind;

const TTL: Duration = Duration::from_secs(1);

pub struct FaultFs {
    pub state: Arc<Mutex<State>>,
    pub faults: Arc<Faults>,
    pub holds: Arc<crate::holds::Holds>,
    pub stats: Arc<Stats>,
}

fn err(e: i32) -> Errno {
    Errno::from_i32(e)
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
    }
}

fn fuse_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: UNIX_EPOCH,
        kind: file_type(a.kind),
        perm: a.perm as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn entry(reply: ReplyEntry, r: Result<Attr, i32>) {
    match r {
        Ok(a) => reply.entry(&TTL, &fuse_attr(&a), Generation(0)),
        Err(e) => reply.error(err(e)),
    }
}

fn empty(reply: ReplyEmpty, r: Result<(), i32>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(err(e)),
    }
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(t) => SetTime::At(t),
    }
}

impl FaultFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in one request must not wedge every later one.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The errno of a fault rule matching `op` on `ino`'s paths, if any.
    fn fault_on(&self, st: &State, op: Op, ino: INodeNo) -> Option<Errno> {
        self.faults.check(op, || st.paths_of(ino.0)).map(err)
    }

    /// The errno of a fault rule matching `op` on `name` in `parent`, if any.
    fn fault_in(&self, st: &State, op: Op, parent: INodeNo, name: &OsStr) -> Option<Errno> {
        self.faults.check(op, || st.path_in(parent.0, name).into_iter().collect()).map(err)
    }
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        entry(reply, self.lock().lookup(parent.0, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &fuse_attr(&a)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut st = self.lock();
        if size.is_some() {
            if let Some(e) = self.fault_on(&st, Op::Truncate, ino) {
                return reply.error(e);
            }
        }
        let set = SetAttr {
            perm: mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
        };
        match st.setattr(ino.0, &set) {
            Ok(a) => reply.attr(&TTL, &fuse_attr(&a)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.lock().readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(err(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only: PostgreSQL needs no FIFOs or devices in its data directory.
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Create, parent, name) {
            return reply.error(e);
        }
        entry(reply, st.create(parent.0, name, mode & !umask, req.uid(), req.gid()));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Create, parent, name) {
            return reply.error(e);
        }
        entry(reply, st.mkdir(parent.0, name, mode & !umask, req.uid(), req.gid()));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Unlink, parent, name) {
            return reply.error(e);
        }
        empty(reply, st.unlink(parent.0, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Unlink, parent, name) {
            return reply.error(e);
        }
        empty(reply, st.rmdir(parent.0, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Create, parent, link_name) {
            return reply.error(e);
        }
        entry(reply, st.symlink(parent.0, link_name, target.as_os_str(), req.uid(), req.gid()));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return reply.error(Errno::EINVAL); // RENAME_EXCHANGE and RENAME_WHITEOUT
        }
        let mut st = self.lock();
        let fault = self.faults.check(Op::Rename, || {
            st.path_in(parent.0, name).into_iter().chain(st.path_in(newparent.0, newname)).collect()
        });
        if let Some(e) = fault {
            return reply.error(err(e));
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        empty(reply, st.rename(parent.0, name, newparent.0, newname, noreplace));
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Create, newparent, newname) {
            return reply.error(e);
        }
        entry(reply, st.link(ino.0, newparent.0, newname));
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.lock();
        if let Some(e) = self.fault_on(&st, Op::Open, ino) {
            return reply.error(e);
        }
        match st.open(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(err(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_on(&st, Op::Read, ino) {
            return reply.error(e);
        }
        match st.read(ino.0, offset, size) {
            Ok(data) => {
                Stats::add(&self.stats.reads, 1);
                reply.data(&data)
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_on(&st, Op::Write, ino) {
            return reply.error(e);
        }
        match st.write(ino.0, offset, data) {
            Ok(n) => {
                Stats::add(&self.stats.writes, 1);
                Stats::add(&self.stats.bytes_written, n as u64);
                reply.written(n)
            }
            Err(e) => reply.error(err(e)),
        }
    }

    /// Called at each close(): nothing becomes durable here.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().release(ino.0);
        reply.ok();
    }

    /// fsync and fdatasync alike (O_SYNC and O_DSYNC writes arrive here too: the kernel
    /// follows such a write with an fsync request).
    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // A held fsync waits here, without the lock, so that other requests go on.
        let paths = self.lock().paths_of(ino.0);
        self.holds.wait_if_held(&paths);
        let mut st = self.lock();
        if let Some(e) = self.fault_on(&st, Op::Fsync, ino) {
            return reply.error(e);
        }
        match st.fsync(ino.0) {
            Ok(n) => {
                Stats::add(&self.stats.fsyncs, 1);
                Stats::add(&self.stats.bytes_durable, n);
                reply.ok()
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut st = self.lock();
        match st.readdir(fh.0, ino.0, offset) {
            Ok(list) => {
                for (i, (child, kind, name)) in list.iter().enumerate() {
                    if reply.add(INodeNo(*child), offset + i as u64 + 1, file_type(*kind), name) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.lock().releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_on(&st, Op::Fsyncdir, ino) {
            return reply.error(e);
        }
        match st.fsyncdir(ino.0) {
            Ok(()) => {
                Stats::add(&self.stats.fsyncdirs, 1);
                reply.ok()
            }
            Err(e) => reply.error(err(e)),
        }
    }

    /// The host's numbers for the backing directory: the space faultfs can really use.
    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let st = self.lock();
        match st.store().statvfs() {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                255,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(err(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    /// With default_permissions the kernel checks modes itself and does not ask; this
    /// answers for an existing inode only.
    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        empty(reply, self.lock().attr(ino.0).map(|_| ()));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_in(&st, Op::Create, parent, name) {
            return reply.error(e);
        }
        let created = st.create(parent.0, name, mode & !umask, req.uid(), req.gid());
        match created.and_then(|a| st.open(a.ino).map(|()| a)) {
            Ok(a) => reply.created(
                &TTL,
                &fuse_attr(&a),
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(err(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        if let Some(e) = self.fault_on(&st, Op::Fallocate, ino) {
            return reply.error(e);
        }
        empty(reply, st.fallocate(ino.0, offset, length, mode));
    }
}
