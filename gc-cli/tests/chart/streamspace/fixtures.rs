//! StreamSpace's own objects and rows (`tests/data/streamspace/`), as its agent, its older
//! controller and its API leave them: what the page's flow meets in a real StreamSpace
//! namespace.

use std::process::Command;

use crate::common::Result;

/// A session of the fixtures: its id, user and template (StreamSpace's `{user}-{template}-{8
/// hex}`), and what its row says.
pub(super) struct Session {
    pub(super) id: &'static str,
    pub(super) user: &'static str,
    pub(super) template: &'static str,
    /// Its row's state; `None`: no row (batch terminate deletes it outright).
    pub(super) state: Option<&'static str>,
}

/// The `tests/data/streamspace/NAME` fixture with `SESSION`, `USER`, `TEMPLATE` (and
/// `OWNER_UID`) put in.
fn fixture(name: &str, s: &Session, owner: &str) -> Result<String> {
    let text = std::fs::read_to_string(format!(
        "{}/tests/data/streamspace/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))?;
    Ok(text
        .replace("SESSION", s.id)
        .replace("USER", s.user)
        .replace("TEMPLATE", s.template)
        .replace("OWNER_UID", owner))
}

/// `kubectl ARGS` as the admin, with `input` on stdin; its stdout.
pub(super) fn kubectl(kubeconfig: &str, args: &[&str], input: &str) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new(gc_testbed::tool("kubectl")?)
        .args(args)
        .args(["--kubeconfig", kubeconfig])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    child.stdin.take().unwrap().write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// What StreamSpace v2's agent creates for `s` in `namespace`, its claim on a volume of its own
/// (reclaim policy `Delete`, as a provisioner's): the volume's name.
pub(super) fn v2_session(kubeconfig: &str, namespace: &str, s: &Session) -> Result<String> {
    let volume = format!("pv-{}", s.id);
    let pv = serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume},
        "spec": {
            "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "standard", "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": format!("/tmp/{volume}")},
            "claimRef": {"namespace": namespace, "name": format!("{}-home", s.id)},
        },
    });
    kubectl(kubeconfig, &["create", "-f", "-"], &pv.to_string())?;
    let objects = fixture("v2-session.yaml", s, "")?;
    kubectl(
        kubeconfig,
        &["create", "-n", namespace, "-f", "-"],
        &objects,
    )?;
    Ok(volume)
}

/// What StreamSpace v1's controller creates for `s` in `namespace`: the `Session`, then the
/// Deployment and Service it owns.
pub(super) fn v1_session(kubeconfig: &str, namespace: &str, s: &Session) -> Result {
    let text = fixture("v1-session.yaml", s, "")?;
    let (session, _) = text
        .split_once("\n---\n")
        .expect("the Session, then what it owns");
    kubectl(kubeconfig, &["create", "-n", namespace, "-f", "-"], session)?;
    let uid = kubectl(
        kubeconfig,
        &[
            "get",
            "-n",
            namespace,
            "sessions.stream.streamspace.io",
            s.id,
            "-o",
            "jsonpath={.metadata.uid}",
        ],
        "",
    )?;
    let owned = fixture("v1-session.yaml", s, &uid)?;
    let owned = owned.split_once("\n---\n").unwrap().1;
    kubectl(kubeconfig, &["create", "-n", namespace, "-f", "-"], owned)?;
    Ok(())
}

/// StreamSpace v1's per-user home claim of `user`, shared by the user's sessions.
pub(super) fn v1_home(kubeconfig: &str, namespace: &str, user: &'static str) -> Result {
    let s = Session {
        id: "",
        user,
        template: "",
        state: None,
    };
    let claim = fixture("v1-home.yaml", &s, "")?;
    kubectl(kubeconfig, &["create", "-n", namespace, "-f", "-"], &claim)?;
    Ok(())
}

/// StreamSpace's `sessions` table with the rows of `sessions` that have one.
pub(super) async fn rows(db: &gc_testbed::TestDatabase, sessions: &[Session]) -> Result {
    let schema = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/streamspace/sessions.sql"
    ))?;
    let pool = db.pool().await?;
    sqlx::raw_sql(&schema).execute(&pool).await?;
    for s in sessions {
        let Some(state) = s.state else { continue };
        sqlx::query(
            "INSERT INTO sessions (id, user_id, template_name, state, agent_id, cluster_id) \
             VALUES ($1, $2, $3, $4, 'k8s-agent-1', 'primary')",
        )
        .bind(s.id)
        .bind(s.user)
        .bind(s.template)
        .bind(state)
        .execute(&pool)
        .await?;
    }
    pool.close().await;
    Ok(())
}

/// Runs `sql` (one statement, binding `$1` to `id`) on StreamSpace's table, as its code does.
pub(super) async fn execute(db: &gc_testbed::TestDatabase, sql: &str, id: &str) -> Result {
    let pool = db.pool().await?;
    sqlx::query(sql).bind(id).execute(&pool).await?;
    pool.close().await;
    Ok(())
}
