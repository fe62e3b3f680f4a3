//! The programs of docs/clients.md, run as written: SQLAlchemy and Django (Python, from
//! target/venv-clients), node-postgres, Drizzle ORM, TypeORM and Kysely (node, from
//! tests/js/node_modules), installed from their registries at the versions
//! tests/clients/requirements.txt and tests/js/package-lock.json pin (tests/clients/install.sh
//! installs them); tokio-postgres (Rust, from crates.io, built with the guide's Cargo.toml and
//! this repository's Cargo.lock); ActiveRecord (Ruby), pgx (Go) and JDBC (Java) as Debian
//! packages them (scripts/setup.sh installs them).
//!
//! The guide is the single source of the programs. A program is a fenced block whose opening
//! line is preceded by `<!-- program: FILE -->`; the test writes it to FILE in a directory of
//! its own under target/, runs it (`.py` with the venv's python, `.mjs` with node, the
//! directory's `node_modules` a link to tests/js/node_modules, `.rb` with ruby, `.go` with
//! `go build` over Debian's Go sources, then run, `.java` with java and Debian's JDBC driver, `.rs` as the
//! main.rs of the crate of the tagged Cargo.toml before it), and what it prints must be
//! exactly the ```text block that follows it. A program reads the twitter-layout server from
//! `DATABASE_URL` and the js53-layout server from `JS53_DATABASE_URL`; the js53 server is
//! configured by the guide's ```conf block. The programs check the ids themselves (the ids they
//! got from the server default against `SELECT id::text ... ORDER BY id`) and fail on any
//! difference, so a passing run means every id arrived exactly, or, for the example of what
//! goes wrong, that the damage it describes happened.
//!
//! Majors: 15. What a client library does with a bigint is the same on every major.
#![cfg(not(feature = "pg_test"))]

use common::*;
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit as common;

/// Each recipe of the guide and its programs, run by the test of that name.
const RECIPES: &[(&str, &[&str])] = &[
    ("sqlalchemy", &["sqlalchemy_recipe.py"]),
    ("django", &["django_recipe.py"]),
    ("node_postgres", &["pg_bigint.mjs", "pg_js53.mjs", "pg_number_mistake.mjs"]),
    ("drizzle", &["drizzle_bigint.mjs", "drizzle_js53.mjs"]),
    ("typeorm", &["typeorm_recipe.mjs"]),
    ("kysely", &["kysely_recipe.mjs"]),
    ("activerecord", &["activerecord_recipe.rb"]),
    ("go_pgx", &["go_pgx_recipe.go"]),
    ("tokio_postgres", &["Cargo.toml", "tokio_postgres_recipe.rs"]),
    ("jdbc", &["JdbcRecipe.java"]),
];

const GUIDE: &str = "docs/clients.md";

/// How long one program may run: they take about a second.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn sqlalchemy_gets_the_ids_of_the_server_default() {
    run_recipe("sqlalchemy");
}

#[test]
fn django_gets_the_ids_of_the_server_default() {
    run_recipe("django");
}

#[test]
fn node_postgres_gets_exact_ids_as_bigint_or_as_js53_numbers() {
    run_recipe("node_postgres");
}

#[test]
fn drizzle_gets_exact_ids_as_bigint_or_as_js53_numbers() {
    run_recipe("drizzle");
}

#[test]
fn typeorm_gets_exact_ids_as_strings() {
    run_recipe("typeorm");
}

#[test]
fn kysely_gets_exact_ids_as_bigint() {
    run_recipe("kysely");
}

#[test]
fn activerecord_gets_the_ids_of_the_server_default() {
    run_recipe("activerecord");
}

#[test]
fn go_pgx_gets_exact_ids_as_int64() {
    run_recipe("go_pgx");
}

#[test]
fn tokio_postgres_gets_exact_ids_as_i64() {
    run_recipe("tokio_postgres");
}

#[test]
fn jdbc_gets_exact_ids_as_long() {
    run_recipe("jdbc");
}

/// No program of the guide goes untested, and every one shows its output.
#[test]
fn every_program_of_the_guide_is_run_by_a_test() {
    let in_guide: BTreeSet<String> = programs().into_iter().map(|p| p.file).collect();
    let run: BTreeSet<String> =
        RECIPES.iter().flat_map(|(_, files)| files.iter().map(|f| f.to_string())).collect();
    assert_eq!(
        in_guide, run,
        "the programs of {GUIDE} (left) and those the tests of tests/docs/clients.rs run (right) differ"
    );
    assert!(
        js53_conf().iter().any(|l| l.replace(' ', "") == "snowflake.layout=js53"),
        "the ```conf block of {GUIDE} does not set snowflake.layout = js53"
    );
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Block {
    lang: String,
    body: String,
    /// Line of the opening fence, 1-based.
    line: usize,
    /// The file name of a `<!-- program: FILE -->` line right above the fence.
    program: Option<String>,
}

fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    let mut previous = "";
    for (i, line) in markdown.lines().enumerate() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                let program = previous
                    .trim()
                    .strip_prefix("<!-- program:")
                    .and_then(|rest| rest.strip_suffix("-->"))
                    .map(|file| file.trim().to_string());
                current = Some(Block {
                    lang: lang.trim().into(),
                    body: String::new(),
                    line: i + 1,
                    program,
                })
            }
            (Some(_), Some("")) => blocks.push(current.take().unwrap()),
            (Some(b), _) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            (None, None) => {}
        }
        previous = line;
    }
    assert!(current.is_none(), "{GUIDE}: unclosed code block");
    blocks
}

fn guide_blocks() -> Vec<Block> {
    let text = std::fs::read_to_string(root().join(GUIDE))
        .unwrap_or_else(|e| panic!("cannot read {GUIDE}: {e}"));
    fenced_blocks(&text)
}

struct Program {
    file: String,
    body: String,
    line: usize,
    /// None for a manifest (Cargo.toml), which is written beside the programs, not run.
    expected: Option<String>,
}

/// The tagged programs of the guide, each with the ```text block that follows it.
fn programs() -> Vec<Program> {
    let blocks = guide_blocks();
    let mut programs: Vec<Program> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let Some(file) = &b.program else { continue };
        let wanted = match Path::new(file).extension().and_then(|e| e.to_str()) {
            Some("py") => "python",
            Some("mjs") => "js",
            Some("rb") => "ruby",
            Some("go") => "go",
            Some("rs") => "rust",
            Some("java") => "java",
            // A manifest the next program is built with: written, not run, no output.
            Some("toml") => "toml",
            _ => panic!(
                "{GUIDE} line {}: {file} is not .py, .mjs, .rb, .go, .rs, .java or .toml",
                b.line
            ),
        };
        assert_eq!(b.lang, wanted, "{GUIDE} line {}: {file} is in a ```{} block", b.line, b.lang);
        let expected = if wanted == "toml" {
            None
        } else {
            Some(blocks.get(i + 1).filter(|t| t.lang == "text").unwrap_or_else(|| {
                panic!(
                    "{GUIDE} line {}: {file} is not followed by a ```text block of its output",
                    b.line
                )
            }))
        };
        assert!(
            !programs.iter().any(|p| &p.file == file),
            "{GUIDE} line {}: a second program named {file}",
            b.line
        );
        programs.push(Program {
            file: file.clone(),
            body: b.body.clone(),
            line: b.line,
            expected: expected.map(|e| normalize(&e.body)),
        });
    }
    programs
}

/// The postgresql.conf lines of the js53 server: the guide's ```conf block.
fn js53_conf() -> Vec<String> {
    let blocks: Vec<Block> = guide_blocks().into_iter().filter(|b| b.lang == "conf").collect();
    assert_eq!(blocks.len(), 1, "{GUIDE} should have one ```conf block");
    blocks[0]
        .body
        .lines()
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Output lines without trailing blanks, and without blank lines at either end.
fn normalize(text: &str) -> String {
    text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n").trim().to_string()
}

fn venv_python() -> PathBuf {
    root().join("target/venv-clients/bin/python")
}

const INSTALL: &str = "run tests/clients/install.sh";

/// Fails, saying what to do, unless the venv holds every pin of requirements.txt.
fn require_python_packages() {
    let python = venv_python();
    assert!(python.exists(), "{} is missing: {INSTALL}", python.display());
    let out = Command::new(&python)
        .arg("-c")
        .arg(
            "import sys\n\
             from importlib import metadata\n\
             for line in open(sys.argv[1]):\n\
             \x20   line = line.split('#')[0].strip()\n\
             \x20   if not line: continue\n\
             \x20   name, version = line.split('==')\n\
             \x20   name = name.split('[')[0]\n\
             \x20   try: have = metadata.version(name)\n\
             \x20   except metadata.PackageNotFoundError: have = 'nothing'\n\
             \x20   if have != version: print(f'{name} {version} is wanted, {have} is installed')\n",
        )
        .arg(root().join("tests/clients/requirements.txt"))
        .output()
        .expect("the venv's python runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && report.trim().is_empty(),
        "the Python packages of tests/clients/requirements.txt are not installed in {}: {INSTALL}\n{report}{}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fails, saying what to do, unless tests/js/node_modules holds every dependency of
/// tests/js/package.json at its version.
fn require_node_modules() {
    let js = root().join("tests/js");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(js.join("package.json")).unwrap()).unwrap();
    let mut wrong = Vec::new();
    for (name, version) in manifest["dependencies"].as_object().unwrap() {
        let installed =
            std::fs::read_to_string(js.join("node_modules").join(name).join("package.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|p| p["version"].as_str().map(str::to_string));
        if installed.as_deref() != version.as_str() {
            wrong.push(format!(
                "{name} {} is wanted, {} is installed",
                version.as_str().unwrap_or("?"),
                installed.as_deref().unwrap_or("nothing")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the npm packages of tests/js/package.json are not installed: {INSTALL}\n{}",
        wrong.join("\n")
    );
}

fn url(cluster: &Cluster) -> String {
    format!("postgresql://postgres@127.0.0.1:{}/postgres", cluster.port)
}

/// A directory under target/ for one recipe's programs, removed when the recipe passed.
struct Workdir(PathBuf);

impl Drop for Workdir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the programs are in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
            // target/clients itself, once no other recipe uses it.
            let _ = std::fs::remove_dir(self.0.parent().unwrap());
        }
    }
}

/// Runs the programs of one recipe, each against the servers it names, and compares what
/// each prints with the guide.
fn run_recipe(recipe: &str) {
    let files = RECIPES
        .iter()
        .find(|(name, _)| *name == recipe)
        .unwrap_or_else(|| panic!("no recipe {recipe}"))
        .1;
    let all = programs();
    let programs: Vec<&Program> = files
        .iter()
        .map(|f| {
            all.iter()
                .find(|p| p.file == *f)
                .unwrap_or_else(|| panic!("{GUIDE} has no program {f} (<!-- program: {f} -->)"))
        })
        .collect();
    if programs.iter().any(|p| p.file.ends_with(".py")) {
        require_python_packages();
    }
    if programs.iter().any(|p| p.file.ends_with(".mjs")) {
        require_node_modules();
    }
    for p in &programs {
        require_runtime(&p.file);
    }

    // A program names the servers it uses through the variables it reads.
    let wants_js53 = programs.iter().any(|p| p.body.contains("JS53_DATABASE_URL"));
    let wants_twitter =
        programs.iter().any(|p| p.body.replace("JS53_DATABASE_URL", "").contains("DATABASE_URL"));
    let twitter = wants_twitter.then(|| {
        let c = Cluster::start_new(&format!("clients_{recipe}_twitter"), &[]);
        c.connect_ext();
        c
    });
    let js53 = wants_js53.then(|| {
        let conf = js53_conf();
        let conf: Vec<&str> = conf.iter().map(String::as_str).collect();
        let c = Cluster::start_new(&format!("clients_{recipe}_js53"), &conf);
        c.connect_ext();
        c
    });

    let dir = Workdir(root().join(format!("target/clients/{recipe}-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    std::os::unix::fs::symlink(root().join("tests/js/node_modules"), dir.0.join("node_modules"))
        .unwrap();

    for p in programs {
        // A Rust program is the main.rs of the crate the guide's Cargo.toml describes.
        let path =
            if p.file.ends_with(".rs") { dir.0.join("src/main.rs") } else { dir.0.join(&p.file) };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &p.body).unwrap();
        let Some(expected) = &p.expected else {
            continue;
        };
        let mut cmd = runner(&p.file, &path, &dir.0);
        cmd.current_dir(&dir.0).env_remove("DATABASE_URL").env_remove("JS53_DATABASE_URL");
        if let Some(c) = &twitter {
            cmd.env("DATABASE_URL", url(c));
        }
        if let Some(c) = &js53 {
            cmd.env("JS53_DATABASE_URL", url(c));
        }
        let (success, stdout, stderr) = run_with_timeout(cmd, &p.file);
        let printed = normalize(&stdout);
        assert!(
            success,
            "{} ({GUIDE} line {}) failed:\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
            p.file, p.line
        );
        assert!(
            &printed == expected,
            "{} ({GUIDE} line {}) printed other lines than the guide shows\n\
             --- the guide ---\n{}\n--- printed ---\n{printed}\n--- stderr ---\n{stderr}",
            p.file,
            p.line,
            expected
        );
        eprintln!("{}: ran as the guide shows", p.file);
    }
}

/// Where the Go recipes find pgx: Debian's packaged sources (golang-github-jackc-pgx-v4-dev),
/// used in GOPATH mode, without any module download.
const GO_PATH: &str = "/usr/share/gocode";
/// Debian's JDBC driver (libpostgresql-jdbc-java).
const JDBC_JAR: &str = "/usr/share/java/postgresql.jar";

/// Fails, saying what to install, unless the language of `file` and its client are here.
fn require_runtime(file: &str) {
    let install = "run scripts/setup.sh test, which installs it";
    let works = |program: &str, args: &[&str]| {
        Command::new(program).args(args).output().is_ok_and(|o| o.status.success())
    };
    match Path::new(file).extension().and_then(|e| e.to_str()) {
        Some("rb") => assert!(
            works("ruby", &["-e", "require 'active_record'; require 'pg'"]),
            "Ruby with ActiveRecord and pg (Debian's ruby-activerecord, ruby-pg) is missing: {install}"
        ),
        Some("go") => assert!(
            works("go", &["version"])
                && Path::new(GO_PATH)
                    .join("src/github.com/jackc/pgx/v4/go.mod")
                    .exists(),
            "Go with pgx (Debian's golang-go, golang-github-jackc-pgx-v4-dev) is missing: {install}"
        ),
        Some("java") => assert!(
            works("java", &["-version"]) && Path::new(JDBC_JAR).exists(),
            "Java with the JDBC driver (Debian's default-jdk-headless, libpostgresql-jdbc-java) is missing: {install}"
        ),
        _ => {}
    }
}

/// The command that runs one program of the guide (written at `path`, in `dir`).
fn runner(file: &str, path: &Path, dir: &Path) -> Command {
    match Path::new(file).extension().and_then(|e| e.to_str()) {
        Some("py") => {
            let mut c = Command::new(venv_python());
            c.env("PYTHONDONTWRITEBYTECODE", "1").arg(path);
            c
        }
        Some("mjs") => {
            let mut c = Command::new("node");
            c.arg(path);
            c
        }
        Some("rb") => {
            let mut c = Command::new("ruby");
            c.arg(path);
            c
        }
        Some("go") => {
            // GOPATH mode over Debian's sources: no module proxy, no download. Built first, as
            // the Rust recipe is, with more time than a program gets: the first build compiles
            // pgx and the standard library (62 s with sid's Go 1.27 on 2 idle cores, more than
            // the 120 s a program gets while other suites run), later ones take 0.6 s.
            let program = dir.join("go_recipe");
            let out = Command::new("go")
                .args(["build", "-o"])
                .arg(&program)
                .arg(path)
                .env("GO111MODULE", "off")
                .env("GOPATH", GO_PATH)
                .env("GOPROXY", "off")
                .env("GOFLAGS", "")
                .env("GOTOOLCHAIN", "local")
                .env("GOCACHE", root().join("target/clients-go-cache"))
                .output()
                .unwrap();
            check(out, "go build of the Go recipe");
            Command::new(program)
        }
        Some("java") => {
            let mut c = Command::new("java");
            c.args(["-cp", JDBC_JAR]).arg(path);
            c
        }
        Some("rs") => {
            // Built first, with more time than a program gets (the first build compiles tokio
            // and the driver: about a minute), in a target directory kept between runs, with
            // the versions of this repository's Cargo.lock where it has them.
            std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
            let target = root().join("target/clients-rust");
            // On the machine's network: the first build downloads the recipe's crates.
            let out = private_network::with_host_network(
                Command::new("cargo")
                    .args(["build", "--quiet", "--manifest-path"])
                    .arg(dir.join("Cargo.toml"))
                    .env("CARGO_TARGET_DIR", &target),
            )
            .output()
            .unwrap();
            check(out, "cargo build of the Rust recipe");
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
                .expect("the Cargo.toml of the guide names its package");
            Command::new(target.join("debug").join(name))
        }
        _ => unreachable!("programs() accepts no other file"),
    }
}

/// Runs `cmd` to its end, or kills it after PROGRAM_TIMEOUT: whether it succeeded, its stdout
/// and its stderr.
fn run_with_timeout(mut cmd: Command, what: &str) -> (bool, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PROGRAM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    match status {
        Some(status) => (status.success(), stdout, stderr),
        None => panic!(
            "{what} did not end within {PROGRAM_TIMEOUT:?}:\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        ),
    }
}
