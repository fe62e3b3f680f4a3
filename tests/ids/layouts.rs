//! Layouts chosen at server start: presets and custom widths generate ids that decode to the
//! clock and the worker id, bad combinations are refused with the reason, and ids never wrap.
//! A change of layout, which the WAL marks and the state file record, is
//! tests/durability/layout_changes.rs.
//!
//! Majors: 17. What is here is the generator's arithmetic and the check of its settings, the same
//! code on every major (the unit tests check the arithmetic against each major's bindings, and
//! tests/ids/configuration.rs the settings on every major). On 17, the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::*;
use testkit as common;

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
    let (ms, worker, _) = decode_id(&mut c, ids[0]);
    assert_eq!(worker, 40000);
    assert!((ms - unix_ms()).abs() < 5_000, "{ms}");
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
    let (ms, worker, _) = decode_id(&mut c, ids[19_999]);
    assert_eq!(worker, 63);
    assert!((ms - unix_ms()).abs() < 5_000, "{ms}");
    let ServerError { code: state, .. } =
        expect_error(&mut c, "ALTER SYSTEM SET snowflake.worker_id = 64");
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
    let id = next_id(&mut c);
    assert_eq!((id >> 11) & 0xfffff, 1_000_000);
    let seconds = id >> 31;
    let expected = (unix_ms() - 1_577_836_800_000) / 1000;
    assert!((seconds - expected).abs() <= 2, "{seconds} vs {expected}");
    let (ms, worker, _) = decode_id(&mut c, id);
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

/// `snowflake_decode(id, layout)` and `snowflake_compose(..., layout)` read a layout's name by
/// the rule of the setting `snowflake.layout` (the whole text, any case): 0.5.0 took
/// `'twitter '` and `E'twitter\n'` there, which the setting refuses.
#[test]
fn a_layout_name_is_read_by_the_settings_rule_in_decode_and_compose() {
    let cluster = Cluster::start_new("layout_names", &[]);
    let mut c = cluster.connect_ext();
    for name in ["twitter ", " twitter", "twitter\n", "\ttwitter"] {
        for sql in [
            "SELECT (snowflake_decode(1, $1)).worker_id",
            "SELECT snowflake_compose('2030-01-01', 1, 0, $1)",
        ] {
            let err = c.query_one(sql, &[&name]).expect_err(name);
            let db = err.as_db_error().unwrap_or_else(|| panic!("{name:?}: {err}"));
            assert_eq!(db.code().code(), "22023", "{name:?}: {}", db.message());
            assert!(db.message().starts_with("unknown snowflake layout"), "{}", db.message());
            assert!(!db.message().contains('\n'), "a control character reached the message");
        }
    }
    let worker: i32 =
        c.query_one("SELECT (snowflake_decode(4096, 'TWITTER')).worker_id", &[]).unwrap().get(0);
    assert_eq!(worker, 1, "a name in capitals is the layout, as in the setting");
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
        assert_eq!(
            db.hint(),
            Some("Give a date and time with its time zone, such as '2024-01-01 00:00:00+00'."),
            "{bad}"
        );
    }
    c.batch_execute("ALTER SYSTEM SET snowflake.epoch = '2020-01-01 00:00:00+00'").unwrap();
}

#[test]
fn ids_never_wrap_a_layout_warns_in_its_last_year_and_ends_with_an_error() {
    // 2^25 s is 388 days: an epoch 380 days ago leaves about 8 days.
    let day_ms = 86_400_000i64;
    let epoch = |days_ago: i64| {
        let secs = (unix_ms() - days_ago * day_ms) / 1000;
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
    next_id(&mut c);
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
