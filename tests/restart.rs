//! Restarts: ids handed out after a restart exceed every id handed out before it.
#![cfg(not(feature = "pg_test"))]

mod common;
use common::*;

fn ids_after_restart_exceed_those_before(mode: &str) {
    let cluster = Cluster::start_new(&format!("restart_{mode}"), &[]);
    let before = ids(
        &mut cluster.connect_ext(),
        "SELECT snowflake_next() FROM generate_series(1, 100000)",
    );
    cluster.restart(mode);
    let after = ids(
        &mut cluster.connect(),
        "SELECT snowflake_next() FROM generate_series(1, 1000)",
    );
    assert!(
        after[0] > *before.last().unwrap(),
        "{} after {} is not above {}",
        after[0],
        mode,
        before.last().unwrap()
    );
    assert_strictly_increasing(&after, "after restart");
}

#[test]
fn ids_after_a_fast_restart_exceed_those_before() {
    ids_after_restart_exceed_those_before("fast");
}

#[test]
fn ids_after_an_immediate_restart_exceed_those_before() {
    ids_after_restart_exceed_those_before("immediate");
}
