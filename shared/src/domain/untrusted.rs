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
    shown_within(text, SHOWN_CHARS)
}

/// As [`shown`], cut to `max` characters: for a longer text that quotes unverified parts
/// (an error's chain of causes naming an address a discovery document gave).
pub fn shown_within(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 2));
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        if c.is_control() || c == '\\' || reorders(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `c` breaks or reorders a line without being a control character: the line and
/// paragraph separators, and the bidirectional marks and overrides that make a line read
/// otherwise than it is written.
fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
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
        assert_eq!(shown("x\u{2028}y\u{202e}z"), "x\\u{2028}y\\u{202e}z");
        let long = "x".repeat(1000);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), SHOWN_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(shown(&"é".repeat(SHOWN_CHARS)), "é".repeat(SHOWN_CHARS));
    }
}
