#!/usr/bin/env python3
"""Runs the black-box suites of tests/, several at a time, each suite's output kept together.

    scripts/test-suites.py [CARGO_ARGS... --] [LIBTEST_ARGS...]

Each suite is its own test binary and starts its own clusters; most of their time is spent
waiting on servers (fsync, replication, failover, timeouts), with the CPU mostly idle. One
after another they took 9 min 13 s on 15 here, on 2 cores; in two lanes, 4 min 57 s. A third
lane took 18's from 234 s to 181 s and 17's from 598 s to 467 s (2026-11-27); the fourth is
untried.

- Lanes: PG_SNOWFLAKE_TEST_LANES (default 3). A suite whose file has a line starting with
  `//! Runs alone` asserts on latencies or speeds that other suites' load would skew: it runs
  after the others, by itself.
- Each running suite gets PG_SNOWFLAKE_TEST_LANE=k/n: tests/common's free_port takes its ports
  from the k-th of n blocks below the kernel's ephemeral range, so two suites never give one
  port to two servers.
- Longest first, by the time each suite took last time (target/test-suites/times.json); a suite
  not timed yet goes first.
- A suite's output goes to target/test-suites/NAME.log while it runs, and is printed whole when
  it ends. A suite still running after PG_SNOWFLAKE_SUITE_TIMEOUT seconds (default 600; the
  longest, the nemesis on 16, took 175 s on a 2-core machine) is killed, with its process group,
  and fails: a hung test costs a run 10 minutes, not more.
- The first failure stops the scheduling of new suites; the running ones finish (killing them
  would leave their clusters running), and the run exits with the failed suites' names.
- Majors: `--major=N --majors="15 16 ..."` (the Makefile gives both) run on major N the suites
  meant for it (`scripts/test-suites.py --majors-of FILE [--majors="15 16 ..."]` prints a
  suite's, checked as a run checks it). A suite whose file has a line `//! Majors: 15 17.` runs on those majors only: what
  it tests is the same code on every major (or a tool it needs exists for those only), and the
  lines after it say why. A mark may name only majors of --majors (so that every suite runs on
  one of them at least), else the run stops; the suites left out of this major are named.
- LIBTEST_ARGS go to every suite (`--test-threads=2 --skip pg_upgrade`), except
  `--skip-suite=NAME`, which leaves out the suite NAME, saying so; CARGO_ARGS, before a `--`, go
  to the build (`--no-default-features --features pg19` in the root of 19, which has no 15 for
  the default feature's bindings).
"""
import json
import re
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "target/test-suites"
TIMES = OUT / "times.json"
SOURCES = {}  # suite -> its file, as cargo built it
ALONE_MARK = "//! Runs alone"
MAJORS_MARK = re.compile(r"^//! Majors: ([0-9]+(?: [0-9]+)*)\.(?: |$)")
BOLD, PLAIN = ("\033[1m", "\033[0m") if sys.stdout.isatty() else ("", "")


def build(cargo_args: list) -> dict:
    """Builds every suite of tests/; returns {name: (executable, source file)}."""
    out = subprocess.run(
        ["cargo", "test", "--no-run", "--test", "*", "--message-format=json-render-diagnostics"]
        + cargo_args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"test-suites: the build failed ({out.returncode})")
    suites = {}
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue  # what a build script or proc macro printed
        msg = json.loads(line)
        target = msg.get("target", {})
        if msg.get("reason") == "compiler-artifact" and "test" in target.get("kind", []):
            suites[target["name"]] = (msg["executable"], target["src_path"])
    # Every file of a folder of suites (tests/ids, tests/durability, ...: any folder of tests/
    # without a mod.rs or a Cargo.toml) is a suite that must run: one that Cargo.toml does not
    # name would otherwise be missing from a green run without a word.
    files = {p.stem for p in suite_files()}
    if files - suites.keys():
        sys.exit(f"test-suites: cargo built no suite of {', '.join(sorted(files - suites.keys()))}")
    return suites


def suite_files() -> list:
    """The files of the folders of suites."""
    folders = [
        d for d in (ROOT / "tests").iterdir()
        if d.is_dir() and not (d / "mod.rs").exists() and not (d / "Cargo.toml").exists()
    ]
    return [f for d in folders for f in d.glob("*.rs")]


def runs_alone(source: str) -> bool:
    lines = pathlib.Path(source).read_text().splitlines()
    return any(line.startswith(ALONE_MARK) for line in lines)


def majors_of(source: str, tested=None) -> list:
    """The majors a suite's `//! Majors:` line names; [] when it has none (every major). A line
    that starts like a mark but is not one stops the run: it would run the suite everywhere. So
    does a mark naming a major outside `tested` (the majors of the whole run, when known): the
    suite would run nowhere."""
    try:
        text = pathlib.Path(source).read_text()
    except OSError as e:
        sys.exit(f"test-suites: {source}: {e.strerror}")
    lines = [l for l in text.splitlines() if l.startswith("//! Majors")]
    # mutant: suite_marks
    bad = [l for l in lines if not MAJORS_MARK.match(l)]
    if bad:
        sys.exit(f"test-suites: {source}: {bad[0]!r} is not `//! Majors: 15 17.` (majors, spaces, a period)")
    if len(lines) > 1:
        sys.exit(f"test-suites: {source} has {len(lines)} lines `//! Majors:`, where one is allowed")
    marked = MAJORS_MARK.match(lines[0]).group(1).split() if lines else []
    if tested is not None and set(marked) - set(tested):
        sys.exit(f"test-suites: {source} is marked for {' '.join(marked)}, beyond the majors {' '.join(tested)}")
    return marked


class Run:
    """The lanes free, the suites failed and the time each took; one lock guards them."""

    def __init__(self, lanes: int, args: list, timeout: float):
        self._lanes = lanes
        self._args = args
        self._timeout = timeout
        self._free = list(range(lanes))
        self._lock = threading.Condition()
        self._failed = []
        self._took = {}

    def suite(self, name: str, exe: str) -> None:
        """Starts the suite once a lane is free; nothing once a suite has failed."""
        with self._lock:
            while not self._free:
                self._lock.wait()
            if self._failed:
                return
            lane = self._free.pop(0)
        threading.Thread(target=self._run, args=(name, exe, lane)).start()

    def _run(self, name: str, exe: str, lane: int) -> None:
        log = OUT / f"{name}.log"
        started = time.monotonic()
        verdict = None
        try:
            env = dict(os.environ, PG_SNOWFLAKE_TEST_LANE=f"{lane}/{self._lanes}")
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [exe] + self._args,
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                try:
                    code = proc.wait(timeout=self._timeout)
                    verdict = None if code == 0 else f"FAILED ({code})"
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    verdict = f"FAILED (still running after {self._timeout:.0f} s: killed)"
        except Exception:
            verdict = "FAILED (the runner could not run it)"
            with open(log, "ab") as out:
                out.write(traceback.format_exc().encode())
        finally:
            took = time.monotonic() - started
            with self._lock:
                if verdict:
                    self._failed.append(name)
                else:
                    # Only a whole run is a suite's time: one cut short would go last next time.
                    self._took[name] = round(took, 1)
                self._free.append(lane)
                self._lock.notify_all()
                try:
                    source = os.path.relpath(SOURCES.get(name, name), ROOT)
                    head = f"{BOLD}--> {source}: {verdict or 'ok'}, {took:.0f} s{PLAIN}\n"
                    sys.stdout.buffer.write(head.encode())
                    sys.stdout.buffer.write(log.read_bytes())
                    sys.stdout.buffer.flush()
                except Exception:
                    pass  # a closed stdout: the verdict is recorded, and the log is on disk

    def finish(self) -> tuple:
        """Waits for every running suite; returns (the failed suites, each suite's seconds)."""
        with self._lock:
            while len(self._free) < self._lanes:
                self._lock.wait()
            return list(self._failed), dict(self._took)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--majors-of"] and len(args) in (2, 3):
        # For scripts/setup.sh, which builds Citus into the majors its suite runs on.
        tested = args[2].split("=", 1)[1].split() if args[2:3] and args[2].startswith("--majors=") else None
        if len(args) == 3 and tested is None:
            sys.exit("test-suites: --majors-of FILE takes --majors=\"15 16 ...\" after it, or nothing")
        print(" ".join(majors_of(args[1], tested)))
        return
    cargo_args = []
    if "--" in args:
        cut = args.index("--")
        cargo_args, args = args[:cut], args[cut + 1 :]
    left_out = [a.split("=", 1)[1] for a in args if a.startswith("--skip-suite=")]
    major = next((a.split("=", 1)[1] for a in args if a.startswith("--major=")), None)
    majors = next((a.split("=", 1)[1].split() for a in args if a.startswith("--majors=")), None)
    args = [a for a in args if not a.startswith(("--skip-suite=", "--major=", "--majors="))]
    lanes = int(os.environ.get("PG_SNOWFLAKE_TEST_LANES", "3"))
    timeout = float(os.environ.get("PG_SNOWFLAKE_SUITE_TIMEOUT", "600"))
    if not 1 <= lanes <= 16:
        sys.exit("test-suites: PG_SNOWFLAKE_TEST_LANES must be 1 to 16")
    suites = build(cargo_args)
    SOURCES.update({name: source for name, (_, source) in suites.items()})
    unknown = [s for s in left_out if s not in suites]
    if unknown:
        sys.exit(f"test-suites: no suite named {', '.join(unknown)}")
    # Every suite's mark is checked, those left out by --skip-suite too.
    marks = {name: majors_of(source, majors) for name, (_, source) in suites.items()}
    for name in left_out:
        del suites[name]
    if left_out:
        print(f"test-suites: left out (--skip-suite): {', '.join(left_out)}", flush=True)
    elsewhere = []
    for name, marked in sorted(marks.items()):
        if not marked:
            continue
        if majors is None or major is None:
            sys.exit(f"test-suites: {name} runs on some majors only: give --major and --majors")
        if major not in marked and name in suites:
            elsewhere.append(f"{name} (on {', '.join(marked)})")
            del suites[name]
    if elsewhere:
        print(f"test-suites: on other majors (their `//! Majors:` line says why): {'; '.join(elsewhere)}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        last = {}
    order = sorted(suites, key=lambda s: (-last.get(s, float("inf")), s))
    alone = [s for s in order if runs_alone(suites[s][1])]
    together = [s for s in order if s not in alone]
    started = time.monotonic()
    took = {}
    failed = []
    for names, width in ((together, lanes), (alone, 1)):
        run = Run(width, args, timeout)
        for name in names:
            run.suite(name, suites[name][0])
        f, t = run.finish()
        failed += f
        took.update(t)
        if failed:
            break
    TIMES.write_text(json.dumps(dict(last, **took), indent=1, sort_keys=True) + "\n")
    print(
        f"test-suites: {len(took)} of {len(suites)} suites passed in {time.monotonic() - started:.0f} s "
        f"({lanes} lanes; alone: {', '.join(alone) or 'none'})",
        flush=True,
    )
    if failed:
        sys.exit(f"test-suites: failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
