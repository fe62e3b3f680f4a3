# pg_snowflake. From a fresh Debian 12 machine, as root:
#   make check   the loop of a change, in seconds, with no PostgreSQL and no root: rustfmt,
#                clippy and the unit tests of core/ (layouts, the clock rule, marks, pacing, the
#                state file, networks), the mutation rows against the code, shellcheck, pyflakes
#   make run     install what is missing, build, install, start a demo cluster (PostgreSQL 15)
#   make test    every test layer on every supported major (15, 16, 17 with assertions, 18, and 19
#                in a Debian sid root: scripts/debian-root.sh)
#   make install build and install into the PostgreSQL that PG_CONFIG names
#   make package the Debian package postgresql-N-pg-snowflake in target/package/
#   make image   the extension image of 18 and 19 for CloudNativePG (an OCI layout in
#                target/image/, made from the package; see docs/kubernetes.md)
#   make repo    a signed apt repository of every major's package in target/repo/
#   make run-cluster  three shards and a hub that subscribes to them (logical replication)
#   make stop    stop the demo clusters
#   make bench   snowflake_next() against nextval(), bigserial and uuids in one cluster, and on
#                Citus against its bigserial, written to docs/benchmarks.json (its duration is
#                there too: duration_s)
#   make bench-hotpath  instructions per id of 0.2.0 and of this tree, by callgrind, in one run
#   make nemesis SEED=n [SECONDS=s]  seeded faults on a fleet, checked (see tests/replication/nemesis.rs)
#   make fuzz SEED=n [CASES=n] [LAYOUT=name]  the planner hook's differential test with one seed
#                for longer: CASES random statements (default 2000) on each layout, or on one,
#                hook on against off, in the build installed in PG_CONFIG's server
#
# PG=17 picks a major for any target (`make test PG=18`, `make run PG=17`, `make bench PG=18`;
# 19 only for test, repo and image, which go into its Debian root: scripts/debian-root.sh);
# PG_CONFIG=/path/to/pg_config picks a server directly for install, run and bench.
# `make test` runs 15 to 18 on this host, then 19 in its Debian root (`make test PG=19` runs only
# that).
PG_MAJORS := 15 16 17 18
# Majors built and tested inside a Debian root, not on this host: Debian packages 19 only for sid
# (experimental's binaries need sid's libc 2.43), and serves no source of it. `make test PG=19`
# runs every layer of 19 there (test-root).
ROOT_MAJORS := 19
ALL_MAJORS := $(PG_MAJORS) $(ROOT_MAJORS)
PG ?=
# pgrx 0.19.3 needs Rust 1.96 or later: stable where it is that new, else the newest installed
# toolchain (scripts/toolchain.sh). Every cargo that make and its scripts run uses it, and so do
# cargo-pgrx's own calls to cargo. The top-level make says which.
RUSTUP_TOOLCHAIN := $(shell scripts/toolchain.sh || echo FAILED)
ifeq ($(RUSTUP_TOOLCHAIN),FAILED)
$(error no Rust toolchain of 1.96 or later (see the line above); pgrx 0.19.3 needs one)
endif
ifneq ($(RUSTUP_TOOLCHAIN),)
export RUSTUP_TOOLCHAIN
endif
# A build with PG_SNOWFLAKE_MUTANT set has a guard removed (core/src/mutant.rs): scripts/mutations.sh
# builds those with cargo itself; no target here builds, tests or installs one.
ifneq ($(PG_SNOWFLAKE_MUTANT),)
$(error PG_SNOWFLAKE_MUTANT=$(PG_SNOWFLAKE_MUTANT) removes a guard (core/src/mutant.rs): unset it)
endif
# Every library keeps only the pgrx wrappers it calls, so that it loads on every minor of its
# major (see scripts/build-env.sh, which the scripts that build outside make source).
export CARGO_PGRX_DISABLE_GC_SECTIONS_WORKAROUND := 1
ifeq ($(MAKELEVEL),0)
# (Named in $(shell) too: GNU make before 4.4, Debian 12's 4.3, exports nothing to it, and it
# said rustc 1.95.0 beside the toolchain nightly.)
$(info ==> Rust: $(shell $(if $(RUSTUP_TOOLCHAIN),RUSTUP_TOOLCHAIN=$(RUSTUP_TOOLCHAIN) )rustc --version 2>/dev/null)$(if $(RUSTUP_TOOLCHAIN), (toolchain $(RUSTUP_TOOLCHAIN))))
endif
# The test binaries of tests/ do not link the extension, but cargo builds its crate for them with
# the bindings of its default feature, 15's. In a Debian root (/.pg_snowflake-root), which has no
# 15, with those of the root's major.
ifneq ($(wildcard /.pg_snowflake-root),)
TEST_FEATURES = --no-default-features --features pg$(ONE_MAJOR)
endif
# test: every major unless PG names some; the other targets: one major, 15 unless PG names one.
TEST_MAJORS := $(or $(PG),$(ALL_MAJORS))
REPO_MAJORS := $(or $(PG),$(ALL_MAJORS))
ONE_MAJOR := $(or $(firstword $(PG)),15)
PG_CONFIG ?= $(shell scripts/pg-config.sh $(ONE_MAJOR))
# cargo pgrx test's data directory: its parent becomes the socket directory, so keep it short,
# and outside the checkout, which may sit under /root where postgres cannot go.
PGRX_TEST_DIR ?= /tmp/pg_snowflake-pgrx

export PG_CONFIG

comma := ,
# The first line of each phase of `make test`: where its time goes (scripts/phase.sh).
PHASE = @scripts/phase.sh begin "$(ONE_MAJOR) $@"

# A PG_CONFIG given on the command line or in the environment names the user's own server:
# installing into it needs only what building needs. Otherwise the server of the major is
# installed too (see scripts/setup.sh).
ifneq ($(filter command line environment,$(origin PG_CONFIG)),)
INSTALL_SETUP := build --pg-config $(PG_CONFIG)
else
INSTALL_SETUP := run $(ONE_MAJOR)
endif

.PHONY: help check setup install package image repo tools run run-cluster stop test test-root test-in-root test-major test-lint test-unit test-sql test-pgrx test-blackbox test-package test-old-flag test-upgrade test-hotpath test-rmgr-id bench bench-hotpath fmt lint nemesis nemesis-run fuzz

# A bare `make` lists the targets (the comment at the top of this file) and does nothing else:
# every other target may install packages as root.
help:
	@awk '/^#/ { sub(/^# ?/, ""); print; next } { exit }' Makefile

# The loop of a change, with no PostgreSQL and no root: formatting, the core's lint and unit
# tests, every mutation row against the code, the shell and Python scripts' lint.
check:
	cargo fmt --all -- --check
	cargo clippy --quiet --all-targets -p pg_snowflake_core -- -D warnings
	cargo test --quiet -p pg_snowflake_core
	@scripts/mutations.sh --check
	@for tool in shellcheck pyflakes3; do command -v $$tool >/dev/null || { echo "make check: $$tool is missing (apt-get install $$tool)" >&2; exit 1; }; done
	shellcheck -S warning scripts/*.sh .ci/run tests/clients/install.sh
	pyflakes3 scripts/*.py

setup:
	@scripts/setup.sh $(INSTALL_SETUP)

# A running demo cluster has the library mapped; overwriting it in place could crash it.
# cargo pgrx installs the library, the install script it generates and the upgrade scripts of
# released steps (sql/); scripts/install-sql.sh adds the upgrade script to this release (made from
# sql/upgrade/) and the install scripts of earlier releases.
install: setup
	$(PHASE)
	@scripts/run.sh stop
	cargo pgrx install --release --pg-config "$$(command -v $(PG_CONFIG))"
	@scripts/install-sql.sh "$$(command -v $(PG_CONFIG))"

# The Debian package of this release for PG_CONFIG's major (see scripts/package.sh).
package: setup
	$(PHASE)
	scripts/package.sh "$$(command -v $(PG_CONFIG))"

# What the tests use besides PostgreSQL: faultfs, the file system of the power-loss tests.
tools:
	$(PHASE)
	cargo build --release --quiet --manifest-path tests/faultfs/Cargo.toml --target-dir target/faultfs

run: install
	@scripts/run.sh

run-cluster: install
	@scripts/run.sh cluster

stop:
	@scripts/run.sh stop

# First, in seconds and without a build, that every mutation row still applies to the code and
# that docs/testing.md lists the rows (scripts/mutations.sh --check). Then what the tests need
# (scripts/setup.sh), and lint. Then each major of this host
# in turn, every layer; the first failure stops the run. Then pg_upgrade from 17 to 18, when both
# are tested. Then the majors of Debian roots (19), each in its root, pg_upgrade from 18 there
# included.
HOST_TEST_MAJORS := $(filter-out $(ROOT_MAJORS),$(TEST_MAJORS))
test: export PG_SNOWFLAKE_PHASES := $(CURDIR)/target/test-phases.tsv
test:
	@mkdir -p target && scripts/phase.sh start
	@scripts/phase.sh begin "all mutations --check"
	@scripts/mutations.sh --check
	@scripts/phase.sh begin "all setup"
	@scripts/setup.sh test $(TEST_MAJORS)
	@scripts/phase.sh begin "all lint"
	@$(MAKE) --no-print-directory lint
	@for v in $(HOST_TEST_MAJORS); do \
	  printf '\033[1m==> PostgreSQL %s\033[0m\n' "$$v"; \
	  $(MAKE) --no-print-directory test-major PG=$$v PG_CONFIG="$$(scripts/pg-config.sh $$v)" || exit 1; \
	done
ifneq ($(and $(filter 17,$(TEST_MAJORS)),$(filter 18,$(TEST_MAJORS))),)
	@printf '\033[1m==> pg_upgrade from 17 to 18\033[0m\n'
	@$(MAKE) --no-print-directory test-upgrade
else ifneq ($(HOST_TEST_MAJORS),)
	@printf '\033[1m==> pg_upgrade not tested: it needs PG to include 17 and 18\033[0m\n'
endif
	@for v in $(filter $(ROOT_MAJORS),$(TEST_MAJORS)); do \
	  printf '\033[1m==> PostgreSQL %s, in the Debian sid root of scripts/debian-root.sh\033[0m\n' "$$v"; \
	  $(MAKE) --no-print-directory test-root PG=$$v || exit 1; \
	done
	@scripts/phase.sh end
	@printf '\033[1m==> where the time went\033[0m\n' && scripts/phase.sh table

# Every layer of 19 in its build root (scripts/debian-root.sh build sid-19: this checkout, with
# target/sid-19 as its target/), as test-major runs them here, then pg_upgrade from the root's
# Debian 18 to 19: the root's setup first (its test tools, made once), then test-in-root.
test-root:
	$(PHASE)
	scripts/debian-root.sh build sid-$(ONE_MAJOR) make --no-print-directory test-in-root PG=$(ONE_MAJOR)

# Only inside the root (test-root).
test-in-root:
	@[ -n "$$(grep -s '^sid-$(ONE_MAJOR) ' /.pg_snowflake-root)" ] || { echo "test-in-root runs inside the root of $(ONE_MAJOR): make test-root PG=$(ONE_MAJOR)" >&2; exit 1; }
	@scripts/setup.sh test $(ONE_MAJOR)
	@$(MAKE) --no-print-directory test-major PG=$(ONE_MAJOR)
	@printf '\033[1m==> pg_upgrade from 18 to %s\033[0m\n' "$(ONE_MAJOR)"
	@$(MAKE) --no-print-directory test-upgrade UPGRADE_FROM=18 UPGRADE_TO=$(ONE_MAJOR)

# test-pgrx installs its own build (with the test schema) into the server: the release build
# is installed after it, once (make runs `install` once), for test-sql and test-blackbox. The
# package test comes last: it installs and removes the package, and then the release build is
# installed again.
test-major: $(if $(wildcard /.pg_snowflake-root),test-lint) test-unit test-pgrx test-sql $(if $(filter 15,$(ONE_MAJOR)),test-hotpath) test-blackbox $(if $(filter 15,$(ONE_MAJOR)),test-rmgr-id) test-package $(if $(filter 16,$(ONE_MAJOR)),test-old-flag)

# pgspot on every install and upgrade script as installed (see scripts/install-sql.sh).
test-sql: install
	$(PHASE)
	@scripts/install-sql.sh "$$(command -v $(PG_CONFIG))" --lint

# The hot path's cost budget (scripts/hotpath-budget): instructions per id of the installed
# build, counted by callgrind on 15 (exact, in seconds; the other majors' builds differ a little
# and have no budget of their own).
test-hotpath: install
	$(PHASE)
	@scripts/callgrind.sh --budget

# The bit layout, the advance rule and the state file, without PostgreSQL (but built against
# this major's pgrx bindings, as everything else).
test-unit:
	$(PHASE)
	cargo test --quiet -p pg_snowflake_core
	cargo test --lib --no-default-features --features pg$(ONE_MAJOR) -- --skip pg_test

# clippy on this major's bindings alone: in the root of 19, where `make lint` does not run (on
# this host, `make lint` runs it for every major, LINT_MAJORS below).
test-lint:
	$(PHASE)
	cargo clippy --quiet --lib --no-default-features --features pg$(ONE_MAJOR) -- -D warnings

# #[pg_test]s in a server that cargo pgrx starts as postgres with the library preloaded.
test-pgrx:
	$(PHASE)
	@scripts/run.sh stop
	@scripts/own-dir.sh $(PGRX_TEST_DIR)
	rm -rf $(PGRX_TEST_DIR)/$(ONE_MAJOR)
	@scripts/own-dir.sh $(PGRX_TEST_DIR)/$(ONE_MAJOR)
	cargo pgrx test pg$(ONE_MAJOR) --runas postgres --pgdata $(PGRX_TEST_DIR)/$(ONE_MAJOR)/data

# tests/: each suite starts its own clusters against the release build installed into
# PG_CONFIG's server. The test binaries do not link the extension: one build serves every major.
# Three suites at a time, each suite's output together (scripts/test-suites.py; `cargo test --test
# NAME` runs one). The pg_upgrade tests need two majors: test-upgrade runs them.
# A suite whose file has a line `//! Majors: ...` runs on those majors only, and the others name
# it: what it tests is the same code on every major (most run on 17, the server built with
# assertions), or what it needs exists for some majors only (pg_auto_failover, Citus); the lines
# after the mark say why. Each runs on one of ALL_MAJORS at least (scripts/test-suites.py checks
# it), so a whole `make test` runs every suite.
test-blackbox: install tools
	$(PHASE)
	scripts/test-suites.py $(if $(TEST_FEATURES),$(TEST_FEATURES) --) --major=$(ONE_MAJOR) --majors="$(ALL_MAJORS)" --test-threads=2 --skip pg_upgrade --skip package_ --skip-suite=image

# The nemesis on seeds of your choice, for as long as asked, writing what it ran (seeds, faults,
# ids checked, availability) into docs/testing.md: `make nemesis SEED=7`, `make nemesis
# SEED=3,4,5 SECONDS=300` (seconds of faults per seed; default 120). A failing run prints its seed
# and schedule; the same SEED and SECONDS replay it.
# On 16 unless PG names another (15 is refused: see tests/replication/nemesis.rs).
nemesis:
	@$(MAKE) --no-print-directory nemesis-run PG=$(or $(PG),16) $(if $(filter command line environment,$(origin PG_CONFIG)),,PG_CONFIG="$$(scripts/pg-config.sh $(or $(PG),16))")

nemesis-run: install tools
	NEMESIS_SEEDS="$(or $(SEED),$$(date +%s))" NEMESIS_SECONDS="$(or $(SECONDS),120)" \
	  NEMESIS_REPORT=docs/testing.md cargo test $(TEST_FEATURES) --test nemesis -- --nocapture

# A build with another WAL resource manager id (PG_SNOWFLAKE_RMGR_ID, the way out of a clash
# with another extension's id, see README): it writes its marks under that id and a standby
# replays them. A debug build, whose dependencies test-pgrx has built, so only pg_snowflake is
# compiled (the mutation profile compiled pgrx-pg-sys too: 1 min 34 s on a fresh machine); then
# the release build goes back in. On 15: the id is the same code on every major.
# (Through REINSTALL: a line that names $(MAKE) itself runs under `make -n` too, and this one
# would run the test.)
REINSTALL = $(MAKE) --no-print-directory install
test-rmgr-id: install
	$(PHASE)
	PG_SNOWFLAKE_RMGR_ID=200 cargo pgrx install --pg-config "$$(command -v $(PG_CONFIG))"
	PG_SNOWFLAKE_RMGR_ID=200 cargo test --test wal_rmgr -- --test-threads=2 || { $(REINSTALL); exit 1; }
	@$(MAKE) --no-print-directory install

# The extension image's suite (tests/packaging/image.rs), on the majors its `//! Majors:` line
# names: it makes the image of the package `package` made (and the black-box suites leave it out).
IMAGE_SUITE = $(if $(filter $(ONE_MAJOR),$(shell scripts/test-suites.py --majors-of tests/packaging/image.rs)),--test image)

# Installs and removes the package, so alone; then the release build goes back in. Then the
# package in Debian's own PostgreSQL of this major (17: Debian 13's, 18: sid's), and the signed
# apt repository, each in a copy of a Debian root (scripts/debian-root.sh), never on this host.
test-package: package
	$(PHASE)
	cargo test $(TEST_FEATURES) --test package -- --test-threads=1
	@$(MAKE) --no-print-directory install
	@scripts/phase.sh begin "$(ONE_MAJOR) test-package: Debian's server, apt$(if $(IMAGE_SUITE),$(comma) the image)"
	cargo test $(TEST_FEATURES) --test debian --test repo $(IMAGE_SUITE) -- --test-threads=2

# 16.2, the one server with the synchronous-standby flag format from before May 2025
# (scripts/build-postgres.sh 16-old unpacked it), gets the files `make install` put into 16, as a
# package built for 16 runs on any 16.x (the library reads the flag by the running server's
# version), and runs tests/replication/sync_standby.rs. Copied, not built again: pgrx would rebuild its
# bindings for another pg_config, and again for 16 at the next run.
OLD_FLAG_PG_CONFIG = $(shell scripts/pg-config.sh 16-old)
test-old-flag:
	$(PHASE)
	cp "$$($(PG_CONFIG) --pkglibdir)/pg_snowflake.so" "$$($(OLD_FLAG_PG_CONFIG) --pkglibdir)/"
	cp "$$($(PG_CONFIG) --sharedir)"/extension/pg_snowflake* "$$($(OLD_FLAG_PG_CONFIG) --sharedir)/extension/"
	PG_CONFIG="$(OLD_FLAG_PG_CONFIG)" SNOWFLAKE_FLAG_FORMAT=bool cargo test --test sync_standby -- --test-threads=2

# A signed apt repository of this release's package for every major, in target/repo (see
# scripts/repo.sh; its key is made once into target/repo-key).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
repo:
	@for v in $(filter-out $(ROOT_MAJORS),$(REPO_MAJORS)); do \
	  scripts/setup.sh run $$v && \
	  $(MAKE) --no-print-directory package PG=$$v PG_CONFIG="$$(scripts/pg-config.sh $$v)" || exit 1; \
	done
	@# 19's package is built in its root (target/sid-19 there) and published with the others.
	@for v in $(filter $(ROOT_MAJORS),$(REPO_MAJORS)); do \
	  scripts/setup.sh test $$v && \
	  scripts/debian-root.sh build sid-$$v make --no-print-directory package PG=$$v && \
	  mkdir -p target/package && \
	  cp target/sid-$$v/package/postgresql-$$v-pg-snowflake_$(VERSION)-1_amd64.deb target/package/ || exit 1; \
	done
	scripts/repo.sh target/repo $(foreach v,$(REPO_MAJORS),target/package/postgresql-$(v)-pg-snowflake_$(VERSION)-1_amd64.deb)

# The extension image of each major from 18 up (or of PG), for CloudNativePG's image volumes:
# an OCI layout in target/image/pg_snowflake-<version>-<major>-<distro>, made from the major's
# package by scripts/image.sh (umoci, no container daemon); skopeo copies it to a registry
# (README, Installing). 19's is made in its root, and copied out.
IMAGE_MAJORS := $(or $(PG),18 19)
ifneq ($(wildcard /.pg_snowflake-root),)
IMAGE_ROOT_MAJORS :=
else
IMAGE_ROOT_MAJORS := $(filter $(ROOT_MAJORS),$(IMAGE_MAJORS))
endif
image:
	@for v in $(filter-out $(IMAGE_ROOT_MAJORS),$(IMAGE_MAJORS)); do \
	  case $$v in 1[5-7]) echo "PostgreSQL $$v has no extension_control_path: images are made for 18 and later" >&2; exit 2 ;; esac; \
	  scripts/setup.sh image $$v && \
	  $(MAKE) --no-print-directory package PG=$$v PG_CONFIG="$$(scripts/pg-config.sh $$v)" && \
	  scripts/image.sh target/package/postgresql-$$v-pg-snowflake_$(VERSION)-1_amd64.deb || exit 1; \
	done
	@for v in $(IMAGE_ROOT_MAJORS); do \
	  scripts/setup.sh test $$v && \
	  scripts/debian-root.sh build sid-$$v make --no-print-directory image PG=$$v && \
	  mkdir -p target/image && cp -a target/sid-$$v/image/pg_snowflake-$(VERSION)-$$v-* target/image/ || exit 1; \
	done

# pg_upgrade from UPGRADE_FROM to UPGRADE_TO: 17 to 18 here, 18 to 19 in the root of 19 (its
# Debian 18.6, see README).
UPGRADE_FROM ?= 17
UPGRADE_TO ?= 18
test-upgrade:
	@$(MAKE) --no-print-directory install PG=$(UPGRADE_FROM) PG_CONFIG="$$(scripts/pg-config.sh $(UPGRADE_FROM))"
	@$(MAKE) --no-print-directory install PG=$(UPGRADE_TO) PG_CONFIG="$$(scripts/pg-config.sh $(UPGRADE_TO))"
	@scripts/phase.sh begin "$(UPGRADE_FROM)-$(UPGRADE_TO) pg_upgrade"
	PG_CONFIG="$$(scripts/pg-config.sh $(UPGRADE_TO))" PG_UPGRADE_FROM_CONFIG="$$(scripts/pg-config.sh $(UPGRADE_FROM))" \
	  cargo test $(TEST_FEATURES) --test upgrade -- --test-threads=2

# Not part of `make test` (which runs tests/ids/time_ranges.rs with its fixed seeds): random
# statements with the time-range hook on and off, any difference in rows or SQLSTATE a failure
# that prints the statement and how to replay it. It installs nothing: it tests the build
# installed in PG_CONFIG's server, as the black-box suites do (`make install` first, or a
# mutation's build). Without SEED, each layout takes one from the clock, printed.
FUZZ_LAYOUTS := twitter discord sonyflake instagram js53 custom
fuzz:
	@$(if $(filter-out $(FUZZ_LAYOUTS),$(LAYOUT)),echo "LAYOUT=$(LAYOUT) is none of $(FUZZ_LAYOUTS)" >&2; exit 2)
	TIME_RANGES_FUZZ=1 $(if $(SEED),TIME_RANGES_SEED=$(SEED)) $(if $(CASES),TIME_RANGES_CASES=$(CASES)) \
	  cargo test $(TEST_FEATURES) --test time_ranges hook_on_and_off_agree_on_$(LAYOUT) -- --nocapture --test-threads=2

# Not part of `make test`: speed is judged as ratios in one run, not by timed tests. The run
# goes into docs/benchmarks.json, the one set of figures the pages quote (tests/docs/readme.rs checks
# every one against it), and the tables of docs/benchmarks.md are rendered from it.
# Citus is built into this project's servers only (scripts/build-citus.sh); in a server that
# PG_CONFIG names, the Citus part runs if Citus is there.
bench: install
ifeq ($(filter command line environment,$(origin PG_CONFIG)),)
	@scripts/build-citus.sh --missing-ok $(ONE_MAJOR)
endif
	cargo run --example bench

# Instructions per snowflake_next() of 0.2.0 and of this tree, counted by callgrind in one run
# (exact, so a change of a few instructions shows; see scripts/callgrind.sh), with random() and
# nextval() for scale, written to docs/benchmarks.json.
bench-hotpath: install
	BASELINE=0.2.0 scripts/callgrind.sh --record

fmt:
	cargo fmt --all
	cargo fmt --manifest-path tests/faultfs/Cargo.toml --all

# shellcheck, pyflakes, and rustfmt and clippy (every warning an error) on every crate: the
# extension with its tests, core/ and testkit, and faultfs and tests/kubernetes (workspaces of
# their own). make test runs it first, once. The extension's library is checked under each
# major's bindings (code under `cfg(feature = "pg18")` is compiled by no other: 0.6.0 called a
# `pqsignal` that 18 renamed, and only 18's unit tests, 38 minutes into a fresh run, found it):
# every major that pgrx knows here (`make setup`, `make test`), or LINT_MAJORS. About 20 s a
# major when its dependencies are checked, 54 s with nothing built. In 19's root, its test-lint
# does it for 19.
PGRX_CONFIG := $(or $(PGRX_HOME),$(HOME)/.pgrx)/config.toml
LINT_MAJORS ?= $(filter $(PG_MAJORS),$(shell sed -nE 's/^pg([0-9]+) = .*/\1/p' $(PGRX_CONFIG) 2>/dev/null))
lint:
	@for tool in shellcheck pyflakes3; do command -v $$tool >/dev/null || { echo "make lint: $$tool is missing: scripts/setup.sh test 15 installs it (apt-get install $$tool)" >&2; exit 1; }; done
	shellcheck -S warning scripts/*.sh .ci/run tests/clients/install.sh
	pyflakes3 scripts/*.py
	cargo fmt --all -- --check
	cargo fmt --manifest-path tests/faultfs/Cargo.toml --all -- --check
	cargo fmt --manifest-path tests/kubernetes/Cargo.toml --all -- --check
	cargo clippy --quiet --all-targets $(TEST_FEATURES) -- -D warnings
	@for v in $(LINT_MAJORS); do echo "cargo clippy --lib (PostgreSQL $$v)"; \
	  cargo clippy --quiet --lib --no-default-features --features pg$$v -- -D warnings || exit 1; done
	cargo clippy --quiet --all-targets -p pg_snowflake_core -p testkit -- -D warnings
	cargo clippy --quiet --all-targets --manifest-path tests/faultfs/Cargo.toml --target-dir target/faultfs -- -D warnings
	cargo clippy --quiet --locked --all-targets --manifest-path tests/kubernetes/Cargo.toml --target-dir target/kubernetes -- -D warnings
