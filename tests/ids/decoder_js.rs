//! snowflake_decode() agrees bit for bit with an independent decoder: the npm package
//! @sapphire/snowflake (its `workerId << 5 | processId` is our worker_id, its `increment` our
//! sequence), run by node on ids the server generated and on seeded random ids, for the Twitter
//! layout (its TwitterSnowflake) and the Discord layout (its DiscordSnowflake).
//!
//! Majors: 17. Decoding is the same code on every major. On 17, the server built with
//! assertions.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::io::Write;
use std::process::{Command, Stdio};
use testkit as common;

#[test]
fn decode_agrees_with_sapphire_snowflake() {
    agrees_with_sapphire("twitter", "snowflake_decode(id)");
}

#[test]
fn a_discord_server_makes_ids_that_sapphires_discord_decoder_reads() {
    agrees_with_sapphire("discord", "snowflake_decode(id)");
}

#[test]
fn discord_ids_decode_by_name_on_a_twitter_server() {
    agrees_with_sapphire("twitter", "snowflake_decode(id, 'discord')");
}

/// `server`: the layout of the server that makes the ids; `decode`: how the server decodes
/// them. The JavaScript decoder is Discord's when either says discord.
fn agrees_with_sapphire(server: &str, decode: &str) {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/@sapphire/snowflake").exists(),
        "run `npm ci --prefix tests/js` first (make test does)"
    );
    let layout = format!("snowflake.layout = {server}");
    let cluster = Cluster::start_new(
        &format!("decoder_js_{server}"),
        &["snowflake.worker_id = 1023", &layout],
    );
    let mut c = cluster.connect_ext();
    let rows = c
        .query(
            format!(
                "WITH ids AS (
                 SELECT snowflake_next() AS id FROM generate_series(1, 5000)
                 UNION ALL
                 SELECT (random() * 9223372036854775807)::bigint
                 FROM (SELECT setseed(0.17)) s, generate_series(1, 5000)
                 UNION ALL
                 VALUES (0::bigint), (9223372036854775807)
             )
             SELECT id::text, (extract(epoch FROM d.ts) * 1000)::bigint::text,
                    d.worker_id, d.sequence
             FROM ids, {decode} d"
            )
            .as_str(),
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 10_002);
    let mut input = String::new();
    for r in &rows {
        let (id, ms, worker, seq): (String, String, i32, i32) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        input.push_str(&format!("{id} {ms} {worker} {seq}\n"));
    }
    let mut node = Command::new("node")
        .arg(js.join("check_decode.mjs"))
        .arg(if server == "discord" || decode.contains("discord") { "discord" } else { "twitter" })
        .current_dir(&js)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    node.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = check(node.wait_with_output().unwrap(), "node check_decode.mjs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(report.trim(), "checked 10002 ids, 0 mismatches", "{report}");
}
