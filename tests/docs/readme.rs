//! The examples of the README and of the guides in docs/, run as written: a page's ```ini
//! blocks configure a fresh cluster, every ```sql block runs through psql in order, and where a
//! ```text block follows, psql must print exactly that (errors included). Multi-server examples
//! run on clusters of their own (see `run_examples`). Also: every page is linked, and every
//! relative link leads to a file. The ```yaml patroni block of docs/many-servers.md is
//! Patroni's configuration: tests/replication/patroni.rs starts its members with it. The
//! ```yaml blocks of docs/kubernetes.md are Kubernetes manifests, checked against the schemas of
//! their resources (tests/kubernetes) and their `snowflake.*` parameters against a server.
//!
//! Majors: 17. The pages' examples mean the same on every major; tests/docs/reference.rs, which
//! holds the reference against what each server says the extension is, runs on every major. On 17,
//! the server built with assertions.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::process::Stdio;
use testkit as common;

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
                current = Some(Block { lang: lang.trim().into(), body: String::new(), line: i + 1 })
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

/// `text` with each named server's address put in: `host=<name> port=5432` in a connection
/// string, and `'<name>', 5432` as Citus's functions take a node.
fn with_servers(text: &str, servers: &std::collections::BTreeMap<&str, Cluster>) -> String {
    let mut text = text.to_string();
    for (name, c) in servers {
        text = text
            .replace(&format!("host={name} port=5432"), &format!("host=127.0.0.1 port={}", c.port))
            .replace(&format!("'{name}', 5432"), &format!("'127.0.0.1', {}", c.port));
    }
    text
}

/// The examples of one page, run as written. Its plain ```ini blocks configure one cluster
/// that runs every plain ```sql block (with the harness's worker id 1 if it has none). The
/// multi-server examples name their server after the language (```ini hub, ```sql hub,
/// ```log hub): each named server is a cluster of its own, configured by its ini block (one
/// block may name several: ```ini coordinator worker-1), where `host=<name> port=5432` in a
/// connection string, and `'<name>', 5432` in a call of Citus's functions, mean that cluster. Replication between them
/// is asynchronous, so a named block is retried for up to 60 s until it prints what the page
/// shows, and every line of a ```log block must appear in that server's log. Returns how many
/// blocks ran and the named servers.
fn run_examples(page: &str) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(format!("{}/{page}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let blocks = fenced_blocks(&text);
    let conf: Vec<&str> =
        blocks.iter().filter(|b| b.lang == "ini").flat_map(|b| b.body.lines()).collect();
    // Only the page's own configuration: the harness default worker id is overridden by it.
    let stem = page.trim_end_matches(".md").replace(['/', '-', '.'], "_").to_lowercase();
    let cluster = Cluster::start_new(&stem, &conf);
    // Pages open with examples that assume the extension exists.
    cluster.connect_ext();
    let mut servers: std::collections::BTreeMap<&str, Cluster> = Default::default();
    // A block named by several servers (```ini coordinator worker-1) configures each of them.
    let mut named: Vec<(&str, String)> = Vec::new();
    for b in &blocks {
        if let Some(names) = b.lang.strip_prefix("ini ") {
            for name in names.split_whitespace() {
                match named.iter_mut().find(|(n, _)| *n == name) {
                    Some(_) => panic!("{page}: two ini blocks for {name}"),
                    None => named.push((name, b.body.clone())),
                }
            }
        }
    }
    if named.iter().any(|(_, body)| body.contains("citus")) {
        common::citus::require_citus();
    }
    // Each named server is made first, so that its configuration may name itself or one made
    // before it (`host=registry port=5432`), and started in the order the page names them.
    for (name, _) in &named {
        let c = Cluster::init(&format!("{stem}_{name}"), &[]);
        servers.insert(name, c);
    }
    for (name, body) in &named {
        let body = with_servers(body, &servers);
        servers[name].append_conf(&body.lines().collect::<Vec<_>>());
        servers[name].start();
    }
    let mut ran = 0;
    let mut differences = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let (lang, server) = match block.lang.split_once(' ') {
            Some((lang, name)) => (lang, Some(name)),
            None => (block.lang.as_str(), None),
        };
        // ```text blocks are read with the ```sql block before them; the ```yaml patroni
        // blocks are run by tests/replication/patroni.rs.
        if lang != "sql" && lang != "log" {
            continue;
        }
        let target = match server {
            Some(name) => servers
                .get(name)
                .unwrap_or_else(|| panic!("{page} line {}: no ini block for {name}", block.line)),
            None => &cluster,
        };
        let deadline = std::time::Instant::now()
            + std::time::Duration::from_secs(if server.is_some() { 60 } else { 0 });
        if lang == "log" {
            poll(
                deadline.saturating_duration_since(std::time::Instant::now()),
                std::time::Duration::from_millis(500),
                || {
                    let log = target.log();
                    let missing: Vec<&str> =
                        block.body.lines().filter(|l| !log.contains(l)).collect();
                    missing.is_empty().then_some(()).ok_or(format!(
                        "{page} line {}: the log of {} lacks {missing:?}:\n{log}",
                        block.line,
                        server.unwrap_or("the page's cluster")
                    ))
                },
            );
            ran += 1;
            continue;
        }
        if lang != "sql" {
            continue;
        }
        let sql = with_servers(&block.body, &servers);
        let expected = blocks.get(i + 1).filter(|b| b.lang == "text").map(|b| normalize(&b.body));
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
            // Every difference of the page is gathered, then reported at once: a change of
            // messages then takes one run to see, not one a block.
            Some(e) if &printed != e => differences.push(format!(
                "{page} line {}: output differs\n  printed: {printed:?}\n  the page: {e:?}",
                block.line
            )),
            Some(_) => {}
            None => {
                assert!(success, "{page} line {} failed:\n{}\n{printed}", block.line, block.body)
            }
        }
        if expected.as_deref().is_some_and(|e| e.starts_with("ERROR:")) {
            assert!(!success, "{page} line {}: expected an error", block.line);
        }
        ran += 1;
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    (ran, servers.keys().map(|k| k.to_string()).collect())
}

#[test]
fn readme_examples_run_as_written() {
    let (ran, _) = run_examples("README.md");
    assert!(ran >= 6, "only {ran} SQL examples found in README.md");
}

#[test]
fn the_examples_of_the_guides_run_as_written() {
    let (ran, servers) = run_examples("docs/many-servers.md");
    assert!(servers.len() >= 3, "the multi-server examples are missing: {servers:?}");
    assert!(ran >= 8, "only {ran} examples in docs/many-servers.md");
    for page in [
        "docs/guarantees.md",
        "docs/security.md",
        "docs/benchmarks.md",
        "docs/testing.md",
        "docs/clients.md",
        "docs/kubernetes.md",
    ] {
        run_examples(page);
    }
    // A coordinator and two workers, Citus first in each. Not where no Citus release supports
    // the major (19), which the run says.
    if !common::citus::has_release() {
        println!(
            "docs/citus.md: not run on PostgreSQL {}, which no Citus release supports",
            common::major_under_test()
        );
        return;
    }
    let (ran, servers) = run_examples("docs/citus.md");
    assert_eq!(servers, ["coordinator", "worker-1", "worker-2"]);
    assert!(ran >= 9, "only {ran} examples in docs/citus.md");
}

/// tests/kubernetes's checker, built once (into target/kubernetes, with the crates its
/// Cargo.lock pins), run on `files`: its JSON line for each document, or what it printed.
fn check_manifests(files: &[std::path::PathBuf]) -> Result<Vec<serde_json::Value>, String> {
    let root = root_dir();
    let manifest = root.join("tests/kubernetes/Cargo.toml");
    let target = root.join("target/kubernetes");
    let build = common::private_network::with_host_network(
        std::process::Command::new("cargo")
            .args(["build", "--quiet", "--locked", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target),
    )
    .output()
    .unwrap();
    check(build, "cargo build of tests/kubernetes");
    let out =
        std::process::Command::new(target.join("debug/manifests")).args(files).output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect())
}

/// docs/kubernetes.md's manifests are what the resources they declare accept (CloudNativePG
/// 1.30.0's Cluster and Database, Kubernetes 1.34's StatefulSet, Service and Secret), and each
/// Cluster and StatefulSet preloads pg_snowflake with settings that a server takes. A misspelt
/// field fails the check (shown on the page's first Cluster).
#[test]
fn the_kubernetes_manifests_match_the_schemas_of_their_resources() {
    let page = "docs/kubernetes.md";
    let text = std::fs::read_to_string(root_dir().join(page)).unwrap();
    let blocks: Vec<Block> =
        fenced_blocks(&text).into_iter().filter(|b| b.lang == "yaml").collect();
    assert!(blocks.len() >= 5, "{page}: only {} manifests", blocks.len());
    let dir = scratch_dir("kubernetes_manifests");
    let files: Vec<std::path::PathBuf> = blocks
        .iter()
        .map(|b| {
            let file = dir.join(format!("line-{}.yaml", b.line));
            std::fs::write(&file, &b.body).unwrap();
            file
        })
        .collect();
    let checked = check_manifests(&files).unwrap_or_else(|e| panic!("{page}: {e}"));
    let documents: usize = blocks.iter().map(|b| b.body.matches("\n---\n").count() + 1).sum();
    assert_eq!(checked.len(), documents, "{page}: a line for each document: {checked:?}");
    let kinds: std::collections::BTreeSet<&str> =
        checked.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    for kind in ["Cluster", "Database", "StatefulSet", "Service", "Secret"] {
        assert!(kinds.contains(kind), "{page} has no {kind}: {kinds:?}");
    }

    // The Clusters' parameters, each set by ALTER SYSTEM (which checks the name and the value
    // as the server would at start) in a server with pg_snowflake loaded.
    let server = Cluster::start_new("kubernetes_parameters", &[]);
    let mut c = server.connect();
    // A StatefulSet sets on its command line what the operator sets for a Cluster: the paths
    // tests/packaging/image.rs sets, and the preload.
    let by_operator = [
        ("extension_control_path", "$system:/extensions/pg_snowflake/share"),
        ("dynamic_library_path", "$libdir:/extensions/pg_snowflake/lib"),
        ("shared_preload_libraries", "pg_snowflake"),
    ];
    for server in checked.iter().filter(|d| d["kind"] == "Cluster" || d["kind"] == "StatefulSet") {
        let name =
            format!("{} {}", server["kind"].as_str().unwrap(), server["name"].as_str().unwrap());
        let parameters = server["parameters"].as_object().unwrap();
        let stateful_set = server["kind"] == "StatefulSet";
        if stateful_set {
            for (key, value) in by_operator {
                assert_eq!(
                    parameters.get(key).and_then(|v| v.as_str()),
                    Some(value),
                    "{page}: {name}: {key}"
                );
            }
        } else {
            assert!(
                server["shared_preload_libraries"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|x| x == "pg_snowflake")),
                "{page}: {name} does not preload pg_snowflake"
            );
        }
        for (key, value) in parameters {
            if stateful_set && by_operator.iter().any(|(k, _)| k == key) {
                continue;
            }
            assert!(key.starts_with("snowflake."), "{page}: {name} sets {key}");
            let known: i64 =
                c.scalar(&format!("SELECT count(*) FROM pg_settings WHERE name = '{key}'"));
            assert_eq!(known, 1, "{page}: {name}: {key} is no setting of pg_snowflake");
            let value = value.as_str().unwrap().replace('\'', "''");
            c.batch_execute(&format!("ALTER SYSTEM SET {key} = '{value}'"))
                .unwrap_or_else(|e| panic!("{page}: {name}: {key} = {value}: {}", why(&e)));
        }
    }
    c.batch_execute("ALTER SYSTEM RESET ALL").unwrap();
    // The scripts a ConfigMap gives the image's entrypoint run as written.
    for map in checked.iter().filter(|d| d["kind"] == "ConfigMap") {
        for (name, script) in map["sql"].as_object().unwrap() {
            c.batch_execute(script.as_str().unwrap()).unwrap_or_else(|e| {
                panic!("{page}: ConfigMap {}: {name}: {}", map["name"], why(&e))
            });
        }
    }

    // The check fails a field the schema lacks.
    let first = blocks.iter().position(|b| b.body.contains("kind: Cluster")).unwrap();
    let misspelt = dir.join("misspelt.yaml");
    std::fs::write(&misspelt, blocks[first].body.replacen("reference:", "referense:", 1)).unwrap();
    let refused = check_manifests(&[misspelt]).expect_err("a misspelt field passed");
    assert!(refused.contains("referense"), "{refused}");
}

/// Every page of docs/ is linked from the README, and every relative link of the README and of
/// the pages leads to a file that exists.
#[test]
fn the_pages_are_linked_and_their_links_lead_somewhere() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                readme.contains(&format!("](docs/{name}")),
                "docs/{name} is not linked from the README"
            );
            pages.push(path);
        }
    }
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for (at, _) in text.match_indices("](") {
            let target = &text[at + 2..];
            let target = &target[..target.find(')').unwrap()];
            if target.starts_with("http") || target.starts_with('#') {
                continue;
            }
            let file = target.split('#').next().unwrap();
            let path = page.parent().unwrap().join(file);
            assert!(path.exists(), "{}: the link to {target} leads nowhere", page.display());
        }
    }
}

/// One set of numbers: docs/benchmarks.md's tables are docs/benchmarks.json rendered (`make
/// bench` writes both, tests/common/benchmarks.rs renders), and every figure that the pages,
/// the Makefile, the scripts and the code's comments quote (ns per id, ratios, M ids/s, MB,
/// instructions per id, the bench's duration) is a figure of that file, rounded as written.
#[test]
fn the_benchmark_tables_and_every_quoted_figure_come_from_docs_benchmarks_json() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = benchmarks::load();
    assert!(
        data["runs"].as_object().is_some_and(|r| !r.is_empty()),
        "docs/benchmarks.json has no run: make bench"
    );
    let page = std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap();
    assert!(
        page.contains("<!-- bench "),
        "docs/benchmarks.md has no table rendered from docs/benchmarks.json"
    );
    let rendered = benchmarks::render(&page, &data).unwrap_or_else(|e| panic!("{e}"));
    if let Some((n, (mine, theirs))) =
        page.lines().zip(rendered.lines()).enumerate().find(|(_, (a, b))| a != b)
    {
        panic!(
            "docs/benchmarks.md line {} is not what docs/benchmarks.json renders (run make bench, \
             or leave the tables to it):\n  page: {mine}\n  data: {theirs}",
            n + 1
        );
    }
    assert_eq!(page, rendered);
    let figures = benchmarks::figures(&data);
    let mut files = vec![root.join("README.md"), root.join("Makefile")];
    let mut dirs = vec![root.join("docs"), root.join("src"), root.join("scripts")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md" || e == "rs" || e == "sh") {
                files.push(path);
            }
        }
    }
    let mut unmatched = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        unmatched.extend(benchmarks::unmatched(&name, &text, &figures));
    }
    assert!(
        unmatched.is_empty(),
        "{} figures are quoted that docs/benchmarks.json does not hold (rounded as written):\n  {}",
        unmatched.len(),
        unmatched.join("\n  ")
    );
}
