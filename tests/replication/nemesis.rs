//! The nemesis (tests/common/nemesis): a fleet of real servers under faults drawn from a seed and
//! overlapping in time, clients that record every answer, and a checker over the whole history:
//! no id acknowledged twice across the fleet (copies of a member's data directory started beside
//! it among them), none below one acknowledged before it was asked for
//! on the same member (through restarts, crashes, power cuts and promotions), after a promotion
//! none below the old primary's, every acknowledged row present at the end, every refusal with an
//! allowed SQLSTATE, and every member making ids again within `RECOVERY` once the faults heal.
//!
//! `make test` runs the fixed seeds of `SEEDS`; `make nemesis SEED=n SECONDS=s` runs others
//! (`NEMESIS_SEEDS=1,2,3`, `NEMESIS_SECONDS`), and with `NEMESIS_REPORT=docs/testing.md` writes
//! what it ran there. A failing run prints its seed and its schedule.
//!
//! Runs alone (scripts/test-suites.py): eleven servers, faultfs and eleven clients fill the
//! machine's two cores, and the recovery bound is a time.
//!
//! Majors: 16. The faults it combines are the same code on every major, each tested alone on
//! every major by its own suite. Not on 15: there libfaketime cannot move the clock of background
//! workers (15's postmaster starts them from a signal handler, while libfaketime's per-thread "do
//! not fake" flag is set in the select() it interrupted), so a member's registry worker would
//! keep the real time through every clock fault.
#![cfg(not(feature = "pg_test"))]

use common::nemesis::history::{self, Outcome, COPY, THIEF};
use common::nemesis::schedule::{self, Scheduled, LEASE_S, MAX_DRIFT_S, MEMBERS};
use common::nemesis::{Clients, Fleet};
use common::rng::Rng;
use common::*;
use std::time::{Duration, Instant};
use testkit as common;

/// The seeds `make test` runs: each schedule holds every kind of fault at least once.
const SEEDS: &[u64] = &[1, 2];
/// How long each seed's faults run.
const SECONDS: f64 = 75.0;

/// Once every fault has healed, every member makes an id again within this: a member whose
/// lease ran out renews at its next try, at most `RETRY` (2 s) after the registry is reachable
/// again, plus `connect_timeout` (2 s here) for a try that was under way; one whose worker id went
/// to the thief is restarted by the operator (here, at once: a start and a lease, a few seconds);
/// a member whose clock was stepped forward within `max_drift` goes on at once. 20 s covers
/// these with room for a loaded 2-core machine.
const RECOVERY: Duration = Duration::from_secs(20);

#[test]
fn faults_on_a_fleet_never_repeat_lose_or_reorder_an_id() {
    // Not on 15: its postmaster starts background workers from a signal handler, and they keep
    // the real time whatever libfaketime says (docs/testing.md), so every clock fault would miss
    // the registry worker. A run there would check less than it reports: refused, not skipped.
    let major: u32 = major_under_test().parse().expect("a major");
    assert!(
        major >= 16,
        "the nemesis needs PostgreSQL 16 or later (PG_CONFIG names {major}): on 15 libfaketime \
         cannot move the clock of background workers; run `make nemesis PG=16`"
    );
    let seeds: Vec<u64> = std::env::var("NEMESIS_SEEDS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| SEEDS.to_vec());
    let seconds: f64 =
        std::env::var("NEMESIS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(SECONDS);
    let mut reports = vec![];
    for seed in seeds {
        reports.push(run(seed, seconds));
    }
    if let Ok(path) = std::env::var("NEMESIS_REPORT") {
        write_report(&root_dir().join(path), &reports);
    }
}

/// What one seed's run did.
struct Report {
    seed: u64,
    seconds: f64,
    faults: Vec<String>,
    calls: usize,
    ids: usize,
    inserted: usize,
    availability: Vec<(String, usize, usize)>,
    recovery: Vec<f64>,
}

fn run(seed: u64, seconds: f64) -> Report {
    let plan = schedule::schedule(seed, seconds);
    let described: Vec<String> =
        plan.iter().map(|s| format!("{:6.1} s +{:4.1} s  {}", s.at_s, s.for_s, s.fault)).collect();
    eprintln!(
        "nemesis seed {seed} ({seconds} s; `make nemesis SEED={seed}` replays it):\n  {}",
        described.join("\n  ")
    );
    let mut fleet = Fleet::start(&format!("nemesis{seed}"), &mut Rng(seed ^ 0x5eed));
    // Every member makes ids before the faults begin.
    for conninfo in &fleet.client_conninfo {
        let mut c = Client::connect(conninfo, NoTls).unwrap();
        poll(Duration::from_secs(30), Duration::from_millis(100), || {
            c.query_one("SELECT snowflake_next()", &[]).map(|_| ()).map_err(|e| why(&e))
        });
    }
    let epoch = Instant::now();
    let clients = Clients::start(&fleet, epoch);
    // Each fault's start and heal, in time order.
    let mut events: Vec<(f64, bool, usize)> = vec![];
    for (i, s) in plan.iter().enumerate() {
        events.push((s.at_s, true, i));
        events.push((s.at_s + s.for_s, false, i));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut promotions = vec![];
    let mut started = vec![0f64; plan.len()];
    let mut windows = vec![];
    let failure = |fleet: &Fleet, what: String| -> ! {
        panic!(
            "nemesis seed {seed}: {what}\nschedule:\n  {}\n{}",
            described.join("\n  "),
            fleet.logs()
        )
    };
    for (at, inject, i) in events {
        let wait = at - epoch.elapsed().as_secs_f64();
        if wait > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(wait));
        }
        let Scheduled { fault, .. } = &plan[i];
        let now = epoch.elapsed().as_secs_f64();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if inject {
                fleet.inject(fault, now)
            } else {
                fleet.heal(fault);
                None
            }
        }));
        match outcome {
            Ok(Some(p)) => promotions.push(p),
            Ok(None) => {}
            Err(e) => failure(
                &fleet,
                format!(
                    "{} of \"{fault}\" at {now:.1} s failed: {}",
                    if inject { "the start" } else { "the heal" },
                    panic_text(&e)
                ),
            ),
        }
        if inject {
            started[i] = now;
        } else {
            windows.push((
                fault.kind().to_string(),
                started[i],
                epoch.elapsed().as_secs_f64(),
                Fleet::affected(fault),
            ));
        }
    }
    let wait = seconds - epoch.elapsed().as_secs_f64();
    if wait > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(wait));
    }
    fleet.heal_all();
    let healed = Instant::now();
    let mut recovery = vec![];
    for (m, conninfo) in fleet.client_conninfo.iter().enumerate() {
        let mut last = String::new();
        let ok = loop {
            let ok = Client::connect(conninfo, NoTls)
                .map_err(|e| why(&e))
                .and_then(|mut c| c.query_one("SELECT snowflake_next()", &[]).map_err(|e| why(&e)));
            match ok {
                Ok(_) => break true,
                Err(e) => last = e,
            }
            if healed.elapsed() > RECOVERY {
                break false;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if !ok {
            failure(
                &fleet,
                format!("m{} made no id within {RECOVERY:?} of the faults' end: {last}", m + 1),
            );
        }
        recovery.push(healed.elapsed().as_secs_f64());
    }
    // A little more history on the healed fleet, then the checks.
    std::thread::sleep(Duration::from_secs(2));
    let calls = clients.stop();
    let mut findings = history::check(&calls, &promotions);
    for m in 0..MEMBERS {
        let stored: std::collections::HashSet<i64> = fleet.stored(m).into_iter().collect();
        let missing: Vec<i64> = calls
            .iter()
            .filter(|c| c.member == m)
            .filter_map(|c| match c.outcome {
                Outcome::Id { id, inserted: true } if !stored.contains(&id) => Some(id),
                _ => None,
            })
            .collect();
        if !missing.is_empty() {
            findings.violations.push(format!(
                "m{}: {} acknowledged rows are gone, the first {:?}",
                m + 1,
                missing.len(),
                &missing[..missing.len().min(5)]
            ));
        }
    }
    let availability = history::availability(&calls, &windows);
    let ids_of = |member: usize| {
        calls
            .iter()
            .filter(|c| c.member == member && matches!(c.outcome, Outcome::Id { .. }))
            .count()
    };
    let (thief_ids, copy_ids) = (ids_of(THIEF), ids_of(COPY));
    eprintln!(
        "nemesis seed {seed}: {} calls, {} ids checked ({} inserted rows, {thief_ids} from the \
         thief, {copy_ids} from copies of m1), {} promotions; back within {:.1} s of the heal; availability:\n  {}",
        findings.calls,
        findings.ids,
        findings.inserted,
        promotions.len(),
        recovery.iter().cloned().fold(0f64, f64::max),
        availability
            .iter()
            .map(|(k, n, ok)| format!(
                "{k}: {ok} of {n} ({:.0}%)",
                100.0 * *ok as f64 / (*n).max(1) as f64
            ))
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    if !findings.violations.is_empty() {
        failure(
            &fleet,
            format!(
                "{} violations:\n  {}",
                findings.violations.len(),
                findings.violations[..findings.violations.len().min(20)].join("\n  ")
            ),
        );
    }
    // The run did what it was meant to: ids under every kind of fault, the thief and a copy
    // among them.
    assert!(findings.ids > 1_000, "only {} ids in the whole run", findings.ids);
    assert!(copy_ids > 0, "no copy of m1 made an id beside it");
    assert!(
        thief_ids > 0,
        "the thief never got a frozen member's worker id: no lease ran out (lease {LEASE_S} s, \
         max_drift {MAX_DRIFT_S} s)"
    );
    Report {
        seed,
        seconds,
        faults: described,
        calls: findings.calls,
        ids: findings.ids,
        inserted: findings.inserted,
        availability,
        recovery,
    }
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Writes what the runs did into `path` (docs/testing.md), between its nemesis markers.
fn write_report(path: &std::path::Path, reports: &[Report]) {
    const BEGIN: &str = "<!-- nemesis: written by make nemesis -->";
    const END: &str = "<!-- /nemesis -->";
    let mut out = String::from(BEGIN);
    out.push('\n');
    for r in reports {
        out.push_str(&format!(
            "\nSeed {} ({} s, on PostgreSQL {}): {} calls, {} ids checked ({} inserted rows), \
             every member back within {:.1} s of the heal; no violation.\n\n",
            r.seed,
            r.seconds,
            major_under_test(),
            r.calls,
            r.ids,
            r.inserted,
            r.recovery.iter().cloned().fold(0f64, f64::max)
        ));
        out.push_str("| fault kind | calls | succeeded |\n|---|---|---|\n");
        for (kind, n, ok) in &r.availability {
            out.push_str(&format!(
                "| {kind} | {n} | {ok} ({:.0}%) |\n",
                100.0 * *ok as f64 / (*n).max(1) as f64
            ));
        }
        out.push_str("\n<details><summary>schedule</summary>\n\n```text\n");
        out.push_str(&r.faults.join("\n"));
        out.push_str("\n```\n\n</details>\n");
    }
    out.push_str(END);
    let text = std::fs::read_to_string(path).unwrap();
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        panic!("{} has no nemesis markers ({BEGIN} ... {END})", path.display());
    };
    let new = format!("{}{out}{}", &text[..b], &text[e + END.len()..]);
    std::fs::write(path, new).unwrap();
}
