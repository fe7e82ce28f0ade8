//! How the library's messages name an option: between backquotes, by the name an embedder sets
//! it by (`store`, `cluster_id`, `bind_wait`, ...): "nothing to verify: ...; receipts exist for
//! `cluster_id` b". A front end that calls its options otherwise shows its own names with
//! [`shown_with`] (`gc-cli` shows its flags: "receipts exist for --cluster-id b").

/// `text` with each option named between backquotes shown as `name_of` names it; text between
/// backquotes that `name_of` does not name is left as it is, backquotes and all.
#[must_use]
pub fn shown_with(text: &str, name_of: impl Fn(&str) -> Option<&'static str>) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else {
            break;
        };
        if let Some(name) = name_of(&after[..close]) {
            shown.push_str(&rest[..open]);
            shown.push_str(name);
            rest = &after[close + 1..];
        } else {
            // Not an option: its closing backquote may open the next one.
            shown.push_str(&rest[..=open]);
            rest = after;
        }
    }
    shown.push_str(rest);
    shown
}

#[cfg(test)]
mod tests {
    use super::shown_with;

    fn flags(option: &str) -> Option<&'static str> {
        match option {
            "store" => Some("--store"),
            "cluster_id" => Some("--cluster-id"),
            _ => None,
        }
    }

    #[test]
    fn each_option_named_is_shown_as_the_front_end_names_it() {
        let cases = [
            ("give `store`", "give --store"),
            ("`cluster_id` b, `store`.", "--cluster-id b, --store."),
            ("no option", "no option"),
            ("", ""),
            // Not options: left as they are, and the next one still found.
            ("(`plan --x` shows) `store`", "(`plan --x` shows) --store"),
            ("`a` and `store` and `b`", "`a` and --store and `b`"),
            ("one ` alone, `store`", "one ` alone, --store"),
            ("`store", "`store"),
            ("``store``", "`--store`"),
            ("é`store`é", "é--storeé"),
        ];
        for (text, shown) in cases {
            assert_eq!(shown_with(text, flags), shown, "{text:?}");
        }
    }
}
