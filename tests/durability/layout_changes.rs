//! A change of layout across a restart, a crash and a promotion. The layout is recorded in the
//! WAL marks and the state file (core/src/mark.rs): a change that would put new ids below old ones is
//! refused until it is undone or reset on purpose (`snowflake_reset_layout()`, itself durable),
//! one whose ids stay above is taken, and a standby that replayed another layout's marks refuses
//! once promoted. Every major: WAL replay, crash recovery and promotion are each major's own.
#![cfg(not(feature = "pg_test"))]

use common::*;
use testkit as common;

/// The refusal of ids after a change from twitter to discord, until it is settled.
const TWITTER_IDS_DISCORD_LAYOUT: &str =
    "55000: snowflake.layout is discord, but this cluster's ids were made with the twitter layout";

#[test]
fn a_layout_change_that_would_go_below_old_ids_is_refused_until_reset() {
    let cluster = Cluster::start_new("relayout", &[]);
    let mut c = cluster.connect_ext();
    c.batch_execute(
        "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), n int);
                     INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g;
                     CREATE ROLE app LOGIN",
    )
    .unwrap();
    let old_max: i64 = c.scalar("SELECT max(id) FROM t");
    drop(c);
    // Discord's epoch is four years after Twitter's: its ids made now are smaller integers.
    cluster.append_conf(&["snowflake.layout = discord"]);
    cluster.restart("fast");
    let mut c = cluster.connect();
    let hint = expect_error_is(&mut c, "INSERT INTO t (n) VALUES (0)", TWITTER_IDS_DISCORD_LAYOUT);
    assert!(
        hint.contains("back to twitter") && hint.contains("snowflake_reset_layout()"),
        "{hint}"
    );
    assert_eq!(stats(&mut c)["layout"]["recorded"], "twitter");
    // Only a superuser may reset.
    let ServerError { code: state, .. } =
        expect_error(&mut cluster.connect_as("app"), "SELECT snowflake_reset_layout()");
    assert_eq!(state, "42501");
    // Still refused after a restart: the refusal is durable until settled.
    cluster.restart("fast");
    let mut c = cluster.connect();
    let ServerError { code: state, .. } = expect_error(&mut c, "SELECT snowflake_next()");
    assert_eq!(state, "55000");
    let reset: bool = c.scalar("SELECT snowflake_reset_layout()");
    assert!(reset);
    let id = next_id(&mut c);
    let (ms, worker, _) = decode_id(&mut c, id);
    assert!((ms - unix_ms()).abs() < 5_000, "a discord id of now: {ms}");
    assert_eq!(worker, 1);
    assert!(id < old_max, "the reset is what lets the layout make smaller ids");
    assert!(stats(&mut c)["layout"].get("recorded").is_none());
    // The reset is durable: a restart keeps generating.
    cluster.restart("immediate");
    let mut c = cluster.connect();
    assert!(next_id(&mut c) > id);
}

#[test]
fn a_layout_change_whose_ids_stay_above_the_old_ones_is_accepted() {
    let cluster = Cluster::start_new("relayout_up", &["snowflake.layout = discord"]);
    let mut c = cluster.connect_ext();
    let discord_ids = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    drop(c);
    // Twitter's ids of now are larger integers than Discord's.
    cluster.append_conf(&["snowflake.layout = twitter"]);
    cluster.restart("fast");
    let mut c = cluster.connect();
    let id = next_id(&mut c);
    assert!(id > *discord_ids.last().unwrap());
    let (ms, ..) = decode_id(&mut c, id);
    assert!((ms - unix_ms()).abs() < 5_000, "{ms}");
    // The next mark recorded Twitter's layout: no refusal, no note, after a crash either.
    cluster.restart("immediate");
    let mut c = cluster.connect();
    assert!(next_id(&mut c) > id);
    assert!(stats(&mut c)["layout"].get("recorded").is_none());
}

#[test]
fn a_promoted_standby_with_another_layout_refuses_until_reset() {
    let primary = Cluster::start_new("layout_primary", &[]);
    let mut p = primary.connect_ext();
    let mut old = ids(&mut p, "SELECT snowflake_next() FROM generate_series(1, 1000)");
    let standby = primary.basebackup("layout_standby");
    standby.append_conf(&["snowflake.layout = discord"]);
    standby.start();
    let mut s = standby.connect();
    // Ids through two lease renewals, replayed by the standby as marks of Twitter's layout
    // (the base backup's state file already holds one).
    old.extend(ids_through_renewals(&mut p, 2));
    wait_for_replay(&mut p, &mut s);
    primary.stop("immediate");
    standby.promote();
    let mut s = standby.connect();
    expect_error_is(&mut s, "SELECT snowflake_next()", TWITTER_IDS_DISCORD_LAYOUT);
    assert!(s.query_one("SELECT snowflake_reset_layout()", &[]).unwrap().get::<_, bool>(0));
    let id = next_id(&mut s);
    assert_eq!(decode_id(&mut s, id).1, 1);
    assert!(id < *old.last().unwrap(), "a Discord id of now is below the Twitter ids");
}
