//! Tables for people: columns padded to their widest cell, and the text put in them made
//! safe for a terminal.

/// Prints `rows` under `header`, each column as wide as its widest cell.
pub fn print(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", text.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// `text` with every control character written as its escape (`\u{1b}`): what a server
/// shows was written by whoever wrote a state (an address, a module, an output's name), and
/// a terminal would act on an escape sequence among it, redrawing or retitling the
/// reader's screen.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_unicode().to_string(),
            false => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped_and_the_rest_as_it_is() {
        assert_eq!(
            printable("aws_s3_bucket.b[\"\u{1b}]0;owned\u{7}\"]"),
            "aws_s3_bucket.b[\"\\u{1b}]0;owned\\u{7}\"]"
        );
        assert_eq!(printable("a\tb\nc\u{9b}d"), "a\\u{9}b\\u{a}c\\u{9b}d");
        assert_eq!(printable("module.net[\"é\"].x"), "module.net[\"é\"].x");
        // Escaped once is escaped for good: no control character is left to escape again.
        let once = printable("\u{1b}[2J");
        assert_eq!(printable(&once), once);
    }
}
