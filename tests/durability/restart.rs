//! Restarts: ids handed out after a restart exceed every id handed out before it, also when the
//! clock comes back behind them (only the durable mark can keep them above then).
#![cfg(not(feature = "pg_test"))]

use common::*;
use testkit as common;

fn ids_after_restart_exceed_those_before(mode: &str) {
    ids_after_restart_exceed_those_before_in(mode, "twitter");
}

/// The lease holds in every layout: the mark counts in the layout's own time units.
fn ids_after_restart_exceed_those_before_in(mode: &str, layout: &str) {
    let layout_line = format!("snowflake.layout = {layout}");
    let mut cluster = Cluster::init(&format!("restart_{mode}_{layout}"), &[&layout_line]);
    let clock = cluster.use_fake_clock();
    cluster.start();
    let before =
        ids(&mut cluster.connect_ext(), "SELECT snowflake_next() FROM generate_series(1, 100000)");
    cluster.stop(mode);
    // 3 s back: within the default snowflake.max_drift (10 s), so nothing but the mark stops
    // the generator from starting at this clock, below the ids above.
    clock.set(-3.0);
    cluster.start();
    let after =
        ids(&mut cluster.connect(), "SELECT snowflake_next() FROM generate_series(1, 1000)");
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

#[test]
fn ids_after_an_immediate_restart_exceed_those_before_in_sonyflake_and_js53() {
    // 10 ms units, and the sequence above the machine id (sonyflake).
    ids_after_restart_exceed_those_before_in("immediate", "sonyflake");
    ids_after_restart_exceed_those_before_in("immediate", "js53");
}
