//! The README's five-minute tour, run as written: each command of its code blocks in order,
//! through bash, with `gc-cli` and the test bed's `kubectl` on PATH and the test bed's API server
//! (with its controller manager, so the tour's namespace can be deleted) as the kubeconfig's
//! cluster. The test bed has no kubelet: where the tour waits for its Pods to fail, the test
//! writes their status as a kubelet would (each container terminated with its exit code and
//! termination message).

use std::path::Path;
use std::process::Command;

use gc_testbed::TestBed;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

mod common;

use common::Result;

/// The shell commands of the README section headed `heading`, in order: fenced `sh` blocks,
/// `\` continuations joined.
fn section_commands(readme: &str, heading: &str) -> Vec<String> {
    let start = readme.find(heading).expect("the section");
    let rest = &readme[start + heading.len()..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let (mut commands, mut fenced, mut pending) = (Vec::new(), false, String::new());
    for line in section.lines() {
        if line.starts_with("```") {
            fenced = line == "```sh";
            continue;
        }
        if !fenced {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                commands.push(std::mem::take(&mut pending).trim().to_owned());
            }
        }
    }
    commands
}

/// What the kubelet writes when each container of the tour's Pod `name` has exited: the exit
/// code its command gives, the message it wrote to `/dev/termination-log`, `Failed`.
async fn fail_as_the_kubelet_would(pods: &Api<Pod>, name: &str) -> Result {
    let pod = pods.get(name).await?;
    let container = &pod.spec.unwrap().containers[0];
    let script = container.command.clone().unwrap().join(" ");
    let code: i32 = script.rsplit("exit ").next().unwrap().trim().parse()?;
    let message = script
        .split("echo '")
        .nth(1)
        .and_then(|m| m.split('\'').next())
        .unwrap_or_default();
    // Now, in whole seconds, as the kubelet writes it: the tour's own wait covers retention.
    let finished =
        k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second())?;
    let status = json!({"status": {
        "phase": "Failed",
        "startTime": finished.to_string(),
        "containerStatuses": [{
            "name": container.name, "image": container.image, "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"terminated": {
                "exitCode": code, "reason": "Error", "message": message,
                "startedAt": finished.to_string(), "finishedAt": finished.to_string(),
            }},
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

#[tokio::test]
async fn the_readme_tour_runs_as_written() -> Result {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md"))?;
    let commands = section_commands(&readme, "## A five-minute tour");
    assert!(commands.len() >= 10, "{commands:?}");

    let bed = TestBed::with_controllers().await?;
    let kubectl = gc_testbed::tool("kubectl")?;
    let gc_cli = Path::new(env!("CARGO_BIN_EXE_gc-cli"));
    // A fresh working folder with the repository's examples, a home and an embedded store.
    let work = tempfile::tempdir()?;
    std::os::unix::fs::symlink(root.join("examples"), work.path().join("examples"))?;
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        gc_cli.parent().unwrap().display(),
        kubectl.parent().unwrap().display()
    );
    let pods: Api<Pod> = Api::namespaced(bed.client(), "gc-tour");
    let mut outputs = Vec::new();
    for command in &commands {
        if command.starts_with("kubectl wait") {
            for name in ["tour-exit-1", "tour-exit-2", "tour-not-opted-in"] {
                fail_as_the_kubelet_would(&pods, name).await?;
            }
        }
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", command])
            .current_dir(work.path())
            .env_clear()
            .env("PATH", &path)
            .env("HOME", work.path())
            .env("KUBECONFIG", bed.kubeconfig_path())
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{command}\nstdout: {stdout}\nstderr: {stderr}"
        );
        outputs.push((command.clone(), stdout));
    }
    let output = |prefix: &str| -> &str {
        &outputs
            .iter()
            .find(|(c, _)| c.starts_with(prefix))
            .unwrap_or_else(|| panic!("no command {prefix}"))
            .1
    };
    // What the tour says each step shows.
    assert!(
        output("gc-cli plan pods --inventory")
            .contains("4 targeted, 0 held, 0 deferred, 17 not eligible"),
        "{}",
        output("gc-cli plan pods --inventory")
    );
    let sealed = output("gc-cli plan pods -n gc-tour");
    for pod in ["tour-exit-1", "tour-exit-2"] {
        let row = sealed
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(pod));
        assert!(
            row.is_some_and(|r| r.starts_with("targeted")),
            "{pod}: {sealed}"
        );
    }
    assert!(!sealed.contains("tour-not-opted-in"), "{sealed}");
    assert!(work.path().join("plan.json").is_file());
    let listed = output("gc-cli archives list");
    assert!(
        listed.contains("tour-exit-1") && listed.contains("tour-exit-2"),
        "{listed}"
    );
    let shown = output("gc-cli archives show");
    assert!(shown.contains("cannot reach the queue"), "{shown}");
    let left = output("kubectl get pods");
    assert!(left.contains("tour-not-opted-in"), "{left}");
    assert!(!left.contains("tour-exit"), "{left}");
    // The archives are where the tour says: beside the embedded store under the home folder.
    assert!(work.path().join(".local/state/gc/gc.sqlite3").is_file());
    // `show KIND/NAME` needs its namespace, and names an object without an archive.
    let show = |args: &[&str]| {
        Command::new(gc_cli)
            .args(["archives", "show"])
            .args(args)
            .env_clear()
            .env("HOME", work.path())
            .output()
            .unwrap()
    };
    let out = show(&["pod/tour-exit-1"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a KIND/NAME is looked for in one namespace: name it (-n)"),
        "{stderr}"
    );
    let out = show(&["-n", "gc-tour", "pod/tour-not-opted-in"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no archive of pod/tour-not-opted-in in namespace gc-tour"),
        "{stderr}"
    );
    // The group is part of the name: no Pod of the group `apps` was archived.
    let out = show(&["-n", "gc-tour", "pod.apps/tour-exit-1"]);
    assert_eq!(out.status.code(), Some(1));
    let out = show(&["-n", "gc-tour", "pod/tour-exit-2", "-o", "json"]);
    let archive: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(archive["metadata"]["name"], "tour-exit-2");
    Ok(())
}
