//! Streaming replication and failover: a standby refuses to generate ids, and once promoted it
//! continues above every id the old primary handed out, with the worker id it inherited, even
//! when its clock is behind the old primary's.
#![cfg(not(feature = "pg_test"))]

use common::*;
use testkit as common;

#[test]
fn a_promoted_standby_continues_above_the_old_primary() {
    // Worker id 77, which the promoted standby must keep; 5 min of drift allowed, as its clock
    // is 30 s behind.
    let conf = ["snowflake.worker_id = 77", "snowflake.max_drift = '5min'"];
    let primary = Cluster::start_new("primary", &conf);
    let mut p = primary.connect_ext();
    // Some ids first, so the backup carries a state file with a mark in it.
    let mut old = ids(&mut p, "SELECT snowflake_next() FROM generate_series(1, 10000)");

    // The standby's clock is well behind the primary's.
    let (standby, _clock) = primary.basebackup_with_clock("standby", -30.0);
    standby.start();
    let mut s = standby.connect();

    // More ids, through two lease renewals, then wait until the standby has them.
    old.extend(ids_through_renewals(&mut p, 2));
    wait_for_replay(&mut p, &mut s);

    expect_refusal(
        &mut s,
        "SELECT snowflake_next()",
        "25006: cannot generate snowflake ids on a standby server",
        "primary",
    );
    // Decoding is read-only and works on a standby.
    assert_eq!(worker_id_of(&mut s, old[0]), 77);

    primary.stop("immediate");
    drop(s);
    standby.promote();
    let mut s = standby.connect();
    let new = ids(&mut s, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    assert_above_all(&old, &new, "the promotion");
    assert_eq!(
        worker_id_of(&mut s, new[0]),
        77,
        "the promoted standby must keep the primary's worker id"
    );
}
