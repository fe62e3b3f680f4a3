//! The README's examples, run as written: its ```ini block configures a fresh cluster, every
//! ```sql block runs through psql in order, and where a ```text block follows, psql must print
//! exactly that (errors included). Multi-server examples run on clusters of their own (see
//! `readme_examples_run_as_written`).
#![cfg(not(feature = "pg_test"))]

mod common;
use common::*;
use std::process::Stdio;

struct Block {
    lang: String,
    body: String,
    line: usize,
}

fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                current = Some(Block {
                    lang: lang.trim().into(),
                    body: String::new(),
                    line: i + 1,
                })
            }
            (Some(_), Some("")) => blocks.push(current.take().unwrap()),
            (Some(b), _) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(current.is_none(), "unclosed code block");
    blocks
}

/// psql's output with the "psql:<stdin>:N: " prefix of error lines and trailing blanks removed.
fn normalize(text: &str) -> String {
    text.lines()
        .map(|l| {
            let l = if l.starts_with("psql:<stdin>:") {
                l.splitn(4, ':').nth(3).unwrap_or(l).trim_start()
            } else {
                l
            };
            l.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// Runs `sql` through psql on `cluster`: what it printed (stdout and stderr in one stream, so
/// that notices and errors come in the order a terminal shows them), and whether it succeeded.
fn psql(cluster: &Cluster, sql: &str) -> (String, bool) {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = cluster
        .client_cmd("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"])
        .env("PGTZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(sql.as_bytes()).unwrap();
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
    let status = child.wait().unwrap();
    (normalize(&text), status.success())
}

/// The README's examples. Its plain ```ini blocks configure one cluster that runs every plain
/// ```sql block. The multi-server examples name their server after the language (```ini hub,
/// ```sql hub, ```log hub): each named server is a cluster of its own, configured by its ini
/// blocks, where `host=<name> port=5432` in a connection string means that cluster. Replication
/// between them is asynchronous, so a named block is retried for up to 60 s until it prints
/// what the README shows, and every line of a ```log block must appear in that server's log.
#[test]
fn readme_examples_run_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let blocks = fenced_blocks(&readme);
    let conf: Vec<&str> = blocks
        .iter()
        .filter(|b| b.lang == "ini")
        .flat_map(|b| b.body.lines())
        .collect();
    assert!(
        conf.iter().any(|l| l.starts_with("snowflake.worker_id")),
        "README shows no worker id"
    );
    // Only the README's own configuration: the harness default worker id is overridden by it.
    let cluster = Cluster::start_new("readme", &conf);
    // The README opens with an example that assumes the extension exists.
    cluster.connect_ext();
    let mut servers: std::collections::BTreeMap<&str, Cluster> = Default::default();
    for b in &blocks {
        if let Some(name) = b.lang.strip_prefix("ini ") {
            let lines: Vec<&str> = b.body.lines().collect();
            let c = Cluster::init(&format!("readme_{name}"), &lines);
            c.start();
            assert!(
                servers.insert(name, c).is_none(),
                "two ini blocks for {name}"
            );
        }
    }
    let mut ran = 0;
    for (i, block) in blocks.iter().enumerate() {
        let (lang, server) = match block.lang.split_once(' ') {
            Some((lang, name)) => (lang, Some(name)),
            None => (block.lang.as_str(), None),
        };
        let target = match server {
            Some(name) => servers.get(name).unwrap_or_else(|| {
                panic!("README.md line {}: no ini block for {name}", block.line)
            }),
            None => &cluster,
        };
        let deadline = std::time::Instant::now()
            + std::time::Duration::from_secs(if server.is_some() { 60 } else { 0 });
        if lang == "log" {
            loop {
                let log = target.log();
                let missing: Vec<&str> = block.body.lines().filter(|l| !log.contains(l)).collect();
                if missing.is_empty() {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "README.md line {}: the log of {} lacks {missing:?}:\n{log}",
                    block.line,
                    server.unwrap_or("readme")
                );
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            ran += 1;
            continue;
        }
        if lang != "sql" {
            continue;
        }
        let mut sql = block.body.clone();
        for (name, c) in &servers {
            sql = sql.replace(
                &format!("host={name} port=5432"),
                &format!("host=127.0.0.1 port={}", c.port),
            );
        }
        let expected = blocks
            .get(i + 1)
            .filter(|b| b.lang == "text")
            .map(|b| normalize(&b.body));
        let (printed, success) = loop {
            let (printed, success) = psql(target, &sql);
            let settled = match &expected {
                Some(e) => &printed == e,
                None => success,
            };
            if settled || std::time::Instant::now() >= deadline {
                break (printed, success);
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        };
        match &expected {
            Some(e) => assert_eq!(&printed, e, "README.md line {}: output differs", block.line),
            None => assert!(
                success,
                "README.md line {} failed:\n{}\n{printed}",
                block.line, block.body
            ),
        }
        if expected.as_deref().is_some_and(|e| e.starts_with("ERROR:")) {
            assert!(!success, "README.md line {}: expected an error", block.line);
        }
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} SQL examples found in README.md");
    assert!(
        servers.len() >= 3,
        "the multi-server examples are missing: {:?}",
        servers.keys()
    );
}
