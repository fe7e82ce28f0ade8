//! The options the library's messages name (`` `store` ``, see `gc_runtime::options`), shown as
//! gc-cli's flags: in its log lines and final error ([`stderr`], [`shown`]) and in the rows it
//! writes that carry the library's words (restores, prunes, verifications).

use std::io::Write;

/// The flag (and variable) that sets each option a library message names.
#[must_use]
pub fn flag(option: &str) -> Option<&'static str> {
    Some(match option {
        "alert_webhooks" => "--alert-webhook or $GC_ALERT_WEBHOOK",
        "allow_future_now" => "GC_ALLOW_FUTURE_NOW=1",
        "all_namespaces" => "--all-namespaces",
        "api_listen" => "--api-listen",
        "api_tls" => "--api-tls-cert and --api-tls-key",
        "archive_dir" => "--archive-dir",
        "bind_wait" => "--bind-wait-seconds",
        "cluster_id" => "--cluster-id",
        "events: false" => "--no-events",
        "kinds" => "--kinds",
        "listen" => "--listen",
        "live_states" => "--live-state (the chart's gc.liveStates)",
        "namespace_selector" => "--namespace-selector",
        "namespaces" => "-n",
        "now" => "--now",
        "override_guard" => "`plan sessions --override-guard`",
        "pushgateway" => "--pushgateway / $GC_PUSHGATEWAY",
        "retain_volume_days" | "volume_retention" => "--volume-retention",
        "sink" => "--archive-dir or --archive-url",
        "stall" => "--stall-seconds",
        "store" => "--store",
        "terminal_states" => "--terminal-state (the chart's gc.terminalStates)",
        _ => return None,
    })
}

/// `text` with the options it names shown as flags.
#[must_use]
pub fn shown(text: &str) -> String {
    gc_runtime::options::shown_with(text, flag)
}

/// Standard error, each write's options shown as flags (a log line is one write).
#[must_use]
pub fn stderr() -> Shown<std::io::Stderr> {
    Shown(std::io::stderr())
}

/// A writer that shows the options in what is written to it as flags.
pub struct Shown<W>(pub W);

impl<W: Write> Write for Shown<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) if text.contains('`') => {
                self.0.write_all(shown(text).as_bytes())?;
                Ok(buf.len())
            }
            _ => self.0.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's messages that name options, as gc-cli shows them.
    #[test]
    fn library_messages_show_the_flags() {
        let cases = [
            (
                "cannot post alerts to the webhook (`alert_webhooks`): its URL",
                "cannot post alerts to the webhook (--alert-webhook or $GC_ALERT_WEBHOOK): its URL",
            ),
            (
                "first error: 403 (grant create on events.k8s.io events, or set `events: false`)",
                "first error: 403 (grant create on events.k8s.io events, or set --no-events)",
            ),
            (
                "no plan (`plan sessions --override-guard` shows what a guard refused)",
                "no plan (`plan sessions --override-guard` shows what a guard refused)",
            ),
            (
                "for `all_namespaces` `namespace_selector` \"a=b\"",
                "for --all-namespaces --namespace-selector \"a=b\"",
            ),
            (
                "after `bind_wait` 1: restore",
                "after --bind-wait-seconds 1: restore",
            ),
        ];
        for (text, cli) in cases {
            assert_eq!(shown(text), cli);
            let mut out = Shown(Vec::new());
            writeln!(out, "{text}").unwrap();
            assert_eq!(String::from_utf8(out.0).unwrap(), format!("{cli}\n"));
        }
    }
}
