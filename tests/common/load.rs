//! Sessions that load a server: each runs one statement in a loop until told to stop, and says
//! what it made, its slowest call and its errors (the burst, pacing and pacing-attack suites).

use super::{why, Client};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// What one session (or, summed, several) did.
#[derive(Debug, Default)]
pub struct Load {
    /// Calls, or ids: what `counts` made of each answer.
    pub made: i64,
    /// The slowest call, in ms.
    pub slowest_ms: f64,
    /// Each failed call: the session's label and why.
    pub errors: Vec<String>,
}

impl Load {
    /// Waits for `sessions` and sums what they did.
    pub fn joined(sessions: Vec<ScopedJoinHandle<'_, Load>>) -> Load {
        sessions.into_iter().map(|h| h.join().unwrap()).fold(Load::default(), |mut all, one| {
            all.made += one.made;
            all.slowest_ms = all.slowest_ms.max(one.slowest_ms);
            all.errors.extend(one.errors);
            all
        })
    }
}

/// How a session counts what it made.
#[derive(Clone, Copy)]
enum Counts {
    /// One a call (`SELECT snowflake_next()`, an INSERT).
    Calls,
    /// The one value its statement returns (`SELECT count(snowflake_next()) FROM ...`).
    Value,
}

/// A statement that sessions run in a loop, and how they count what it made.
#[derive(Clone, Copy)]
pub struct Looping {
    label: &'static str,
    sql: &'static str,
    counts: Counts,
    pause: Duration,
}

impl Looping {
    /// Each call counts one (`SELECT snowflake_next()`, an INSERT); errors say `label`.
    pub fn calls(label: &'static str, sql: &'static str) -> Looping {
        Looping { label, sql, counts: Counts::Calls, pause: Duration::ZERO }
    }

    /// Each call counts the one value it returns (`SELECT count(snowflake_next()) FROM ...`).
    pub fn values(label: &'static str, sql: &'static str) -> Looping {
        Looping { label, sql, counts: Counts::Value, pause: Duration::ZERO }
    }

    /// With `pause` after each call.
    pub fn pausing(self, pause: Duration) -> Looping {
        Looping { pause, ..self }
    }

    /// One thread of `s` per client, each running the statement until `stop`. An error is
    /// recorded (as `label: why`), and the loop goes on.
    pub fn run<'s>(
        self,
        s: &'s Scope<'s, '_>,
        clients: Vec<Client>,
        stop: &'s AtomicBool,
    ) -> Vec<ScopedJoinHandle<'s, Load>> {
        let Looping { label, sql, counts, pause } = self;
        clients
            .into_iter()
            .map(|mut c| {
                s.spawn(move || {
                    let mut load = Load::default();
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        match c.query(sql, &[]) {
                            Ok(rows) => {
                                load.made += match counts {
                                    Counts::Calls => 1,
                                    Counts::Value => rows[0].get::<_, i64>(0),
                                }
                            }
                            Err(e) => load.errors.push(format!("{label}: {}", why(&e))),
                        }
                        load.slowest_ms =
                            load.slowest_ms.max(sent.elapsed().as_secs_f64() * 1000.0);
                        if !pause.is_zero() {
                            std::thread::sleep(pause);
                        }
                    }
                    load
                })
            })
            .collect()
    }
}
