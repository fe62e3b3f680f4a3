//! A randomized model test: random create / write / truncate / fsync / rename / link /
//! unlink / mkdir / rmdir / fsyncdir sequences through the kernel, power cuts at random
//! points, and after each cut the mounted tree compared with a plain in-test model of the
//! durable state:
//!
//! * a file inode has volatile and durable contents; fsync copies volatile to durable;
//! * a directory inode has volatile and durable entry maps; fsyncdir copies one to the
//!   other (directories are renamed within the root only, so the one-durable-name rule of
//!   directories moved to another parent does not come up);
//! * after a cut, the tree is what the root's durable entries reach, and each file shows
//!   its inode's durable contents;
//! * in journal mode (`--journal`), every fsync and fsyncdir also copies every directory's
//!   volatile entries to its durable ones.
//!
//! The seed is printed; `FAULTFS_SEED=<n>` replays one, `FAULTFS_SEEDS=<k>` sets how many.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::*;

#[derive(Clone, Debug)]
enum Node {
    File { v: Vec<u8>, d: Vec<u8> },
    Dir { v: BTreeMap<String, usize>, d: BTreeMap<String, usize> },
}

struct Model {
    nodes: Vec<Node>,
    journal: bool,
}

const ROOT: usize = 0;
const DIRS: [&str; 2] = ["d1", "d2"];
const NAMES: [&str; 3] = ["a", "b", "c"];

/// What a walk of a tree finds at one path.
#[derive(PartialEq)]
enum Seen {
    File(Vec<u8>),
    Dir,
}

impl std::fmt::Debug for Seen {
    /// A length and a digest: a whole file in a failure message says nothing readable.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Dir => write!(f, "directory"),
            Seen::File(d) => {
                let hash = d.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
                });
                let nonzero = d.iter().filter(|&&b| b != 0).count();
                write!(f, "file of {} bytes ({nonzero} non-zero, fnv {hash:016x})", d.len())
            }
        }
    }
}

impl Model {
    fn new(journal: bool) -> Model {
        Model { nodes: vec![Node::Dir { v: BTreeMap::new(), d: BTreeMap::new() }], journal }
    }

    /// A journal commit: every directory's entries become durable.
    fn commit_all_dirs(&mut self) {
        for n in &mut self.nodes {
            if let Node::Dir { v, d } = n {
                *d = v.clone();
            }
        }
    }

    fn ventries(&self, dir: usize) -> &BTreeMap<String, usize> {
        match &self.nodes[dir] {
            Node::Dir { v, .. } => v,
            Node::File { .. } => panic!("not a dir"),
        }
    }

    fn ventries_mut(&mut self, dir: usize) -> &mut BTreeMap<String, usize> {
        match &mut self.nodes[dir] {
            Node::Dir { v, .. } => v,
            Node::File { .. } => panic!("not a dir"),
        }
    }

    /// The directory node at a top-level path ("" is the root).
    fn dir_at(&self, dir: &str) -> Option<usize> {
        if dir.is_empty() {
            return Some(ROOT);
        }
        let n = *self.ventries(ROOT).get(dir)?;
        matches!(self.nodes[n], Node::Dir { .. }).then_some(n)
    }

    fn file_at(&self, dir: &str, name: &str) -> Option<usize> {
        let n = *self.ventries(self.dir_at(dir)?).get(name)?;
        matches!(self.nodes[n], Node::File { .. }).then_some(n)
    }

    fn vdata(&mut self, n: usize) -> &mut Vec<u8> {
        match &mut self.nodes[n] {
            Node::File { v, .. } => v,
            Node::Dir { .. } => panic!("not a file"),
        }
    }

    /// The tree as seen through volatile (`durable == false`) or durable entries:
    /// path -> (what, node).
    fn tree(&self, durable: bool) -> BTreeMap<String, (Seen, usize)> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(String::new(), ROOT)];
        while let Some((prefix, dir)) = stack.pop() {
            let Node::Dir { v, d } = &self.nodes[dir] else { unreachable!() };
            for (name, &c) in if durable { d } else { v } {
                let path =
                    if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
                match &self.nodes[c] {
                    Node::File { v, d } => {
                        out.insert(
                            path,
                            (Seen::File(if durable { d.clone() } else { v.clone() }), c),
                        );
                    }
                    Node::Dir { .. } => {
                        out.insert(path.clone(), (Seen::Dir, c));
                        stack.push((path, c));
                    }
                }
            }
        }
        out
    }

    /// After a power cut: the durable state becomes the volatile one.
    fn power_cut(&mut self) {
        for n in &mut self.nodes {
            match n {
                Node::File { v, d } => *v = d.clone(),
                Node::Dir { v, d } => *v = d.clone(),
            }
        }
    }
}

/// What the mount shows: path -> (what, st_ino, st_nlink).
fn walk(root: &Path) -> BTreeMap<String, (Seen, u64, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(prefix) = stack.pop() {
        let dir = if prefix.is_empty() { root.to_path_buf() } else { root.join(&prefix) };
        for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("readdir {}: {e}", dir.display())) {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            let md = fs::symlink_metadata(root.join(&path)).unwrap();
            if md.is_dir() {
                out.insert(path.clone(), (Seen::Dir, md.ino(), md.nlink()));
                stack.push(path);
            } else {
                out.insert(
                    path.clone(),
                    (Seen::File(read(&root.join(&path))), md.ino(), md.nlink()),
                );
            }
        }
    }
    out
}

/// Compares the mount with the model's volatile or durable tree: same paths, same
/// contents, names share an inode exactly when the model says so, and link counts.
fn compare(f: &Faultfs, m: &Model, durable: bool, context: &str) {
    let want = m.tree(durable);
    let got = walk(&f.mnt);
    let names = |t: Vec<&String>| t.into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(got.keys().collect()),
        names(want.keys().collect()),
        "paths differ (left: mount, right: model); {context}"
    );
    let mut names_of: HashMap<usize, u64> = HashMap::new();
    let mut ino_of: HashMap<usize, u64> = HashMap::new();
    let mut node_of: HashMap<u64, usize> = HashMap::new();
    for (path, (what, node)) in &want {
        let (seen, ino, _) = &got[path];
        if seen != what {
            let first_diff = match (seen, what) {
                (Seen::File(a), Seen::File(b)) => {
                    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
                }
                _ => 0,
            };
            panic!("{path}: got {seen:?}, want {what:?}; first difference at byte {first_diff}; {context}");
        }
        *names_of.entry(*node).or_default() += 1;
        assert_eq!(
            *ino_of.entry(*node).or_insert(*ino),
            *ino,
            "{path}: names of one inode differ in st_ino; {context}"
        );
        assert_eq!(
            *node_of.entry(*ino).or_insert(*node),
            *node,
            "{path}: two inodes share st_ino; {context}"
        );
    }
    for (path, (what, node)) in &want {
        let nlink = got[path].2;
        let expected = match what {
            Seen::File(_) => names_of[node],
            Seen::Dir => {
                2 + want
                    .keys()
                    .filter(|p| {
                        p.starts_with(&format!("{path}/")) && matches!(want[*p].0, Seen::Dir)
                    })
                    .count() as u64
            }
        };
        assert_eq!(nlink, expected, "{path}: st_nlink; {context}");
    }
}

fn path_of(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Runs one random operation whose preconditions hold in the model (so the real call must
/// succeed), applies it to the model, and describes it.
fn step(f: &Faultfs, m: &mut Model, rng: &mut Rng) -> Option<String> {
    let dirs = ["", DIRS[0], DIRS[1]];
    let dir = *rng.pick(&dirs);
    let name = *rng.pick(&NAMES);
    let p = path_of(dir, name);
    let full = f.path(&p);
    match rng.below(15) {
        0 | 1 => {
            let parent = m.dir_at(dir)?;
            if m.ventries(parent).contains_key(name) {
                return None;
            }
            File::options().write(true).create_new(true).open(&full).unwrap();
            m.nodes.push(Node::File { v: Vec::new(), d: Vec::new() });
            let n = m.nodes.len() - 1;
            m.ventries_mut(parent).insert(name.into(), n);
            Some(format!("create {p}"))
        }
        2..=4 => {
            let n = m.file_at(dir, name)?;
            let off = rng.below(12_000) as usize;
            let len = rng.below(6_000) as usize + 1;
            let data = if rng.below(4) == 0 { vec![0; len] } else { rng.bytes(len) };
            File::options()
                .write(true)
                .open(&full)
                .unwrap()
                .write_all_at(&data, off as u64)
                .unwrap();
            let v = m.vdata(n);
            if v.len() < off + len {
                v.resize(off + len, 0);
            }
            v[off..off + len].copy_from_slice(&data);
            Some(format!("write {p} {off}+{len}"))
        }
        5 => {
            let n = m.file_at(dir, name)?;
            let len = rng.below(15_000) as usize;
            File::options().write(true).open(&full).unwrap().set_len(len as u64).unwrap();
            m.vdata(n).resize(len, 0);
            Some(format!("truncate {p} {len}"))
        }
        6 | 7 => {
            let n = m.file_at(dir, name)?;
            if rng.below(2) == 0 {
                fsync_file(&full);
            } else {
                fdatasync_file(&full);
            }
            if let Node::File { v, d } = &mut m.nodes[n] {
                *d = v.clone();
            }
            if m.journal {
                m.commit_all_dirs();
            }
            Some(format!("fsync {p}"))
        }
        8 => {
            let src = m.file_at(dir, name)?;
            let (dir2, name2) = (*rng.pick(&dirs), *rng.pick(&NAMES));
            let parent2 = m.dir_at(dir2)?;
            let dst = m.ventries(parent2).get(name2).copied();
            if dst.is_some_and(|d| matches!(m.nodes[d], Node::Dir { .. }))
                || (dir, name) == (dir2, name2)
            {
                return None;
            }
            let p2 = path_of(dir2, name2);
            fs::rename(&full, f.path(&p2)).unwrap();
            if dst != Some(src) {
                // Renaming one name of an inode onto another name of it changes nothing.
                let parent = m.dir_at(dir).unwrap();
                m.ventries_mut(parent).remove(name);
                m.ventries_mut(parent2).insert(name2.into(), src);
            }
            Some(format!("rename {p} {p2}"))
        }
        9 => {
            let src = m.file_at(dir, name)?;
            let (dir2, name2) = (*rng.pick(&dirs), *rng.pick(&NAMES));
            let parent2 = m.dir_at(dir2)?;
            if m.ventries(parent2).contains_key(name2) {
                return None;
            }
            let p2 = path_of(dir2, name2);
            fs::hard_link(&full, f.path(&p2)).unwrap();
            m.ventries_mut(parent2).insert(name2.into(), src);
            Some(format!("link {p} {p2}"))
        }
        10 => {
            m.file_at(dir, name)?;
            fs::remove_file(&full).unwrap();
            let parent = m.dir_at(dir).unwrap();
            m.ventries_mut(parent).remove(name);
            Some(format!("unlink {p}"))
        }
        11 => {
            let d = *rng.pick(&DIRS);
            if m.ventries(ROOT).contains_key(d) {
                // rmdir if empty
                let n = m.dir_at(d)?;
                if !m.ventries(n).is_empty() {
                    return None;
                }
                fs::remove_dir(f.path(d)).unwrap();
                m.ventries_mut(ROOT).remove(d);
                Some(format!("rmdir {d}"))
            } else {
                fs::create_dir(f.path(d)).unwrap();
                m.nodes.push(Node::Dir { v: BTreeMap::new(), d: BTreeMap::new() });
                let n = m.nodes.len() - 1;
                m.ventries_mut(ROOT).insert(d.into(), n);
                Some(format!("mkdir {d}"))
            }
        }
        12 => {
            // Rename a directory within the root, possibly over an empty one.
            let (from, to) =
                if rng.below(2) == 0 { (DIRS[0], DIRS[1]) } else { (DIRS[1], DIRS[0]) };
            let src = m.dir_at(from)?;
            if let Some(dst) = m.ventries(ROOT).get(to).copied() {
                if !m.ventries(dst).is_empty() {
                    return None;
                }
            }
            fs::rename(f.path(from), f.path(to)).unwrap();
            m.ventries_mut(ROOT).remove(from);
            m.ventries_mut(ROOT).insert(to.into(), src);
            Some(format!("rename {from} {to}"))
        }
        _ => {
            let n = m.dir_at(dir)?;
            fsync_dir(&f.path(dir));
            if let Node::Dir { v, d } = &mut m.nodes[n] {
                *d = v.clone();
            }
            if m.journal {
                m.commit_all_dirs();
            }
            Some(format!("fsyncdir /{dir}"))
        }
    }
}

fn run_seed(seed: u64, journal: bool) {
    let mode = if journal { "journal" } else { "strict" };
    eprintln!("model test ({mode}) seed={seed} (replay: FAULTFS_SEED={seed})");
    let mut rng = Rng::split(seed, 0);
    let mut f = Faultfs::with_options("model", if journal { &["--journal"] } else { &[] });
    let mut m = Model::new(journal);
    let mut log: Vec<String> = Vec::new();
    for epoch in 0..4 {
        let steps = rng.below(150) + 1;
        let mut done = 0;
        while done < steps {
            if let Some(op) = step(&f, &mut m, &mut rng) {
                log.push(format!("epoch {epoch}: {op}"));
                done += 1;
            }
        }
        let ctx = |what: &str, log: &[String]| {
            format!(
                "{mode} mode, seed {seed}, epoch {epoch}, {what}; operations:\n  {}",
                log.join("\n  ")
            )
        };
        compare(&f, &m, false, &ctx("before the cut (volatile view)", &log));
        f.power_cut();
        log.push(format!("epoch {epoch}: POWER CUT"));
        compare(&f, &m, true, &ctx("after the cut (durable state)", &log));
        m.power_cut();
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("FAULTFS_SEED") {
        Ok(s) => vec![s.parse().expect("FAULTFS_SEED is a number")],
        Err(_) => {
            let base = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            let n: u64 =
                std::env::var("FAULTFS_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(12);
            (0..n).map(|i| base.wrapping_add(i.wrapping_mul(0x9E37_79B9))).collect()
        }
    }
}

#[test]
fn random_operations_and_power_cuts_match_the_model() {
    for seed in seeds() {
        run_seed(seed, false);
    }
}

#[test]
fn random_operations_and_power_cuts_match_the_model_in_journal_mode() {
    for seed in seeds() {
        run_seed(seed, true);
    }
}
