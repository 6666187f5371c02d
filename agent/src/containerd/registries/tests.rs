use super::hosts::{hosts_files, Endpoint, HostsFile, HEADER};
use super::*;

fn parsed(text: &str) -> Registries {
    parse(Path::new("/etc/k3rs/registries.yaml"), text).unwrap()
}

fn error(text: &str) -> String {
    let e = parse(Path::new("/etc/k3rs/registries.yaml"), text).unwrap_err();
    crate::report::error_chain(&e)
}

const FULL: &str = r#"
mirrors:
  docker.io:
    endpoint:
      - "https://10.0.0.9:5443"
      - "mirror.example.com"
  "*":
    endpoint: ["http://127.0.0.1:5000"]
  registry.example.com:
    endpoint: ["https://cache.example.com/proxy", "registry.example.com"]
    rewrite:
      "^library/(.*)": "mirrored/$1"
configs:
  "10.0.0.9:5443":
    auth:
      username: pull
      password: "s3cr\"et"
    tls:
      ca_file: /etc/k3rs/ca.crt
      cert_file: /etc/k3rs/client.crt
      key_file: /etc/k3rs/client.key
  mirror.example.com:
    tls:
      insecure_skip_verify: true
  registry.example.com:
    auth:
      identitytoken: tok
"#;

#[test]
fn parses_k3s_format() {
    let r = parsed(FULL);
    assert_eq!(
        r.mirrors["docker.io"].endpoint,
        vec!["https://10.0.0.9:5443", "mirror.example.com"]
    );
    assert_eq!(
        r.mirrors["registry.example.com"].rewrite["^library/(.*)"],
        "mirrored/$1"
    );
    let c = &r.configs["10.0.0.9:5443"];
    assert_eq!(
        c.auth,
        Some(Auth {
            username: "pull".into(),
            password: "s3cr\"et".into(),
            ..Default::default()
        })
    );
    assert_eq!(
        c.tls.as_ref().unwrap().ca_file.as_deref(),
        Some(Path::new("/etc/k3rs/ca.crt"))
    );
    assert!(
        r.configs["mirror.example.com"]
            .tls
            .as_ref()
            .unwrap()
            .insecure_skip_verify
    );
}

#[test]
fn an_empty_or_missing_file_is_no_configuration() {
    assert_eq!(parsed(""), Registries::default());
    assert_eq!(parsed("# nothing yet\n"), Registries::default());
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load(&dir.path().join("registries.yaml")).unwrap(), None);
}

#[test]
fn an_unknown_key_names_the_file_key_and_line() {
    let e = error("mirrors:\n  docker.io:\n    endpoints:\n      - https://m\n");
    assert!(e.starts_with("/etc/k3rs/registries.yaml: "), "{e}");
    assert!(e.contains("mirrors.docker.io"), "{e}");
    assert!(e.contains("unknown field `endpoints`"), "{e}");
    assert!(e.contains("line 3 column 5"), "{e}");
    let e = error("configs:\n  reg:\n    tls:\n      ca: /x\n");
    assert!(e.contains("configs.reg.tls"), "{e}");
    assert!(e.contains("unknown field `ca`"), "{e}");
    assert!(e.contains("line 4"), "{e}");
    let e = error("mirror:\n  docker.io: {}\n");
    assert!(e.contains("unknown field `mirror`"), "{e}");
}

#[test]
fn bad_yaml_and_bad_endpoints_are_errors() {
    let e = error("mirrors:\n  docker.io:\n    endpoint: [\n");
    assert!(e.starts_with("/etc/k3rs/registries.yaml: "), "{e}");
    assert!(e.contains("line"), "{e}");
    let e = error("mirrors:\n  docker.io:\n    endpoint: yes\n");
    assert!(e.contains("mirrors.docker.io.endpoint"), "{e}");
    assert_eq!(
        error("mirrors:\n  docker.io:\n    endpoint: [\"ftp://m\"]\n"),
        "/etc/k3rs/registries.yaml: mirrors.docker.io.endpoint: \"ftp://m\" has a scheme \
         other than http or https"
    );
    assert!(error("mirrors:\n  x:\n    endpoint: [\"https://\"]\n").contains("has no host"));
}

#[test]
fn endpoints_normalize_as_k3s() {
    let e = |t: &str| Endpoint::parse(t).unwrap();
    assert_eq!(
        e("mirror.example.com").url(),
        "https://mirror.example.com/v2"
    );
    assert_eq!(e("localhost:5000").url(), "http://localhost:5000/v2");
    assert_eq!(e("127.0.0.1:5000").url(), "http://127.0.0.1:5000/v2");
    assert_eq!(e("127.0.0.1:443").url(), "https://127.0.0.1:443/v2");
    assert_eq!(
        e("https://localhost:5000/").url(),
        "https://localhost:5000/v2"
    );
    assert_eq!(e("docker.io").url(), "https://registry-1.docker.io/v2");
    assert_eq!(e("docker.io").registry, "docker.io");
    let custom = e("https://cache.example.com/proxy");
    assert_eq!(custom.url(), "https://cache.example.com/proxy");
    assert!(custom.override_path());
    assert!(!e("https://m/v2").override_path());
}

#[test]
fn renders_the_exact_hosts_files() {
    let files = hosts_files(&parsed(FULL));
    let dirs: Vec<&str> = files.iter().map(|f| f.dir.as_str()).collect();
    assert_eq!(
        dirs,
        [
            "*",
            "10.0.0.9:5443",
            "docker.io",
            "mirror.example.com",
            "registry.example.com"
        ]
        .map(|d| if d == "*" { "_default" } else { d })
    );
    let by = |d: &str| &files.iter().find(|f| f.dir == d).unwrap().text;
    assert_eq!(
        by("docker.io"),
        &format!(
            r#"{HEADER}
server = "https://registry-1.docker.io/v2"

[host]

[host."https://10.0.0.9:5443/v2"]
  capabilities = ["pull", "resolve"]
  ca = ["/etc/k3rs/ca.crt"]
  client = [["/etc/k3rs/client.crt", "/etc/k3rs/client.key"]]

[host."https://mirror.example.com/v2"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
"#
        )
    );
    assert_eq!(
        by("_default"),
        &format!(
            r#"{HEADER}

[host]

[host."http://127.0.0.1:5000/v2"]
  capabilities = ["pull", "resolve"]
"#
        )
    );
    // The registry itself listed last is the server, with the rewrites.
    assert_eq!(
        by("registry.example.com"),
        &format!(
            r#"{HEADER}
server = "https://registry.example.com/v2"
[rewrite]
  "^library/(.*)" = "mirrored/$1"

[host]

[host."https://cache.example.com/proxy"]
  capabilities = ["pull", "resolve"]
  override_path = true
  [host."https://cache.example.com/proxy".rewrite]
    "^library/(.*)" = "mirrored/$1"
"#
        )
    );
    // A config with TLS alone makes the registry's own file.
    assert_eq!(
        by("10.0.0.9:5443"),
        &format!(
            r#"{HEADER}
server = "https://10.0.0.9:5443/v2"
ca = ["/etc/k3rs/ca.crt"]
client = [["/etc/k3rs/client.crt", "/etc/k3rs/client.key"]]

[host]
"#
        )
    );
}

#[test]
fn a_registry_with_auth_only_gets_no_hosts_file_but_config_toml_credentials() {
    let r =
        parsed("configs:\n  reg.example.com:\n    auth:\n      username: u\n      password: p\n");
    assert_eq!(hosts_files(&r), Vec::<HostsFile>::new());
    let mut c = crate::containerd::Config::new(Path::new("/d/agent"), "pause");
    c.registries = r;
    let text = c.render();
    assert!(
        text.ends_with(
            r#"[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/d/agent/etc/containerd/certs.d"

[plugins."io.containerd.grpc.v1.cri".registry.configs."reg.example.com".auth]
  username = "u"
  password = "p"
"#
        ),
        "{text}"
    );
}

#[test]
fn credentials_are_toml_escaped() {
    let mut c = crate::containerd::Config::new(Path::new("/d/agent"), "pause");
    c.registries = parsed(FULL);
    let text = c.render();
    assert!(
        text.contains(
            "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"10.0.0.9:5443\".auth]\n  \
             username = \"pull\"\n  password = \"s3cr\\\"et\"\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("configs.\"registry.example.com\".auth]\n  identitytoken = \"tok\"\n"),
        "{text}"
    );
}

#[test]
fn the_hosts_dir_replaces_only_what_the_agent_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = |name: &str| HostsFile {
        dir: name.into(),
        text: format!("{HEADER}\nserver = \"https://{name}/v2\"\n\n[host]\n"),
    };
    hosts::write_hosts_dir(d, &[file("old.example.com"), file("docker.io")]).unwrap();
    std::fs::create_dir_all(d.join("mine.example.com")).unwrap();
    std::fs::write(d.join("mine.example.com/hosts.toml"), "server = \"x\"\n").unwrap();
    hosts::write_hosts_dir(d, &[file("docker.io")]).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["docker.io", "mine.example.com"]);
    assert_eq!(
        std::fs::read_to_string(d.join("docker.io/hosts.toml")).unwrap(),
        file("docker.io").text
    );
}
