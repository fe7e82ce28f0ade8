//! Small plots drawn on the server as SVG, where a picture reads faster than a table: one bar per
//! item, its value written beside it. Each has a title and a description for screen readers,
//! and the same figures are in a table on the page.

use maud::{Markup, html};

/// Height of one bar and the gap after it.
const ROW: f64 = 22.0;
/// Width of the label column and of the bars' column.
const LABEL: f64 = 220.0;
const BARS: f64 = 360.0;

/// A horizontal bar chart of `items` (label, value), titled `title`, values written with `unit`.
pub(crate) fn bars(id: &str, title: &str, items: &[(String, f64)], unit: &str) -> Markup {
    let most = items
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    let height = ROW * items.len().max(1) as f64 + 4.0;
    let width = LABEL + BARS + 90.0;
    html! {
        svg.plot role="img" aria-labelledby={ (id) "-title" } viewBox={ "0 0 " (width) " " (height) }
            width=(width) height=(height) xmlns="http://www.w3.org/2000/svg" {
            title id={ (id) "-title" } { (title) }
            @for (i, (label, value)) in items.iter().enumerate() {
                @let y = ROW * i as f64 + 2.0;
                @let w = (value.max(0.0) / most * BARS).max(1.0);
                text.label x=(LABEL - 6.0) y=(y + 14.0) text-anchor="end" { (label) }
                rect.bar x=(LABEL) y=(y) width=(format!("{w:.1}")) height=(ROW - 6.0) {}
                text.value x=(LABEL + w + 6.0) y=(y + 14.0) { (format!("{value:.0}")) " " (unit) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_longest_bar_is_the_largest_value() {
        let items = [("a".to_owned(), 2.0), ("b".to_owned(), 8.0)];
        let svg = super::bars("p", "Deletes", &items, "objects").into_string();
        assert!(svg.contains(r#"width="90.0""#), "{svg}");
        assert!(svg.contains(r#"width="360.0""#), "{svg}");
        assert!(
            svg.contains("<title id=\"p-title\">Deletes</title>"),
            "{svg}"
        );
    }
}
