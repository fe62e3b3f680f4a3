//! Writers through a failover, and what must hold after it, for any HA engine: writers insert
//! through `DEFAULT snowflake_next()` over a multi-host connection string, the primary fails,
//! the writers reconnect to whichever server accepts writes, and then every id the new primary
//! handed out is above every id the old one acknowledged, no acknowledged row is lost and no key
//! is duplicated.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// The table the writers insert into; create it on the primary before `write_through_failover`.
pub const ORDERS: &str =
    "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), writer int)";

/// What the writers saw.
pub struct Writes {
    /// Ids of committed INSERTs, with the port of the server that acknowledged each.
    pub acked: Vec<(u16, i64)>,
    /// Unique violations (there must be none: a new primary that repeated an id).
    pub duplicate_keys: Vec<String>,
}

impl Writes {
    pub fn ids_of(&self, port: u16) -> Vec<i64> {
        self.acked.iter().filter(|(p, _)| *p == port).map(|(_, id)| *id).collect()
    }
}

/// `writers` threads insert one row at a time through `conninfo` (which names every node, with
/// `target_session_attrs=read-write`). Once each has `before` rows acknowledged, `fail()` runs
/// (the primary's machine fails); the writers reconnect on any error and go on until each has
/// `after` rows acknowledged by the server on `new_port`, within `within`.
pub fn write_through_failover(
    conninfo: &str,
    writers: i32,
    before: usize,
    after: usize,
    new_port: u16,
    within: Duration,
    fail: impl FnOnce(),
) -> Writes {
    let failed_over = AtomicBool::new(false);
    let acked = Mutex::new(Vec::new());
    let duplicate_keys = Mutex::new(Vec::new());
    let ready = Barrier::new(writers as usize + 1);
    std::thread::scope(|scope| {
        for w in 0..writers {
            let (acked, duplicate_keys, failed_over, ready) =
                (&acked, &duplicate_keys, &failed_over, &ready);
            scope.spawn(move || {
                let deadline = Instant::now() + within;
                let (mut done, mut on_new) = (0, 0);
                let mut client: Option<(Client, u16)> = None;
                while on_new < after {
                    assert!(Instant::now() < deadline, "writer {w} never got going again");
                    let Some((c, port)) = client.as_mut() else {
                        client = connect_to_primary(conninfo);
                        if client.is_none() {
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        continue;
                    };
                    match c.query_one("INSERT INTO orders (writer) VALUES ($1) RETURNING id", &[&w])
                    {
                        Ok(row) => {
                            acked.lock().unwrap().push((*port, row.get(0)));
                            done += 1;
                            if failed_over.load(Ordering::Relaxed) && *port == new_port {
                                on_new += 1;
                            }
                            if done == before {
                                ready.wait();
                            }
                        }
                        Err(e) => {
                            if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
                                duplicate_keys.lock().unwrap().push(e.to_string());
                            }
                            // The server went away (or is read-only now): reconnect.
                            client = None;
                        }
                    }
                }
            });
        }
        ready.wait();
        fail();
        failed_over.store(true, Ordering::Relaxed);
    });
    Writes {
        acked: acked.into_inner().unwrap(),
        duplicate_keys: duplicate_keys.into_inner().unwrap(),
    }
}

/// A connection to the server that accepts writes, and its port.
fn connect_to_primary(conninfo: &str) -> Option<(Client, u16)> {
    let mut c = Client::connect(conninfo, NoTls).ok()?;
    let port: i32 = c.query_one("SELECT inet_server_port()", &[]).ok()?.get(0);
    Some((c, port as u16))
}

/// Checks what must hold after the failover from `old_port` to the server `new` (on
/// `new_port`): no duplicate key, every id of the new primary above every id the old one
/// acknowledged, every acknowledged row there once (synchronous replication), all with the
/// worker id of both. Returns the largest id the new primary handed out.
pub fn check_failover(writes: &Writes, old_port: u16, new_port: u16, new: &mut Client) -> i64 {
    assert_eq!(writes.duplicate_keys, Vec::<String>::new());
    let (old, fresh) = (writes.ids_of(old_port), writes.ids_of(new_port));
    assert!(!old.is_empty() && !fresh.is_empty());
    let (old_max, new_min) = (*old.iter().max().unwrap(), *fresh.iter().min().unwrap());
    let row = new
        .query_one(
            "SELECT (snowflake_decode($1)).ts::text, (snowflake_decode($2)).ts::text, now()::text",
            &[&old_max, &new_min],
        )
        .unwrap();
    let (old_ts, new_ts, new_now): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    eprintln!(
        "the old primary acknowledged {} ids, the last made at {old_ts}; the new one {} ids, \
         the first at {new_ts} (its clock: {new_now})",
        old.len(),
        fresh.len()
    );
    assert!(
        new_min > old_max,
        "the new primary handed out {new_min}, below the old primary's {old_max}"
    );
    let worker_ids = {
        let row = new
            .query_one("SELECT count(DISTINCT (snowflake_decode(id)).worker_id) FROM orders", &[]);
        row.unwrap().get::<_, i64>(0)
    };
    let (rows, distinct, lost): (i64, i64, i64) = {
        let r = new
            .query_one(
                "SELECT count(*), count(DISTINCT id),
                        (SELECT count(*) FROM unnest($1::bigint[]) a(id)
                          WHERE NOT EXISTS (SELECT FROM orders o WHERE o.id = a.id))
                 FROM orders",
                &[&writes.acked.iter().map(|(_, id)| *id).collect::<Vec<i64>>()],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!(lost, 0, "acknowledged rows are missing on the new primary");
    assert_eq!(worker_ids, 1, "the old and the new primary share one worker id");
    assert_eq!(rows, distinct);
    assert!(rows >= writes.acked.len() as i64);
    *fresh.iter().max().unwrap()
}

/// After a failover, once the old primary is back as a standby (`old`): it refuses ids
/// (25006), and the writers' connection string (`uri`) reaches the new primary on `new_port`,
/// whose next id is above `above`, the largest id before the failover.
pub fn check_rejoined(old: &str, uri: &str, new_port: u16, above: i64) {
    let mut old = Client::connect(old, NoTls).unwrap();
    let err = old.query_one("SELECT snowflake_next()", &[]).unwrap_err();
    assert_eq!(err.code(), Some(&postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION), "{err}");
    let mut app = Client::connect(uri, NoTls).unwrap();
    let port: i32 = app.scalar("SELECT inet_server_port()");
    assert_eq!(port as u16, new_port);
    let id: i64 = app.scalar("INSERT INTO orders (writer) VALUES (9) RETURNING id");
    assert!(id > above, "the first id after the rejoin, {id}, is not above {above}");
}
