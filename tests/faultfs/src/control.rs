//! The control socket: a line-based text protocol on a Unix socket, one reply line per
//! command line, `ok ...` or `error ...`.
//!
//! ```text
//! ping                                      -> ok
//! fail <op> <path-glob> <errno> [<count>]   -> ok <rule id>
//! clear                                     -> ok
//! rules                                     -> ok <n> <id>:<op>:<glob>:<errno>:<remaining|->:<hits> ...
//! stats                                     -> ok fsyncs=N fsyncdirs=N writes=N ... faults=N dirty_bytes=N inodes=N
//! sync                                      -> ok <bytes made durable>
//! ```

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use crate::faults::{parse_errno, Faults, Op};
use crate::state::State;
use crate::stats::Stats;

#[derive(Clone)]
pub struct Control {
    pub state: Arc<Mutex<State>>,
    pub faults: Arc<Faults>,
    pub holds: Arc<crate::holds::Holds>,
    pub stats: Arc<Stats>,
}

impl Control {
    /// Listens on `path` (replacing a stale socket) and serves each connection in a thread.
    pub fn spawn(self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(path)?;
        thread::Builder::new().name("control".into()).spawn(move || {
            for conn in listener.incoming().flatten() {
                let me = self.clone();
                let _ = thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || me.serve(conn));
            }
        })?;
        Ok(())
    }

    fn serve(&self, conn: UnixStream) {
        let Ok(mut out) = conn.try_clone() else {
            return;
        };
        for line in BufReader::new(conn).lines() {
            let Ok(line) = line else { return };
            if line.trim().is_empty() {
                continue;
            }
            let reply = self.command(line.trim());
            if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
                return;
            }
        }
    }

    pub fn command(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ping"] => "ok".into(),
            ["fail", op, glob, errno, rest @ ..] if rest.len() <= 1 => {
                let Some(op) = Op::parse(op) else {
                    return format!("error unknown op {op:?} (one of {})", Op::names());
                };
                let Some(errno) = parse_errno(errno) else {
                    return format!("error unknown errno {errno:?} (ENOSPC, EIO, EDQUOT, EROFS, ... or a number)");
                };
                let count = match rest.first().map(|c| c.parse::<u64>()) {
                    None => None,
                    Some(Ok(n)) if n > 0 => Some(n),
                    Some(_) => return format!("error bad count {:?} (a positive number)", rest[0]),
                };
                format!("ok {}", self.faults.add(op, glob, errno, count))
            }
            ["fail", ..] => "error usage: fail <op> <path-glob> <errno> [<count>]".into(),
            ["clear"] => {
                self.faults.clear();
                "ok".into()
            }
            ["rules"] => format!("ok {}", self.faults.describe()),
            ["hold", "fsync", glob, rest @ ..] if rest.len() <= 1 => {
                let count = match rest.first().map(|c| c.parse::<u64>()) {
                    None => 1,
                    Some(Ok(n)) if n > 0 => n,
                    Some(_) => return format!("error bad count {:?} (a positive number)", rest[0]),
                };
                self.holds.add(glob, count);
                "ok".into()
            }
            ["hold", ..] => "error usage: hold fsync <path-glob> [<count>]".into(),
            ["holds"] => format!("ok {}", self.holds.describe()),
            ["release"] => {
                self.holds.release();
                "ok".into()
            }
            ["stats"] => {
                let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                format!(
                    "ok {} dirty_bytes={} inodes={}",
                    self.stats.render(),
                    st.dirty_bytes(),
                    st.inode_count()
                )
            }
            ["sync"] => {
                let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                match st.sync_all() {
                    Ok(n) => {
                        Stats::add(&self.stats.bytes_durable, n);
                        format!("ok {n}")
                    }
                    Err(e) => format!("error sync failed: {}", io::Error::from_raw_os_error(e)),
                }
            }
            _ => format!("error unknown command {line:?} (ping, fail, clear, rules, hold, holds, release, stats, sync)"),
        }
    }
}
