//! The `\u` escapes of a document's strings, checked in a pass of their own: the JSON
//! reader checks every other part of a value it skips (its syntax, its numbers, its other
//! escapes, its control characters), but not that `\u` is followed by four hex digits, and
//! a document Terraform could not read back must be refused when it is written.

/// Where the first `\u` escape not followed by four hex digits starts in `text`, a JSON
/// text the reader found otherwise sound: every backslash is then inside a string. A `\u`
/// is an escape when an odd number of backslashes ends there (`\\u` is an escaped
/// backslash and a `u`). The pair is looked for, not every backslash: a state escapes
/// quotes in every policy it holds, and stopping at each of them took 0.2 ms of a 2 MiB
/// state where the pair's search takes a few microseconds.
pub(super) fn first_bad_unicode_escape(text: &[u8]) -> Option<usize> {
    memchr::memmem::find_iter(text, br"\u").find(|&at| {
        let backslashes = text[..=at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        backslashes % 2 == 1
            && !text
                .get(at + 2..at + 6)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    })
}

/// The line and column (both from 1, the column in bytes) of byte `at` of `text`.
pub(super) fn line_and_column(text: &[u8], at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = memchr::memchr_iter(b'\n', before).count() + 1;
    let column = at - memchr::memrchr(b'\n', before).map_or(0, |newline| newline + 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_unicode_escape_without_four_hex_digits() {
        assert_eq!(first_bad_unicode_escape(br#"["\u00e9", "\u0041"]"#), None);
        assert_eq!(first_bad_unicode_escape(br#"["ok", "\u00ug"]"#), Some(8));
        assert_eq!(first_bad_unicode_escape(br#"["\u12"]"#), Some(2));
        assert_eq!(first_bad_unicode_escape(br#"["\u"#), Some(2));
    }

    #[test]
    fn an_escaped_backslash_does_not_start_an_escape() {
        assert_eq!(
            first_bad_unicode_escape(br#"["\\u", "\\\\uxyz", "\"\\"]"#),
            None
        );
        assert_eq!(first_bad_unicode_escape(br#"["\\\uxyz0"]"#), Some(4));
    }

    #[test]
    fn places_a_byte_by_line_and_column() {
        let text = b"{\n  \"a\": 1,\n  \"b\"\n}";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 4), (2, 3));
        assert_eq!(line_and_column(text, 14), (3, 3));
    }
}
