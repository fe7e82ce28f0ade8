//! `--dry-run[=none|server]`, as kubectl spells it, for `apply`, `run pods`, `run sessions` and
//! `archives prune`.
//! The older spellings stay: a bare `--dry-run` (server), and `true`/`false` (run pods).

/// Parses a `--dry-run` value: whether every write is sent as a server-side dry run.
///
/// # Errors
/// A message naming the accepted values (and why `client` is not one of them).
pub(crate) fn parse(text: &str) -> Result<bool, String> {
    match text {
        "server" | "true" => Ok(true),
        "none" | "false" => Ok(false),
        "client" => Err(
            "client is not offered: plan is the client-side dry run; use server (every write \
             sent as a server-side dry run) or none"
                .into(),
        ),
        _ => Err("expected none or server (older forms: true, false)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_values_and_the_older_ones() {
        for (text, dry) in [
            ("server", true),
            ("true", true),
            ("none", false),
            ("false", false),
        ] {
            assert_eq!(parse(text), Ok(dry), "{text}");
        }
        for bad in ["client", "yes", "", "Server"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
