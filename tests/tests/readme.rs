//! Every YAML example in README.md is valid: `fedvol check` accepts it as written.

use std::process::Command;

use fedvol_tests::bin_path;
use fedvol_tests::bins::workspace_root;

#[test]
fn every_yaml_block_of_the_readme_passes_fedvol_check() {
    let readme = std::fs::read_to_string(workspace_root().join("docs/formats.md")).unwrap();
    let mut blocks = Vec::new();
    let mut rest = readme.as_str();
    while let Some(i) = rest.find("```yaml\n") {
        let body = &rest[i + 8..];
        let end = body.find("```").expect("closed code block");
        blocks.push(body[..end].to_string());
        rest = &body[end + 3..];
    }
    assert!(blocks.len() >= 2, "the README shows an inventory and a workflow");
    let dir = tempfile::tempdir().unwrap();
    for (i, b) in blocks.iter().enumerate() {
        // The coordinator's configuration is checked by its own test
        // (`daemon::policy::tests::the_readme_configuration_loads`).
        if b.starts_with("# coordinator.yaml\n") {
            continue;
        }
        let f = dir.path().join(format!("block-{i}.yaml"));
        std::fs::write(&f, b).unwrap();
        let out = Command::new(bin_path("fedvol")).arg("check").arg(&f).output().unwrap();
        assert!(
            out.status.success(),
            "README yaml block {i} fails fedvol check:\n{b}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
