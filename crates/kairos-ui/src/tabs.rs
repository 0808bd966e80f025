//! Tabs of a page (WAI-ARIA tabs): a `tablist` of links, each a `tab` naming its `tabpanel`
//! (`aria-controls`), the first one selected and the other panels hidden. The page's script
//! selects a tab when it is clicked (or moved to with the arrow keys) and from the URL
//! fragment (`#history` opens the panel `history`), also after each refresh.

use maud::{html, Markup};

/// One tab: the id of its panel (also the URL fragment that opens it) and its title.
pub(crate) struct Tab<'a> {
    pub panel: &'a str,
    pub title: &'a str,
}

/// The tab bar called `label`; the first tab is selected.
pub(crate) fn tablist(label: &str, tabs: &[Tab<'_>]) -> Markup {
    html! {
        div.tablist role="tablist" aria-label=(label) {
            @for (i, tab) in tabs.iter().enumerate() {
                a role="tab" id=(tab_id(tab.panel)) href=(format!("#{}", tab.panel))
                    aria-controls=(tab.panel) aria-selected=(if i == 0 { "true" } else { "false" })
                    tabindex=(if i == 0 { "0" } else { "-1" }) { (tab.title) }
            }
        }
    }
}

/// The panel `panel` holding `inside`; hidden unless it is the first (`selected`).
pub(crate) fn tabpanel(panel: &str, selected: bool, inside: Markup) -> Markup {
    html! {
        section.tabpanel role="tabpanel" id=(panel) aria-labelledby=(tab_id(panel)) hidden[!selected] {
            (inside)
        }
    }
}

fn tab_id(panel: &str) -> String {
    format!("tab-{panel}")
}

#[cfg(test)]
mod tests {
    use super::{tablist, tabpanel, Tab};
    use maud::html;

    #[test]
    fn the_first_tab_is_selected_and_each_names_its_panel() {
        let bar = tablist(
            "Views",
            &[
                Tab {
                    panel: "overview",
                    title: "Overview",
                },
                Tab {
                    panel: "history",
                    title: "History",
                },
            ],
        )
        .into_string();
        assert!(
            bar.contains(r#"role="tablist" aria-label="Views""#),
            "{bar}"
        );
        assert!(
            bar.contains(r##"<a role="tab" id="tab-overview" href="#overview" aria-controls="overview" aria-selected="true" tabindex="0">Overview</a>"##),
            "{bar}"
        );
        assert!(
            bar.contains(r##"<a role="tab" id="tab-history" href="#history" aria-controls="history" aria-selected="false" tabindex="-1">History</a>"##),
            "{bar}"
        );
        let shown = tabpanel("overview", true, html! { "a" }).into_string();
        assert_eq!(
            shown,
            r#"<section class="tabpanel" role="tabpanel" id="overview" aria-labelledby="tab-overview">a</section>"#
        );
        let hidden = tabpanel("history", false, html! { "b" }).into_string();
        assert!(hidden.contains(" hidden>b</section>"), "{hidden}");
    }
}
