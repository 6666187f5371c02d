//! A deterministic OCI image layout archive with one single-layer image, written without a
//! tar library: the entries are a handful of small regular files and directories, so the
//! POSIX ustar headers are written here (no long names, no links, mtime 0, root-owned).

use sha2::{Digest, Sha256};

/// One archive entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    Dir(&'a str),
    File {
        path: &'a str,
        mode: u32,
        data: &'a [u8],
    },
}

const BLOCK: usize = 512;

/// `n` as `width - 1` octal digits and a NUL, into `field`.
fn octal(field: &mut [u8], n: u64) {
    let width = field.len() - 1;
    let text = format!("{n:0width$o}");
    assert!(
        text.len() == width,
        "{n} does not fit a {width}-digit tar field"
    );
    field[..width].copy_from_slice(text.as_bytes());
    field[width] = 0;
}

fn header(path: &str, mode: u32, size: u64, typeflag: u8) -> [u8; BLOCK] {
    assert!(path.len() < 100, "tar name {path} is too long for ustar");
    let mut h = [0u8; BLOCK];
    h[..path.len()].copy_from_slice(path.as_bytes());
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0); // uid
    octal(&mut h[116..124], 0); // gid
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 0); // mtime
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..269].copy_from_slice(b"root");
    h[297..301].copy_from_slice(b"root");
    // The checksum is taken with its own field as spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|b| u64::from(*b)).sum();
    octal(&mut h[148..155], sum);
    h[155] = b' ';
    h
}

/// The tar archive of `entries`, in order, with the two zero blocks that end it.
pub(crate) fn tar(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        match e {
            Entry::Dir(path) => out.extend_from_slice(&header(path, 0o755, 0, b'5')),
            Entry::File { path, mode, data } => {
                out.extend_from_slice(&header(path, *mode, data.len() as u64, b'0'));
                out.extend_from_slice(data);
                out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
            }
        }
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// What the image is.
#[derive(Debug, Clone)]
pub(crate) struct ImageSpec<'a> {
    /// Repository (`docker.io/k3rs/pause`).
    pub repository: &'a str,
    pub tag: &'a str,
    /// OCI `architecture` (`amd64`, `arm64`).
    pub architecture: &'a str,
    /// The root file system's files: path (relative), mode, content.
    pub files: &'a [(&'a str, u32, &'a [u8])],
    pub entrypoint: &'a [&'a str],
}

/// An image as an archive `ctr images import` takes, and its manifest's digest.
#[derive(Debug, Clone)]
pub struct ImageArchive {
    /// The tar archive (an OCI image layout), deterministic for a given image.
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the manifest.
    pub manifest_digest: String,
}

/// The OCI image layout archive (`oci-layout`, `index.json`, `blobs/sha256/…`) of `spec`;
/// the index names the image in containerd's `io.containerd.image.name` annotation.
pub(crate) fn image(spec: &ImageSpec<'_>) -> ImageArchive {
    let layer_entries: Vec<Entry<'_>> = spec
        .files
        .iter()
        .map(|(path, mode, data)| Entry::File {
            path,
            mode: *mode,
            data,
        })
        .collect();
    let layer = tar(&layer_entries);
    let layer_hex = sha256_hex(&layer);
    let platform = serde_json::json!({"architecture": spec.architecture, "os": "linux"});
    let config = serde_json::json!({
        "architecture": spec.architecture,
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": spec.entrypoint,
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_hex}")]},
        "history": [{"created_by": "k3rs (embedded in the binary)"}],
    });
    let config = serde_json::to_vec(&config).expect("JSON");
    let config_hex = sha256_hex(&config);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": format!("sha256:{config_hex}"),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": format!("sha256:{layer_hex}"),
            "size": layer.len(),
        }],
    });
    let manifest = serde_json::to_vec(&manifest).expect("JSON");
    let manifest_hex = sha256_hex(&manifest);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{manifest_hex}"),
            "size": manifest.len(),
            "platform": platform,
            "annotations": {
                "io.containerd.image.name": format!("{}:{}", spec.repository, spec.tag),
                "org.opencontainers.image.ref.name": spec.tag,
            },
        }],
    });
    let index = serde_json::to_vec(&index).expect("JSON");
    let (layer_path, config_path, manifest_path) = (
        format!("blobs/sha256/{layer_hex}"),
        format!("blobs/sha256/{config_hex}"),
        format!("blobs/sha256/{manifest_hex}"),
    );
    let mut blobs = [
        (layer_path.as_str(), layer.as_slice()),
        (config_path.as_str(), config.as_slice()),
        (manifest_path.as_str(), manifest.as_slice()),
    ];
    blobs.sort_by_key(|(path, _)| *path);
    let mut entries = vec![Entry::Dir("blobs/"), Entry::Dir("blobs/sha256/")];
    entries.extend(blobs.iter().map(|(path, data)| Entry::File {
        path,
        mode: 0o644,
        data,
    }));
    entries.push(Entry::File {
        path: "index.json",
        mode: 0o644,
        data: &index,
    });
    entries.push(Entry::File {
        path: "oci-layout",
        mode: 0o644,
        data: br#"{"imageLayoutVersion":"1.0.0"}"#,
    });
    ImageArchive {
        bytes: tar(&entries),
        manifest_digest: format!("sha256:{manifest_hex}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Lists an archive with the system's GNU tar: `mode owner size name` lines.
    fn tar_tv(bytes: &[u8]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tar");
        std::fs::write(&path, bytes).unwrap();
        let out = Command::new("tar")
            .args(["--numeric-owner", "-tvf"])
            .arg(&path)
            .output()
            .expect("tar");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                format!("{} {} {} {}", f[0], f[1], f[2], f[5])
            })
            .collect()
    }

    #[test]
    fn gnu_tar_reads_the_archive() {
        let a = tar(&[
            Entry::Dir("d/"),
            Entry::File {
                path: "d/x",
                mode: 0o755,
                data: b"hello",
            },
            Entry::File {
                path: "empty",
                mode: 0o600,
                data: b"",
            },
        ]);
        assert_eq!(a.len(), 512 * (1 + 2 + 1 + 2));
        assert_eq!(
            tar_tv(&a),
            [
                "drwxr-xr-x 0/0 0 d/",
                "-rwxr-xr-x 0/0 5 d/x",
                "-rw------- 0/0 0 empty"
            ]
        );
    }

    const SPEC: ImageSpec<'static> = ImageSpec {
        repository: "example.com/x",
        tag: "1",
        architecture: "arm64",
        files: &[("bin", 0o755, b"\x7fELF")],
        entrypoint: &["/bin"],
    };

    #[test]
    fn the_image_layout_is_content_addressed() {
        let img = image(&SPEC);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.tar");
        std::fs::write(&path, &img.bytes).unwrap();
        let out = dir.path().join("x");
        std::fs::create_dir(&out).unwrap();
        let st = Command::new("tar")
            .arg("-xf")
            .arg(&path)
            .arg("-C")
            .arg(&out)
            .status()
            .unwrap();
        assert!(st.success());
        let read = |p: &str| std::fs::read(out.join(p)).unwrap();
        let json = |p: &str| serde_json::from_slice::<serde_json::Value>(&read(p)).unwrap();
        for e in std::fs::read_dir(out.join("blobs/sha256")).unwrap() {
            let e = e.unwrap();
            let data = std::fs::read(e.path()).unwrap();
            assert_eq!(sha256_hex(&data), e.file_name().to_string_lossy());
        }
        let index = json("index.json");
        let m = &index["manifests"][0];
        assert_eq!(m["digest"], img.manifest_digest.as_str());
        assert_eq!(
            m["annotations"]["io.containerd.image.name"],
            "example.com/x:1"
        );
        assert_eq!(m["platform"]["architecture"], "arm64");
        let manifest = json(&format!(
            "blobs/sha256/{}",
            img.manifest_digest.trim_start_matches("sha256:")
        ));
        let layer = manifest["layers"][0]["digest"].as_str().unwrap();
        let layer = read(&format!("blobs/sha256/{}", &layer[7..]));
        assert_eq!(tar_tv(&layer), ["-rwxr-xr-x 0/0 4 bin"]);
        let config = manifest["config"]["digest"].as_str().unwrap();
        let config = json(&format!("blobs/sha256/{}", &config[7..]));
        assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/bin"]));
        assert_eq!(config["architecture"], "arm64");
        assert_eq!(read("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#);
        // Deterministic: the same spec, the same bytes.
        assert_eq!(image(&SPEC).bytes, img.bytes);
    }
}
