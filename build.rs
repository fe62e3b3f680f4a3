//! pg_snowflake links libpq, PostgreSQL's client library, for the worker-id registry's background
//! worker (src/registry/), as dblink, postgres_fdw and pglogical do: Debian's `libpq-dev` for
//! building (scripts/setup.sh installs it), `libpq5` at run time.

fn main() {
    println!("cargo:rerun-if-env-changed=PG_CONFIG");
    println!("cargo:rustc-link-lib=dylib=pq");
}
