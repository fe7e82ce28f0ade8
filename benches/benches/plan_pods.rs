//! Parse + plan of generated failed-Pod inventories (1k, 10k, 100k Pods) from their JSON text,
//! in chunks as `gc-cli plan pods` reads a file.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gc_core::pods::inventory::Reader;
use gc_core::{PodConfig, PodInputs, PreviousLedger, plan_pods};

fn config(n: usize) -> PodConfig {
    let mut cfg = PodInputs {
        namespace: "batch".into(),
        max_inventory: 10_000,
        ..PodInputs::default()
    }
    .validate()
    .expect("valid inputs");
    // The CLI refuses more than 10,000 Pods, as the flow does; the library is measured past it.
    cfg.max_inventory = n;
    cfg
}

fn parse_and_plan(text: &[u8], cfg: &PodConfig) -> usize {
    let rules = cfg.rules();
    let mut reader = Reader::new(rules, cfg.max_inventory + 1);
    for chunk in text.chunks(256 * 1024) {
        reader.feed(chunk).expect("inventory");
    }
    let inventory = reader.finish().expect("inventory");
    let plan =
        plan_pods(&inventory, &PreviousLedger::default(), cfg, 1_795_953_600.0).expect("plan");
    plan.targets.len() + plan.held + plan.deferred
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan_pods");
    group.sample_size(10);
    for n in [1_000, 10_000, 100_000] {
        let text = benches::native_inventory(n);
        let cfg = config(n);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| parse_and_plan(text, &cfg));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
