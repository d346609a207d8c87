//! Runs fio (installed by scripts/install-deps.sh) and reads what it measured from its JSON
//! output: the `fuse` suite's jobs.

use crate::error::{BenchError, Result};
use std::path::Path;
use std::process::Command;

/// What one fio job measured (its read or write side, as the job's direction).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FioResult {
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// I/O operations done.
    pub ios: u64,
    /// The job's run time in seconds (fio's, including an `end_fsync`).
    pub runtime_s: f64,
}

/// fio's version line, or `Skipped` saying it is missing.
pub fn version() -> Result<String> {
    let out = Command::new("fio").arg("--version").output().map_err(|e| {
        BenchError::Skipped(format!(
            "fio not runnable ({e}); install it with scripts/install-deps.sh"
        ))
    })?;
    if !out.status.success() {
        return Err(BenchError::Skipped(format!(
            "fio --version failed: {}",
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn fio_err(message: String) -> BenchError {
    BenchError::System {
        system: "fio".into(),
        message,
    }
}

/// Parse fio's `--output-format=json` text for job 0's `side` ("read" or "write").
pub fn parse(text: &str, side: &str) -> Result<FioResult> {
    // fio may print notes before the JSON document.
    let start = text
        .find('{')
        .ok_or_else(|| fio_err(format!("no JSON in fio's output: {}", text.trim())))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text[start..]).map_err(|e| fio_err(format!("fio's JSON: {e}")))?;
    let job = &doc["jobs"][0];
    let error = job["error"].as_i64().unwrap_or(0);
    if error != 0 {
        return Err(fio_err(format!("fio job failed with error {error}")));
    }
    let s = &job[side];
    let num = |key: &str| {
        s[key]
            .as_f64()
            .ok_or_else(|| fio_err(format!("fio's JSON lacks jobs[0].{side}.{key}")))
    };
    let result = FioResult {
        iops: num("iops")?,
        bw_bytes: num("bw_bytes")?,
        ios: num("total_ios")? as u64,
        runtime_s: num("runtime")? / 1e3,
    };
    if result.ios == 0 {
        return Err(fio_err(format!("fio did no {side} I/O")));
    }
    Ok(result)
}

/// Run one fio job with `args` in `dir`; `side` names the direction to report.
pub fn run(dir: &Path, args: &[String], side: &str) -> Result<FioResult> {
    let out = Command::new("fio")
        .arg("--output-format=json")
        .arg(format!("--directory={}", dir.display()))
        .args(args)
        .output()
        .map_err(|e| fio_err(format!("cannot run fio: {e}")))?;
    if crate::interrupted() {
        return Err(BenchError::Interrupted);
    }
    if !out.status.success() {
        return Err(fio_err(format!(
            "fio {} in {}: {} {}",
            args.join(" "),
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse(&String::from_utf8_lossy(&out.stdout), side)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_write_side_and_rejects_failed_jobs() {
        let text = r#"note: a line before
{"jobs": [{"error": 0, "write": {"iops": 1234.5, "bw_bytes": 5056512, "total_ios": 2469,
 "runtime": 2000}, "read": {"iops": 0, "bw_bytes": 0, "total_ios": 0, "runtime": 0}}]}"#;
        let r = parse(text, "write").expect("parse");
        assert_eq!(r.ios, 2469);
        assert!((r.iops - 1234.5).abs() < 1e-9 && (r.runtime_s - 2.0).abs() < 1e-9);
        assert!(
            parse(text, "read").is_err(),
            "a side without I/O is an error"
        );
        let failed = text.replace("\"error\": 0", "\"error\": 5");
        assert!(parse(&failed, "write").is_err());
        assert!(parse("fio: no JSON here", "write").is_err());
    }
}
