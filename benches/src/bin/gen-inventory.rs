//! Writes a generated inventory of N Pods to a file: `gen-inventory N FILE`.
fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: gen-inventory N FILE");
    let path = args.next().expect("usage: gen-inventory N FILE");
    std::fs::write(&path, benches::native_inventory(n)).expect("cannot write the inventory");
}
