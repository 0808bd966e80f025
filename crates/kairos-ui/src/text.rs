//! Free text (reasons, errors, notes, timeline details) as the page shows it: it wraps
//! between words, never inside one. A word a browser could break by itself (after a hyphen
//! or a slash: an id, a zone) is kept whole; only a word too long to be an id may still
//! break anywhere, so that it cannot stretch the page without end.

use maud::{html, Markup};

/// The longest word kept whole (run keys are 64 characters, ids and zones shorter).
const WHOLE_MAX: usize = 100;

/// Characters after which a browser may end a line inside a word (Unicode line breaking:
/// hyphens, dashes, slashes, `|`, `?`, `!` and closing brackets).
const BREAKS_AFTER: &[char] = &[
    '-', '/', '\\', '|', '?', '!', '}', '\u{2010}', '\u{2013}', '\u{2014}',
];

/// `text` with each word that holds a break opportunity (one of [`BREAKS_AFTER`] before
/// its last character) in a `span.nowrap`, unless it is longer than [`WHOLE_MAX`]
/// characters.
pub(crate) fn words(text: &str) -> Markup {
    html! {
        @for (i, word) in text.split(' ').enumerate() {
            @if i > 0 { " " }
            @if breakable(word) && word.chars().count() <= WHOLE_MAX {
                span.nowrap { (word) }
            } @else {
                (word)
            }
        }
    }
}

fn breakable(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next_back();
    chars.any(|c| BREAKS_AFTER.contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_whole_and_words_wrap() {
        assert_eq!(
            words("executor pool-eu-1 failed").into_string(),
            r#"executor <span class="nowrap">pool-eu-1</span> failed"#
        );
        let long = "x".repeat(WHOLE_MAX) + "-";
        assert_eq!(words(&long).into_string(), long);
        assert_eq!(words("").into_string(), "");
        assert_eq!(
            words("no limit (overlap allow) —").into_string(),
            "no limit (overlap allow) —"
        );
        assert_eq!(
            words("zone America/New_York, step-").into_string(),
            r#"zone <span class="nowrap">America/New_York,</span> step-"#
        );
    }
}
