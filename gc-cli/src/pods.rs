//! The failed-Pod diagnostics collector: its flags, its plan (from a file or the cluster), the
//! fenced apply of a reviewed or freshly made plan, and the plan as text.

pub(crate) mod apply;
pub(crate) mod args;
pub(crate) mod plan;
