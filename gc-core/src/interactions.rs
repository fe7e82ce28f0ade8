//! Interaction tests of the engines against `mockall` expectations of their ports: which calls
//! happen, in which order, with which arguments, and which never happen.

mod pods;
mod sessions;
