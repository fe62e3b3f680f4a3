//! What the clients saw, and the checker over the whole of it: every call's outcome with the
//! member, server and session that gave it, when it was sent and when its answer came.

use std::collections::{BTreeMap, HashMap};

/// One call of a client.
#[derive(Clone, Debug)]
pub struct Call {
    /// Seconds since the run began: when it was sent, and when its answer came.
    pub sent: f64,
    pub answered: f64,
    /// The logical member (a primary and its standby are one member), `THIEF` or `COPY`.
    pub member: usize,
    /// The connection: a new one after every reconnect.
    pub session: u64,
    /// The port of the server that answered (0: none).
    pub port: u16,
    pub outcome: Outcome,
}

/// The thief of the freeze faults, as a member of the history.
pub const THIEF: usize = 99;
/// The copy of the copy faults (a member's data directory started beside it), likewise.
pub const COPY: usize = 98;

#[derive(Clone, Debug)]
pub enum Outcome {
    /// An id, acknowledged: a committed INSERT's (`inserted`) or a `SELECT snowflake_next()`'s.
    Id { id: i64, inserted: bool },
    /// An error of the server (its SQLSTATE), or of the connection (none).
    Refused { code: Option<String>, message: String },
}

/// A promotion: from then on the member's ids come from `new_port`, and all must be above every
/// id `old_port` acknowledged.
#[derive(Clone, Debug)]
pub struct Promotion {
    pub at: f64,
    pub member: usize,
    pub old_port: u16,
    pub new_port: u16,
}

/// SQLSTATEs a call may end with: pg_snowflake's documented refusals (55000 no lease, clock or
/// turn; 58030 the state file cannot be written; 25006 a standby; 57014 a cancelled wait), and
/// PostgreSQL's own for a server that stops, crashes or is starting (57P01-57P03) and for a
/// broken connection (08xxx). Anything else, above all XX000 or 23505 (a repeated id), fails.
pub const ALLOWED: &[&str] =
    &["55000", "58030", "25006", "57014", "57P01", "57P02", "57P03", "08000", "08003", "08006"];

/// What the checker found.
#[derive(Default, Debug)]
pub struct Findings {
    pub violations: Vec<String>,
    pub ids: usize,
    pub inserted: usize,
    pub calls: usize,
}

/// Checks the history: no id acknowledged twice across the fleet; within a session ids strictly
/// increase; within a member, an id acknowledged before another call was sent is below that
/// call's id (restarts, crashes, power cuts and promotions included: a member is its primary and
/// its standby); after a promotion every id is above every id the old primary acknowledged;
/// every refusal carries an allowed SQLSTATE.
pub fn check(calls: &[Call], promotions: &[Promotion]) -> Findings {
    let mut f = Findings { calls: calls.len(), ..Default::default() };
    let mut seen: HashMap<i64, &Call> = HashMap::new();
    let mut by_session: BTreeMap<(usize, u64), Vec<&Call>> = BTreeMap::new();
    for c in calls {
        match &c.outcome {
            Outcome::Id { id, inserted } => {
                f.ids += 1;
                f.inserted += usize::from(*inserted);
                if let Some(first) = seen.insert(*id, c) {
                    f.violations.push(format!(
                        "id {id} acknowledged twice: by {} (port {}, session {}, at {:.3} s) \
                         and by {} (port {}, session {}, at {:.3} s)",
                        holder(first.member),
                        first.port,
                        first.session,
                        first.answered,
                        holder(c.member),
                        c.port,
                        c.session,
                        c.answered
                    ));
                }
                by_session.entry((c.member, c.session)).or_default().push(c);
            }
            Outcome::Refused { code: Some(code), message } => {
                if !ALLOWED.contains(&code.as_str()) {
                    f.violations.push(format!(
                        "{} refused with {code} at {:.3} s: {message}",
                        holder(c.member),
                        c.answered
                    ));
                }
            }
            Outcome::Refused { code: None, .. } => {}
        }
    }
    for ((member, session), ids) in &by_session {
        for w in ids.windows(2) {
            if let (Outcome::Id { id: a, .. }, Outcome::Id { id: b, .. }) =
                (&w[0].outcome, &w[1].outcome)
            {
                if b <= a {
                    f.violations
                        .push(format!("{}'s session {session} got {b} after {a}", holder(*member)));
                }
            }
        }
    }
    // Real-time order within a member: sweep the calls by the time they were sent, keeping the
    // largest id of those answered before.
    let mut members: BTreeMap<usize, Vec<&Call>> = BTreeMap::new();
    for c in calls {
        if matches!(c.outcome, Outcome::Id { .. }) {
            members.entry(c.member).or_default().push(c);
        }
    }
    for (member, acks) in &members {
        let mut by_answer = acks.clone();
        by_answer.sort_by(|a, b| a.answered.total_cmp(&b.answered));
        let mut by_sent = acks.clone();
        by_sent.sort_by(|a, b| a.sent.total_cmp(&b.sent));
        let (mut i, mut highest): (usize, Option<&Call>) = (0, None);
        for c in by_sent {
            while i < by_answer.len() && by_answer[i].answered < c.sent {
                if highest.is_none_or(|h| id_of(by_answer[i]) > id_of(h)) {
                    highest = Some(by_answer[i]);
                }
                i += 1;
            }
            if let Some(h) = highest {
                if id_of(c) <= id_of(h) {
                    f.violations.push(format!(
                        "{}: id {} (port {}, sent at {:.3} s) is not above {} (port {}, \
                         answered at {:.3} s, before it was sent)",
                        holder(*member),
                        id_of(c),
                        c.port,
                        c.sent,
                        id_of(h),
                        h.port,
                        h.answered
                    ));
                }
            }
        }
    }
    // A worker id's holders, one after another (members, not servers: a primary and its
    // promoted standby are one holder). The registry gives a worker id whose lease ran out to a
    // new holder above everything the previous holders covered, and a holder's ids stay below
    // its coverage (the ceiling). So every id a holder made before the next one's first id is
    // below all of the next one's ids; and what it makes after (still below its coverage, while
    // its clock is behind it, or above, once it got the worker id back) never falls among them.
    let mut by_worker: BTreeMap<i64, BTreeMap<usize, Vec<&Call>>> = BTreeMap::new();
    for c in calls {
        if let Outcome::Id { id, .. } = c.outcome {
            by_worker.entry(worker_id(id)).or_default().entry(c.member).or_default().push(c);
        }
    }
    for (w, holders) in &by_worker {
        let first_of = |acks: &Vec<&Call>| acks.iter().map(|c| c.answered).fold(f64::MAX, f64::min);
        let mut order: Vec<(&usize, &Vec<&Call>)> = holders.iter().collect();
        order.sort_by(|a, b| first_of(a.1).total_cmp(&first_of(b.1)));
        for (k, (b, b_acks)) in order.iter().enumerate() {
            let b_first = first_of(b_acks);
            let b_min = b_acks.iter().map(|c| id_of(c)).min().unwrap_or(i64::MAX);
            let b_max = b_acks.iter().map(|c| id_of(c)).max().unwrap_or(i64::MIN);
            for (a, a_acks) in &order[..k] {
                for c in a_acks.iter() {
                    let id = id_of(c);
                    let before = c.answered < b_first && id >= b_min;
                    let among = id >= b_min && id <= b_max;
                    if before || among {
                        f.violations.push(format!(
                            "worker id {w}: {} gave {id} (answered at {:.3} s), {} {} of {}, \
                             which holds that worker id since {b_first:.3} s",
                            holder(**a),
                            c.answered,
                            if before { "not below" } else { "among" },
                            if before {
                                format!("{b_min}, the lowest id")
                            } else {
                                format!("{b_min}..{b_max}, the ids")
                            },
                            holder(**b)
                        ));
                        break;
                    }
                }
            }
        }
    }
    for p in promotions {
        let old_max = calls
            .iter()
            .filter(|c| c.member == p.member && c.port == p.old_port && c.answered <= p.at)
            .filter_map(id_or_none)
            .max();
        let new_min = calls
            .iter()
            .filter(|c| c.member == p.member && c.port == p.new_port && c.sent >= p.at)
            .filter_map(id_or_none)
            .min();
        if let (Some(old), Some(new)) = (old_max, new_min) {
            if new <= old {
                f.violations.push(format!(
                    "after m{}'s promotion at {:.3} s the new primary (port {}) gave {new}, not \
                     above {old}, the old primary's (port {})",
                    p.member + 1,
                    p.at,
                    p.new_port,
                    p.old_port
                ));
            }
        }
    }
    f
}

/// The worker id of an id of the layout the fleet runs (twitter: 10 bits above 12 of sequence).
fn worker_id(id: i64) -> i64 {
    (id >> 12) & 1023
}

fn holder(member: usize) -> String {
    if member == THIEF {
        "the thief".into()
    } else if member == COPY {
        "the copy".into()
    } else {
        format!("m{}", member + 1)
    }
}

fn id_of(c: &Call) -> i64 {
    id_or_none(c).unwrap_or(i64::MIN)
}

fn id_or_none(c: &Call) -> Option<i64> {
    match c.outcome {
        Outcome::Id { id, .. } => Some(id),
        Outcome::Refused { .. } => None,
    }
}

/// The share of calls that succeeded while each kind of fault was in force on the servers of
/// the member called (or on the registry, for every member): (kind, calls, succeeded).
pub fn availability(
    calls: &[Call],
    windows: &[(String, f64, f64, Vec<usize>)],
) -> Vec<(String, usize, usize)> {
    let mut by_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for c in calls {
        for (kind, from, to, members) in windows {
            if c.sent >= *from && c.sent < *to && members.contains(&c.member) {
                let e = by_kind.entry(kind.clone()).or_default();
                e.0 += 1;
                e.1 += usize::from(matches!(c.outcome, Outcome::Id { .. }));
            }
        }
    }
    let healthy = calls
        .iter()
        .filter(|c| {
            !windows.iter().any(|(_, from, to, members)| {
                c.sent >= *from && c.sent < *to && members.contains(&c.member)
            })
        })
        .fold((0, 0), |(n, ok), c| {
            (n + 1, ok + usize::from(matches!(c.outcome, Outcome::Id { .. })))
        });
    let mut out: Vec<(String, usize, usize)> =
        by_kind.into_iter().map(|(k, (n, ok))| (k, n, ok)).collect();
    out.push(("no fault".into(), healthy.0, healthy.1));
    out
}
