//! The reference cannot miss anything: what a running server says the extension is (its
//! functions and relations in `pg_depend`, its settings in `pg_settings`, the keys of
//! `snowflake_stats()`) and every SQLSTATE the code raises (found in `src/` and `sql/`) is
//! described in the README's Reference section or in a page of docs/ that the README links;
//! what the README's reference tables name exists; and every object that a release's install
//! script adds is named in that release's section of CHANGELOG.md.
//!
//! Described means: in a Markdown table row. A function by its signature (`name(arg type, ...)`,
//! resolved by the server, so an overload or a changed argument list counts; `name(...)` for one
//! that has a single signature), a table or view by its name in the row's first cell, a setting
//! as `snowflake.name` there, a key of `snowflake_stats()` as the first cell of a table headed
//! `Key` (and the keys inside it in that row), a SQLSTATE in the SQLSTATE column of a table that
//! has one. A failure lists everything missing at once.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use testkit as common;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A Markdown table: its header cells and its rows' cells, with the page it is on.
struct Table {
    page: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim().trim_start_matches('|').trim_end_matches('|');
    line.split('|').map(|c| c.trim().to_string()).collect()
}

fn parse_tables(page: &str, text: &str) -> Vec<Table> {
    let mut tables = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let is_table = line.starts_with('|')
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("|---") || next.starts_with("| ---"));
        if !is_table {
            continue;
        }
        lines.next();
        let mut table = Table { page: page.to_string(), header: cells(line), rows: Vec::new() };
        while let Some(row) = lines.next_if(|l| l.starts_with('|')) {
            table.rows.push(cells(row));
        }
        tables.push(table);
    }
    tables
}

/// The spans between backticks.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The README's Reference section, and every page of docs/ that the README links.
fn reference_pages() -> Vec<(String, String)> {
    let readme = read(&root().join("README.md"));
    let start = readme.find("\n## Reference\n").expect("README.md has a Reference section");
    let section = &readme[start + 1..];
    let end = section[1..].find("\n## ").map_or(section.len(), |e| e + 1);
    let mut pages = vec![("README.md (Reference)".to_string(), section[..end].to_string())];
    let mut linked = BTreeSet::new();
    for (at, _) in readme.match_indices("](docs/") {
        let target = &readme[at + 2..];
        let file = target[..target.find([')', '#']).unwrap()].to_string();
        if file.ends_with(".md") {
            linked.insert(file);
        }
    }
    for file in linked {
        pages.push((file.clone(), read(&root().join(&file))));
    }
    pages
}

fn all_tables(pages: &[(String, String)]) -> Vec<Table> {
    pages.iter().flat_map(|(page, text)| parse_tables(page, text)).collect()
}

/// `[schema.]snowflake_name(args)` as written in a table's first cell: the text
/// `to_regprocedure` reads, arguments written `name type` or `type`; `name(...)` for a function
/// of one signature (the name alone, which `to_regproc` resolves only when it is not
/// overloaded).
fn signature(span: &str) -> Option<String> {
    let open = span.find('(')?;
    let (name, rest) = span.split_at(open);
    let args = rest.strip_prefix('(')?.strip_suffix(')')?;
    let bare = name.rsplit('.').next().unwrap();
    if !bare.starts_with("snowflake_")
        || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.".contains(c))
    {
        return None;
    }
    if args == "..." {
        return Some(name.to_string());
    }
    let types: Vec<String> = args
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| match a.split_once(' ') {
            Some((_, ty)) => ty.trim().to_string(),
            None => a.to_string(),
        })
        .collect();
    Some(format!("{name}({})", types.join(", ")))
}

/// The OID of the function a signature names, as the server resolves it (a type that does not
/// exist is an error on PostgreSQL 15, NULL on later majors: both are "no such function").
fn resolve(c: &mut Client, signature: &str) -> Option<i64> {
    let function = if signature.contains('(') { "to_regprocedure" } else { "to_regproc" };
    c.query_one(&format!("SELECT {function}($1)::oid::int8"), &[&signature])
        .ok()
        .and_then(|r| r.get::<_, Option<i64>>(0))
}

/// `snowflake.registry` set to the cluster itself, and `snowflake.claims_database`, so that
/// `snowflake_stats()` has every key it can have (the `registry` and `claims` keys are absent
/// without them).
fn reference_cluster() -> Cluster {
    let cluster = Cluster::init("reference", &[]);
    cluster.append_conf(&[
        &format!(
            "snowflake.registry = 'host=127.0.0.1 port={} dbname=postgres user=postgres'",
            cluster.port
        ),
        "snowflake.claims_database = 'postgres'",
    ]);
    cluster.start();
    cluster
}

/// The extension's members. From PostgreSQL 17 on, a table's row type and every array type are
/// members too: they come with their table or type, and are left out.
const EXTENSION_OBJECTS: &str = "
    SELECT d.classid::regclass::text, d.objid::int8, (pg_identify_object(d.classid, d.objid, 0)).*
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_snowflake')
      AND d.deptype = 'e'
      AND NOT EXISTS (SELECT FROM pg_type t LEFT JOIN pg_class r ON r.oid = t.typrelid
                      WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                        AND (t.typcategory = 'A' OR r.relkind <> 'c'))
    ORDER BY 4";

#[test]
fn every_function_relation_setting_stats_key_and_sqlstate_is_in_the_reference() {
    let cluster = reference_cluster();
    let mut c = cluster.connect_ext();
    let pages = reference_pages();
    let tables = all_tables(&pages);
    let mut missing: Vec<String> = Vec::new();

    // Functions and procedures by signature; relations and types by name.
    let mut documented: BTreeMap<i64, String> = BTreeMap::new();
    for t in &tables {
        for span in t.rows.iter().flatten().flat_map(|cell| code_spans(cell)) {
            if let Some(oid) = signature(span).and_then(|sig| resolve(&mut c, &sig)) {
                documented.insert(oid, t.page.clone());
            }
        }
    }
    let first_cell_names: BTreeSet<String> = tables
        .iter()
        .flat_map(|t| &t.rows)
        .flat_map(|r| code_spans(&r[0]))
        .map(str::to_string)
        .collect();
    let any_cell_names: BTreeSet<String> = tables
        .iter()
        .flat_map(|t| &t.rows)
        .flat_map(|r| r.iter().flat_map(|cell| code_spans(cell)))
        .map(|s| s.split([' ', '(']).next().unwrap().to_string())
        .collect();
    let objects = c.query(EXTENSION_OBJECTS, &[]).unwrap();
    assert!(objects.len() >= 10, "only {} objects", objects.len());
    for o in &objects {
        let (class, oid, kind, schema, name, identity): (
            String,
            i64,
            String,
            Option<String>,
            Option<String>,
            String,
        ) = (o.get(0), o.get(1), o.get(2), o.get(3), o.get(4), o.get(5));
        let qualified = |n: &str| format!("{}.{n}", schema.as_deref().unwrap_or(""));
        let described = match (class.as_str(), kind.as_str()) {
            ("pg_proc", _) => documented.contains_key(&oid),
            (_, "table" | "view" | "materialized view" | "foreign table") => {
                let n = name.as_deref().unwrap();
                first_cell_names.contains(n) || first_cell_names.contains(&qualified(n))
            }
            (_, "composite type" | "type") => {
                let n = name.as_deref().unwrap();
                any_cell_names.contains(n) || any_cell_names.contains(&qualified(n))
            }
            // The schema of the extension's own objects: the tables and functions in it are.
            (_, "schema") => true,
            _ => false,
        };
        if !described {
            missing.push(format!(
                "{kind} {identity}: no table row of the reference names it{}",
                if class == "pg_proc" {
                    " by its signature (`name(arg type, ...)`, or `name(...)` when it has one)"
                } else {
                    " (in backticks in the first cell)"
                }
            ));
        }
    }

    // Settings.
    let settings: Vec<String> =
        c.column("SELECT name FROM pg_settings WHERE name LIKE 'snowflake.%' ORDER BY 1");
    assert!(settings.len() >= 10, "only {settings:?}");
    for s in &settings {
        if !first_cell_names.contains(s) {
            missing.push(format!(
                "setting {s}: no table row of the reference names it (`{s}` in the first cell)"
            ));
        }
    }

    // Keys of snowflake_stats(), with the registry configured (its key is there from the start,
    // with the worker's state).
    let stats = stats(&mut c);
    let stats = stats.as_object().unwrap();
    assert!(
        stats.contains_key("registry"),
        "snowflake.registry is set, but snowflake_stats() has no registry key: {stats:?}"
    );
    let key_rows: Vec<(&Table, &Vec<String>)> = tables
        .iter()
        .filter(|t| t.header.first().is_some_and(|h| h == "Key"))
        .flat_map(|t| t.rows.iter().map(move |r| (t, r)))
        .collect();
    for (key, value) in stats {
        let row = key_rows.iter().find(|(_, r)| r[0] == format!("`{key}`"));
        let Some((_, row)) = row else {
            missing
                .push(format!("snowflake_stats() key {key}: no row `{key}` in a table headed Key"));
            continue;
        };
        let spans: BTreeSet<&str> = row[1..].iter().flat_map(|c| code_spans(c)).collect();
        for inner in value.as_object().into_iter().flat_map(|o| o.keys()) {
            if !spans.contains(inner.as_str()) {
                missing.push(format!(
                    "snowflake_stats() key {key} -> {inner}: not named (in backticks) in the row of `{key}`"
                ));
            }
        }
    }

    // SQLSTATEs the code raises.
    let documented_codes: BTreeSet<String> = tables
        .iter()
        .filter_map(|t| Some((t, t.header.iter().position(|h| h == "SQLSTATE")?)))
        .flat_map(|(t, col)| t.rows.iter().filter_map(move |r| r.get(col)))
        .flat_map(|cell| {
            cell.split(|ch: char| !ch.is_ascii_alphanumeric())
                .filter(|w| w.len() == 5)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    for (code, wheres) in raised_sqlstates(&c_includedir()) {
        if !documented_codes.contains(&code) {
            missing.push(format!(
                "SQLSTATE {code} (raised in {}): in no SQLSTATE column of the reference",
                wheres.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }

    // And the other way: what the README's tables of functions, settings and stats keys name
    // exists.
    let readme = &pages[0];
    for t in parse_tables(&readme.0, &readme.1) {
        let heading = t.header.first().map_or("", String::as_str);
        if !["Function", "Setting", "Object", "Key"].contains(&heading) {
            continue;
        }
        for r in &t.rows {
            for span in code_spans(&r[0]) {
                if let Some(sig) = signature(span) {
                    if resolve(&mut c, &sig).is_none_or(|oid| !documented_contains(&objects, oid)) {
                        missing.push(format!(
                            "README.md's reference names `{span}`, which is no function of the extension"
                        ));
                    }
                } else if span.starts_with("snowflake.")
                    && !span.contains(' ')
                    && !settings.iter().any(|s| s == span)
                    && !objects.iter().any(|o| o.get::<_, String>(5) == span)
                {
                    missing.push(format!(
                        "README.md's reference names `{span}`, which is no setting or object of the extension"
                    ));
                }
            }
            if heading == "Key" {
                let key = r[0].trim_matches('`');
                if !stats.contains_key(key) {
                    missing.push(format!(
                        "README.md's reference describes the snowflake_stats() key {key}, which it does not have"
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the reference misses {} things:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

fn documented_contains(objects: &[postgres::Row], oid: i64) -> bool {
    objects.iter().any(|o| o.get::<_, String>(0) == "pg_proc" && o.get::<_, i64>(1) == oid)
}

fn c_includedir() -> PathBuf {
    pg_config(&default_pg_config(), "--includedir-server")
}

/// Every SQLSTATE that src/ and sql/ raise, with the files that raise it: `PgSqlErrorCode::X`
/// in Rust, `ERRCODE = '...'` (a code or a condition name) in SQL, and P0001 for a
/// `RAISE EXCEPTION` without one. The install scripts of past releases (sql/pg_snowflake--*)
/// are history, not code that runs. 00000 (a NOTICE's) is no error.
fn raised_sqlstates(includedir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let header = read(&includedir.join("utils/errcodes.h"));
    let codes: BTreeMap<String, String> = header
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("#define ERRCODE_")?;
            let (name, value) = rest.split_once(' ')?;
            let chars: String = value
                .trim()
                .strip_prefix("MAKE_SQLSTATE(")?
                .chars()
                .filter(|ch| ch.is_ascii_alphanumeric())
                .collect();
            Some((format!("ERRCODE_{name}"), chars))
        })
        .collect();
    assert!(codes.len() > 200, "errcodes.h: only {} codes", codes.len());
    let mut files = Vec::new();
    let mut dirs = vec![root().join("src"), root().join("sql")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else if (name.ends_with(".rs") || name.ends_with(".sql"))
                && !(dir.ends_with("sql") && name.starts_with("pg_snowflake--"))
            {
                files.push(path);
            }
        }
    }
    let mut raised: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in files {
        let text = read(&path);
        let file = path.strip_prefix(root()).unwrap().display().to_string();
        let mut add = |code: String| {
            raised.entry(code).or_default().insert(file.clone());
        };
        for (at, _) in text.match_indices("ERRCODE_") {
            let name: String = text[at..]
                .chars()
                .take_while(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || *ch == '_')
                .collect();
            let code =
                codes.get(&name).unwrap_or_else(|| panic!("{file}: {name} is not in errcodes.h"));
            add(code.clone());
        }
        for (at, _) in text.match_indices("ERRCODE = '") {
            let value = &text[at + 11..];
            let value = &value[..value.find('\'').unwrap()];
            let code = if value.len() == 5 && value.chars().all(|ch| ch.is_ascii_alphanumeric()) {
                value.to_string()
            } else {
                codes
                    .get(&format!("ERRCODE_{}", value.to_uppercase()))
                    .unwrap_or_else(|| panic!("{file}: condition {value} is not in errcodes.h"))
                    .clone()
            };
            add(code);
        }
        for (at, _) in text.match_indices("RAISE EXCEPTION") {
            let statement = &text[at..];
            let statement = &statement[..statement.find(";\n").unwrap_or(statement.len())];
            if !statement.contains("ERRCODE") {
                add("P0001".into());
            }
        }
    }
    raised.remove("00000");
    assert!(raised.len() >= 10, "only {raised:?}");
    raised
}

/// The releases: every install script kept in sql/ (`pg_snowflake--X.sql`) and the current
/// one (the crate's version, which the control file's default_version is), oldest first.
fn releases() -> Vec<String> {
    let mut versions: Vec<String> = std::fs::read_dir(root().join("sql"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let v = name.strip_prefix("pg_snowflake--")?.strip_suffix(".sql")?;
            (!v.contains("--")).then(|| v.to_string())
        })
        .collect();
    // pg_snowflake.control's default_version is @CARGO_VERSION@.
    versions.push(env!("CARGO_PKG_VERSION").to_string());
    let key = |v: &String| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    versions.sort_by_key(key);
    versions.dedup();
    versions
}

/// The section `## X` of CHANGELOG.md.
fn changelog_section(changelog: &str, version: &str) -> String {
    let head = format!("\n## {version}\n");
    let start =
        changelog.find(&head).unwrap_or_else(|| panic!("CHANGELOG.md has no section ## {version}"));
    let section = &changelog[start + head.len()..];
    section[..section.find("\n## ").unwrap_or(section.len())].to_string()
}

/// `text` names `name` as a word of its own (`snowflake_registry` is not named by
/// `snowflake_registry_lease`, nor the schema `snowflake` by `snowflake_next`).
fn names(text: &str, name: &str) -> bool {
    let word = |ch: char| ch.is_ascii_alphanumeric() || ch == '_';
    text.match_indices(name)
        .any(|(at, _)| !text[..at].ends_with(word) && !text[at + name.len()..].starts_with(word))
}

/// Each release's install script, run by the server into a database of its own: the objects it
/// makes (as `pg_identify_object` names them, arguments included) that the release before did
/// not make are named (their bare name, as a word) in the later release's section of
/// CHANGELOG.md. An object moved to another schema counts as new.
#[test]
fn every_object_a_release_adds_is_named_in_its_changelog_section() {
    let cluster = Cluster::start_new("changelog", &[]);
    let mut c = cluster.connect();
    let versions = releases();
    assert!(versions.len() >= 4, "releases: {versions:?}");
    let changelog = read(&root().join("CHANGELOG.md"));
    let mut made: Vec<BTreeMap<String, String>> = Vec::new();
    for v in &versions {
        let db = format!("release_{}", v.replace('.', "_"));
        c.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
        let mut d = cluster.connect_db("postgres", &db);
        d.batch_execute(&format!("CREATE EXTENSION pg_snowflake VERSION '{v}'"))
            .unwrap_or_else(|e| panic!("CREATE EXTENSION pg_snowflake VERSION '{v}': {e}"));
        made.push(
            d.query(EXTENSION_OBJECTS, &[])
                .unwrap()
                .iter()
                .map(|r| {
                    let (kind, name, identity): (String, Option<String>, String) =
                        (r.get(2), r.get(4), r.get(5));
                    // Functions have no name column: their identity is schema.name(args).
                    let bare = name.unwrap_or_else(|| {
                        let f = identity.split('(').next().unwrap();
                        f.rsplit('.').next().unwrap().to_string()
                    });
                    (format!("{kind} {identity}"), bare)
                })
                .collect(),
        );
    }
    let mut missing = Vec::new();
    for (i, pair) in made.windows(2).enumerate() {
        let (before, after) = (&pair[0], &pair[1]);
        let version = &versions[i + 1];
        let section = changelog_section(&changelog, version);
        for (object, bare) in after {
            if !before.contains_key(object) && !names(&section, bare) {
                missing.push(format!(
                    "{version} adds {object}, and its CHANGELOG section does not name {bare}"
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "CHANGELOG.md misses {} objects:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}
