//! Text that came from a peer or a user, quoted cut to a bound: an echo of it (in an
//! answer, an error or a log line) never grows with the input.

use std::fmt;

/// At most this many bytes of the text are quoted; the rest is counted.
pub const QUOTE_LIMIT: usize = 128;

/// `text` as a quoted string cut to [`QUOTE_LIMIT`] bytes (on a character boundary),
/// with the whole length named when it was cut.
pub fn quoted(text: &str) -> Quoted<'_> {
    Quoted {
        text,
        limit: QUOTE_LIMIT,
    }
}

/// The [`Display`](fmt::Display) of [`quoted`].
#[derive(Clone, Copy, Debug)]
pub struct Quoted<'a> {
    text: &'a str,
    limit: usize,
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cut(f, self.text, self.limit, true)
    }
}

/// `text` as it is (not quoted), cut to `limit` bytes on a character boundary, with
/// the whole length named when it was cut.
pub fn cut(text: &str, limit: usize) -> Cut<'_> {
    Cut { text, limit }
}

/// The [`Display`](fmt::Display) of [`cut`].
#[derive(Clone, Copy, Debug)]
pub struct Cut<'a> {
    text: &'a str,
    limit: usize,
}

impl fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cut(f, self.text, self.limit, false)
    }
}

/// `text` cut to `limit` bytes on a character boundary, quoted or as it is, with the
/// whole length named when it was cut.
fn write_cut(f: &mut fmt::Formatter<'_>, text: &str, limit: usize, quote: bool) -> fmt::Result {
    let (shown, cut) = match text.len() <= limit {
        true => (text, false),
        false => (&text[..floor_boundary(text, limit)], true),
    };
    match quote {
        true => write!(f, "{shown:?}")?,
        false => f.write_str(shown)?,
    }
    if cut {
        write!(f, "… ({} bytes in all)", text.len())?;
    }
    Ok(())
}

/// The largest character boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_quoted_whole_and_long_text_is_cut_on_a_character() {
        let long = "x".repeat(10 << 20);
        let wide = "é".repeat(100); // 200 bytes, two per character
                                    // (text, shown)
        let rows: [(&str, String); 4] = [
            ("", r#""""#.to_owned()),
            ("h-1", r#""h-1""#.to_owned()),
            (
                &long,
                format!("{:?}… (10485760 bytes in all)", "x".repeat(128)),
            ),
            (&wide, format!("{:?}… (200 bytes in all)", "é".repeat(64))),
        ];
        for (text, shown) in rows {
            assert_eq!(quoted(text).to_string(), shown);
        }
    }

    #[test]
    fn cut_text_is_not_quoted() {
        assert_eq!(cut("abc", 3).to_string(), "abc");
        assert_eq!(cut("abcd", 3).to_string(), "abc… (4 bytes in all)");
        assert_eq!(cut("éé", 3).to_string(), "é… (4 bytes in all)");
    }

    proptest::proptest! {
        #[test]
        fn a_quote_stays_bounded(text in ".{0,400}") {
            // Each character escapes to at most 10 bytes (`\u{10ffff}`).
            proptest::prop_assert!(quoted(&text).to_string().len() <= 10 * QUOTE_LIMIT + 40);
        }
    }
}
