//! Running iproute2 (`ip`, `bridge`): the one way the pod-network backends change the kernel's
//! links, addresses, routes, neighbours and forwarding database. Output is read as JSON
//! (`-j`) where the backends parse it.

/// Why an iproute2 command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("running {0}: {1}")]
    Spawn(String, #[source] std::io::Error),
    #[error("{0}: {1}")]
    Failed(String, String),
}

/// Runs `program args…` (`ip` or `bridge`); its stdout, or its stderr as the error.
pub async fn run(program: &str, args: &[String]) -> Result<Vec<u8>, Error> {
    let line = format!("{program} {}", args.join(" "));
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| Error::Spawn(line.clone(), e))?;
    if !out.status.success() {
        return Err(Error::Failed(
            line,
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(out.stdout)
}

/// `args` as owned strings.
pub fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| a.to_string()).collect()
}

/// Whether `json` is empty output (iproute2 prints nothing, not `[]`, for an empty list).
pub fn is_empty(json: &[u8]) -> bool {
    json.iter().all(u8::is_ascii_whitespace)
}
