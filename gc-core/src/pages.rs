//! Reading a paginated list to the end: one helper for every list the engines make.

use serde_json::Value;

use crate::ports::{ClusterError, Page};

/// Objects per list page.
pub const PAGE_SIZE: u32 = 500;

/// How many times a list starts again after its continue token expired (HTTP 410).
pub const MAX_RESTARTS: usize = 3;

/// What `keep` makes of every item of the list that `fetch` returns page by page
/// (`fetch(None)` is the first page, `fetch(Some(token))` the next), `None`s left out.
///
/// # Guarantees
/// - Every page's `items` is read in order; the list ends when a page has no continue token.
/// - An expired continue token starts the list again from its first page with nothing kept,
///   [`MAX_RESTARTS`] times at most.
///
/// # Errors
/// The first error of `fetch` or `keep`, or a page that is not a JSON list.
pub async fn collect<T, F>(
    mut fetch: impl FnMut(Option<String>) -> F,
    mut keep: impl FnMut(&Value) -> Result<Option<T>, ClusterError>,
) -> Result<Vec<T>, ClusterError>
where
    // A plain closure returning a future of an owned token (not an async closure over a borrowed
    // one): the caller's future then stays `Send` for every lifetime, as a spawned task needs.
    F: Future<Output = Result<Page, ClusterError>>,
{
    let mut kept = Vec::new();
    let mut restarts = 0;
    let mut token: Option<String> = None;
    loop {
        let page = match fetch(token.clone()).await {
            Err(ClusterError::Expired) if restarts < MAX_RESTARTS => {
                restarts += 1;
                kept.clear();
                token = None;
                continue;
            }
            page => page?,
        };
        let list: Value = serde_json::from_slice(&page.text)
            .map_err(|e| ClusterError::Other(format!("unreadable list: {e}")))?;
        for item in list["items"].as_array().into_iter().flatten() {
            kept.extend(keep(item)?);
        }
        match page.continue_token {
            Some(t) => token = Some(t),
            None => return Ok(kept),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::block_on;

    use super::*;

    fn page(items: &[u32], next: Option<&str>) -> Result<Page, ClusterError> {
        Ok(Page {
            text: serde_json::json!({ "items": items })
                .to_string()
                .into_bytes(),
            continue_token: next.map(str::to_owned),
        })
    }

    /// Scripted answers in order; what was kept, and the tokens asked for.
    fn check(
        answers: Vec<Result<Page, ClusterError>>,
        expect: Result<Vec<u64>, ClusterError>,
        tokens: &[Option<&str>],
    ) {
        let mut answers = answers.into_iter();
        let mut asked = Vec::new();
        let got = block_on(collect(
            |token| {
                asked.push(token);
                std::future::ready(answers.next().expect("an answer"))
            },
            |item| Ok(item.as_u64().filter(|n| n % 2 == 1)),
        ));
        assert_eq!(got, expect);
        let tokens: Vec<Option<String>> = tokens.iter().map(|t| t.map(str::to_owned)).collect();
        assert_eq!(asked, tokens);
    }

    #[test]
    fn pages_are_read_to_the_end_and_restarted_when_expired() {
        check(vec![page(&[], None)], Ok(vec![]), &[None]);
        check(
            vec![page(&[1, 2], Some("a")), page(&[3], None)],
            Ok(vec![1, 3]),
            &[None, Some("a")],
        );
        // Expired: start again with nothing kept from the first pass.
        check(
            vec![
                page(&[1], Some("a")),
                Err(ClusterError::Expired),
                page(&[5], Some("b")),
                page(&[7], None),
            ],
            Ok(vec![5, 7]),
            &[None, Some("a"), None, Some("b")],
        );
        // Three restarts at most: the fourth expiry is the error.
        let answers = (0..=MAX_RESTARTS)
            .flat_map(|_| [page(&[1], Some("a")), Err(ClusterError::Expired)])
            .collect();
        let tokens: Vec<Option<&str>> =
            (0..=MAX_RESTARTS).flat_map(|_| [None, Some("a")]).collect();
        check(answers, Err(ClusterError::Expired), &tokens);
        check(
            vec![Err(ClusterError::Unavailable("down".into()))],
            Err(ClusterError::Unavailable("down".into())),
            &[None],
        );
        check(
            vec![Ok(Page {
                text: b"not json".to_vec(),
                continue_token: None,
            })],
            Err(ClusterError::Other(
                "unreadable list: expected ident at line 1 column 2".into(),
            )),
            &[None],
        );
    }
}
