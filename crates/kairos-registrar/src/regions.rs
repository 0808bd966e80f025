//! The rules of a schedule's `region` and `fallback_regions` (docs/regions.md): names a
//! NATS subject token and a stream name can carry, among the deployment's regions
//! (`regions.names`), fallbacks only beside a region, none twice, never the region itself.

use kairos_core::Problem;

/// Most fallback regions a schedule may list (the bound the `schedules` table checks too).
pub const MAX_FALLBACK_REGIONS: usize = 16;

/// Longest region name, in characters.
pub const MAX_REGION_LEN: usize = 32;

/// Whether `name` is a region name: a lowercase letter, then lowercase letters, digits and
/// `-`, at most [`MAX_REGION_LEN`] characters.
pub fn is_region_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_REGION_LEN
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Checks `region` and `fallback_regions` against the deployment's regions `known`; returns
/// them as stored (no fallbacks when none are given), or pushes a problem per broken rule.
pub(crate) fn check(
    region: Option<&str>,
    fallbacks: Option<&[String]>,
    known: &[String],
    problems: &mut Vec<Problem>,
) -> (Option<String>, Vec<String>) {
    let before = problems.len();
    let fallbacks = fallbacks.unwrap_or_default();
    if let Some(region) = region {
        named(problems, "region".to_string(), region, known);
    }
    if !fallbacks.is_empty() && region.is_none() {
        problems.push(Problem::new(
            "fallback_regions",
            "needs region: fallbacks are where a region's runs go while it is unavailable",
        ));
    }
    if fallbacks.len() > MAX_FALLBACK_REGIONS {
        problems.push(Problem::new(
            "fallback_regions",
            format!(
                "lists {} regions; the limit is {MAX_FALLBACK_REGIONS}",
                fallbacks.len()
            ),
        ));
    }
    for (index, fallback) in fallbacks.iter().enumerate() {
        let field = format!("fallback_regions[{index}]");
        if !named(problems, field.clone(), fallback, known) {
            continue;
        }
        if Some(fallback.as_str()) == region {
            problems.push(Problem::new(
                field,
                format!("{fallback:?} is the schedule's own region"),
            ));
        } else if fallbacks[..index].contains(fallback) {
            problems.push(Problem::new(field, format!("{fallback:?} is listed twice")));
        }
    }
    if problems.len() > before {
        return (None, Vec::new());
    }
    (region.map(str::to_string), fallbacks.to_vec())
}

/// Pushes a problem on `field` unless `name` is a region name among `known`.
fn named(problems: &mut Vec<Problem>, field: String, name: &str, known: &[String]) -> bool {
    let problem = if !is_region_name(name) {
        format!(
            "{:?} is not a region name: 1 to {MAX_REGION_LEN} characters, lowercase letters, \
             digits and '-', starting with a letter",
            name.chars().take(MAX_REGION_LEN + 8).collect::<String>()
        )
    } else if known.is_empty() {
        format!(
            "{name:?}: this deployment has no regions (regions.names is empty); leave the \
             field out, or configure the regions"
        )
    } else if !known.iter().any(|known| known == name) {
        format!(
            "{name:?} is not a region of this deployment ({})",
            known.join(", ")
        )
    } else {
        return true;
    };
    problems.push(Problem::new(field, problem));
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        ["eu", "us", "ap"].iter().map(|r| r.to_string()).collect()
    }

    fn fields(region: Option<&str>, fallbacks: &[&str], known: &[String]) -> Vec<String> {
        let fallbacks: Vec<String> = fallbacks.iter().map(|r| r.to_string()).collect();
        let mut problems = Vec::new();
        check(region, Some(&fallbacks), known, &mut problems);
        problems.iter().map(|p| p.field.clone()).collect()
    }

    #[test]
    fn names_are_subject_tokens_and_stream_name_parts() {
        assert!(is_region_name("eu"));
        assert!(is_region_name("us-east-1"));
        for bad in [
            "",
            "EU",
            "1eu",
            "eu.west",
            "eu west",
            "eu*",
            &"a".repeat(33),
        ] {
            assert!(!is_region_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_region_and_its_fallbacks_are_kept_in_order() {
        let mut problems = Vec::new();
        let fallbacks = vec!["ap".to_string(), "us".to_string()];
        let got = check(Some("eu"), Some(&fallbacks), &known(), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(got, (Some("eu".to_string()), fallbacks));
    }

    #[test]
    fn each_broken_rule_names_its_field() {
        assert_eq!(fields(Some("mars"), &[], &known()), ["region"]);
        assert_eq!(fields(Some("eu"), &[], &[]), ["region"]);
        assert_eq!(fields(None, &["eu"], &known()), ["fallback_regions"]);
        assert_eq!(
            fields(Some("eu"), &["us", "eu", "us", "X"], &known()),
            [
                "fallback_regions[1]",
                "fallback_regions[2]",
                "fallback_regions[3]"
            ]
        );
    }
}
