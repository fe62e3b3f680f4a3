//! Passwords out of what the registry's worker shows: a log line, an error, a hint and
//! `snowflake_stats()` may quote a connection string (libpq quotes the one it cannot parse), and
//! `snowflake.registry = 'postgresql://fleet:S3cretPW@[::1'`, a typo, logged the whole string.
//! Plain Rust, tested without PostgreSQL.

/// What a password is shown as.
const MASK: &str = "********";

/// `text` with every password of a connection string in it masked: the value of a `password`
/// keyword (key/value form, quoted or not, or a URI's query parameter) and the part after `:`
/// in a URI's `user:password@`.
pub fn redact(text: &str) -> String {
    mask_keyword_values(&mask_uri_passwords(text))
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
        let authority_end = after
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(after.len());
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
    ["postgresql://", "postgres://"]
        .iter()
        .filter_map(|s| lower.find(s))
        .min()
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
    use super::redact;

    #[test]
    fn uri_passwords_are_masked() {
        assert_eq!(
            redact("postgresql://fleet:S3cretPW@[::1"),
            "postgresql://fleet:********@[::1"
        );
        assert_eq!(
            redact("invalid URI \"postgres://u:p%40ss@h1:5432,h2/db?sslmode=require\": x"),
            "invalid URI \"postgres://u:********@h1:5432,h2/db?sslmode=require\": x"
        );
        assert_eq!(
            redact("POSTGRESQL://a:b@c and postgresql://d:e@f"),
            "POSTGRESQL://a:********@c and postgresql://d:********@f"
        );
        // No password, or no user info: nothing to mask.
        assert_eq!(
            redact("postgresql://fleet@hub/db"),
            "postgresql://fleet@hub/db"
        );
        assert_eq!(
            redact("postgresql://hub:5432/db"),
            "postgresql://hub:5432/db"
        );
        assert_eq!(
            redact("postgresql://hub/db?user=u&password=pw&sslmode=verify-full"),
            "postgresql://hub/db?user=u&password=********&sslmode=verify-full"
        );
    }

    #[test]
    fn keyword_passwords_are_masked() {
        assert_eq!(
            redact("host=hub password=S3cret dbname=r"),
            "host=hub password=******** dbname=r"
        );
        assert_eq!(
            redact("host=hub password = 'a b\\' c' dbname=r"),
            "host=hub password = ******** dbname=r"
        );
        assert_eq!(redact("PASSWORD=x"), "PASSWORD=********");
        assert_eq!(redact("password='unterminated"), "password=********");
        // Words that only contain the keyword, and the word alone, stay.
        assert_eq!(
            redact("passfile=/p mypassword=1"),
            "passfile=/p mypassword=1"
        );
        assert_eq!(
            redact("password authentication failed for user \"fleet\""),
            "password authentication failed for user \"fleet\""
        );
        assert_eq!(redact("password="), "password=");
    }
}
