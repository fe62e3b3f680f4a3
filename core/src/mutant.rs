//! Mutation points: each guard that a test must catch is written
//! `mutant!(name, { kept }, { removed })` at its place in the code. A build with
//! `PG_SNOWFLAKE_MUTANT=name` in its environment compiles the removed branch there and the kept
//! one everywhere else (scripts/mutations.sh builds and tests one such build a guard). The choice
//! is a constant, so an ordinary build carries no trace of it; and both branches type-check in
//! every build, so a change that breaks a mutation breaks the build instead of silently leaving a
//! guard untested, as a text substitution that no longer matches did.

/// Whether the build was asked to remove the guard `name`: compares `PG_SNOWFLAKE_MUTANT`, as
/// the compiler read it, with the name, in a constant.
pub const fn on(chosen: Option<&str>, name: &str) -> bool {
    let Some(chosen) = chosen else { return false };
    let (a, b) = (chosen.as_bytes(), name.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `mutant!(name, { kept }, { removed })`: the kept block, unless this build removes the guard
/// `name` (see the module's comment). Both blocks have one type; either may `return`.
#[macro_export]
macro_rules! mutant {
    ($name:ident, $kept:block, $removed:block) => {{
        const REMOVED: bool = $crate::mutant::on(
            ::core::option_env!("PG_SNOWFLAKE_MUTANT"),
            ::core::stringify!($name),
        );
        if REMOVED $removed else $kept
    }};
}

/// Whether `part` occurs exactly once in `text`: `mutant_text!` asserts it of each of its
/// substitutions in a constant, so that the compiler refuses one that no longer matches.
pub const fn occurs_once(text: &str, part: &str) -> bool {
    let (text, part) = (text.as_bytes(), part.as_bytes());
    if part.is_empty() || part.len() > text.len() {
        return false;
    }
    let mut found = 0;
    let mut at = 0;
    while at + part.len() <= text.len() {
        let mut i = 0;
        while i < part.len() && text[at + i] == part[i] {
            i += 1;
        }
        if i == part.len() {
            found += 1;
        }
        at += 1;
    }
    found == 1
}

/// `mutant_text!(TEXT, name: "from" => "to", ...)`: the constant text of an SQL statement the
/// extension runs, as a `Cow<'static, str>`; in a build that removes the guard `name`, with its
/// `from` replaced by `to`. Where a guard is a clause of a statement, which no block can hold.
/// Each `from` must occur exactly once in the text: the compiler checks it.
#[macro_export]
macro_rules! mutant_text {
    ($text:expr, $($name:ident: $from:literal => $to:literal),+ $(,)?) => {{
        $(
            const _: () = ::core::assert!(
                $crate::mutant::occurs_once($text, $from),
                ::core::concat!("mutant_text!: ", ::core::stringify!($name), "'s text must occur once")
            );
        )+
        let text = ::std::borrow::Cow::<'static, str>::Borrowed($text);
        $(
            let text = $crate::mutant!($name, { text }, {
                ::std::borrow::Cow::Owned(text.replacen($from, $to, 1))
            });
        )+
        text
    }};
}

#[cfg(test)]
mod tests {
    use super::{occurs_once, on};

    #[test]
    fn a_text_mutation_must_match_its_statement_once() {
        assert!(occurs_once("WHERE a AND b", "AND b"));
        assert!(!occurs_once("WHERE a AND b AND b", "AND b"));
        assert!(!occurs_once("WHERE a", "AND b"));
        assert!(!occurs_once("WHERE a", ""));
        let text = crate::mutant_text!("WHERE a AND b", some_guard: "AND b" => "");
        assert_eq!(text, "WHERE a AND b");
    }

    #[test]
    fn a_guard_is_removed_only_when_its_own_name_is_chosen() {
        assert!(on(Some("cas"), "cas"));
        assert!(!on(None, "cas"));
        assert!(!on(Some("cas2"), "cas"));
        assert!(!on(Some("ca"), "cas"));
        assert!(!on(Some(""), "cas"));
    }

    #[test]
    fn an_ordinary_build_keeps_every_guard() {
        // A unit test build with a guard removed is refused (`make check` refuses to start), so
        // that no one reads its failures as the code's.
        let chosen = option_env!("PG_SNOWFLAKE_MUTANT").filter(|name| !name.is_empty());
        assert_eq!(chosen, None, "this build removes a guard: unset PG_SNOWFLAKE_MUTANT");
        assert_eq!(crate::mutant!(any_guard, { 1 }, { 2 }), 1);
    }
}
