# pg_snowflake. From a fresh Debian 12 machine, as root:
#   make run     install what is missing, build, install, start a demo cluster
#   make test    every test layer; non-zero exit on any failure
#   make install build and install into the PostgreSQL that PG_CONFIG names
#   make stop    stop the demo cluster
#   make bench   snowflake_next() against nextval(), bigserial and uuid in one cluster (~5 min)
PG_CONFIG ?= pg_config
# cargo pgrx test's data directory: its parent becomes the socket directory, so keep it short,
# and outside the checkout, which may sit under /root where postgres cannot go.
PGRX_TEST_DIR ?= /tmp/pg_snowflake-pgrx

export PG_CONFIG

.PHONY: setup install run stop test test-unit test-pgrx test-blackbox bench fmt lint

setup:
	@scripts/setup.sh

# A running demo cluster has the library mapped; overwriting it in place could crash it.
install: setup
	@scripts/run.sh stop
	cargo pgrx install --release --pg-config "$$(command -v $(PG_CONFIG))"

run: install
	@scripts/run.sh

stop:
	@scripts/run.sh stop

test: setup test-unit test-pgrx test-blackbox

# The bit layout and the advance rule, without PostgreSQL.
test-unit:
	cargo test --lib -- --skip pg_test

# #[pg_test]s in a server that cargo pgrx starts as postgres with the library preloaded.
test-pgrx:
	@scripts/run.sh stop
	mkdir -p $(PGRX_TEST_DIR) && chown postgres:postgres $(PGRX_TEST_DIR)
	cargo pgrx test pg15 --runas postgres --pgdata $(PGRX_TEST_DIR)/data

# tests/: each suite starts its own clusters against the installed release build.
test-blackbox: install
	cargo test --test '*' -- --test-threads=2

# Not part of `make test`: speed is judged as ratios in one run, not by timed tests.
bench: install
	cargo run --example bench

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
