//! Tests of quota counting on parsed workflows (`fedvol_common::quota`). They live in this crate because the core crate does
//! not depend on the file readers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fedvol_common::model::Workflow;
use fedvol_common::quota::*;
use fedvol_common::size::ByteSize;
use fedvol_formats::files::parse_rendered_workflow;

fn wf(text: &str) -> Workflow {
    parse_rendered_workflow(std::path::Path::new("wf.yaml"), text)
        .map(|l| l.value)
        .unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn a_workflow_counts_its_requests_and_its_placed_jobs() {
    let w = wf("version: v4
volumes:
  a: {size: 10GB}
  b: {size: 1GiB}
  c: {name: existing}
jobs:
  one:
    image: {uri: docker://alpine}
    mounts: {/a: a}
    resource: {cpu: {cores: 4}, memory: {size: 2GiB}}
    multinode: {nodes: 2, implementation: openmpi}
  two:
    image: {uri: docker://alpine}
    mounts: {/b: b}
  unmounted:
    image: {uri: docker://alpine}
    resource: {cpu: {cores: 64}}
");
    let a = Amounts::of(&w);
    assert_eq!(a.storage, ByteSize(10_000_000_000 + 1_073_741_824));
    assert_eq!(a.volumes, 3);
    // one: 4 cores x 2 nodes; two: 1 core (the default); unmounted: 64 cores, placed too
    // (every job is placed, with or without volumes).
    assert_eq!(a.cpu, 4 * 2 + 1 + 64);
    assert_eq!(a.instances, 4);
    assert_eq!(
        a.memory.0,
        2 * 2 * 1_073_741_824 + w.jobs[1].resources.memory.0 + w.jobs[2].resources.memory.0
    );
}
