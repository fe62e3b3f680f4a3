//! pg_upgrade: the old cluster's mark goes into the new cluster's data directory.
//!
//! A cluster made by `pg_upgrade` has the old cluster's rows but neither its state file nor its
//! WAL, so without help its generator would start from the clock, and ids the old cluster had
//! handed out ahead of the clock (borrowed time, or a clock that is now set back) could repeat.
//!
//! `pg_upgrade` starts both servers in binary-upgrade mode (`-b`), first the old one, and writes
//! their logs into `NEW_PGDATA/pg_upgrade_output.d/` (PostgreSQL 15 and later), which is where
//! the postmaster's stderr points. So a postmaster started with `-b` knows which cluster is being
//! made, and whether it is that cluster:
//! - the old cluster writes its mark into the new cluster's state file (keeping a higher one);
//! - the new cluster, if no mark arrived (the old server did not load this version of
//!   pg_snowflake), writes a marker that makes `snowflake_next()` refuse until an operator copies
//!   the old state file over or deletes the marker.
//!
//! Nothing here runs outside binary-upgrade mode.

use crate::errors;
use crate::layout::TWITTER;
use crate::mark::Mark;
use crate::state_file::{self, Contents};
use std::path::{Path, PathBuf};

/// The directory `pg_upgrade` creates inside the new cluster's data directory for its logs.
const OUTPUT_DIR: &str = "/pg_upgrade_output.d/";

/// The data directory of the cluster being made, from the path of a file under its
/// `pg_upgrade_output.d`.
pub fn new_cluster_of(log_path: &str) -> Option<PathBuf> {
    log_path.find(OUTPUT_DIR).map(|at| PathBuf::from(&log_path[..at]))
}

/// What a postmaster in binary-upgrade mode does with the state files.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Write this state into the new cluster's data directory.
    Carry(Contents),
    /// This is the new cluster and no mark arrived: write the "not carried" marker here.
    MarkNotCarried,
    Nothing,
}

/// The rule: `own` is this cluster's state, `theirs` the new cluster's (`None` when this is the
/// new cluster).
pub fn step(own: Contents, theirs: Option<Contents>) -> Step {
    match (own, theirs) {
        // The new cluster: a mark (or a marker) arrived, or none did.
        (Contents::Missing, None) => Step::MarkNotCarried,
        (_, None) => Step::Nothing,
        // The old cluster: carry the higher mark; an old cluster that never handed out an id
        // carries 0, which tells the new one that nothing is missing.
        (Contents::Missing, Some(Contents::Mark(_))) => Step::Nothing,
        (Contents::Missing, Some(_)) => {
            Step::Carry(Contents::Mark(Mark { units: 0, layout: TWITTER }))
        }
        // Marks of different layouts compare through their ids.
        (Contents::Mark(mine), Some(Contents::Mark(there))) if there.bound() >= mine.bound() => {
            Step::Nothing
        }
        (Contents::Mark(mine), _) => Step::Carry(Contents::Mark(mine)),
        // Upgraded before without its mark, and never settled, or its ids unknown since its
        // state file was lost (it refuses them): the new one is not settled either, unless it
        // already holds a mark.
        (Contents::NotCarried | Contents::Lost, Some(Contents::Mark(_))) => Step::Nothing,
        (Contents::NotCarried | Contents::Lost, _) => Step::Carry(Contents::NotCarried),
    }
}

/// Called in the postmaster while `shared_preload_libraries` is processed, with the data
/// directory as the working directory. Errors are logged, not raised: the upgrade goes on, and
/// the new cluster then refuses to generate ids until an operator settles its mark.
pub fn at_binary_upgrade_start() {
    let Some(new) = std::fs::read_link("/proc/self/fd/2")
        .ok()
        .and_then(|p| new_cluster_of(&p.to_string_lossy()))
    else {
        return log(&format!(
            "pg_snowflake: started in binary-upgrade mode, but not by pg_upgrade of \
             PostgreSQL 15 or later (its log is not under {OUTPUT_DIR}): no mark carried"
        ));
    };
    let here = Path::new(".");
    let is_new = match (std::fs::canonicalize(&new), std::fs::canonicalize(here)) {
        (Ok(a), Ok(b)) => a == b,
        _ => return log("pg_snowflake: cannot resolve the new cluster's data directory"),
    };
    let own = match state_file::read(here) {
        Ok(state) => state,
        // The start fails on it a moment later, with the reason (generator::shmem, where
        // shared memory is set up: recovered_state).
        Err(_) => return,
    };
    let theirs = (!is_new).then(|| state_file::read(&new).unwrap_or(Contents::Missing));
    let (dir, state) = match step(own, theirs) {
        Step::Nothing => return,
        Step::Carry(state) => (new.as_path(), state),
        Step::MarkNotCarried => (here, Contents::NotCarried),
    };
    match state_file::write(dir, state) {
        Ok(()) => log(&match state {
            Contents::Mark(mark) => format!(
                "pg_snowflake: carried the mark {} of the {} layout to the new cluster in \"{}\"",
                mark.units,
                mark.layout.describe(),
                new.display()
            ),
            _ => format!(
                "pg_snowflake: no mark arrived from the old cluster; \"{}\" now refuses to \
                 generate ids until its mark is settled",
                dir.join(state_file::FILE_NAME).display()
            ),
        }),
        Err(e) => log(&format!(
            "pg_snowflake: could not write \"{}\": {}",
            dir.join(e.place.path()).display(),
            e.error
        )),
    }
}

/// A LOG line in the server log (pg_upgrade's server log here).
fn log(message: &str) {
    errors::log(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_cluster_is_found_from_pg_upgrades_log_path() {
        assert_eq!(
            new_cluster_of(
                "/srv/pg18/data/pg_upgrade_output.d/20261122T051500.123/log/pg_upgrade_server.log"
            ),
            Some(PathBuf::from("/srv/pg18/data"))
        );
        assert_eq!(new_cluster_of("/var/log/postgresql/postgresql-17-main.log"), None);
        assert_eq!(new_cluster_of("/dev/null"), None);
    }

    fn m(units: u64) -> Contents {
        Contents::Mark(Mark { units, layout: TWITTER })
    }

    #[test]
    fn marks_of_different_layouts_compare_through_their_ids() {
        use crate::layout::SONYFLAKE;
        // Sonyflake's 24 low bits to Twitter's 22: 300 of its units are 1200 of Twitter's.
        let sony = Contents::Mark(Mark { units: 300, layout: SONYFLAKE });
        assert_eq!(step(sony, Some(m(1_000))), Step::Carry(sony));
        assert_eq!(step(sony, Some(m(1_300))), Step::Nothing);
    }

    #[test]
    fn the_old_cluster_carries_the_higher_mark() {
        use Contents::{Missing, NotCarried};
        assert_eq!(step(m(500), Some(Missing)), Step::Carry(m(500)));
        assert_eq!(step(m(500), Some(m(400))), Step::Carry(m(500)));
        assert_eq!(step(m(500), Some(m(600))), Step::Nothing);
        assert_eq!(step(m(500), Some(NotCarried)), Step::Carry(m(500)));
        // Never handed out an id: 0 says so, and keeps the new cluster from refusing.
        assert_eq!(step(Missing, Some(Missing)), Step::Carry(m(0)));
        assert_eq!(step(Missing, Some(m(7))), Step::Nothing);
        assert_eq!(step(Missing, Some(NotCarried)), Step::Carry(m(0)));
        // An unsettled marker travels on, and a lost state becomes one.
        assert_eq!(step(NotCarried, Some(Missing)), Step::Carry(NotCarried));
        assert_eq!(step(NotCarried, Some(m(7))), Step::Nothing);
        assert_eq!(step(Contents::Lost, Some(Missing)), Step::Carry(NotCarried));
        assert_eq!(step(Contents::Lost, Some(m(7))), Step::Nothing);
    }

    #[test]
    fn the_new_cluster_refuses_when_nothing_arrived() {
        use Contents::{Missing, NotCarried};
        assert_eq!(step(Missing, None), Step::MarkNotCarried);
        assert_eq!(step(m(0), None), Step::Nothing);
        assert_eq!(step(m(500), None), Step::Nothing);
        assert_eq!(step(NotCarried, None), Step::Nothing);
    }
}
