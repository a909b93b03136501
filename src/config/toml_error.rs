//! A TOML error said so that the file can be fixed: where, which limit, what.
//!
//! The `toml` crate reports a byte span; a missing field's span is the whole
//! `[[limits]]` table, a bad value's span the value. This turns the span
//! into a line and column and names the limit the span falls in, so
//! "missing field `in_seconds`" becomes "line 7, column 1: limit \"api\":
//! missing field `in_seconds`". It only formats; it reads no file.

/// `error`, raised while parsing `text`, as one line.
pub fn describe(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    let Some(span) = error.span() else {
        return message.to_owned();
    };
    let (line, column) = line_and_column(text, span.start);
    match limit_at(text, span.start) {
        Some(name) => format!("line {line}, column {column}: limit {name:?}: {message}"),
        None => format!("line {line}, column {column}: {message}"),
    }
}

/// The 1-based line and column (in characters) of byte `at`.
fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..floor_char_boundary(text, at)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    (line, column)
}

/// The name of the `[[limits]]` table that byte `at` falls in, when it has
/// one that can be read.
fn limit_at(text: &str, at: usize) -> Option<String> {
    const HEADER: &str = "[[limits]]";
    let at = floor_char_boundary(text, at);
    // A header that starts at `at` (a missing field's span) counts as before it.
    let upto = floor_char_boundary(text, at + HEADER.len());
    let start = text[..upto].rfind(HEADER)?;
    let body_start = start + HEADER.len();
    // The table ends where the next table header begins.
    let end = text[body_start..].find("\n[").map_or(text.len(), |i| body_start + i + 1);
    if at >= end {
        return None;
    }
    let table: toml::Table = toml::from_str(&text[start..end]).ok()?;
    let name = table.get("limits")?.as_array()?.first()?.get("name")?.as_str()?;
    Some(name.to_owned())
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    fn error_of(text: &str) -> String {
        describe(text, &toml::from_str::<FileConfig>(text).unwrap_err())
    }

    #[test]
    fn a_missing_field_names_its_limit_and_line() {
        let text = "bind = 'tcp://*:1'\n\n[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 1\n\n\
                    [[limits]]\nname = 'db'\nmax_requests = 5\n";
        assert_eq!(error_of(text), "line 8, column 1: limit \"db\": missing field `in_seconds`");
    }

    #[test]
    fn a_bad_value_names_its_limit_line_and_column() {
        let text = "[[limits]]\nname = \"api\"\nmax_requests = 5\nin_seconds = 'soon'\n";
        let e = error_of(text);
        assert!(e.starts_with("line 4, column 14: limit \"api\": "), "{e}");
        assert!(e.contains("expected"), "{e}");
    }

    #[test]
    fn an_error_outside_the_limits_names_none() {
        assert_eq!(error_of("max_keys = 'many'\n"), "line 1, column 12: invalid type: string \"many\", expected usize");
        let e = error_of("nonsense = 1\n");
        assert!(e.starts_with("line 1, column 1: unknown field `nonsense`"), "{e}");
    }

    #[test]
    fn a_limit_without_a_name_is_still_placed() {
        let e = error_of("[[limits]]\nmax_requests = 5\nin_seconds = 1\n");
        assert_eq!(e, "line 1, column 1: missing field `name`");
    }

    #[test]
    fn a_broken_file_gets_a_line() {
        let e = error_of("[[limits]\nname = 'x'\n");
        assert!(e.starts_with("line 1, column "), "{e}");
    }
}
