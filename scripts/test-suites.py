#!/usr/bin/env python3
"""Runs the black-box suites of tests/, several at a time, each suite's output kept together.

    scripts/test-suites.py [LIBTEST_ARGS...]

Each suite is its own test binary and starts its own clusters; most of their time is spent
waiting on servers (fsync, replication, failover, timeouts), with the CPU mostly idle. One
after another they took 9 min 13 s on 15 here, on 2 cores; in two lanes they take about half.

- Lanes: PG_SNOWFLAKE_TEST_LANES (default 2). A suite whose file has a line starting with
  `//! Runs alone` asserts on latencies or speeds that other suites' load would skew: it runs
  after the others, by itself.
- Each running suite gets PG_SNOWFLAKE_TEST_LANE=k/n; tests/common's free_port hands out only
  ports p with p % n == k, so two suites never give one port to two servers.
- Longest first: the time each suite took last time is kept in target/test-suites/times.json.
- A suite's output is printed when it ends, whole. The first failure stops the scheduling of
  new suites; the running ones finish (killing them would leave their clusters running), and
  the run exits with the failed suites' names.
- LIBTEST_ARGS go to every suite (`--test-threads=2 --skip pg_upgrade`).
"""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMES = ROOT / "target/test-suites/times.json"
ALONE_MARK = "//! Runs alone"


def build() -> dict:
    """Builds every suite of tests/ and returns {suite name: executable}."""
    out = subprocess.run(
        ["cargo", "test", "--no-run", "--test", "*", "--message-format=json-render-diagnostics"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    ).stdout
    suites = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            if "test" in msg["target"]["kind"]:
                suites[msg["target"]["name"]] = msg["executable"]
    if not suites:
        sys.exit("test-suites: cargo built no test suite")
    return suites


def runs_alone(name: str) -> bool:
    source = ROOT / "tests" / f"{name}.rs"
    return any(line.startswith(ALONE_MARK) for line in source.read_text().splitlines())


class Run:
    """The suites still to run, the lanes free, and what has ended; one lock guards them."""

    def __init__(self, lanes: int, args: list):
        self._lanes = lanes
        self._args = args
        self._free = list(range(lanes))
        self._lock = threading.Condition()
        self._failed = []
        self._took = {}

    def suite(self, name: str, exe: str) -> None:
        with self._lock:
            while not self._free:
                self._lock.wait()
            if self._failed:
                return
            lane = self._free.pop(0)
        threading.Thread(target=self._run, args=(name, exe, lane)).start()

    def _run(self, name: str, exe: str, lane: int) -> None:
        env = dict(os.environ, PG_SNOWFLAKE_TEST_LANE=f"{lane}/{self._lanes}")
        started = time.monotonic()
        done = subprocess.run(
            [exe] + self._args,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        took = time.monotonic() - started
        with self._lock:
            verdict = "ok" if done.returncode == 0 else f"FAILED ({done.returncode})"
            sys.stdout.write(f"\033[1m--> tests/{name}.rs: {verdict}, {took:.0f} s\033[0m\n")
            sys.stdout.write(done.stdout.decode(errors="replace"))
            sys.stdout.flush()
            self._took[name] = round(took, 1)
            if done.returncode != 0:
                self._failed.append(name)
            self._free.append(lane)
            self._lock.notify_all()

    def finish(self) -> tuple:
        """Waits for every running suite; returns (the failed suites, each suite's seconds)."""
        with self._lock:
            while len(self._free) < self._lanes:
                self._lock.wait()
            return list(self._failed), dict(self._took)


def main() -> None:
    args = sys.argv[1:]
    lanes = int(os.environ.get("PG_SNOWFLAKE_TEST_LANES", "2"))
    if lanes < 1:
        sys.exit("test-suites: PG_SNOWFLAKE_TEST_LANES must be 1 or more")
    suites = build()
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        last = {}
    order = sorted(suites, key=lambda s: (-last.get(s, 0), s))
    together = [s for s in order if not runs_alone(s)]
    alone = [s for s in order if runs_alone(s)]
    started = time.monotonic()
    took = {}
    failed = []
    for names, width in ((together, lanes), (alone, 1)):
        run = Run(width, args)
        for name in names:
            run.suite(name, suites[name])
        f, t = run.finish()
        failed += f
        took.update(t)
        if failed:
            break
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(dict(last, **took), indent=1, sort_keys=True) + "\n")
    print(
        f"test-suites: {len(took)} of {len(suites)} suites in {time.monotonic() - started:.0f} s "
        f"({lanes} lanes; alone: {', '.join(alone) or 'none'})"
    )
    if failed:
        sys.exit(f"test-suites: failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
