//! `kubectl gc`: the release archive (`scripts/package.sh`) installed by a real krew from the
//! plugin manifest (`deploy/krew/gc.yaml`, rendered as krew-release-bot renders it), then run
//! through a real kubectl (built by the test bed from the API server's Go modules): its help says
//! `kubectl gc`, and kubectl completes `kubectl gc ...` through `kubectl_complete-gc`.

use std::path::Path;
use std::process::{Command, Output};

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `deploy/krew/gc.yaml` as krew-release-bot renders it for `tag`: each `addURIAndSha` the
/// archive's URL and `sha256`.
fn render(template: &str, tag: &str, sha256: &str) -> String {
    let mut rendered = Vec::new();
    for line in template.lines() {
        let line = line.replace("{{ .TagName }}", tag);
        match line.trim_start().strip_prefix("{{addURIAndSha \"") {
            Some(rest) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                let url = rest.split('"').next().unwrap();
                rendered.push(format!("{indent}uri: {url}"));
                rendered.push(format!("{indent}sha256: {sha256}"));
            }
            None => rendered.push(line),
        }
    }
    rendered.join("\n") + "\n"
}

#[test]
fn kubectl_gc_is_the_plugin_krew_installs() {
    let kubectl = gc_testbed::tool("kubectl").unwrap();
    let krew = gc_testbed::tool("krew").unwrap();
    let bin = kubectl.parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("v{}", env!("CARGO_PKG_VERSION"));

    // The release archive of this machine's platform.
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/package.sh"
    ))
    .args([env!("CARGO_BIN_EXE_gc-cli"), &tag])
    .arg(dir.path().join("dist"))
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let (sha256, archive) = stdout.trim().split_once(' ').unwrap();
    let archive = Path::new(archive);

    // The manifest names that archive for this platform.
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/krew/gc.yaml"
    ))
    .unwrap();
    let manifest = render(&template, &tag, sha256);
    let file = archive.file_name().unwrap().to_str().unwrap();
    assert!(
        manifest.contains(&format!("/{tag}/{file}")),
        "{file} in\n{manifest}"
    );
    let manifest_path = dir.path().join("gc.yaml");
    std::fs::write(&manifest_path, &manifest).unwrap();

    // krew installs it from the manifest and the archive, as from a release.
    let krew_root = dir.path().join("krew");
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        krew_root.join("bin").display(),
        bin.display()
    );
    let run = |program: &Path, args: &[&str]| {
        Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", dir.path())
            .env("KREW_ROOT", &krew_root)
            .output()
            .unwrap()
    };
    let out = run(
        &krew,
        &[
            "install",
            &format!("--manifest={}", manifest_path.display()),
            &format!("--archive={}", archive.display()),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "krew install:\n{stdout}\n{stderr}");
    assert!(krew_root.join("bin/kubectl-gc").exists());

    // `kubectl gc` through the real kubectl: its help and version say `kubectl gc`.
    let out = run(&kubectl, &["gc", "--help"]);
    let (help, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        help.contains("Usage: kubectl gc [OPTIONS] <COMMAND>"),
        "{help}"
    );
    for command in ["plan", "apply", "run", "restore", "archives"] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command}: {help}"
        );
    }
    assert!(!help.contains("Usage: gc-cli"), "{help}");
    let out = run(&kubectl, &["gc", "restore", "sessions", "--help"]);
    let (help, _) = text(&out);
    assert!(
        help.contains("Usage: kubectl gc restore sessions"),
        "{help}"
    );
    let out = run(&kubectl, &["gc", "--version"]);
    assert_eq!(
        text(&out).0.trim(),
        format!("kubectl gc {}", env!("CARGO_PKG_VERSION"))
    );
    // A usage error names the command as the user typed it.
    let out = run(&kubectl, &["gc", "plan", "pods", "--no-such-flag"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Usage: kubectl gc plan pods"), "{stderr}");

    // Completion through kubectl, once kubectl_complete-gc is on PATH as the caveats say.
    let store = krew_root.join(format!("store/gc/{tag}/kubectl_complete-gc"));
    std::os::unix::fs::symlink(&store, krew_root.join("bin/kubectl_complete-gc")).unwrap();
    let complete = |words: &[&str]| -> Vec<String> {
        let args: Vec<&str> = ["__complete", "gc"].iter().chain(words).copied().collect();
        let out = run(&kubectl, &args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        stdout
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(complete(&["re"]), ["restore", ":4"]);
    let top = complete(&[""]);
    for command in ["plan", "apply", "run", "serve", "restore", "archives"] {
        assert!(top.iter().any(|c| c == command), "{command}: {top:?}");
    }
    assert!(!top.iter().any(|c| c.starts_with("__")), "{top:?}");
    assert_eq!(complete(&["run", "pods", "--dry-r"]), ["--dry-run", ":4"]);
    assert_eq!(complete(&["archives", "list", "-o", "ya"]), ["yaml", ":4"]);
    let shells = complete(&["completions", ""]);
    assert!(
        shells.contains(&"bash".to_owned()) && shells.contains(&"zsh".to_owned()),
        "{shells:?}"
    );
}
