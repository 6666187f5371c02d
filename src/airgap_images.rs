//! `k3rs airgap-images`: writes the images tarball a release ships beside the binary
//! (`k3rs-airgap-images-<arch>.tar`, what `scripts/release.sh` puts in `dist/`).
//!
//! The only image a k3rs node needs that k3rs itself provides is the pod sandbox (pause)
//! image, which the agent also imports from the binary at start; the tarball is for runtimes
//! the agent does not import into (`--container-runtime-endpoint`), for mirroring into a
//! private registry, and for `<data-dir>/agent/images`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use k3rs_agent::images::pause;

#[derive(Args)]
pub struct AirgapImagesArgs {
    /// Where to write the tarball (`-`: standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: PathBuf,
    /// The architecture (amd64, arm64; default: this machine's).
    #[arg(long)]
    arch: Option<String>,
}

pub fn run(args: AirgapImagesArgs) -> anyhow::Result<()> {
    let arch = match args.arch.as_deref() {
        None => pause::Arch::host().with_context(|| {
            format!(
                "k3rs airgap-images: no embedded pause image for {} (its nodes pull {})",
                std::env::consts::ARCH,
                pause::FALLBACK_IMAGE
            )
        })?,
        Some("amd64") => pause::Arch::Amd64,
        Some("arm64") => pause::Arch::Arm64,
        Some(other) => anyhow::bail!(
            "k3rs airgap-images: no embedded pause image for --arch {other} (there are amd64 and arm64)"
        ),
    };
    let archive = pause::archive(arch);
    if args.output.as_os_str() == "-" {
        std::io::stdout()
            .write_all(&archive.bytes)
            .context("k3rs airgap-images: writing to standard output")?;
    } else {
        let tmp = args.output.with_extension("tar.tmp");
        std::fs::write(&tmp, &archive.bytes)
            .and_then(|()| std::fs::rename(&tmp, &args.output))
            .with_context(|| format!("k3rs airgap-images: writing {}", args.output.display()))?;
        eprintln!(
            "k3rs airgap-images: wrote {} ({} for {}, manifest {})",
            args.output.display(),
            pause::IMAGE,
            arch.oci(),
            archive.manifest_digest
        );
    }
    Ok(())
}
