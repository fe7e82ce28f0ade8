//! Archives as objects in an S3-compatible store:
//! `s3://BUCKET/PREFIX/<cluster>/<namespace>/<uid>.<sha256>.json`, written create-only.
//!
//! As with [`crate::DirectorySink`], every segment of an object's key after the sink's prefix comes
//! from the [`ArchiveKey`] and is checked against a pattern with no room for `.`, `/` or anything
//! a Pod's author chooses, so no key can name an object outside the prefix. [`ObjectSink::read`]
//! takes back only URIs of this sink's bucket and prefix, so a receipt edited to point elsewhere
//! reads nothing.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use gc_core::ports::{ArchiveKey, ArchiveSink, StoreError};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsCredential, Checksum};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig, StaticCredentialProvider,
};

use crate::archive::{
    ArchiveEntry, PROBE_FOLDER, Parts, Refusal, is_known, probe_bytes, probe_read_back,
};

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may take, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries of a failed request (connection errors, 5xx, 429), at most.
const MAX_RETRIES: usize = 3;
/// No retry starts later than this after the first attempt.
const RETRY_TIMEOUT: Duration = Duration::from_secs(15);
/// The region when neither the options nor the environment name one.
const DEFAULT_REGION: &str = "us-east-1";

/// How to reach an S3-compatible store; secrets never come from here but from the environment or
/// a file.
#[derive(Debug, Clone, Default)]
pub struct ObjectOptions {
    /// Endpoint URL (`https://...`, or `http://...` which is then allowed); `None` = from the
    /// environment (`AWS_ENDPOINT_URL`, else `AWS_ENDPOINT`), else AWS.
    pub endpoint: Option<String>,
    /// Region; `None` = from the environment (`AWS_REGION`, else `AWS_DEFAULT_REGION`), else
    /// `us-east-1`.
    pub region: Option<String>,
    /// An AWS shared-credentials file: its `[default]` section, or the one `$AWS_PROFILE` names,
    /// with `aws_access_key_id`, `aws_secret_access_key` and optionally `aws_session_token`.
    /// `None` = the standard environment variables (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) and the other credential sources that
    /// `object_store`'s `AmazonS3Builder::from_env` reads (web identity, container, instance).
    pub credentials_file: Option<PathBuf>,
}

/// Archives in an S3-compatible object store, one JSON object per Pod. Implements
/// [`ArchiveSink`].
///
/// # Guarantees
/// A write is one `PutObject` of the whole archive, so a reader sees the old archive or the new
/// one, never part of one. Each upload carries the SHA-256 of its body twice (the signed payload
/// hash and `x-amz-checksum-sha256`), so a store refuses a body that arrives altered or short.
/// Requests are path-style (`ENDPOINT/BUCKET/KEY`, as MinIO, Ceph and most S3-compatible stores
/// expect). A failed request is retried at most 3 times and never after 15 s; connecting may take
/// 5 s and a request 30 s, so an unreachable store fails in seconds. Plain HTTP is allowed only
/// when the endpoint is `http://`. Credentials never appear in messages or in `Debug` output.
///
/// # Errors
/// Reading a URI with nothing behind it is [`StoreError::NotFound`]; a URI of another bucket or
/// prefix, or not of an archive's form, is refused with [`StoreError::Other`] before any request.
/// An unreachable store, refused credentials, a missing bucket and answers 5xx or 429 are
/// [`StoreError::Unavailable`].
///
/// # Caveats
/// Nothing is checked until the first request; [`ObjectSink::check`] makes one on purpose.
#[derive(Clone)]
pub struct ObjectSink {
    /// The URL as given.
    url: String,
    bucket: String,
    /// `PREFIX/`, or empty.
    key_prefix: String,
    /// The endpoint as messages show it.
    endpoint: String,
    store: Arc<AmazonS3>,
}

impl fmt::Debug for ObjectSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectSink")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl ObjectSink {
    /// A sink for `url`: `s3://BUCKET` or `s3://BUCKET/PREFIX`. The bucket follows S3's naming
    /// rules (3 to 63 of `[a-z0-9.-]`, starting and ending with a letter or digit, no `..`, not
    /// an IP address); the prefix is one or more `/`-separated segments of `[A-Za-z0-9._-]`, none
    /// empty, `.` or `..`.
    ///
    /// Reads the credentials file when one is given, and makes no request.
    ///
    /// # Errors
    /// [`StoreError::Other`] naming the URL (or the endpoint, region or credentials file) and
    /// what is wrong with it.
    pub fn open(url: &str, options: &ObjectOptions) -> Result<Self, StoreError> {
        let location = Location::parse(url)?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let endpoint = options
            .endpoint
            .clone()
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .or_else(|| env("AWS_ENDPOINT"));
        let region = options
            .region
            .clone()
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        check_region(&region)?;
        let credentials = match &options.credentials_file {
            Some(path) => Some(read_credentials(path, env("AWS_PROFILE").as_deref())?),
            None => None,
        };

        install_crypto_provider();
        let mut builder = builder_from_env(credentials.is_some());
        let shown_endpoint = match &endpoint {
            Some(endpoint) => {
                let allow_http = check_endpoint(endpoint)?;
                builder = builder
                    .with_endpoint(endpoint.trim_end_matches('/'))
                    .with_allow_http(allow_http);
                endpoint.trim_end_matches('/').to_owned()
            }
            None => {
                builder = builder.with_allow_http(false);
                format!("https://s3.{region}.amazonaws.com")
            }
        };
        if let Some(credential) = credentials {
            builder = builder.with_credentials(Arc::new(StaticCredentialProvider::new(credential)));
        }
        let store = builder
            .with_bucket_name(&location.bucket)
            .with_region(&region)
            .with_virtual_hosted_style_request(false)
            .with_s3_express(false)
            .with_checksum_algorithm(Checksum::SHA256)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: MAX_RETRIES,
                retry_timeout: RETRY_TIMEOUT,
            })
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                format!("{}s", CONNECT_TIMEOUT.as_secs()),
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                format!("{}s", REQUEST_TIMEOUT.as_secs()),
            )
            .build()
            .map_err(|e| StoreError::Other(format!("cannot set up the object store {url}: {e}")))?;
        Ok(Self {
            url: url.to_owned(),
            key_prefix: location.prefix.map(|p| format!("{p}/")).unwrap_or_default(),
            bucket: location.bucket,
            endpoint: shown_endpoint,
            store: Arc::new(store),
        })
    }

    /// The sink's URL as given (it holds no secrets: a URL with user information is refused).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Proves the store answers, accepts the credentials and has the bucket, with one `LIST`
    /// request of at most one key under the prefix.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the store cannot be reached, refuses the credentials
    /// (`the store ... refused the credentials (403 ...)`), denies the key the request (`the store
    /// ... denied it (403 AccessDenied ...)`) or has no such bucket
    /// (`bucket "x" does not exist at ENDPOINT`); [`StoreError::Other`] for any other answer.
    pub async fn check(&self) -> Result<(), StoreError> {
        let options = PaginatedListOptions {
            max_keys: Some(1),
            ..PaginatedListOptions::default()
        };
        self.store
            .list_paginated(self.list_prefix(None).as_deref(), options)
            .await
            .map(drop)
            .map_err(|e| self.error(&format!("cannot list {}", self.url), None, &e))
    }

    /// Every archive under the prefix for `cluster_id` (every cluster's when `None`), in key
    /// order. Objects whose names are not `<cluster>/<namespace>/<uid>.json` with checked parts
    /// are skipped.
    ///
    /// # Errors
    /// [`StoreError::Other`] when `cluster_id` is not a valid cluster id; otherwise as
    /// [`ObjectSink::check`].
    pub async fn list(&self, cluster_id: Option<&str>) -> Result<Vec<ArchiveEntry>, StoreError> {
        if let Some(cluster) = cluster_id {
            // Checks the cluster alone: the namespace and uid given with it are valid.
            Parts::check(cluster, "default", "0")?;
        }
        let mut entries = Vec::new();
        self.walk(cluster_id, |relative, size| {
            if let Ok(parts) = Parts::parse(relative) {
                entries.push(ArchiveEntry {
                    uri: format!("{}{relative}", self.uri_prefix()),
                    key: parts.key(),
                    bytes: size,
                });
            }
        })
        .await?;
        entries.sort_by(|a, b| a.uri.cmp(&b.uri));
        Ok(entries)
    }

    /// The URIs of the objects under the prefix that are neither archives (of any cluster) nor
    /// sink probes, in key order: gc never reads them, `archives verify` lists them.
    ///
    /// # Errors
    /// As [`ObjectSink::check`].
    pub async fn unexpected(&self) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        self.walk(None, |relative, _| {
            if !is_known(relative) {
                found.push(format!("{}{relative}", self.uri_prefix()));
            }
        })
        .await?;
        found.sort();
        Ok(found)
    }

    /// Calls `each` with the name (relative to the prefix) and size of every object under the
    /// prefix, or under `cluster_id`'s folder of it, page by page.
    async fn walk(
        &self,
        cluster_id: Option<&str>,
        mut each: impl FnMut(&str, u64),
    ) -> Result<(), StoreError> {
        let prefix = self.list_prefix(cluster_id);
        let mut page_token = None;
        loop {
            let options = PaginatedListOptions {
                page_token: page_token.take(),
                ..PaginatedListOptions::default()
            };
            let page = self
                .store
                .list_paginated(prefix.as_deref(), options)
                .await
                .map_err(|e| self.error(&format!("cannot list {}", self.url), None, &e))?;
            for object in page.result.objects {
                if let Some(relative) = object.location.as_ref().strip_prefix(&self.key_prefix) {
                    each(relative, object.size);
                }
            }
            match page.page_token {
                Some(token) => page_token = Some(token),
                None => return Ok(()),
            }
        }
    }

    /// Whether `uri` names a place under this sink's bucket and prefix (whether or not an
    /// archive is there).
    pub fn holds(&self, uri: &str) -> bool {
        uri.starts_with(&self.uri_prefix())
    }

    /// `s3://BUCKET/` or `s3://BUCKET/PREFIX/`: every URI this sink writes starts with it.
    fn uri_prefix(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key_prefix)
    }

    /// The key prefix a listing asks for: `PREFIX/`, then `CLUSTER/` when given; `None` when both
    /// are absent (the whole bucket).
    fn list_prefix(&self, cluster_id: Option<&str>) -> Option<String> {
        let prefix = match cluster_id {
            Some(cluster) => format!("{}{cluster}/", self.key_prefix),
            None => self.key_prefix.clone(),
        };
        (!prefix.is_empty()).then_some(prefix)
    }

    /// The object key and URI for `key`'s archive of sha256 `digest`, after checking every part.
    fn locate(&self, key: &ArchiveKey, digest: String) -> Result<(ObjectPath, String), StoreError> {
        let parts = Parts::of(key, digest)?;
        let relative = parts.relative();
        let uri = format!("{}{relative}", self.uri_prefix());
        Ok((self.object_path(&relative, &uri)?, uri))
    }

    /// The object key of an archive URI this sink wrote, or a refusal.
    fn path_of_uri(&self, uri: &str) -> Result<ObjectPath, StoreError> {
        let prefix = self.uri_prefix();
        let Some(relative) = uri.strip_prefix(&prefix) else {
            return Err(refuse_uri(
                uri,
                &format!("not an object URI under {}", prefix.trim_end_matches('/')),
            ));
        };
        let parts = Parts::parse(relative).map_err(|why| match why {
            Refusal::Shape(why) => refuse_uri(uri, why),
            Refusal::Part(e) => e,
        })?;
        self.object_path(&parts.relative(), uri)
    }

    fn object_path(&self, relative: &str, uri: &str) -> Result<ObjectPath, StoreError> {
        ObjectPath::parse(format!("{}{relative}", self.key_prefix))
            .map_err(|e| refuse_uri(uri, &format!("not a valid object key: {e}")))
    }

    /// Maps a store error for `doing` (a phrase such as `cannot write archive URI`); a 404 that is
    /// not a missing bucket means the archive `missing` names does not exist.
    fn error(&self, doing: &str, missing: Option<&str>, e: &object_store::Error) -> StoreError {
        self.error_needing(doing, missing, e, "list, put and get")
    }

    /// As [`ObjectSink::error`], for a request that needs the permissions `needs` on the bucket.
    fn error_needing(
        &self,
        doing: &str,
        missing: Option<&str>,
        e: &object_store::Error,
        needs: &str,
    ) -> StoreError {
        let answer = Answer::of(e);
        let endpoint = &self.endpoint;
        match answer.status {
            None if answer.transport => StoreError::Unavailable(format!(
                "{doing}: no answer from the object store at {endpoint}: {e}"
            )),
            None => StoreError::Other(format!("{doing}: {e}")),
            Some(status) => {
                let said = answer.said(status);
                if answer.code.as_deref() == Some("NoSuchBucket") {
                    StoreError::Unavailable(format!(
                        "{doing}: bucket {:?} does not exist at {endpoint} ({said})",
                        self.bucket
                    ))
                } else if let (404, Some(uri)) = (status, missing) {
                    StoreError::NotFound(format!("archive {uri} does not exist ({said})"))
                } else if status == 403 && answer.code.as_deref() == Some("AccessDenied") {
                    // Valid credentials without the permission: say which, not "credentials".
                    StoreError::Unavailable(format!(
                        "{doing}: the store at {endpoint} denied it ({said}): the key needs {needs} \
                         on the bucket"
                    ))
                } else if status == 401 || status == 403 {
                    StoreError::Unavailable(format!(
                        "{doing}: the store at {endpoint} refused the credentials ({said})"
                    ))
                } else if status >= 500 || status == 429 || status == 408 {
                    StoreError::Unavailable(format!(
                        "{doing}: the store at {endpoint} is unavailable ({said})"
                    ))
                } else {
                    StoreError::Other(format!("{doing}: the store at {endpoint} answered {said}"))
                }
            }
        }
    }
}

impl ObjectSink {
    /// Proves the store takes archives: lists the prefix ([`ObjectSink::check`]), writes the
    /// probe object `PREFIX/.gc-probe/<cluster>` (outside the archives' keys; replaced each run),
    /// writes it again create-only as archives are written (`If-None-Match: *`: a 412 is the
    /// answer expected, a store that refuses conditional writes fails here) and reads it back. Denied writes or
    /// reads, a read-only or missing bucket, an unreachable store or refused credentials fail
    /// here, before anything is pinned: the permissions a bucket needs stay list, put and get.
    ///
    /// # Errors
    /// As [`ObjectSink::check`], and [`StoreError::Unavailable`] when the probe reads back other
    /// bytes.
    pub async fn probe(&self, cluster_id: &str) -> Result<(), StoreError> {
        Parts::check(cluster_id, "default", "0")?;
        // A listing first: some stores (s3s-fs) take a write into a missing bucket.
        self.check().await?;
        let relative = format!("{PROBE_FOLDER}/{cluster_id}");
        let uri = format!("{}{relative}", self.uri_prefix());
        let path = self.object_path(&relative, &uri)?;
        let bytes = probe_bytes(cluster_id);
        self.store
            .put(&path, PutPayload::from(bytes.clone()))
            .await
            .map_err(|e| self.error(&format!("cannot write the probe {uri}"), None, &e))?;
        // Archives are written create-only: the store must take such a write (and refuse it
        // over an existing object, 412; one that ignores the condition replaces nothing here).
        let create = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&path, PutPayload::from(bytes.clone()), create)
            .await
        {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(e) => {
                let doing = format!(
                    "cannot write the probe {uri} create-only (If-None-Match: *), as archives are \
                     written"
                );
                return Err(self.error(&doing, None, &e));
            }
        }
        let doing = format!("cannot read back the probe {uri}");
        let back = self
            .store
            .get(&path)
            .await
            .map_err(|e| self.error(&doing, None, &e))?
            .bytes()
            .await
            .map_err(|e| self.error(&doing, None, &e))?;
        if !probe_read_back(&back, &bytes, cluster_id) {
            return Err(StoreError::Unavailable(format!(
                "{doing}: it holds other bytes than were written"
            )));
        }
        Ok(())
    }
}

impl ObjectSink {
    /// Removes the archive `uri` names: `true` when it was there, `false` when it was already
    /// missing (a `HEAD` first: S3 answers a `DELETE` of a missing key as one of an existing one).
    ///
    /// # Errors
    /// [`StoreError::Other`] for a URI of another bucket or prefix, or not of an archive's form
    /// (no request is made); otherwise as [`ObjectSink::check`] (a key without `s3:DeleteObject`
    /// is `denied it`).
    pub async fn remove(&self, uri: &str) -> Result<bool, StoreError> {
        if !self.exists(uri).await? {
            return Ok(false);
        }
        let path = self.path_of_uri(uri)?;
        let doing = format!("cannot remove archive {uri}");
        match self.store.delete(&path).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.error_needing(&doing, None, &e, "delete (s3:DeleteObject)")),
        }
    }

    /// Whether the archive `uri` names is there (a `HEAD`).
    ///
    /// # Errors
    /// As [`ObjectSink::remove`].
    pub async fn exists(&self, uri: &str) -> Result<bool, StoreError> {
        let path = self.path_of_uri(uri)?;
        let doing = format!("cannot look for archive {uri}");
        match self.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(e) => match self.error_needing(&doing, Some(uri), &e, "get") {
                StoreError::NotFound(_) => Ok(false),
                other => Err(other),
            },
        }
    }
}

#[async_trait]
impl ArchiveSink for ObjectSink {
    /// Writes create-only (`If-None-Match: *`) under a key that names the archive's sha256, so
    /// no upload, however late, replaces an archive: the same archive lands on its own key
    /// (refused, or the same bytes again where a store ignores the condition), another one
    /// beside it. An archive already there is read back and must hold exactly these bytes.
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        let (path, uri) = self.locate(key, gc_core::pods::archive::digest(bytes))?;
        let create = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&path, PutPayload::from(bytes.to_vec()), create)
            .await
        {
            Ok(_) => Ok(uri),
            Err(object_store::Error::AlreadyExists { .. }) => {
                if self.read(&uri).await? == bytes {
                    Ok(uri)
                } else {
                    Err(StoreError::Other(format!(
                        "archive {uri} exists with other bytes: not replaced"
                    )))
                }
            }
            Err(e) => Err(self.error(&format!("cannot write archive {uri}"), None, &e)),
        }
    }

    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of_uri(uri)?;
        let doing = format!("cannot read archive {uri}");
        let result = self
            .store
            .get(&path)
            .await
            .map_err(|e| self.error(&doing, Some(uri), &e))?;
        let bytes = result
            .bytes()
            .await
            .map_err(|e| self.error(&doing, Some(uri), &e))?;
        Ok(bytes.to_vec())
    }
}

/// Makes ring the process's default TLS crypto provider when none is installed: the HTTP client
/// asks for the default, and ring is the one provider this workspace builds rustls with, so
/// anything else in the process that asks would get ring too.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a default is then installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A parsed `s3://` URL. Read here, not by `object_store` (`AmazonS3Builder::with_url`): that
/// takes the bucket from the URL but checks neither S3's naming rules nor the prefix's segments,
/// and a URL gc refuses must be refused before any request, saying which rule it breaks. The
/// URL is read by the `url` crate first ([`crate::shown_url`]): one that does not parse, or that
/// holds credentials, is never shown.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Location {
    bucket: String,
    /// The prefix without leading or trailing `/`.
    prefix: Option<String>,
}

impl Location {
    fn parse(url: &str) -> Result<Self, StoreError> {
        let shown = crate::shown_url(url).map_err(|why| {
            StoreError::Other(format!(
                "the archive URL ($GC_ARCHIVE_URL / --archive-url) {why}"
            ))
        })?;
        let refuse = |why: &str| Err(StoreError::Other(format!("archive URL {shown}: {why}")));
        let Some(rest) = url.strip_prefix("s3://") else {
            return refuse("not an s3:// URL (s3://BUCKET or s3://BUCKET/PREFIX, in lowercase)");
        };
        let (bucket, prefix) = match rest.split_once('/') {
            Some((bucket, prefix)) => (bucket, Some(prefix)),
            None => (rest, None),
        };
        // Before the bucket is named: it would hold them.
        if bucket.contains('@') {
            return refuse(
                "must not hold user information; credentials come from the environment or a file",
            );
        }
        if url.contains(['?', '#']) {
            return refuse("must not have a query or fragment");
        }
        if bucket.is_empty() {
            return refuse("no bucket");
        }
        if let Err(why) = check_bucket(bucket) {
            return refuse(&format!("bucket {bucket:?} {why}"));
        }
        if let Some(prefix) = prefix {
            for segment in prefix.split('/') {
                if let Err(why) = check_segment(segment) {
                    return refuse(&format!("prefix segment {segment:?} {why}"));
                }
            }
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.map(str::to_owned),
        })
    }
}

/// S3's bucket naming rules, as far as they can be checked without asking.
fn check_bucket(bucket: &str) -> Result<(), &'static str> {
    let bytes = bucket.as_bytes();
    if !(3..=63).contains(&bytes.len()) {
        return Err("must be 3 to 63 characters long");
    }
    if !bytes
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return Err("must consist of lowercase letters, digits, `.` and `-`");
    }
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err("must start and end with a letter or digit");
    }
    if bucket.contains("..") {
        return Err("must not contain `..`");
    }
    if bucket.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("must not be an IP address");
    }
    Ok(())
}

fn check_segment(segment: &str) -> Result<(), &'static str> {
    if segment.is_empty() {
        return Err("is empty (no leading, trailing or double `/`)");
    }
    if segment == "." || segment == ".." {
        return Err("must not be `.` or `..`");
    }
    if !segment
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
    {
        return Err("must consist of letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

/// Whether plain HTTP is to be allowed: only for an `http://` endpoint.
fn check_endpoint(endpoint: &str) -> Result<bool, StoreError> {
    let shown = crate::shown_url(endpoint).map_err(|why| {
        StoreError::Other(format!(
            "the object store endpoint (--archive-endpoint, $GC_ARCHIVE_ENDPOINT, \
             $AWS_ENDPOINT_URL or $AWS_ENDPOINT) {why}"
        ))
    })?;
    let refuse = |why: &str| {
        Err(StoreError::Other(format!(
            "object store endpoint {shown}: {why}"
        )))
    };
    let (allow_http, rest) = if let Some(rest) = endpoint.strip_prefix("https://") {
        (false, rest)
    } else if let Some(rest) = endpoint.strip_prefix("http://") {
        (true, rest)
    } else {
        return refuse("must start with https:// or http://");
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return refuse("has no host");
    }
    if authority.contains('@') {
        return refuse(
            "must not hold user information; credentials come from the environment or a file",
        );
    }
    if rest.contains(['?', '#']) {
        return refuse("must not have a query or fragment");
    }
    Ok(allow_http)
}

fn check_region(region: &str) -> Result<(), StoreError> {
    if region.is_empty()
        || !region
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    {
        return Err(StoreError::Other(format!(
            "object store region {region:?} must consist of letters, digits, `-` and `_`"
        )));
    }
    Ok(())
}

/// A builder with the `AWS_*` settings of the environment that `from_env` would read, less those
/// [`ObjectSink::open`] decides itself (endpoint, region, bucket, addressing, checksum), and less
/// every credential setting when a credentials file is used.
fn builder_from_env(own_credentials: bool) -> AmazonS3Builder {
    use AmazonS3ConfigKey as K;
    let mut builder = AmazonS3Builder::new();
    for (name, value) in std::env::vars_os() {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            continue;
        };
        if !name.starts_with("AWS_") {
            continue;
        }
        let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() else {
            continue;
        };
        let decided = matches!(
            key,
            K::Endpoint
                | K::S3Endpoint
                | K::Region
                | K::DefaultRegion
                | K::Bucket
                | K::VirtualHostedStyleRequest
                | K::S3Express
                | K::Checksum
                | K::Client(ClientConfigKey::AllowHttp)
        );
        let credential = matches!(
            key,
            K::AccessKeyId
                | K::SecretAccessKey
                | K::Token
                | K::ImdsV1Fallback
                | K::MetadataEndpoint
                | K::ContainerCredentialsRelativeUri
                | K::ContainerCredentialsFullUri
                | K::ContainerAuthorizationTokenFile
                | K::WebIdentityTokenFile
                | K::RoleArn
                | K::RoleSessionName
                | K::StsEndpoint
                | K::SkipSignature
        );
        let skipped = decided || (own_credentials && credential);
        if !skipped {
            builder = builder.with_config(key, value);
        }
    }
    builder
}

/// The credentials of `profile` (`default` when `None`) in an AWS shared-credentials file.
fn read_credentials(path: &Path, profile: Option<&str>) -> Result<AwsCredential, StoreError> {
    let profile = profile.unwrap_or("default");
    let file = path.display();
    let ini = ini::Ini::load_from_file_noescape(path)
        .map_err(|e| StoreError::Other(format!("cannot read the credentials file {file}: {e}")))?;
    let Some(section) = ini.section(Some(profile)) else {
        return Err(StoreError::Other(format!(
            "the credentials file {file} has no [{profile}] section"
        )));
    };
    let value = |name: &str| section.get(name).map(str::trim).filter(|v| !v.is_empty());
    let required = |name: &str| {
        value(name).map(str::to_owned).ok_or_else(|| {
            StoreError::Other(format!(
                "the credentials file {file} has no {name} in its [{profile}] section"
            ))
        })
    };
    Ok(AwsCredential {
        key_id: required("aws_access_key_id")?,
        secret_key: required("aws_secret_access_key")?,
        token: value("aws_session_token").map(str::to_owned),
    })
}

fn refuse_uri(uri: &str, why: &str) -> StoreError {
    StoreError::Other(format!("refusing to read archive {uri:?}: {why}"))
}

/// What the store answered, as far as `object_store`'s error tells.
#[derive(Debug, Default, PartialEq, Eq)]
struct Answer {
    /// The HTTP status, when there was an answer.
    status: Option<u16>,
    /// S3's error code (`NoSuchBucket`, `AccessDenied`, ...).
    code: Option<String>,
    /// S3's error message.
    message: Option<String>,
    /// No answer: the connection failed, timed out or broke.
    transport: bool,
}

impl Answer {
    fn of(e: &object_store::Error) -> Self {
        // The status and S3's error document are only in the error's text.
        let text = e.to_string();
        let status = match e {
            object_store::Error::NotFound { .. } => Some(404),
            object_store::Error::PermissionDenied { .. } => Some(403),
            object_store::Error::Unauthenticated { .. } => Some(401),
            _ => status_in(&text),
        };
        Self {
            status,
            code: element(&text, "Code"),
            message: element(&text, "Message"),
            transport: transport_kind(e).is_some(),
        }
    }

    /// `403 AccessDenied: Access Denied.`, or as much of it as is known.
    fn said(&self, status: u16) -> String {
        let mut said = status.to_string();
        if let Some(code) = &self.code {
            said = format!("{said} {code}");
        }
        if let Some(message) = &self.message {
            said = format!("{said}: {message}");
        }
        said
    }
}

/// The kind of the transport error in `e`'s chain of sources, if any.
fn transport_kind(e: &object_store::Error) -> Option<HttpErrorKind> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = current {
        if let Some(http) = error.downcast_ref::<HttpError>() {
            return Some(http.kind());
        }
        current = error.source();
    }
    None
}

/// The status in `object_store`'s text `... status code: 403 Forbidden ...`.
fn status_in(text: &str) -> Option<u16> {
    let (_, after) = text.split_once("status code: ")?;
    after.get(..3)?.parse().ok()
}

/// The text of the first `<name>...</name>` element in `text`, unescaped, at most 200 characters.
fn element(text: &str, name: &str) -> Option<String> {
    let (_, after) = text.split_once(&format!("<{name}>"))?;
    let (value, _) = after.split_once(&format!("</{name}>"))?;
    let value = value
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    let value: String = value.chars().take(200).collect();
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cluster: &str, namespace: &str, uid: &str) -> ArchiveKey {
        ArchiveKey {
            cluster_id: cluster.into(),
            namespace: namespace.into(),
            uid: uid.into(),
        }
    }

    fn sink(url: &str) -> ObjectSink {
        let options = ObjectOptions {
            endpoint: Some("http://127.0.0.1:1".into()),
            ..ObjectOptions::default()
        };
        ObjectSink::open(url, &options).unwrap()
    }

    fn message(e: StoreError) -> String {
        match e {
            StoreError::Other(m) => m,
            other => panic!("expected StoreError::Other, got {other:?}"),
        }
    }

    #[test]
    fn urls_parse_into_bucket_and_prefix() {
        let cases = [
            ("s3://bkt", "bkt", None),
            ("s3://my.bucket-1", "my.bucket-1", None),
            ("s3://bkt/gc", "bkt", Some("gc")),
            ("s3://bkt/a/B_c/d.e-f", "bkt", Some("a/B_c/d.e-f")),
        ];
        for (url, bucket, prefix) in cases {
            let location = Location::parse(url).unwrap();
            assert_eq!(location.bucket, bucket, "{url}");
            assert_eq!(location.prefix.as_deref(), prefix, "{url}");
        }
    }

    #[test]
    fn bad_urls_are_refused_naming_the_url() {
        let long = format!("s3://{}", "b".repeat(64));
        for url in [
            "",
            "s3://",
            "s3:/bkt",
            "S3://bkt",
            "http://bkt",
            "file:///bkt",
            "s3://Bad_Bucket",
            "s3://ab",
            &long,
            "s3://-bkt",
            "s3://bkt-",
            "s3://b..kt",
            "s3://192.168.1.1",
            "s3://bkt?x=1",
            "s3://bkt/",
            "s3://bkt//a",
            "s3://bkt/a/",
            "s3://bkt/./a",
            "s3://bkt/a/..",
            "s3://bkt/a b",
            "s3://bkt/a%2Fb",
            "s3://bkt/a?b",
        ] {
            let e = ObjectSink::open(url, &ObjectOptions::default()).unwrap_err();
            let m = message(e);
            // Named as it may be shown; one that cannot be shown named by its setting.
            let named = match crate::shown_url(url) {
                Ok(shown) => format!("archive URL {shown}:"),
                Err(_) => "the archive URL ($GC_ARCHIVE_URL / --archive-url) is not a valid URL \
                           (its value is not shown): "
                    .into(),
            };
            assert!(m.contains(&named), "{url}: {m}");
        }
    }

    #[test]
    fn user_information_is_never_shown() {
        // A secret key holding a raw `/` makes the text before it read as the bucket: nothing
        // of it is shown.
        for url in [
            "s3://key:Zq/Wv@bkt/p",
            "s3://key:Zq?Wv@bkt",
            "s3://key:1/Wv@bkt",
        ] {
            let m = message(Location::parse(url).unwrap_err());
            assert!(!m.contains("Zq") && !m.contains("Wv"), "{m}");
        }
        let m = message(Location::parse("s3://key:secret@bkt/p").unwrap_err());
        assert!(!m.contains("secret"), "{m}");
        assert!(m.contains("s3://***@bkt/p"), "{m}");
        let options = ObjectOptions {
            endpoint: Some("https://key:secret@store.example".into()),
            ..ObjectOptions::default()
        };
        let m = message(ObjectSink::open("s3://bkt", &options).unwrap_err());
        assert!(
            !m.contains("secret") && m.contains("https://***@store.example"),
            "{m}"
        );
    }

    #[test]
    fn endpoints_must_be_http_or_https() {
        assert!(!check_endpoint("https://s3.example").unwrap());
        assert!(check_endpoint("http://127.0.0.1:9000/").unwrap());
        for endpoint in ["s3.example", "ftp://x", "https://", "http://x?a=b"] {
            assert!(check_endpoint(endpoint).is_err(), "{endpoint}");
        }
    }

    #[tokio::test]
    async fn an_https_endpoint_gets_a_tls_client() {
        let options = ObjectOptions {
            endpoint: Some("https://127.0.0.1:1".into()),
            ..ObjectOptions::default()
        };
        let sink = ObjectSink::open("s3://bkt", &options).unwrap();
        let e = sink.check().await.unwrap_err();
        assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
        assert!(e.to_string().contains("https://127.0.0.1:1"), "{e}");
    }

    #[test]
    fn uris_round_trip_with_and_without_a_prefix() {
        let digest = "7e".repeat(32);
        for (url, uri) in [
            ("s3://bkt", format!("s3://bkt/c/ns/0a-B9.{digest}.json")),
            (
                "s3://bkt/gc/archives",
                format!("s3://bkt/gc/archives/c/ns/0a-B9.{digest}.json"),
            ),
        ] {
            let sink = sink(url);
            let (path, written) = sink
                .locate(&key("c", "ns", "0a-B9"), digest.clone())
                .unwrap();
            assert_eq!(written, uri);
            assert_eq!(sink.path_of_uri(&written).unwrap(), path);
            let object = uri.strip_prefix("s3://bkt/").unwrap();
            assert_eq!(path.as_ref(), object);
        }
    }

    #[test]
    fn only_this_sinks_uris_are_read() {
        let sink = sink("s3://bkt/gc");
        assert!(sink.path_of_uri("s3://bkt/gc/c/ns/u-2.json").is_ok());
        let named = format!("s3://bkt/gc/c/ns/u-2.{}.json", "09".repeat(32));
        assert!(sink.path_of_uri(&named).is_ok());
        let upper = format!("s3://bkt/gc/c/ns/u-2.{}.json", "AB".repeat(32));
        for uri in [
            "s3://bkt/c/ns/u.json",
            "s3://other/gc/c/ns/u.json",
            "s3://bkt/gc2/c/ns/u.json",
            "s3://bkt/gc/../c/ns/u.json",
            "s3://bkt/gc/c/../ns/u.json",
            "s3://bkt/gc/c/ns/../u.json",
            "s3://bkt/gc/c/ns/u.json/x",
            "s3://bkt/gc/x/c/ns/u.json",
            "s3://bkt/gc/c/ns/u.txt",
            "s3://bkt/gc/c/ns/u%2Fx.json",
            "s3://bkt/gc//c/ns/u.json",
            "s3://bkt/gc/c/ns",
            "file:///bkt/gc/c/ns/u.json",
            "S3://bkt/gc/c/ns/u.json",
            "s3://bkt/gc/.gc-probe/c",
            "s3://bkt/gc/c/ns/u.1.json",
            upper.as_str(),
        ] {
            let e = sink.path_of_uri(uri).unwrap_err();
            assert!(message(e).starts_with("refusing"), "{uri}");
        }
    }

    #[test]
    fn keys_are_checked_part_by_part() {
        let sink = sink("s3://bkt");
        for (c, n, u) in [
            ("", "ns", "u"),
            ("Primary", "ns", "u"),
            ("a/b", "ns", "u"),
            ("c", "..", "u"),
            ("c", "n.s", "u"),
            ("c", "ns", ".."),
            ("c", "ns", "a/b"),
            ("c", "ns", "a.json"),
        ] {
            let e = sink.locate(&key(c, n, u), "0".repeat(64)).unwrap_err();
            assert!(
                message(e).contains("refusing archive key"),
                "{c:?} {n:?} {u:?}"
            );
        }
    }

    #[test]
    fn list_prefixes_end_with_a_slash() {
        assert_eq!(sink("s3://bkt").list_prefix(None), None);
        assert_eq!(
            sink("s3://bkt").list_prefix(Some("c")).as_deref(),
            Some("c/")
        );
        assert_eq!(
            sink("s3://bkt/p/q").list_prefix(None).as_deref(),
            Some("p/q/")
        );
        assert_eq!(
            sink("s3://bkt/p").list_prefix(Some("c")).as_deref(),
            Some("p/c/")
        );
    }

    #[test]
    fn debug_shows_the_url_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AKEXAMPLE\naws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        let options = ObjectOptions {
            endpoint: Some("http://127.0.0.1:1".into()),
            credentials_file: Some(file),
            ..ObjectOptions::default()
        };
        let sink = ObjectSink::open("s3://bkt/p", &options).unwrap();
        let shown = format!("{sink:?}");
        assert_eq!(shown, r#"ObjectSink { url: "s3://bkt/p", .. }"#);
        assert_eq!(sink.url(), "s3://bkt/p");
    }

    #[test]
    fn credentials_files_name_what_is_missing_but_never_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        let missing = read_credentials(&dir.path().join("nope"), None).unwrap_err();
        assert!(message(missing).contains("nope"));

        std::fs::write(&file, "[other]\naws_access_key_id = AKEXAMPLE\n").unwrap();
        let m = message(read_credentials(&file, None).unwrap_err());
        assert!(
            m.contains("[default]") && m.contains(&file.display().to_string()),
            "{m}"
        );
        let m = message(read_credentials(&file, Some("other")).unwrap_err());
        assert!(
            m.contains("aws_secret_access_key") && !m.contains("AKEXAMPLE"),
            "{m}"
        );

        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AK\naws_secret_access_key = S/K+\naws_session_token = T\n",
        )
        .unwrap();
        let credential = read_credentials(&file, None).unwrap();
        assert_eq!(credential.key_id, "AK");
        assert_eq!(credential.secret_key, "S/K+");
        assert_eq!(credential.token.as_deref(), Some("T"));
    }

    #[test]
    fn answers_are_read_from_the_error_text() {
        let text = "Error performing GET http://h/b in 1ms - Server returned non-2xx status code: \
                    404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>\
                    <Message>The bucket &amp; all</Message></Error>";
        assert_eq!(status_in(text), Some(404));
        assert_eq!(element(text, "Code").as_deref(), Some("NoSuchBucket"));
        assert_eq!(
            element(text, "Message").as_deref(),
            Some("The bucket & all")
        );
        assert_eq!(status_in("no status"), None);
        assert_eq!(element("<Code></Code>", "Code"), None);
    }
}
