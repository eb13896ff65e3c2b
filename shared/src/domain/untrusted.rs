//! Text that no one has verified (an ID token's claims before its signature is checked, a
//! client's header) as it may be shown in a log line or a message: control characters
//! escaped, so a newline cannot forge a line of a text log, and cut to a bounded length, so
//! a flood of long claims cannot swell the log. No I/O.

/// The longest unverified text shown, in characters.
pub const SHOWN_CHARS: usize = 200;

/// `text` with its control characters (and the backslash that introduces an escape)
/// escaped as Rust writes them (`\n`, `\u{1b}`), cut to [`SHOWN_CHARS`] characters with `…`
/// after a cut.
pub fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(SHOWN_CHARS * 2));
    for (n, c) in text.chars().enumerate() {
        if n == SHOWN_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() || c == '\\' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_is_cut() {
        assert_eq!(shown("https://issuer.example"), "https://issuer.example");
        assert_eq!(
            shown("https://a\nINFO forged line\r\u{1b}[31m"),
            "https://a\\nINFO forged line\\r\\u{1b}[31m"
        );
        assert_eq!(shown("a\\nb"), "a\\\\nb");
        let long = "x".repeat(1000);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), SHOWN_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(shown(&"é".repeat(SHOWN_CHARS)), "é".repeat(SHOWN_CHARS));
    }
}
