//! Holds: file fsyncs on chosen paths that wait, without holding the file system's lock,
//! until released. A test uses one to cut the power exactly while a program is making
//! something durable: it holds the fsync, waits until the program is blocked in it (`holds`
//! says how many calls wait), and kills the daemon. Other requests go on meanwhile, if the
//! daemon serves with more than one thread (`--threads 2` or more).

use std::sync::{Condvar, Mutex};

use crate::faults::glob_match;

#[derive(Debug, Default)]
struct Inner {
    /// Path globs whose fsyncs wait, each with how many calls it may still catch.
    rules: Vec<(String, u64)>,
    /// Calls waiting now, and calls caught so far.
    waiting: u64,
    caught: u64,
    /// Bumped by every release: waiting calls go on when it moves.
    generation: u64,
}

#[derive(Debug, Default)]
pub struct Holds {
    inner: Mutex<Inner>,
    released: Condvar,
}

impl Holds {
    /// Holds the next `count` fsyncs of a path matching `glob`.
    pub fn add(&self, glob: &str, count: u64) {
        self.inner.lock().unwrap().rules.push((glob.to_string(), count));
    }

    /// Lets every waiting call go on, and drops the rules.
    pub fn release(&self) {
        let mut g = self.inner.lock().unwrap();
        g.rules.clear();
        g.generation += 1;
        self.released.notify_all();
    }

    /// `waiting caught`.
    pub fn describe(&self) -> String {
        let g = self.inner.lock().unwrap();
        format!("{} {}", g.waiting, g.caught)
    }

    /// Waits, if a rule catches one of `paths`, until the next release.
    pub fn wait_if_held(&self, paths: &[String]) {
        let mut g = self.inner.lock().unwrap();
        let Some(rule) = g.rules.iter_mut().find(|(glob, left)| {
            *left > 0 && paths.iter().any(|p| glob_match(glob.as_bytes(), p.as_bytes()))
        }) else {
            return;
        };
        rule.1 -= 1;
        g.caught += 1;
        g.waiting += 1;
        let generation = g.generation;
        while g.generation == generation {
            g = self.released.wait(g).unwrap();
        }
        g.waiting -= 1;
    }
}
