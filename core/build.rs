//! A build with `PG_SNOWFLAKE_MUTANT` set compiles a guard's removed branch (src/mutant.rs): it
//! says so in every build that uses this crate, so that a hand-run `cargo pgrx install` with the
//! variable left in the shell is not mistaken for a real build.
fn main() {
    println!("cargo:rerun-if-env-changed=PG_SNOWFLAKE_MUTANT");
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(name) = std::env::var_os("PG_SNOWFLAKE_MUTANT").filter(|name| !name.is_empty()) {
        println!(
            "cargo:warning=PG_SNOWFLAKE_MUTANT={}: this build removes that guard (scripts/mutations.sh); never install it",
            name.to_string_lossy()
        );
    }
}
