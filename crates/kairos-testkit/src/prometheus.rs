//! Reading the Prometheus text format in tests: the value of one series, so a test can
//! check what `/metrics` says after driving known work.

use std::collections::BTreeMap;

/// The value of the series `name` whose labels are exactly `labels` (in any order), or
/// `None` when `text` has no such series.
///
/// # Panics
/// When a sample line's value is not a number (the text is not the Prometheus format).
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' '))
        .find(|(series, _)| {
            let (found, found_labels) = parse_series(series);
            found == name && found_labels == wanted
        })
        .map(|(_, value)| {
            value
                .parse()
                .unwrap_or_else(|_| panic!("not a number: {value:?}"))
        })
}

/// `name{a="x",b="y"}` → (`name`, {a: x, b: y}). Label values with commas or quotes are
/// not needed by kairos's metrics and not handled.
fn parse_series(series: &str) -> (&str, BTreeMap<&str, &str>) {
    let Some((name, rest)) = series.split_once('{') else {
        return (series, BTreeMap::new());
    };
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| (key, value.trim_matches('"')))
        .collect();
    (name, labels)
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn finds_a_series_by_name_and_label_set() {
        let text = "# TYPE x counter\nx{b=\"2\",a=\"1\"} 3\nx{a=\"1\"} 4\ny 5.5\n";
        assert_eq!(sample(text, "x", &[("a", "1"), ("b", "2")]), Some(3.0));
        assert_eq!(sample(text, "x", &[("a", "1")]), Some(4.0));
        assert_eq!(sample(text, "y", &[]), Some(5.5));
        assert_eq!(sample(text, "x", &[]), None);
    }
}
