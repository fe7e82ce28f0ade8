//! Text output that every command shares: instants as RFC 3339, aligned columns.

use std::io::Write;

/// An instant in seconds as RFC 3339 (UTC, whole seconds).
pub(crate) fn rfc3339(seconds: f64) -> String {
    #[allow(clippy::cast_possible_truncation)]
    let whole = seconds.floor() as i64;
    time::OffsetDateTime::from_unix_timestamp(whole)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{seconds}"))
}

/// Writes `rows` under `header` in aligned columns; nothing when there is no row.
pub(crate) fn write_columns<const N: usize>(
    out: &mut impl Write,
    header: [&str; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let header = header.map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}
