//! `gc-cli plan sessions` and `gc-cli run sessions`: the orphaned-session collector against a
//! live cluster and the application's session database.
//!
//! `plan` scans, looks the ids up and plans, and writes nothing anywhere but its output. `run`
//! does the same under the run lock and then deletes, each delete fenced on uid and
//! resourceVersion (a dry run sends the same deletes in server-side dry run), and writes one
//! JSON audit line per resource judged. Any doubt before the first delete (the cluster or the
//! database unreachable, a table that holds none of the scanned ids, the mass-deletion guard)
//! deletes nothing and exits non-zero.

pub(crate) mod args;
pub(crate) mod plan;
pub(crate) mod restore;
pub(crate) mod run;
