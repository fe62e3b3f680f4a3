//! The nemesis's schedule: faults drawn from a seed, overlapping in time on different servers.
//! The same seed gives the same schedule, printed before the run and on failure, so a failing run
//! replays with `make nemesis SEED=n`.

use crate::rng::Rng;
use std::fmt;

/// A server of the fleet, by its role: faults that take a server's role (a promotion) act on
/// whichever server holds it then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// The registry's primary, and its synchronous standby.
    Registry,
    RegistryStandby,
    /// Member `n` (0-based); member 2's standby; members' data directories as the fleet makes
    /// them (member 1's on faultfs, member 3 with a fixed worker id and claims).
    Member(usize),
    MemberStandby,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Registry => write!(f, "registry"),
            Target::RegistryStandby => write!(f, "registry standby"),
            Target::Member(n) => write!(f, "m{}", n + 1),
            Target::MemberStandby => write!(f, "m3 standby"),
        }
    }
}

/// Which file of the state a restart loses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    StateFile,
    Copy,
}

/// How the copy of a member's data directory is made (`Fault::Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copied {
    /// The member stopped, its directory copied, both started (an image, a cold backup).
    Stopped,
    /// `pg_basebackup` of the running member, started as a primary (a backup restored beside
    /// its source).
    Running,
    /// A streaming standby of the member, promoted while the member goes on (a split brain).
    Promoted,
}

/// One fault, from its start to its heal.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// SIGKILL of the server (all its processes), started again after the fault's length.
    Kill(Target),
    /// SIGSTOP of the whole server, longer than the lease; then SIGCONT. Meanwhile a new
    /// cluster (the thief), its clock `thief_clock_s` off, asks the registry for the frozen
    /// member's worker id, which it gets once the lease ran out.
    Freeze { member: usize, thief_clock_s: f64 },
    /// The server's clock moves by `step_s` (back when negative) for the fault's length, then
    /// returns to its own offset.
    Clock { target: Target, step_s: f64 },
    /// The member's link to the registry (both registry servers) cut.
    Partition { member: usize },
    /// The member's link to the registry slowed: every chunk waits `ms`.
    Delay { member: usize, ms: u64 },
    /// The fsync of the state file's temporary file held (member 1, on faultfs).
    DiskStall,
    /// Writes of the state file's and its copy's temporary files fail with EIO (member 1).
    DiskFail,
    /// A power cut of member 1 (faultfs drops what was not made durable); it starts again with
    /// its clock `back_s` behind.
    PowerCut { back_s: f64 },
    /// The primary (of the registry, or of member 3) killed and its standby promoted; the old
    /// primary returns as the new one's standby through pg_rewind after the fault's length.
    Promote(Target),
    /// A clean stop of the member, the state file or its copy deleted, a start.
    Lose { member: usize, lost: Lost },
    /// A copy of `COPIED_MEMBER`'s data directory (its system identifier, its cached lease)
    /// started beside it, making ids until the heal.
    Copy { how: Copied },
    /// The member killed and started again `crashes` times, each start waiting for its first
    /// id: a crash loop.
    CrashLoop { member: usize, crashes: u32 },
}

impl Fault {
    /// Its kind, for availability by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Kill(_) => "kill",
            Fault::Freeze { .. } => "freeze",
            Fault::Clock { .. } => "clock step",
            Fault::Partition { .. } => "partition",
            Fault::Delay { .. } => "delay",
            Fault::DiskStall => "disk stall",
            Fault::DiskFail => "disk failure",
            Fault::PowerCut { .. } => "power cut",
            Fault::Promote(_) => "promotion",
            Fault::Lose { .. } => "lost file",
            Fault::Copy { .. } => "copy",
            Fault::CrashLoop { .. } => "crash loop",
        }
    }

    /// The servers it acts on: no two faults act on one server at once.
    pub fn servers(&self) -> Vec<Target> {
        match self {
            Fault::Kill(t) | Fault::Clock { target: t, .. } => vec![*t],
            Fault::Freeze { member, .. }
            | Fault::Lose { member, .. }
            | Fault::CrashLoop { member, .. } => vec![Target::Member(*member)],
            Fault::Copy { .. } => vec![Target::Member(COPIED_MEMBER)],
            // The link's two ends: a member, and both registry servers' proxies are its own.
            Fault::Partition { member } | Fault::Delay { member, .. } => {
                vec![Target::Member(*member)]
            }
            Fault::DiskStall | Fault::DiskFail | Fault::PowerCut { .. } => {
                vec![Target::Member(DISK_MEMBER)]
            }
            Fault::Promote(Target::Registry) => vec![Target::Registry, Target::RegistryStandby],
            Fault::Promote(_) => vec![Target::Member(STANDBY_MEMBER), Target::MemberStandby],
        }
    }
}

/// The member whose data directory is on faultfs.
pub const DISK_MEMBER: usize = 1;
/// The member with a streaming standby of its own.
pub const STANDBY_MEMBER: usize = 2;
/// The member with a fixed worker id and claims.
pub const FIXED_MEMBER: usize = 3;
/// The member whose data directory is copied (`Fault::Copy`): one that leases its worker id (a
/// copy of the fixed member would share its worker id by configuration), on a plain disk.
pub const COPIED_MEMBER: usize = 0;
pub const MEMBERS: usize = 4;

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Kill(t) => write!(f, "kill -9 {t}"),
            Fault::Freeze { member, thief_clock_s } => write!(
                f,
                "SIGSTOP m{} past its lease; a thief with its clock {thief_clock_s:+} s takes its worker id",
                member + 1
            ),
            Fault::Clock { target, step_s } => write!(f, "{target}'s clock {step_s:+} s"),
            Fault::Partition { member } => write!(f, "m{} cut off from the registry", member + 1),
            Fault::Delay { member, ms } => {
                write!(f, "m{}'s link to the registry {ms} ms slow", member + 1)
            }
            Fault::DiskStall => write!(f, "m{}'s state file fsync held", DISK_MEMBER + 1),
            Fault::DiskFail => write!(f, "m{}'s state file writes fail (EIO)", DISK_MEMBER + 1),
            Fault::PowerCut { back_s } => write!(
                f,
                "power cut of m{}, restarted with its clock {back_s} s back",
                DISK_MEMBER + 1
            ),
            Fault::Promote(t) => write!(f, "{t} killed, its standby promoted, pg_rewind back"),
            Fault::Lose { member, lost } => write!(f, "m{} restarted without its {lost:?}", member + 1),
            Fault::Copy { how } => {
                let how = match how {
                    Copied::Stopped => "copied while stopped",
                    Copied::Running => "copied while running (pg_basebackup)",
                    Copied::Promoted => "streamed to a standby promoted",
                };
                write!(f, "m{}'s data directory {how}, started beside it", COPIED_MEMBER + 1)
            }
            Fault::CrashLoop { member, crashes } => {
                write!(f, "m{} killed and started {crashes} times", member + 1)
            }
        }
    }
}

/// A fault at `at_s` seconds into the run, healed `for_s` seconds later.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduled {
    pub at_s: f64,
    pub for_s: f64,
    pub fault: Fault,
}

/// The lease the members run with (the shortest there is: they run out during a run).
pub const LEASE_S: f64 = 10.0;
/// snowflake.max_drift of every member.
pub const MAX_DRIFT_S: f64 = 10.0;

/// The faults of a run of `seconds`, drawn from `seed`: every kind at least once (in an order,
/// at times and on servers the seed picks), then more while time is left; two faults never act
/// on one server at once, and at most `MAX_AT_ONCE` are in force together.
pub fn schedule(seed: u64, seconds: f64) -> Vec<Scheduled> {
    const MAX_AT_ONCE: usize = 2;
    let mut rng = Rng(seed.max(1));
    let mut kinds: Vec<usize> = (0..KINDS).collect();
    // Fisher-Yates, by the seed.
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut out: Vec<Scheduled> = vec![];
    let mut tries = 0;
    let mut next_kind = 0;
    while tries < 2_000 {
        tries += 1;
        let kind = if next_kind < kinds.len() {
            kinds[next_kind]
        } else {
            rng.below(KINDS as u64) as usize
        };
        let (fault, for_s) = draw(kind, &mut rng);
        // Room to heal and for the fleet to settle before the run ends.
        let latest = seconds - for_s - 8.0;
        if latest <= 2.0 {
            continue;
        }
        let at_s = 2.0 + (rng.below(((latest - 2.0) * 10.0) as u64) as f64) / 10.0;
        let end = at_s + for_s + SETTLE_S;
        let clashes = |s: &Scheduled| s.at_s < end && at_s < s.at_s + s.for_s + SETTLE_S;
        let busy = out
            .iter()
            .any(|s| clashes(s) && s.fault.servers().iter().any(|t| fault.servers().contains(t)));
        let crowded = (0..=((end - at_s) * 10.0) as usize).any(|i| {
            let t = at_s + i as f64 / 10.0;
            out.iter().filter(|s| s.at_s <= t && t < s.at_s + s.for_s + SETTLE_S).count()
                >= MAX_AT_ONCE
        });
        if busy || crowded {
            continue;
        }
        out.push(Scheduled { at_s, for_s, fault });
        next_kind += 1;
        if next_kind >= kinds.len() && out.len() >= kinds.len() + EXTRA {
            break;
        }
    }
    out.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    out
}

/// After a fault heals, its servers get this long before another fault may touch them (a
/// restart's recovery, a rewound standby's catch-up).
const SETTLE_S: f64 = 3.0;
/// Faults beyond one of each kind, when time allows.
const EXTRA: usize = 4;
const KINDS: usize = 13;

/// A fault of kind `kind` and its length.
fn draw(kind: usize, rng: &mut Rng) -> (Fault, f64) {
    let any_member = |rng: &mut Rng| rng.below(MEMBERS as u64) as usize;
    let server = |rng: &mut Rng| -> Target {
        match rng.below(7) {
            0 => Target::Registry,
            1 => Target::RegistryStandby,
            2 => Target::MemberStandby,
            n => Target::Member(n as usize - 3),
        }
    };
    let secs =
        |rng: &mut Rng, lo: f64, hi: f64| lo + (rng.below(((hi - lo) * 10.0) as u64) as f64) / 10.0;
    match kind {
        0 => (Fault::Kill(server(rng)), secs(rng, 0.5, 3.0)),
        1 => {
            // Members leasing from the registry (not the fixed one, whose id nobody may take).
            let member = rng.below(FIXED_MEMBER as u64) as usize;
            let thief_clock_s = -(secs(rng, 0.0, 30.0));
            (Fault::Freeze { member, thief_clock_s }, LEASE_S + secs(rng, 4.0, 8.0))
        }
        2 => {
            // Within max_drift (absorbed), or beyond it (refused until the clock is back), or
            // forward (the ids follow, and are ahead once it is back).
            let step_s = *rng.pick(&[-3.0, -6.0, -15.0, 4.0, 8.0]);
            (Fault::Clock { target: server(rng), step_s }, secs(rng, 2.0, 6.0))
        }
        // Shorter and longer than the lease.
        3 => (Fault::Partition { member: any_member(rng) }, secs(rng, 3.0, 2.0 * LEASE_S)),
        4 => (
            Fault::Delay { member: any_member(rng), ms: *rng.pick(&[200, 800, 2_500]) },
            secs(rng, 3.0, 8.0),
        ),
        5 => (Fault::DiskStall, secs(rng, 1.0, 4.0)),
        6 => (Fault::DiskFail, secs(rng, 1.0, 4.0)),
        7 => (Fault::PowerCut { back_s: *rng.pick(&[3.0, 15.0]) }, secs(rng, 0.5, 2.0)),
        8 => (Fault::Promote(Target::Registry), secs(rng, 1.0, 3.0)),
        9 => (Fault::Promote(Target::Member(STANDBY_MEMBER)), secs(rng, 1.0, 3.0)),
        11 => (
            Fault::Copy { how: *rng.pick(&[Copied::Stopped, Copied::Running, Copied::Promoted]) },
            // Long enough for the copy to start, lease and make ids beside its original.
            secs(rng, 5.0, 8.0),
        ),
        // Members leasing from the registry, on plain disks (a crash loop on faultfs is a power
        // cut's business).
        12 => (
            Fault::CrashLoop {
                member: *rng.pick(&[0, STANDBY_MEMBER]),
                crashes: 3 + rng.below(4) as u32,
            },
            1.0,
        ),
        _ => (
            Fault::Lose {
                member: *rng.pick(&[0, DISK_MEMBER, FIXED_MEMBER]),
                lost: *rng.pick(&[Lost::StateFile, Lost::Copy]),
            },
            1.0,
        ),
    }
}
