//! Kubernetes label selectors: parsed and checked once, matched against an object's labels, and
//! written back in one canonical form (the form the API server receives).
//!
//! The syntax is the API server's set-based one: comma-separated requirements, each
//! `key=value` (or `key==value`), `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`
//! (the label exists) or `!key` (it does not). Keys are label keys (an optional DNS-subdomain
//! prefix and `/`, then a name of at most 63 characters of `[A-Za-z0-9._-]` that starts and ends
//! alphanumeric); values are label values (the same name rule, or empty). An empty selector is
//! refused: the collectors never mean "everything".
//!
//! The canonical form is the API server's own: requirements sorted by key (stably), `==` written
//! `=`, the values of `in` and `notin` sorted and without duplicates, `key in (a,b)` with one
//! space on each side of the operator.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use crate::input::is_qualified_name;

/// An object's labels.
pub type Labels = BTreeMap<String, String>;

/// How a requirement compares a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key=value`: the label is present with this value.
    Equals,
    /// `key!=value`: the label is absent, or has another value.
    NotEquals,
    /// `key in (a,b)`: the label is present with one of these values.
    In,
    /// `key notin (a,b)`: the label is absent, or has none of these values.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The comparison.
    pub operator: Operator,
    /// The values: one for `=` and `!=`, at least one (sorted, distinct) for `in` and `notin`,
    /// none for `key` and `!key`.
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `labels` meet this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        let among = || value.is_some_and(|v| self.values.contains(v));
        match self.operator {
            Operator::Equals | Operator::In => among(),
            Operator::NotEquals | Operator::NotIn => !among(),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match self.operator {
            Operator::Equals => write!(f, "{key}={}", self.values[0]),
            Operator::NotEquals => write!(f, "{key}!={}", self.values[0]),
            Operator::In => write!(f, "{key} in ({})", self.values.join(",")),
            Operator::NotIn => write!(f, "{key} notin ({})", self.values.join(",")),
            Operator::Exists => f.write_str(key),
            Operator::DoesNotExist => write!(f, "!{key}"),
        }
    }
}

/// A parsed label selector: every requirement must hold. Its [`fmt::Display`] is the canonical
/// form, which parses back to the same selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Why a text is not a label selector: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("label selector {input:?}: {problem} at position {position} ({near})")]
pub struct SelectorError {
    /// The text given.
    pub input: String,
    /// Where (in characters, from 1; one past the end for a text that stops too early).
    pub position: usize,
    /// The term found there, quoted, or `end of input`.
    pub near: String,
    /// What is wrong.
    pub problem: String,
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    s.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub fn is_label_key(s: &str) -> bool {
    is_qualified_name(s)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Equals,
    DoubleEquals,
    NotEquals,
    Bang,
    Open,
    Close,
    Comma,
    End,
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self {
            Self::Word(w) => format!("{w:?}"),
            Self::Equals => "\"=\"".into(),
            Self::DoubleEquals => "\"==\"".into(),
            Self::NotEquals => "\"!=\"".into(),
            Self::Bang => "\"!\"".into(),
            Self::Open => "\"(\"".into(),
            Self::Close => "\")\"".into(),
            Self::Comma => "\",\"".into(),
            Self::End => "end of input".into(),
        }
    }
}

/// Characters that end a word.
fn special(c: char) -> bool {
    c.is_whitespace() || matches!(c, '=' | '!' | '(' | ')' | ',')
}

struct Parser<'a> {
    input: &'a str,
    /// Tokens with their byte offsets.
    tokens: Vec<(usize, Token<'a>)>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        let mut tokens = Vec::new();
        let mut chars = input.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            let mut then = |want: char| chars.next_if(|(_, n)| *n == want).is_some();
            let token = match c {
                c if c.is_whitespace() => continue,
                '=' if then('=') => Token::DoubleEquals,
                '=' => Token::Equals,
                '!' if then('=') => Token::NotEquals,
                '!' => Token::Bang,
                '(' => Token::Open,
                ')' => Token::Close,
                ',' => Token::Comma,
                _ => {
                    let mut end = input.len();
                    while let Some((i, n)) = chars.peek() {
                        if special(*n) {
                            end = *i;
                            break;
                        }
                        chars.next();
                    }
                    Token::Word(&input[at..end])
                }
            };
            tokens.push((at, token));
        }
        tokens.push((input.len(), Token::End));
        Self {
            input,
            tokens,
            next: 0,
        }
    }

    fn peek(&self) -> &Token<'a> {
        &self.tokens[self.next].1
    }

    fn take(&mut self) -> (usize, Token<'a>) {
        let t = self.tokens[self.next].clone();
        self.next = (self.next + 1).min(self.tokens.len() - 1);
        t
    }

    fn error(&self, at: usize, token: &Token<'_>, problem: impl Into<String>) -> SelectorError {
        SelectorError {
            input: self.input.into(),
            position: self.input[..at].chars().count() + 1,
            near: token.describe(),
            problem: problem.into(),
        }
    }

    fn key(&mut self, after: &str) -> Result<String, SelectorError> {
        match self.take() {
            (_, Token::Word(w)) if is_label_key(w) => Ok(w.into()),
            (at, t @ Token::Word(_)) => Err(self.error(
                at,
                &t,
                "not a label key (an optional DNS-subdomain prefix and \"/\", then at most 63 \
                 of [A-Za-z0-9._-], starting and ending alphanumeric)",
            )),
            (at, t) => Err(self.error(at, &t, format!("expected a label key {after}"))),
        }
    }

    fn value(&mut self, after: &str) -> Result<String, SelectorError> {
        match self.peek() {
            // `key=` and `key=,...`: the empty value.
            Token::Comma | Token::End | Token::Close => Ok(String::new()),
            _ => match self.take() {
                (_, Token::Word(w)) if is_label_value(w) => Ok(w.into()),
                (at, t @ Token::Word(_)) => Err(self.error(
                    at,
                    &t,
                    "not a label value (at most 63 of [A-Za-z0-9._-], starting and ending \
                     alphanumeric, or empty)",
                )),
                (at, t) => Err(self.error(at, &t, format!("expected a label value {after}"))),
            },
        }
    }

    fn values(&mut self, key: &str, op: &str) -> Result<Vec<String>, SelectorError> {
        match self.take() {
            (_, Token::Open) => {}
            (at, t) => {
                return Err(self.error(at, &t, format!("expected \"(\" after \"{key} {op}\"")));
            }
        }
        let mut values = Vec::new();
        loop {
            let (at, t) = self.take();
            match t {
                Token::Word(w) if is_label_value(w) => values.push(w.to_owned()),
                Token::Word(_) => {
                    return Err(self.error(
                        at,
                        &t,
                        "not a label value (at most 63 of [A-Za-z0-9._-], starting and ending \
                         alphanumeric)",
                    ));
                }
                _ => {
                    return Err(self.error(
                        at,
                        &t,
                        format!("expected a value in the list of \"{key} {op}\""),
                    ));
                }
            }
            match self.take() {
                (_, Token::Comma) => {}
                (_, Token::Close) => break,
                (at, t) => {
                    return Err(self.error(
                        at,
                        &t,
                        format!("expected \",\" or \")\" in the list of \"{key} {op}\""),
                    ));
                }
            }
        }
        values.sort();
        values.dedup();
        Ok(values)
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if *self.peek() == Token::Bang {
            self.take();
            let key = self.key("after \"!\"")?;
            return Ok(Requirement {
                key,
                operator: Operator::DoesNotExist,
                values: vec![],
            });
        }
        let key = self.key("at the start of a requirement")?;
        if matches!(self.peek(), Token::Comma | Token::End) {
            return Ok(Requirement {
                key,
                operator: Operator::Exists,
                values: vec![],
            });
        }
        let (at, op) = self.take();
        let (operator, values) = match op {
            Token::Equals | Token::DoubleEquals => {
                let after = format!("after {key:?} {}", op.describe());
                (Operator::Equals, vec![self.value(&after)?])
            }
            Token::NotEquals => {
                let after = format!("after {key:?} \"!=\"");
                (Operator::NotEquals, vec![self.value(&after)?])
            }
            Token::Word("in") => (Operator::In, self.values(&key, "in")?),
            Token::Word("notin") => (Operator::NotIn, self.values(&key, "notin")?),
            t => {
                return Err(self.error(
                    at,
                    &t,
                    format!("expected an operator after {key:?} (=, ==, !=, in, notin) or \",\""),
                ));
            }
        };
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }
}

impl Selector {
    /// Parses and checks `text`.
    ///
    /// # Errors
    /// [`SelectorError`] naming the text, the position and the term where it goes wrong: an
    /// empty selector, a key or value outside the label syntax, a missing or unknown operator,
    /// an unclosed or empty list, a stray character.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut p = Parser::new(text);
        if *p.peek() == Token::End {
            let (at, t) = p.take();
            return Err(p.error(at, &t, "empty selector"));
        }
        let mut requirements = Vec::new();
        loop {
            requirements.push(p.requirement()?);
            match p.take() {
                (_, Token::End) => break,
                (_, Token::Comma) => {}
                (at, t) => {
                    return Err(p.error(at, &t, "expected \",\" or the end after a requirement"));
                }
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The requirements, in canonical order.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A label that spares an object: `key=value`, as `--protect-label` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPair {
    /// The label key.
    pub key: String,
    /// The value it must have.
    pub value: String,
}

impl LabelPair {
    /// Parses `key=value` (a label key, then a label value, which may be empty).
    ///
    /// # Errors
    /// What is wrong with it, in words.
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        let Some((key, value)) = text.split_once('=') else {
            return Err("must be KEY=VALUE");
        };
        if !is_label_key(key) {
            return Err("must be KEY=VALUE with a label key");
        }
        if !is_label_value(value) {
            return Err("must be KEY=VALUE with a label value");
        }
        Ok(Self {
            key: key.into(),
            value: value.into(),
        })
    }

    /// Whether `labels` carry this label with this value.
    pub fn matches(&self, labels: &Labels) -> bool {
        labels.get(&self.key) == Some(&self.value)
    }
}

impl fmt::Display for LabelPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

impl Serialize for LabelPair {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LabelPair {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a label selector input must be, in the words of an [`crate::input::InputError`].
pub const SELECTOR_RULE: &str = "must be a label selector: comma-separated key=value, \
     key!=value, key in (a,b), key notin (a,b), key or !key";

/// The default protect label: objects labelled so are never deleted by either collector.
pub const DEFAULT_PROTECT_LABEL: &str = "gc.example.com/protect=true";

/// Why an object the collector would otherwise judge is spared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Spared {
    /// It carries the protect label.
    Protected,
    /// It matches the exclude selector.
    Excluded,
}

impl Spared {
    /// `protected` or `excluded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Protected => "protected",
            Self::Excluded => "excluded",
        }
    }

    /// Whether `labels` spare their object: the protect label first, then the exclude
    /// selector.
    pub fn of(labels: &Labels, protect: &LabelPair, exclude: Option<&Selector>) -> Option<Self> {
        if protect.matches(labels) {
            Some(Self::Protected)
        } else if exclude.is_some_and(|s| s.matches(labels)) {
            Some(Self::Excluded)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Each valid text and its canonical form.
    #[test]
    fn parses_and_renders_canonically() {
        for (text, canonical) in [
            ("app=web", "app=web"),
            ("app==web", "app=web"),
            (" app = web ", "app=web"),
            ("app!=web", "app!=web"),
            ("tier in (b,a,b)", "tier in (a,b)"),
            ("tier in(a)", "tier in (a)"),
            ("tier notin ( x , y )", "tier notin (x,y)"),
            ("canary", "canary"),
            ("!canary", "!canary"),
            ("! canary", "!canary"),
            ("app=", "app="),
            ("app=,b", "app=,b"),
            ("app==", "app="),
            (
                "z=1,app in (streamspace-session),!canary,a.b/c_d.e-f",
                "a.b/c_d.e-f,app in (streamspace-session),!canary,z=1",
            ),
            ("b=2,a=1,b=1", "a=1,b=2,b=1"),
            ("example.com/x=Y.z_9", "example.com/x=Y.z_9"),
            ("in=notin", "in=notin"),
            ("in in (in)", "in in (in)"),
        ] {
            let s = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.to_string(), canonical, "{text}");
            assert_eq!(Selector::parse(canonical).unwrap(), s, "{text} round trip");
        }
    }

    /// Each malformed text, the position and the term named, and the problem.
    #[test]
    fn malformed_selectors_name_the_place() {
        let long = "a".repeat(64);
        for (text, position, near, problem) in [
            ("", 1, "end of input", "empty selector"),
            ("   ", 4, "end of input", "empty selector"),
            ("app=web,", 9, "end of input", "expected a label key"),
            (",app", 1, "\",\"", "expected a label key"),
            ("app in (a", 10, "end of input", "expected \",\" or \")\""),
            ("app in a", 8, "\"a\"", "expected \"(\""),
            ("app in ()", 9, "\")\"", "expected a value in the list"),
            ("app in (a,)", 11, "\")\"", "expected a value in the list"),
            ("app notin (a b)", 14, "\"b\"", "expected \",\" or \")\""),
            ("app = web = x", 11, "\"=\"", "expected \",\" or the end"),
            ("app web", 5, "\"web\"", "expected an operator"),
            ("app >1", 5, "\">1\"", "expected an operator"),
            ("!app=1", 5, "\"=\"", "expected \",\" or the end"),
            ("!", 2, "end of input", "expected a label key after \"!\""),
            ("-app=1", 1, "\"-app\"", "not a label key"),
            ("Bad_/x=1", 1, "\"Bad_/x\"", "not a label key"),
            ("a/b/c=1", 1, "\"a/b/c\"", "not a label key"),
            ("app=-x", 5, "\"-x\"", "not a label value"),
            ("app=a/b", 5, "\"a/b\"", "not a label value"),
            ("app in (x,-y)", 11, "\"-y\"", "not a label value"),
            ("app)", 4, "\")\"", "expected an operator"),
            ("(app)", 1, "\"(\"", "expected a label key"),
            ("é=1", 1, "\"é\"", "not a label key"),
            ("a=é,b", 3, "\"é\"", "not a label value"),
        ] {
            let e = Selector::parse(text).expect_err(text);
            assert_eq!(
                (e.position, e.near.as_str()),
                (position, near),
                "{text}: {e}"
            );
            assert!(e.problem.contains(problem), "{text}: {e}");
            assert_eq!(e.input, text);
            assert!(
                e.to_string()
                    .starts_with(&format!("label selector {text:?}: "))
            );
        }
        assert!(Selector::parse(&format!("{long}=1")).is_err());
        assert!(Selector::parse(&format!("a={long}")).is_err());
        assert!(Selector::parse(&format!("{}=1", "a".repeat(63))).is_ok());
        assert!(Selector::parse(&format!("a={}", "a".repeat(63))).is_ok());
    }

    /// Each requirement against labels that meet it and labels that do not.
    #[test]
    fn matches_as_the_api_server_does() {
        let none = labels(&[]);
        let web = labels(&[("app", "web"), ("team", "payments")]);
        let db = labels(&[("app", "db"), ("canary", "")]);
        for (text, [on_none, on_web, on_db]) in [
            ("app=web", [false, true, false]),
            ("app==db", [false, false, true]),
            ("app!=web", [true, false, true]),
            ("app in (web,db)", [false, true, true]),
            ("team in (payments)", [false, true, false]),
            ("team notin (payments)", [true, false, true]),
            ("canary", [false, false, true]),
            ("!canary", [true, true, false]),
            ("canary=", [false, false, true]),
            ("app in (web,db),!canary", [false, true, false]),
            ("app,team!=payments", [false, false, true]),
        ] {
            let s = Selector::parse(text).unwrap();
            assert_eq!(
                [s.matches(&none), s.matches(&web), s.matches(&db)],
                [on_none, on_web, on_db],
                "{text}"
            );
        }
    }

    #[test]
    fn label_pairs_and_what_spares() {
        for (text, ok) in [
            ("gc.example.com/protect=true", true),
            ("keep=yes", true),
            ("keep=", true),
            ("keep", false),
            ("=yes", false),
            ("keep=a=b", false),
            ("bad key=yes", false),
            ("keep=-yes", false),
        ] {
            assert_eq!(LabelPair::parse(text).is_ok(), ok, "{text}");
        }
        let protect = LabelPair::parse(DEFAULT_PROTECT_LABEL).unwrap();
        assert_eq!(protect.to_string(), DEFAULT_PROTECT_LABEL);
        let exclude = Selector::parse("team in (payments)").unwrap();
        let both = labels(&[("gc.example.com/protect", "true"), ("team", "payments")]);
        let spare = |l: &Labels| Spared::of(l, &protect, Some(&exclude));
        assert_eq!(spare(&both), Some(Spared::Protected));
        assert_eq!(
            spare(&labels(&[("team", "payments")])),
            Some(Spared::Excluded)
        );
        assert_eq!(spare(&labels(&[("gc.example.com/protect", "false")])), None);
        assert_eq!(spare(&labels(&[("gc.example.com/protect", "True")])), None);
        assert_eq!(
            Spared::of(&labels(&[("team", "payments")]), &protect, None),
            None
        );
    }

    #[test]
    fn serde_uses_the_canonical_text() {
        let s = Selector::parse("b in (y,x),a").unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#""a,b in (x,y)""#);
        assert_eq!(serde_json::from_str::<Selector>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Selector>(r#""a in (""#).is_err());
        let p: LabelPair = serde_json::from_str(r#""keep=yes""#).unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), r#""keep=yes""#);
        assert!(serde_json::from_str::<LabelPair>(r#""keep""#).is_err());
    }
}
