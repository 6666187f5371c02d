//! The names the `k3rs` binary answers to besides its own (install.sh links them to it), as
//! k3s's binary does: run as `kubectl`, it is `k3rs kubectl` (the system kubectl with the
//! admin kubeconfig when KUBECONFIG is unset); run as `crictl`, `k3rs crictl`.
//!
//! k3rs does not bundle kubectl: `k3rs kubectl` runs the first `kubectl` on the PATH, else
//! [`PRIVATE_KUBECTL`] next to the k3rs binary (install.sh downloads the official kubectl
//! there when the machine has none).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The command line as k3rs's own: `kubectl ARGS` (argv[0] named `kubectl`) becomes
/// `k3rs kubectl ARGS`, `crictl ARGS` `k3rs crictl ARGS`; any other argv[0] is left alone.
pub fn argv(mut argv: Vec<OsString>) -> Vec<OsString> {
    let called_as = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|name| ["kubectl", "crictl"].into_iter().find(|c| name == *c));
    if let Some(command) = called_as {
        argv[0] = OsString::from("k3rs");
        argv.insert(1, OsString::from(command));
    }
    argv
}

/// The kubectl install.sh puts beside the k3rs binary when the machine has none.
pub const PRIVATE_KUBECTL: &str = "k3rs-kubectl";

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The kubectl `k3rs kubectl` runs: the first executable `kubectl` on `path_var` that is not
/// `self_exe` (a `kubectl` symlink to k3rs must not run itself), else an executable
/// [`PRIVATE_KUBECTL`] in the directory of `self_exe`'s target.
pub fn system_kubectl(path_var: &str, self_exe: &Path) -> Option<PathBuf> {
    let me = std::fs::canonicalize(self_exe).ok();
    let on_path = std::env::split_paths(path_var)
        .map(|dir| dir.join("kubectl"))
        .filter(|p| executable(p))
        .find(|p| me.is_none() || std::fs::canonicalize(p).ok() != me);
    on_path.or_else(|| {
        let private = me.as_deref()?.parent()?.join(PRIVATE_KUBECTL);
        executable(&private).then_some(private)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn kubectl_as_argv0_is_the_kubectl_subcommand() {
        assert_eq!(
            argv(os(&["/usr/local/bin/kubectl", "get", "nodes"])),
            os(&["k3rs", "kubectl", "get", "nodes"])
        );
        assert_eq!(argv(os(&["kubectl"])), os(&["k3rs", "kubectl"]));
        assert_eq!(
            argv(os(&["/usr/local/bin/k3rs", "server"])),
            os(&["/usr/local/bin/k3rs", "server"])
        );
        assert_eq!(argv(os(&["kubectl-foo"])), os(&["kubectl-foo"]));
        assert_eq!(
            argv(os(&["/usr/local/bin/crictl", "ps", "-a"])),
            os(&["k3rs", "crictl", "ps", "-a"])
        );
        assert_eq!(argv(os(&["ctr"])), os(&["ctr"]));
    }

    #[test]
    fn the_system_kubectl_is_never_k3rs_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (linked, real, empty) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        for d in [&linked, &real, &empty] {
            std::fs::create_dir(d).unwrap();
        }
        let me = linked.join("k3rs");
        std::fs::write(&me, "k3rs").unwrap();
        std::os::unix::fs::symlink("k3rs", linked.join("kubectl")).unwrap();
        std::fs::write(real.join("kubectl"), "kubectl").unwrap();
        for p in [&me, &real.join("kubectl")] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = |dirs: &[&PathBuf]| std::env::join_paths(dirs).unwrap().into_string().unwrap();
        assert_eq!(
            system_kubectl(&path(&[&empty, &linked, &real]), &me),
            Some(real.join("kubectl"))
        );
        assert_eq!(system_kubectl(&path(&[&linked, &empty]), &me), None);
        // Run from elsewhere (no symlink involved), the linked one is a kubectl like any other.
        assert_eq!(
            system_kubectl(&path(&[&linked]), &real.join("kubectl")),
            Some(linked.join("kubectl"))
        );
        // With none on the PATH, the private one beside k3rs (also when run through a link).
        let private = linked.join(PRIVATE_KUBECTL);
        std::fs::write(&private, "kubectl").unwrap();
        assert_eq!(
            system_kubectl(&path(&[&empty]), &me),
            None,
            "not executable"
        );
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            system_kubectl(&path(&[&empty]), &linked.join("kubectl")),
            Some(private.clone())
        );
        assert_eq!(
            system_kubectl(&path(&[&linked, &real]), &me),
            Some(real.join("kubectl")),
            "the PATH's kubectl first"
        );
    }
}
