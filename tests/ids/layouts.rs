//! Layouts chosen at server start: presets and custom widths generate ids that decode to the
//! clock and the worker id, bad combinations are refused with the reason, the layout is
//! recorded with the durable state, and a change that would put new ids below old ones is
//! refused until it is undone or reset on purpose.
//!
//! Majors: 17. A layout is the generator's arithmetic and its state file, the same code on every
//! major (the unit tests check the arithmetic against each major's bindings, and
//! tests/ids/configuration.rs the settings on every major). On 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

#[path = "../common/mod.rs"]
mod common;
use common::*;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// `(time in Unix ms, worker id, sequence)` of an id, decoded by the server's layout.
fn decode(c: &mut postgres::Client, id: i64) -> (i64, i32, i32) {
    let row = c
        .query_one(
            "SELECT (extract(epoch FROM ts) * 1000)::int8, worker_id, sequence
             FROM snowflake_decode($1)",
            &[&id],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn next(c: &mut postgres::Client) -> i64 {
    c.scalar("SELECT snowflake_next()")
}

/// The refusal of ids after a change from twitter to discord, until it is settled.
const TWITTER_IDS_DISCORD_LAYOUT: &str =
    "55000: snowflake.layout is discord, but this cluster's ids were made with the twitter layout";

#[test]
fn sonyflake_ids_carry_a_16_bit_machine_id_in_the_low_bits() {
    let cluster = Cluster::start_new(
        "sonyflake",
        &["snowflake.layout = sonyflake", "snowflake.worker_id = 40000"],
    );
    let mut c = cluster.connect_ext();
    let ids = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 20000)");
    assert_strictly_increasing(&ids, "sonyflake ids");
    // The machine id is the low 16 bits, the sequence the 8 above, the time the 39 above.
    assert!(ids.iter().all(|id| id & 0xffff == 40000));
    let (ms, worker, _) = decode(&mut c, ids[0]);
    assert_eq!(worker, 40000);
    assert!((ms - now_ms()).abs() < 5_000, "{ms}");
    assert_eq!((ids[0] >> 24) * 10 + 1_409_529_600_000, ms, "10 ms units since 2014-09-01");
    let same: bool = c
        .query_one("SELECT snowflake_decode($1) = snowflake_decode($1, 'sonyflake')", &[&ids[0]])
        .unwrap()
        .get(0);
    assert!(same);
    let max: String =
        c.scalar("SELECT max_val FROM pg_settings WHERE name = 'snowflake.worker_id'");
    assert_eq!(max, "65535");
    let s = stats(&mut c);
    assert_eq!(s["layout"]["name"], "sonyflake");
    assert_eq!(s["layout"]["ends"], "2188-11-16T03:28:58.879Z");
    assert_eq!(s["layout"]["order"], "time, sequence, worker");
}

#[test]
fn js53_ids_stay_below_2_to_the_53() {
    let cluster =
        Cluster::start_new("js53", &["snowflake.layout = js53", "snowflake.worker_id = 63"]);
    let mut c = cluster.connect_ext();
    let ids = ids(&mut c, "SELECT snowflake_next() FROM generate_series(1, 20000)");
    assert_strictly_increasing(&ids, "js53 ids");
    assert!(ids.iter().all(|&id| id < 1 << 53));
    let (ms, worker, _) = decode(&mut c, ids[19_999]);
    assert_eq!(worker, 63);
    assert!((ms - now_ms()).abs() < 5_000, "{ms}");
    let (state, ..) = expect_error(&mut c, "ALTER SYSTEM SET snowflake.worker_id = 64");
    assert_eq!(state, "22023");
}

#[test]
fn a_custom_layout_takes_its_epoch_unit_and_widths_from_the_settings() {
    // Seed 000's shape: seconds, many worker bits.
    let cluster = Cluster::start_new(
        "custom",
        &[
            "snowflake.layout = custom",
            "snowflake.epoch = '2020-01-01 00:00:00+00'",
            "snowflake.time_unit = '1s'",
            "snowflake.time_bits = 32",
            "snowflake.worker_bits = 20",
            "snowflake.sequence_bits = 11",
            "snowflake.worker_id = 1000000",
        ],
    );
    let mut c = cluster.connect_ext();
    let id = next(&mut c);
    assert_eq!((id >> 11) & 0xfffff, 1_000_000);
    let seconds = id >> 31;
    let expected = (now_ms() - 1_577_836_800_000) / 1000;
    assert!((seconds - expected).abs() <= 2, "{seconds} vs {expected}");
    let (ms, worker, _) = decode(&mut c, id);
    assert_eq!((ms, worker), (1_577_836_800_000 + seconds * 1000, 1_000_000));
    let s = stats(&mut c);
    assert_eq!(s["layout"]["name"], "custom");
    assert_eq!(s["layout"]["time_unit_ms"], 1000);
    assert_eq!(s["layout"]["epoch"], "2020-01-01T00:00:00.000Z");
}

#[test]
fn bad_layout_settings_are_reported_and_keep_the_worker_id_unset() {
    // Each case: its name | the settings | what the log says.
    for case in [
        "widths | snowflake.layout = custom; snowflake.time_bits = 45; snowflake.worker_bits = 10; snowflake.sequence_bits = 12 | the widths add up to 67 bits",
        "future | snowflake.layout = custom; snowflake.epoch = '2999-01-01 00:00:00+00' | lies in the future",
        "not_a_time | snowflake.layout = custom; snowflake.epoch = 'soon' | is not a timestamp with time zone",
        "moving | snowflake.layout = custom; snowflake.epoch = 'now' | is not a fixed moment",
        "stray | snowflake.layout = discord; snowflake.sequence_bits = 14 | snowflake.sequence_bits only apply to snowflake.layout = custom",
        // What PostgreSQL's own parsers refuse: its timestamp input raises 22009 for a time
        // zone displacement out of range (which once ended the start with FATAL), and a value
        // it cannot read or that is out of range would otherwise be replaced by the default,
        // another layout than the one asked for.
        "displacement | snowflake.layout = custom; snowflake.epoch = '2020-01-01 00:00:00+16' | snowflake.epoch \"2020-01-01 00:00:00+16\" is not a timestamp with time zone",
        "enum | snowflake.layout = sonyflak | snowflake.layout = 'sonyflak' is not one of twitter, discord, sonyflake",
        "range | snowflake.layout = custom; snowflake.time_bits = 70 | snowflake.time_bits = '70' is outside its range, 1 to 63",
        "unit | snowflake.layout = custom; snowflake.time_unit = '2s' | snowflake.time_unit = '2s' is outside its range, 1 to 1000",
        "garbage | snowflake.layout = custom; snowflake.worker_bits = 'ten' | snowflake.worker_bits = 'ten' is not an integer",
        // PostgreSQL compares an enum's whole text: a trailing space is another value, which
        // it would replace by twitter.
        "trailing_space | snowflake.layout = 'sonyflake ' | snowflake.layout = 'sonyflake ' is not one of twitter, discord, sonyflake",
        // Every other setting too: "day" is no unit of PostgreSQL's (it would run 5 minutes).
        "lease_unit | snowflake.registry_lease = '1 day' | snowflake.registry_lease = '1 day' is not an integer (with a unit of s, min, h or d)",
        "lease_range | snowflake.registry_lease = '2d' | snowflake.registry_lease = '2d' is outside its range, 10 to 86400",
        "time_ranges | snowflake.time_ranges = 'sometimes' | snowflake.time_ranges = 'sometimes' is not a boolean",
    ] {
        let [name, conf, reason] = case.split(" | ").collect::<Vec<_>>()[..] else { panic!("{case}") };
        let conf: Vec<&str> = conf.split("; ").collect();
        let cluster = Cluster::start_new(&format!("bad_layout_{name}"), &conf);
        assert!(cluster.log().contains(reason), "{name}: {}", cluster.log());
        cluster.assert_ids_refused_at_start();
        cluster.stop("fast");
    }
    // A worker id the layout cannot hold: PostgreSQL leaves it unset, the extension says why.
    let cluster = Cluster::start_new(
        "bad_layout_worker",
        &["snowflake.layout = instagram", "snowflake.worker_id = 8192"],
    );
    let log = cluster.log();
    assert!(
        log.contains(
            "8192 is outside the valid range for parameter \"snowflake.worker_id\" (-1 .. 8191)"
        ) && log.contains("snowflake.worker_id = '8192' is outside its range, -1 to 8191"),
        "{log}"
    );
    cluster.assert_ids_refused_at_start();
}

#[test]
fn alter_system_refuses_an_epoch_that_is_not_a_fixed_timestamp() {
    let cluster = Cluster::start_new("epoch_check", &[]);
    let mut c = cluster.connect_ext();
    for (bad, why) in [
        ("2020-01-01 00:00:00+16", "is not a timestamp with time zone"),
        ("soon", "is not a timestamp with time zone"),
        ("now", "is not a fixed moment"),
        ("infinity", "is not a finite timestamp"),
    ] {
        let err =
            c.batch_execute(&format!("ALTER SYSTEM SET snowflake.epoch = '{bad}'")).unwrap_err();
        let db = err.as_db_error().unwrap();
        assert_eq!(db.code().code(), "22023", "{bad}: {}", db.message());
        assert_eq!(
            db.message(),
            format!("invalid value for parameter \"snowflake.epoch\": \"{bad}\"")
        );
        let detail = db.detail().unwrap_or_default();
        assert!(detail.contains(why), "{bad}: {detail}");
    }
    c.batch_execute("ALTER SYSTEM SET snowflake.epoch = '2020-01-01 00:00:00+00'").unwrap();
}

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
    let (state, ..) =
        expect_error(&mut cluster.connect_as("app"), "SELECT snowflake_reset_layout()");
    assert_eq!(state, "42501");
    // Still refused after a restart: the refusal is durable until settled.
    cluster.restart("fast");
    let mut c = cluster.connect();
    let (state, ..) = expect_error(&mut c, "SELECT snowflake_next()");
    assert_eq!(state, "55000");
    let reset: bool = c.scalar("SELECT snowflake_reset_layout()");
    assert!(reset);
    let id = next(&mut c);
    let (ms, worker, _) = decode(&mut c, id);
    assert!((ms - now_ms()).abs() < 5_000, "a discord id of now: {ms}");
    assert_eq!(worker, 1);
    assert!(id < old_max, "the reset is what lets the layout make smaller ids");
    assert!(stats(&mut c)["layout"].get("recorded").is_none());
    // The reset is durable: a restart keeps generating.
    cluster.restart("immediate");
    let mut c = cluster.connect();
    assert!(next(&mut c) > id);
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
    let id = next(&mut c);
    assert!(id > *discord_ids.last().unwrap());
    let (ms, ..) = decode(&mut c, id);
    assert!((ms - now_ms()).abs() < 5_000, "{ms}");
    // The next mark recorded Twitter's layout: no refusal, no note, after a crash either.
    cluster.restart("immediate");
    let mut c = cluster.connect();
    assert!(next(&mut c) > id);
    assert!(stats(&mut c)["layout"].get("recorded").is_none());
}

#[test]
fn ids_never_wrap_a_layout_warns_in_its_last_year_and_ends_with_an_error() {
    // 2^25 s is 388 days: an epoch 380 days ago leaves about 8 days.
    let day_ms = 86_400_000i64;
    let epoch = |days_ago: i64| {
        let secs = (now_ms() - days_ago * day_ms) / 1000;
        let out = std::process::Command::new("date")
            .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%d %H:%M:%S+00"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        format!("snowflake.epoch = '{}'", text.trim())
    };
    let conf = |epoch: String| {
        vec![
            "snowflake.layout = custom".to_string(),
            "snowflake.time_unit = '1s'".into(),
            "snowflake.time_bits = 25".into(),
            epoch,
        ]
    };
    let ending = conf(epoch(380));
    let cluster =
        Cluster::start_new("layout_ending", &ending.iter().map(String::as_str).collect::<Vec<_>>());
    drop(cluster.connect_ext());
    let notices = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut c = {
        let seen = notices.clone();
        let mut config: postgres::Config = cluster.conninfo("postgres").parse().unwrap();
        config.notice_callback(move |n| seen.lock().unwrap().push(n.message().to_string()));
        config.connect(postgres::NoTls).unwrap()
    };
    next(&mut c);
    let seen = notices.lock().unwrap().clone();
    assert!(seen.iter().any(|m| m.contains("run out at")), "no warning in {seen:?}");
    cluster.stop("fast");

    let ended = conf(epoch(400));
    let cluster =
        Cluster::start_new("layout_ended", &ended.iter().map(String::as_str).collect::<Vec<_>>());
    expect_error_is(
        &mut cluster.connect_ext(),
        "SELECT snowflake_next()",
        "2200H: snowflake ids are exhausted",
    );
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
    let id = next(&mut s);
    assert_eq!(decode(&mut s, id).1, 1);
    assert!(id < *old.last().unwrap(), "a Discord id of now is below the Twitter ids");
}
