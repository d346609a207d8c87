//! results.json (a stable shape: keep it), the printed ratio table.
//!
//! ```text
//! { "suite": str, "machine": {cpu, cores, memory_bytes, kernel, flush, nvmm, core_round_trip_ns}, "revision": str,
//!   "config": {...}, "rows": [ {figure, system, param (number|null), metric, median, min,
//!   max, runs: [number], txs: [number]} ] }
//! ```

use crate::error::{BenchError, Result};
use crate::runner::{Figure, FigureResult, Metric, Row};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

pub fn row_json(r: &Row) -> Value {
    json!({
        "figure": r.figure,
        "system": r.system,
        "param": r.param,
        "metric": r.metric.as_str(),
        "median": r.median,
        "min": r.min,
        "max": r.max,
        "runs": r.runs,
        "txs": r.txs,
    })
}

/// The `"config"` entry of one figure: its points, systems and media, skipped systems.
pub fn figure_config(fig: &Figure, res: &FigureResult) -> Value {
    json!({
        "id": fig.id,
        "title": fig.title,
        "reference": fig.reference,
        "x_label": fig.x_label,
        "points": fig.points.iter().map(|p| json!({
            "param": p.param,
            "files": p.workload.files,
            "file_size": p.workload.file_size,
            "value": p.workload.value.describe(),
            "idle_fraction": p.idle_fraction,
        })).collect::<Vec<_>>(),
        "systems": res.systems.iter().map(|(n, m, g)| json!({
            "name": n, "medium": m, "guarantee": g,
        })).collect::<Vec<_>>(),
        "skipped": res.skipped.iter().map(|(n, why)| json!({"system": n, "why": why}))
            .collect::<Vec<_>>(),
    })
}

/// Writes `dir/results.json` (creating `dir`).
pub fn write_json(dir: &Path, doc: &Value) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io("mkdir", dir, e))?;
    let path = dir.join("results.json");
    let text = serde_json::to_string_pretty(doc).map_err(|e| BenchError::Output(e.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|e| BenchError::io("write", &path, e))?;
    Ok(path)
}

fn fmt_value(metric: Metric, v: f64) -> String {
    match metric {
        Metric::TxLatencyUs => format!("{v:.2} µs"),
        Metric::TxPerS => format!("{v:.0}/s"),
        Metric::NvmmBytesPerTx => format!("{v:.0} B"),
        Metric::RecoveryS => format!("{v:.4} s"),
        Metric::NvmmFgBytesPerTx | Metric::NvmmCkptBytesPerTx => format!("{v:.0} B"),
        Metric::TxPerSNorm => format!("{v:.3}"),
        Metric::MbPerS => format!("{v:.0} MB/s"),
        Metric::Iops => format!("{v:.0} IOPS"),
        Metric::CpuUsPerTx => format!("{v:.2} µs"),
    }
}

/// The ratio table of one figure: for each metric and point, every system's median (with
/// min–max) and its ratio to the figure's reference system.
pub fn ratio_table(fig: &Figure, res: &FigureResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "== {} — {}", fig.id, fig.title);
    for metric in &fig.metrics {
        let rows: Vec<&Row> = res.rows.iter().filter(|r| r.metric == *metric).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "   {} (ratio = system / {})",
            metric.as_str(),
            fig.reference
        );
        let mut params: Vec<Option<f64>> = Vec::new();
        for r in &rows {
            if !params.contains(&r.param) {
                params.push(r.param);
            }
        }
        for p in params {
            if let (Some(p), Some(label)) = (p, &fig.x_label) {
                let _ = writeln!(s, "   {label} = {p}");
            }
            let reference = rows
                .iter()
                .find(|r| r.param == p && r.system == fig.reference)
                .map(|r| r.median);
            for r in rows.iter().filter(|r| r.param == p) {
                let ratio = match reference {
                    Some(x) if x > 0.0 => format!("{:>8.2}×", r.median / x),
                    _ => format!("{:>9}", "—"),
                };
                let _ = writeln!(
                    s,
                    "     {:<21} {:>14}   [{} – {}]   {}",
                    r.system,
                    fmt_value(*metric, r.median),
                    fmt_value(*metric, r.min),
                    fmt_value(*metric, r.max),
                    ratio
                );
            }
        }
    }
    for (name, why) in &res.skipped {
        let _ = writeln!(s, "   {name}: skipped: {why}");
    }
    for (name, medium, guarantee) in &res.systems {
        let _ = writeln!(s, "   {name}: {guarantee}; {medium}");
    }
    s
}
