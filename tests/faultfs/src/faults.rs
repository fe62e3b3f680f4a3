//! Fault rules: make chosen operations on chosen paths fail with a chosen errno.
//!
//! A rule is checked before the operation touches any state, so a failed write leaves the
//! data as it was and a failed fsync makes nothing durable.

use std::fmt;
use std::sync::{Arc, Mutex};

use crate::stats::Stats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write,
    /// File fsync and fdatasync.
    Fsync,
    Fsyncdir,
    /// create, mknod, mkdir, symlink and link (the new name's path).
    Create,
    /// The source or the destination path.
    Rename,
    Open,
    Read,
    Fallocate,
    /// A size change (truncate, ftruncate, open with O_TRUNC).
    Truncate,
    /// unlink and rmdir.
    Unlink,
}

const OPS: [(Op, &str); 10] = [
    (Op::Write, "write"),
    (Op::Fsync, "fsync"),
    (Op::Fsyncdir, "fsyncdir"),
    (Op::Create, "create"),
    (Op::Rename, "rename"),
    (Op::Open, "open"),
    (Op::Read, "read"),
    (Op::Fallocate, "fallocate"),
    (Op::Truncate, "truncate"),
    (Op::Unlink, "unlink"),
];

impl Op {
    pub fn parse(s: &str) -> Option<Op> {
        OPS.iter().find(|(_, n)| *n == s).map(|(op, _)| *op)
    }

    pub fn names() -> String {
        OPS.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = OPS.iter().find(|(op, _)| op == self).map(|(_, n)| *n).unwrap_or("?");
        f.write_str(name)
    }
}

const ERRNOS: [(&str, i32); 10] = [
    ("ENOSPC", libc::ENOSPC),
    ("EIO", libc::EIO),
    ("EDQUOT", libc::EDQUOT),
    ("EROFS", libc::EROFS),
    ("EACCES", libc::EACCES),
    ("EPERM", libc::EPERM),
    ("EFBIG", libc::EFBIG),
    ("ENOMEM", libc::ENOMEM),
    ("EAGAIN", libc::EAGAIN),
    ("EINTR", libc::EINTR),
];

/// An errno by name (`ENOSPC`) or number (`28`).
pub fn parse_errno(s: &str) -> Option<i32> {
    if let Some((_, n)) = ERRNOS.iter().find(|(name, _)| name.eq_ignore_ascii_case(s)) {
        return Some(*n);
    }
    s.parse::<i32>().ok().filter(|n| *n > 0 && *n < 4096)
}

fn errno_name(n: i32) -> String {
    ERRNOS
        .iter()
        .find(|(_, e)| *e == n)
        .map(|(name, _)| name.to_string())
        .unwrap_or_else(|| n.to_string())
}

#[derive(Debug)]
struct Rule {
    id: u64,
    op: Op,
    glob: String,
    errno: i32,
    /// Faults still to inject; `None`: until cleared.
    remaining: Option<u64>,
    hits: u64,
}

#[derive(Debug)]
pub struct Faults {
    rules: Mutex<(u64, Vec<Rule>)>,
    stats: Arc<Stats>,
}

impl Faults {
    pub fn new(stats: Arc<Stats>) -> Faults {
        Faults { rules: Mutex::new((1, Vec::new())), stats }
    }

    /// Adds a rule; returns its id.
    pub fn add(&self, op: Op, glob: &str, errno: i32, count: Option<u64>) -> u64 {
        let mut g = self.rules.lock().unwrap();
        let id = g.0;
        g.0 += 1;
        g.1.push(Rule { id, op, glob: glob.to_string(), errno, remaining: count, hits: 0 });
        id
    }

    pub fn clear(&self) {
        self.rules.lock().unwrap().1.clear();
    }

    /// One line: `id:op:glob:errno:remaining:hits` per rule, `remaining` being `-` for
    /// a rule that lasts until cleared.
    pub fn describe(&self) -> String {
        let g = self.rules.lock().unwrap();
        let mut out = format!("{}", g.1.len());
        for r in &g.1 {
            let remaining = r.remaining.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
            out.push_str(&format!(
                " {}:{}:{}:{}:{}:{}",
                r.id,
                r.op,
                r.glob,
                errno_name(r.errno),
                remaining,
                r.hits
            ));
        }
        out
    }

    /// The errno to fail `op` with, if a live rule matches one of the paths. The paths are
    /// computed only when some rule for `op` is live, so rules cost nothing when unused.
    pub fn check(&self, op: Op, paths: impl FnOnce() -> Vec<String>) -> Option<i32> {
        let mut g = self.rules.lock().unwrap();
        if !g.1.iter().any(|r| r.op == op && r.remaining != Some(0)) {
            return None;
        }
        let paths = paths();
        let rule = g.1.iter_mut().find(|r| {
            r.op == op
                && r.remaining != Some(0)
                && paths.iter().any(|p| glob_match(r.glob.as_bytes(), p.as_bytes()))
        })?;
        rule.hits += 1;
        if let Some(n) = rule.remaining.as_mut() {
            *n -= 1;
        }
        Stats::add(&self.stats.faults, 1);
        Some(rule.errno)
    }
}

/// Shell-like matching of a whole path: `*` matches any run of bytes, `/` included, and
/// `?` any one byte; everything else matches itself.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text index it covers to).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let m = |p: &str, t: &str| glob_match(p.as_bytes(), t.as_bytes());
        assert!(m("pg_wal/*", "pg_wal/000000010000000000000001"));
        assert!(m("pg_wal/*", "pg_wal/archive_status/x.ready"));
        assert!(!m("pg_wal/*", "base/1/1234"));
        assert!(m("pg_snowflake.state*", "pg_snowflake.state.tmp"));
        assert!(m("f*", "f"));
        assert!(!m("f*", "g"));
        assert!(m("?", "f"));
        assert!(!m("?", "ff"));
        assert!(m("*a*b", "xxaxxb"));
        assert!(!m("*a*b", "xxaxxbx"));
        assert!(m("*", ""));
        assert!(m(".", "."));
    }

    #[test]
    fn rules_count_down_and_clear() {
        let stats = Arc::new(Stats::default());
        let f = Faults::new(stats.clone());
        assert_eq!(f.check(Op::Write, || panic!("paths computed without rules")), None);
        f.add(Op::Write, "f*", libc::ENOSPC, Some(2));
        assert_eq!(f.check(Op::Read, || panic!("paths computed for another op")), None);
        assert_eq!(f.check(Op::Write, || vec!["g".into()]), None);
        assert_eq!(f.check(Op::Write, || vec!["f1".into()]), Some(libc::ENOSPC));
        assert_eq!(f.check(Op::Write, || vec!["g".into(), "f2".into()]), Some(libc::ENOSPC));
        assert_eq!(f.check(Op::Write, || vec!["f1".into()]), None);
        assert_eq!(f.describe(), "1 1:write:f*:ENOSPC:0:2");
        f.add(Op::Fsync, "*", libc::EIO, None);
        assert_eq!(f.check(Op::Fsync, || vec![".".into()]), Some(libc::EIO));
        f.clear();
        assert_eq!(f.check(Op::Fsync, || vec![".".into()]), None);
        assert_eq!(stats.faults.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[test]
    fn errnos() {
        assert_eq!(parse_errno("ENOSPC"), Some(libc::ENOSPC));
        assert_eq!(parse_errno("erofs"), Some(libc::EROFS));
        assert_eq!(parse_errno("5"), Some(5));
        assert_eq!(parse_errno("EBOGUS"), None);
        assert_eq!(parse_errno("0"), None);
    }
}
