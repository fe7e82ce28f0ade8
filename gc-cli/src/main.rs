//! `gc-cli`: plan, apply and run the collectors.
fn main() {}
