//! Alerts to webhooks, each in its format: Slack's incoming webhook (`{"text": ...}`), a
//! Microsoft Teams message card (Office 365 connectors), an Adaptive Card message (Teams
//! Workflows), or a documented JSON body for anything else (collector, namespace, outcome,
//! counts, error, run id). A webhook URL's path is its secret: no message
//! ever shows it.

use std::fmt;

use serde_json::{Value, json};

use super::http::{agent, describe, endpoint};

/// How the failure of an alert names its webhook (the URL is never shown).
const WEBHOOK: &str = "the webhook (`alert_webhooks`)";

/// The body a webhook takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlertFormat {
    /// Slack's incoming webhook: `{"text": ...}` (also Mattermost and Rocket.Chat).
    #[default]
    Slack,
    /// A Microsoft Teams message card (`@type: MessageCard`), red on failure: what an Office 365
    /// connector's URL takes.
    Teams,
    /// A message with one Adaptive Card (`type: message`, an attachment of content type
    /// `application/vnd.microsoft.card.adaptive`): what a Teams Workflows webhook ("when a
    /// Teams webhook request is received") takes.
    Adaptive,
    /// `{"collector", "namespace", "outcome", "counts", "error", "runId", "text"}`.
    Json,
}

impl AlertFormat {
    /// The format named `slack`, `teams`, `adaptive` or `json`.
    ///
    /// # Errors
    /// What the name should have been.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "slack" => Ok(Self::Slack),
            "teams" => Ok(Self::Teams),
            "adaptive" => Ok(Self::Adaptive),
            "json" => Ok(Self::Json),
            _ => Err(format!("{name:?} is not slack, teams, adaptive or json")),
        }
    }
}

/// A webhook and the body it takes.
#[derive(Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The URL (a secret: never shown).
    pub url: String,
    /// Its body's format.
    pub format: AlertFormat,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = endpoint(&self.url).unwrap_or_else(|_| "(invalid URL)".into());
        f.debug_struct("Webhook")
            .field("url", &format_args!("{shown}/..."))
            .field("format", &self.format)
            .finish()
    }
}

impl Webhook {
    /// `[FORMAT=]URL`: `teams=https://...`, `adaptive=https://...` or `json=https://...`, else
    /// a URL in `default`'s format.
    ///
    /// # Errors
    /// A format prefix that names no format (the URL is not repeated).
    pub fn parse(text: &str, default: AlertFormat) -> Result<Self, String> {
        match text.split_once('=') {
            Some((name, url)) if !name.contains(':') && !name.contains('/') => Ok(Self {
                url: url.to_owned(),
                format: AlertFormat::parse(name)?,
            }),
            _ => Ok(Self {
                url: text.to_owned(),
                format: default,
            }),
        }
    }
}

/// One alert: a run that failed (or, when asked, a run that did something).
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// `pods` or `sessions`.
    pub collector: String,
    /// The namespace; `None` for a run that failed before it knew its namespaces.
    pub namespace: Option<String>,
    /// Why the run failed; `None` for a success.
    pub error: Option<String>,
    /// What the run counted (`scanned`, `eligible`, `held`, `deferred`, `deleted`, `errors`,
    /// `fencesLost`, `archiveBytes`).
    pub counts: Value,
    /// Tells this run's alert from any other's.
    pub run_id: String,
    /// The alert in words.
    pub text: String,
}

impl Alert {
    /// The body `format` takes.
    #[must_use]
    pub fn body(&self, format: AlertFormat) -> Value {
        let plain = self.text.trim_start_matches(":rotating_light: ");
        let outcome = if self.error.is_some() {
            "failed"
        } else {
            "succeeded"
        };
        let title = match &self.namespace {
            Some(ns) => format!(
                "gc {} collector {outcome} in namespace {ns}",
                self.collector
            ),
            None => format!("gc {} collector {outcome}", self.collector),
        };
        match format {
            AlertFormat::Slack => json!({ "text": self.text }),
            AlertFormat::Adaptive => self.adaptive_card(&title, plain),
            AlertFormat::Teams => {
                json!({
                    "@type": "MessageCard",
                    "@context": "https://schema.org/extensions",
                    "summary": title,
                    "themeColor": if self.error.is_some() { "D70000" } else { "2EB886" },
                    "title": title,
                    "text": plain,
                })
            }
            AlertFormat::Json => json!({
                "collector": self.collector,
                "namespace": self.namespace,
                "outcome": outcome,
                "counts": self.counts,
                "error": self.error,
                "runId": self.run_id,
                "text": plain,
            }),
        }
    }
}

impl Alert {
    /// A message with one Adaptive Card (schema 1.4): the title (red on failure), the text, and
    /// the run's counts and id as facts.
    fn adaptive_card(&self, title: &str, text: &str) -> Value {
        let mut facts: Vec<Value> = self
            .counts
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, n)| json!({ "title": name, "value": n.to_string() }))
            .collect();
        facts.push(json!({ "title": "runId", "value": self.run_id }));
        json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": null,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "msteams": { "width": "Full" },
                    "body": [
                        {
                            "type": "TextBlock",
                            "text": title,
                            "weight": "Bolder",
                            "size": "Medium",
                            "color": if self.error.is_some() { "Attention" } else { "Good" },
                            "wrap": true,
                        },
                        { "type": "TextBlock", "text": text, "wrap": true },
                        { "type": "FactSet", "facts": facts },
                    ],
                },
            }],
        })
    }
}

/// Posts `alert` to `hook` in its format; with no alert, only checks the webhook's URL (on
/// every run, so that a wrong URL is found before the failure it should report).
pub(super) fn post_alert(hook: &Webhook, alert: Option<&Alert>) -> crate::Result<()> {
    if hook.url.is_empty() {
        return Ok(());
    }
    let shown = endpoint(&hook.url).map_err(|why| {
        crate::Error::msg(format!(
            "cannot post alerts to {WEBHOOK}: its URL {why} (the URL is not shown: its \
             path is the webhook's secret)"
        ))
    })?;
    if let Some(alert) = alert {
        agent()
            .post(&hook.url)
            .send_json(alert.body(hook.format))
            .map_err(|e| {
                crate::Error::msg(format!(
                    "cannot post the alert to {WEBHOOK} at {shown} (path not shown): {}",
                    describe(&e)
                ))
            })?;
    }
    Ok(())
}

/// Posts `alert` to each of `hooks`; every problem, each reported.
pub(super) fn post_alerts(hooks: &[Webhook], alert: Option<&Alert>) -> Vec<crate::Error> {
    hooks
        .iter()
        .filter_map(|hook| post_alert(hook, alert).err())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(error: Option<&str>) -> Alert {
        Alert {
            collector: "pods".into(),
            namespace: Some("etl".into()),
            error: error.map(Into::into),
            counts: json!({ "deleted": 2 }),
            run_id: "pods-etl-1".into(),
            text: ":rotating_light: gc pods collector failed in namespace etl: x".into(),
        }
    }

    #[test]
    fn each_format_has_its_shape() {
        let failed = alert(Some("x"));
        assert_eq!(
            failed.body(AlertFormat::Slack),
            json!({ "text": failed.text })
        );
        let card = failed.body(AlertFormat::Teams);
        assert_eq!(card["@type"], "MessageCard");
        assert_eq!(card["themeColor"], "D70000");
        assert_eq!(card["title"], "gc pods collector failed in namespace etl");
        assert_eq!(card["text"], "gc pods collector failed in namespace etl: x");
        let body = failed.body(AlertFormat::Json);
        assert_eq!(body["outcome"], "failed");
        assert_eq!(body["error"], "x");
        assert_eq!(body["counts"]["deleted"], 2);
        assert_eq!(body["runId"], "pods-etl-1");
        let done = alert(None).body(AlertFormat::Json);
        assert_eq!(
            (done["outcome"].as_str(), done["error"].is_null()),
            (Some("succeeded"), true)
        );
        assert_eq!(alert(None).body(AlertFormat::Teams)["themeColor"], "2EB886");
        let message = failed.body(AlertFormat::Adaptive);
        assert_eq!(message["type"], "message");
        let attachment = &message["attachments"][0];
        assert_eq!(
            attachment["contentType"],
            "application/vnd.microsoft.card.adaptive"
        );
        let card = &attachment["content"];
        assert_eq!(card["type"], "AdaptiveCard");
        assert_eq!(
            card["body"][0]["text"],
            "gc pods collector failed in namespace etl"
        );
        assert_eq!(card["body"][0]["color"], "Attention");
        assert_eq!(
            card["body"][1]["text"],
            "gc pods collector failed in namespace etl: x"
        );
        assert_eq!(
            card["body"][2]["facts"],
            json!([{"title": "deleted", "value": "2"}, {"title": "runId", "value": "pods-etl-1"}])
        );
        let good = alert(None).body(AlertFormat::Adaptive);
        assert_eq!(
            good["attachments"][0]["content"]["body"][0]["color"],
            "Good"
        );
    }

    #[test]
    fn a_webhook_names_its_format_or_takes_the_default() {
        let hook = |t| Webhook::parse(t, AlertFormat::Slack);
        assert_eq!(hook("https://h/x?a=b").unwrap().format, AlertFormat::Slack);
        assert_eq!(hook("https://h/x?a=b").unwrap().url, "https://h/x?a=b");
        let teams = hook("teams=https://h/x").unwrap();
        assert_eq!(
            (teams.format, teams.url.as_str()),
            (AlertFormat::Teams, "https://h/x")
        );
        assert_eq!(
            Webhook::parse("https://h", AlertFormat::Json)
                .unwrap()
                .format,
            AlertFormat::Json
        );
        assert_eq!(
            hook("adaptive=https://h/x").unwrap().format,
            AlertFormat::Adaptive
        );
        let err = hook("discord=https://h/secret").unwrap_err();
        assert!(!err.contains("secret"), "{err}");
        assert!(!format!("{:?}", hook("https://h/secret").unwrap()).contains("secret"));
    }
}
