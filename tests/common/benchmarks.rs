//! docs/benchmarks.json, the one set of measured numbers: `make bench` writes a run per major
//! (examples/bench.rs) and `make bench-hotpath` the instructions per id (scripts/callgrind.sh).
//! The tables of docs/benchmarks.md are rendered from it here, by the bench when it writes a run
//! and by tests/docs/readme.rs to check that they were not edited by hand; every figure the pages
//! quote (ns per id, ratios, M ids/s, MB, instructions per id, the bench's duration) must be one
//! of `figures`.

use serde_json::Value;
use std::path::PathBuf;

pub fn path() -> PathBuf {
    crate::root_dir().join("docs/benchmarks.json")
}

/// The data file, or an empty object before the first run.
pub fn load() -> Value {
    match std::fs::read_to_string(path()) {
        Ok(text) => serde_json::from_str(&text).expect("docs/benchmarks.json is JSON"),
        Err(_) => serde_json::json!({}),
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("docs/benchmarks.json: {v} is not a number"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("docs/benchmarks.json: {v} is not a string"))
}

/// A ratio cell: "-" where there is none (the candidate against itself).
fn ratio(v: &Value, decimals: usize) -> String {
    v.as_f64().map_or("-".into(), |r| format!("{r:.decimals$}"))
}

/// The Markdown table `which` (bulk, time_range, insert, pgbench) of a run.
pub fn table(run: &Value, which: &str) -> String {
    let mut t = String::new();
    match which {
        "bulk" => {
            t += "| f | median s | min..max s | per id | snowflake / f |\n|---|---|---|---|---|\n";
            for c in run["bulk"]["candidates"].as_array().unwrap() {
                let per_id = c["per_id_ns"].as_f64().map_or("-".into(), |ns| format!("{ns:.1} ns"));
                t += &format!(
                    "| {} | {:.3} | {:.3}..{:.3} | {per_id} | {} |\n",
                    s(&c["label"]),
                    f(&c["median_s"]),
                    f(&c["min_s"]),
                    f(&c["max_s"]),
                    ratio(&c["snowflake_over"], 3)
                );
            }
        }
        "time_range" => {
            t += "| condition | median ms | / id range | plan |\n|---|---|---|---|\n";
            for c in run["time_range"]["candidates"].as_array().unwrap() {
                t += &format!(
                    "| {} | {:.3} | {:.2} | {} |\n",
                    s(&c["label"]),
                    f(&c["median_ms"]),
                    f(&c["over_id_range"]),
                    s(&c["plan"])
                );
            }
        }
        "insert" => {
            t += "| primary key | empty table, median s | pkey index | second million after CHECKPOINT, s |\n\
                  |---|---|---|---|\n";
            for c in run["insert"]["candidates"].as_array().unwrap() {
                t += &format!(
                    "| {} | {:.3} | {:.1} MB | {:.3} |\n",
                    s(&c["label"]),
                    f(&c["median_empty_s"]),
                    f(&c["pkey_bytes"]) / 1048576.0,
                    f(&c["median_second_s"])
                );
            }
        }
        "pgbench" => {
            let clients = run["pgbench"]["clients"].as_array().unwrap();
            t += "| script |";
            for n in clients {
                let n = n.as_u64().unwrap();
                t += &format!(" {n} client{} |", if n == 1 { "" } else { "s" });
            }
            t += &format!("\n|---|{}\n", "---|".repeat(clients.len()));
            for c in run["pgbench"]["scripts"].as_array().unwrap() {
                t += &format!("| {} |", s(&c["label"]));
                for tps in c["median_tps"].as_array().unwrap() {
                    t += &format!(" {:.0} |", f(tps));
                }
                t += "\n";
            }
        }
        "citus" => {
            let citus = &run["citus"];
            t += &format!(
                "| Citus {}, {} nodes | `snowflake_next()` | `bigserial` | snowflake / bigserial |\n\
                 |---|---|---|---|\n",
                s(&citus["citus"]),
                citus["nodes"]
            );
            // The median and, in brackets, the spread of the runs.
            for c in citus["candidates"].as_array().unwrap() {
                let unit = s(&c["unit"]);
                let cell = |median: &Value, runs: &Value| {
                    let runs: Vec<f64> = runs.as_array().unwrap().iter().map(f).collect();
                    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    match unit {
                        "s" => format!("{:.3} s ({lo:.3}..{hi:.3})", f(median)),
                        _ => format!("{:.0} tps ({lo:.0}..{hi:.0})", f(median)),
                    }
                };
                t += &format!(
                    "| {} | {} | {} | {:.2} |\n",
                    s(&c["label"]),
                    cell(&c["median_snowflake"], &c["snowflake"]),
                    cell(&c["median_bigserial"], &c["bigserial"]),
                    f(&c["snowflake_over_bigserial"])
                );
            }
        }
        other => panic!("no table {other}"),
    }
    t
}

/// The marker that opens a generated block: `<!-- bench pg18 bulk -->`; `<!-- end bench -->`
/// closes it.
fn marker(line: &str) -> Option<(&str, &str)> {
    let inner = line.strip_prefix("<!-- bench ")?.strip_suffix(" -->")?;
    inner.split_once(' ')
}

/// `markdown` with every generated block rendered anew from `data`; a block of a run that
/// `data` lacks is an error.
pub fn render(markdown: &str, data: &Value) -> Result<String, String> {
    let mut out = String::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        out += line;
        out += "\n";
        let Some((run, which)) = marker(line) else {
            continue;
        };
        let key = run.strip_prefix("pg").unwrap_or(run);
        let Some(run_data) = data["runs"].get(key) else {
            return Err(format!("{line}: docs/benchmarks.json has no run {key}"));
        };
        out += &table(run_data, which);
        loop {
            match lines.next() {
                Some("<!-- end bench -->") => {
                    out += "<!-- end bench -->\n";
                    break;
                }
                Some(_) => {}
                None => return Err(format!("{line}: no <!-- end bench -->")),
            }
        }
    }
    Ok(out)
}

/// A measured figure that a page may quote.
#[derive(Debug, Clone)]
pub struct Figure {
    /// ns, µs, x (a ratio), M ids/s, MB, instructions, min (the bench's duration).
    pub unit: &'static str,
    pub value: f64,
    pub what: String,
}

/// Every figure of the data file, by unit.
pub fn figures(data: &Value) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut add = |unit: &'static str, value: f64, what: String| {
        out.push(Figure { unit, value, what });
    };
    for (major, run) in data["runs"].as_object().into_iter().flatten() {
        let b = &run["bulk"];
        for c in b["candidates"].as_array().into_iter().flatten() {
            let name = s(&c["label"]);
            if let Some(ns) = c["per_id_ns"].as_f64() {
                add("ns", ns, format!("pg{major} bulk {name} per id"));
                add("µs", ns / 1000.0, format!("pg{major} bulk {name} per id"));
            }
            if let Some(r) = c["snowflake_over"].as_f64() {
                add("x", r, format!("pg{major} bulk snowflake / {name}"));
            }
        }
        add(
            "M ids/s",
            f(&b["one_backend_ids_per_s"]) / 1e6,
            format!("pg{major} bulk ids/s of one backend"),
        );
        add(
            "M ids/s",
            f(&b["layout_ids_per_s"]) / 1e6,
            "the twitter layout's ids/s (not measured)".into(),
        );
        for c in run["time_range"]["candidates"].as_array().into_iter().flatten() {
            let name = s(&c["label"]);
            add("x", f(&c["over_id_range"]), format!("pg{major} time range {name} / id range"));
            if let Some(r) = c["over_expression_index"].as_f64() {
                add("x", r, format!("pg{major} time range {name} / expression index"));
            }
        }
        for c in run["insert"]["candidates"].as_array().into_iter().flatten() {
            let name = s(&c["key"]);
            add("MB", f(&c["pkey_bytes"]) / 1048576.0, format!("pg{major} insert {name} pkey"));
            for (k, what) in [
                ("snowflake_over", "snowflake / {name}"),
                ("over_snowflake", "{name} / snowflake"),
                ("snowflake_over_second", "snowflake / {name}, second million"),
                ("over_snowflake_second", "{name} / snowflake, second million"),
                ("pkey_over_snowflake", "{name} pkey / snowflake pkey"),
            ] {
                if let Some(r) = c[k].as_f64() {
                    add("x", r, format!("pg{major} insert {}", what.replace("{name}", name)));
                }
            }
        }
        for c in run["citus"]["candidates"].as_array().into_iter().flatten() {
            add(
                "x",
                f(&c["snowflake_over_bigserial"]),
                format!("pg{major} citus {} snowflake / bigserial", s(&c["label"])),
            );
        }
        for (name, r) in run["pgbench"]["ratios"].as_object().into_iter().flatten() {
            add("x", f(r), format!("pg{major} pgbench {name}"));
        }
        if let Some(d) = run["duration_s"].as_f64() {
            add("min", d / 60.0, format!("pg{major} make bench duration"));
        }
    }
    let hot = &data["hotpath"];
    for (label, value) in hot["instructions_per_id"].as_object().into_iter().flatten() {
        add("instructions", f(value), format!("callgrind, {label}, per id"));
    }
    if let Some(budget) = budget() {
        add("instructions", budget, "the cost budget".into());
    }
    out
}

/// The hot path's budget in instructions per id, kept in scripts/hotpath-budget.
pub fn budget() -> Option<f64> {
    let text = std::fs::read_to_string(crate::root_dir().join("scripts/hotpath-budget")).ok()?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.parse().expect("scripts/hotpath-budget holds a number"))
}

/// The figures quoted in `text` (a page, a comment) that are no figure of the data file, rounded
/// as they are written: `file:line: 41.7 ns`. A figure is a number followed by one of the units
/// of `Figure` (a ratio, `0.15x` or `0.15×`, and a size in MB with a decimal point), or on a
/// line that names `make bench` (not bench-hotpath), a duration in minutes (`8 min`,
/// `~9 minutes`).
pub fn unmatched(file: &str, text: &str, figures: &[Figure]) -> Vec<String> {
    let mut bad = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (number, unit) in quoted(line) {
            let decimals = number.split('.').nth(1).map_or(0, str::len);
            let written: f64 = number.replace(',', "").parse().unwrap();
            let matches = figures.iter().any(|fig| {
                fig.unit == unit
                    && format!("{:.decimals$}", fig.value) == format!("{written:.decimals$}")
            });
            if !matches {
                bad.push(format!("{file}:{}: {number} {unit}", n + 1));
            }
        }
    }
    bad
}

/// (number, unit) of each figure on a line.
fn quoted(line: &str) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric() || b"_.-".contains(&bytes[i - 1])));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.') {
            j += 1;
        }
        let number = line[i..j].trim_end_matches('.').to_string();
        let rest = &line[i + number.len()..];
        let after = rest.trim_start_matches(' ');
        let spaced = rest.len() != after.len();
        // Ratios and index sizes are measured to a decimal; `{:08x}` and `512MB` are not
        // figures.
        let decimal = number.contains('.');
        let word_end = |s: &str, unit: &str| {
            s.strip_prefix(unit)
                .is_some_and(|r| !r.starts_with(|ch: char| ch.is_ascii_alphanumeric()))
        };
        let unit = if word_end(after, "ns") {
            Some("ns")
        } else if word_end(after, "µs") {
            Some("µs")
        } else if decimal && !spaced && (word_end(after, "x") || after.starts_with('×')) {
            Some("x")
        } else if word_end(after, "M ids/s") {
            Some("M ids/s")
        } else if decimal && word_end(after, "MB") {
            Some("MB")
        } else if after.starts_with("instructions") {
            Some("instructions")
        } else if line.contains("make bench")
            && !line.contains("bench-hotpath")
            && (word_end(after, "min") || after.starts_with("minutes"))
        {
            Some("min")
        } else {
            None
        };
        if let Some(unit) = unit {
            out.push((number, unit));
        }
        i = j;
    }
    out
}
