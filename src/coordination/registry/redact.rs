//! Passwords out of what the registry's worker shows: a log line, an error, a hint and
//! `snowflake_stats()` may quote a connection string (libpq quotes the one it cannot parse), and
//! `snowflake.registry = 'postgresql://fleet:S3cretPW@[::1'`, a typo, logged the whole string.
//! Plain Rust, tested without PostgreSQL.

/// What a password is shown as.
const MASK: &str = "********";

/// The secrets of the configured connection string (see `know_secrets`).
static SECRETS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Keeps the secrets of `conninfo` (and the `decoded` values libpq reads from it), so that
/// `redact` masks them wherever they stand: libpq quotes a value alone in some errors
/// (`invalid percent-encoded token: "Pa%ssw0rd"`), where no pattern around it is left to see.
pub fn know_secrets(conninfo: &str, decoded: &[String]) {
    let mut secrets = secrets_of(conninfo);
    secrets.extend(decoded.iter().filter(|s| s.len() >= MIN_SECRET).cloned());
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let _ = SECRETS.set(secrets);
}

/// Shorter secrets are left to the patterns: masking every "ab" would garble every message.
const MIN_SECRET: usize = 3;

/// `text` with every password of a connection string in it masked: the secrets of the
/// configured string wherever they stand, the value of a `password` keyword (key/value form,
/// quoted or not, or a URI's query parameter) and the part after `:` in a URI's
/// `user:password@`.
pub fn redact(text: &str) -> String {
    mutant!(registry_redact, {}, {
        return text.to_string();
    });
    let mut text = text.to_string();
    for secret in SECRETS
        .get()
        .into_iter()
        .flatten()
        .filter(|_| mutant!(registry_secrets, { true }, { false }))
    {
        text = text.replace(secret.as_str(), MASK);
    }
    mask_keyword_values(&mask_uri_passwords(&text))
}

/// Every secret a connection string holds, as written and percent-decoded, and each piece of
/// one that spaces or quotes split (libpq may quote a piece): a URI's password (after the
/// first `:` of what comes before its last `@`), and the values of `password` and `sslpassword`
/// (the client key's passphrase), as keywords or a URI's query parameters (whose names libpq
/// percent-decodes too: `pass%77ord` is `password`).
fn secrets_of(conninfo: &str) -> Vec<String> {
    let mut found: Vec<String> = vec![];
    let lower = conninfo.to_ascii_lowercase();
    if let Some(scheme) = ["postgresql://", "postgres://"]
        .iter()
        .filter_map(|s| lower.find(s).map(|i| i + s.len()))
        .min()
    {
        let rest = &conninfo[scheme..];
        if let Some(at) = rest.rfind('@') {
            if let Some((_, password)) = rest[..at].split_once(':') {
                found.push(password.to_string());
            }
        }
        if let Some((_, query)) = rest.split_once('?') {
            for pair in query.split('&') {
                if let Some((key, value)) = pair.split_once('=') {
                    if is_secret_key(&percent_decoded(key)) {
                        found.push(value.to_string());
                    }
                }
            }
        }
    }
    // The keyword form: `password = 'a b'`, `sslpassword=x`.
    let bytes = conninfo.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        let key = &conninfo[start..i];
        let mut j = i;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if !key.is_empty() && j < bytes.len() && bytes[j] == b'=' && is_secret_key(key) {
            j += 1;
            while j < bytes.len() && bytes[j] == b' ' {
                j += 1;
            }
            let mut value = Vec::new();
            if j < bytes.len() && bytes[j] == b'\'' {
                j += 1;
                while j < bytes.len() && bytes[j] != b'\'' {
                    if bytes[j] == b'\\' && j + 1 < bytes.len() {
                        j += 1;
                    }
                    value.push(bytes[j]);
                    j += 1;
                }
            } else {
                while j < bytes.len() && !bytes[j].is_ascii_whitespace() {
                    value.push(bytes[j]);
                    j += 1;
                }
            }
            found.push(String::from_utf8_lossy(&value).into_owned());
            i = j;
        }
        i = i.max(start + 1);
    }
    let mut secrets = vec![];
    for s in found {
        let decoded = percent_decoded(&s);
        for whole in [s, decoded] {
            let pieces: Vec<String> = whole
                .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                .map(str::to_string)
                .collect();
            secrets.push(whole);
            secrets.extend(pieces);
        }
    }
    secrets.retain(|s| s.len() >= MIN_SECRET);
    secrets
}

fn is_secret_key(key: &str) -> bool {
    key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword")
}

/// `%XX` decoded; anything else kept.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `scheme://user:password@host...` for PostgreSQL's two URI schemes.
fn mask_uri_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_scheme(rest) {
        let (before, from_scheme) = rest.split_at(start);
        out.push_str(before);
        let scheme_len = from_scheme.find("://").map_or(0, |i| i + 3);
        out.push_str(&from_scheme[..scheme_len]);
        let after = &from_scheme[scheme_len..];
        // The user info ends at the last '@' before the host part (a password may hold '@'
        // only percent-encoded, but be generous), and never past whitespace or a quote.
        let authority_end =
            after.find(|c: char| c.is_whitespace() || c == '"' || c == '\'').unwrap_or(after.len());
        let authority = &after[..authority_end];
        let cut = authority.find(['/', '?']).unwrap_or(authority.len());
        match authority[..cut].rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon + 1]);
                        out.push_str(MASK);
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&after[at..authority_end]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}

fn find_scheme(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    ["postgresql://", "postgres://"].iter().filter_map(|s| lower.find(s)).min()
}

/// `password=value`, `password = 'v a l'` (with `\'` and `\\` inside quotes), and `password=v`
/// in a URI's query (ending at `&`).
fn mask_keyword_values(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find("password") {
        let key = search + found;
        let mut i = key + "password".len();
        search = i;
        // Only the keyword itself: not "passwordx=", nor "mypassword=".
        let word_start =
            key == 0 || !(bytes[key - 1].is_ascii_alphanumeric() || bytes[key - 1] == b'_');
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if !word_start || i >= bytes.len() || bytes[i] != b'=' {
            continue;
        }
        i += 1;
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        let value_start = i;
        if i < bytes.len() && bytes[i] == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'\'' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() && !b"&\"'".contains(&bytes[i])
            {
                i += 1;
            }
        }
        if i == value_start {
            continue;
        }
        out.push_str(&text[copied..value_start]);
        out.push_str(MASK);
        copied = i;
        search = i;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::{redact, secrets_of};

    #[test]
    fn the_secrets_of_a_connection_string_are_found_in_every_form() {
        let has = |conninfo: &str, secret: &str| {
            let found = secrets_of(conninfo);
            assert!(found.iter().any(|s| s == secret), "{conninfo}: {secret} not among {found:?}");
        };
        has("postgresql://fleet:Pa%ssw0rd@127.0.0.1/registry", "Pa%ssw0rd");
        has("postgresql://fleet:p%40ss@hub/db", "p@ss");
        has("postgresql://fleet@[::1/registry?sslpassword=KeyPassphrase", "KeyPassphrase");
        has("postgresql://fleet@[::1/registry?pass%77ord=S3cretPW", "S3cretPW");
        has("postgresql://fleet:S3c r3t@[::1", "S3c r3t");
        has("postgresql://fleet:S3c r3t@[::1", "r3t");
        has("host=hub password='a b\\' c' user=x", "a b' c");
        has("host=hub sslpassword=Phrase1 user=x", "Phrase1");
        assert!(secrets_of("host=hub user=fleet").is_empty());
        assert!(secrets_of("postgresql://fleet@hub/db").is_empty());
    }

    #[test]
    fn uri_passwords_are_masked() {
        for (text, masked) in [
            ("postgresql://fleet:S3cretPW@[::1", "postgresql://fleet:********@[::1"),
            (
                "invalid URI \"postgres://u:p%40ss@h1:5432,h2/db?sslmode=require\": x",
                "invalid URI \"postgres://u:********@h1:5432,h2/db?sslmode=require\": x",
            ),
            (
                "POSTGRESQL://a:b@c and postgresql://d:e@f",
                "POSTGRESQL://a:********@c and postgresql://d:********@f",
            ),
            // No password, or no user info: nothing to mask.
            ("postgresql://fleet@hub/db", "postgresql://fleet@hub/db"),
            ("postgresql://hub:5432/db", "postgresql://hub:5432/db"),
            (
                "postgresql://hub/db?user=u&password=pw&sslmode=verify-full",
                "postgresql://hub/db?user=u&password=********&sslmode=verify-full",
            ),
        ] {
            assert_eq!(redact(text), masked, "{text}");
        }
    }

    #[test]
    fn keyword_passwords_are_masked() {
        for (text, masked) in [
            ("host=hub password=S3cret dbname=r", "host=hub password=******** dbname=r"),
            ("host=hub password = 'a b\\' c' dbname=r", "host=hub password = ******** dbname=r"),
            ("PASSWORD=x", "PASSWORD=********"),
            ("password='unterminated", "password=********"),
            // Words that only contain the keyword, and the word alone, stay.
            ("passfile=/p mypassword=1", "passfile=/p mypassword=1"),
            (
                "password authentication failed for user \"fleet\"",
                "password authentication failed for user \"fleet\"",
            ),
            ("password=", "password="),
        ] {
            assert_eq!(redact(text), masked, "{text}");
        }
    }
}
