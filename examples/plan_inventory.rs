//! Plans a failed-Pod inventory in-process with the library, as a Rust service would.
fn main() {}
