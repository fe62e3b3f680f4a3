//! The README's examples, run as written: its ```ini block configures a fresh cluster, every
//! ```sql block runs through psql in order, and where a ```text block follows, psql must print
//! exactly that (errors included).
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
    let mut ran = 0;
    for (i, block) in blocks.iter().enumerate() {
        if block.lang != "sql" {
            continue;
        }
        let expected = blocks
            .get(i + 1)
            .filter(|b| b.lang == "text")
            .map(|b| normalize(&b.body));
        // One pipe for stdout and stderr, so that notices and errors come in the order a
        // terminal shows them.
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
            stdin.write_all(block.body.as_bytes()).unwrap();
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
        let status = child.wait().unwrap();
        let printed = normalize(&text);
        match &expected {
            Some(e) => assert_eq!(&printed, e, "README.md line {}: output differs", block.line),
            None => assert!(
                status.success(),
                "README.md line {} failed:\n{}\n{printed}",
                block.line,
                block.body
            ),
        }
        if expected.as_deref().is_some_and(|e| e.starts_with("ERROR:")) {
            assert!(
                !status.success(),
                "README.md line {}: expected an error",
                block.line
            );
        }
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} SQL examples found in README.md");
}
