//! "Which engine for which workload": derived from the rows of one run of the `engines`
//! suite, never written by hand. For each workload: the engine with the most operations per
//! second (median of its runs), how that compares with ext4 (the median of its run-by-run
//! ratios), the next engine and whether the lead is clear (the winner's slowest run beat the
//! other's fastest) or within the run-to-run spread, and the engine that used the least CPU
//! time per operation (background threads included).

use super::FAILED;
use crate::runner::{Figure, FigureResult, Metric, Row};
use crate::systems::ext4_mix::EXT4;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// One workload's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub workload: String,
    pub fastest: String,
    pub per_s: f64,
    /// Median of the fastest engine's ops/s over ext4's, run by run (None: no ext4 here).
    pub vs_ext4: Option<f64>,
    /// The next engine, its ops/s, and whether the fastest one's lead is clear.
    pub next: Option<(String, f64, bool)>,
    /// The engine with the least CPU time per operation, and that time in µs.
    pub least_cpu: Option<(String, f64)>,
    /// Systems that failed during the workload (they have no rows).
    pub failed: Vec<String>,
}

/// (system, reason) of every system that failed during the workload.
fn failures(res: &FigureResult) -> impl Iterator<Item = &(String, String)> {
    res.skipped
        .iter()
        .filter(|(_, why)| why.starts_with(FAILED))
}

fn engine_rows(res: &FigureResult, metric: Metric) -> Vec<&Row> {
    res.rows
        .iter()
        .filter(|r| r.metric == metric && r.system != EXT4 && r.median.is_finite())
        .collect()
}

/// The verdict of one workload, `None` when no engine ran it.
pub fn judge(fig: &Figure, res: &FigureResult) -> Option<Verdict> {
    let mut speed = engine_rows(res, Metric::TxPerS);
    speed.sort_by(|a, b| b.median.total_cmp(&a.median));
    let best = *speed.first()?;
    let vs_ext4 = res
        .rows
        .iter()
        .find(|r| r.metric == Metric::TxPerSNorm && r.system == best.system)
        .map(|r| r.median);
    let next = speed
        .get(1)
        .map(|n| (n.system.clone(), n.median, best.min > n.max));
    let least_cpu = engine_rows(res, Metric::CpuUsPerTx)
        .into_iter()
        .min_by(|a, b| a.median.total_cmp(&b.median))
        .map(|r| (r.system.clone(), r.median));
    Some(Verdict {
        workload: fig.id.clone(),
        fastest: best.system.clone(),
        per_s: best.median,
        vs_ext4,
        next,
        least_cpu,
        failed: failures(res).map(|(n, _)| n.clone()).collect(),
    })
}

fn line(v: &Verdict) -> String {
    let vs = v.vs_ext4.map_or("—".to_string(), |x| format!("{x:.2}×"));
    let next = match &v.next {
        Some((name, per_s, clear)) => format!(
            "{name} {per_s:.0}/s: {:.2}× {}",
            v.per_s / per_s.max(1e-12),
            if *clear { "clear" } else { "within noise" }
        ),
        None => "— (only engine)".into(),
    };
    let cpu = v
        .least_cpu
        .as_ref()
        .map_or("—".to_string(), |(n, us)| format!("{n} {us:.1} µs"));
    format!(
        "   {:<15} {:<10} {:>12} {:>9}   {:<36} {}",
        v.workload,
        v.fastest,
        format!("{:.0}/s", v.per_s),
        vs,
        next,
        cpu
    )
}

/// The printed table and its JSON form, from every workload's results.
pub fn verdict(results: &[(Figure, FigureResult)]) -> (String, Value) {
    let verdicts: Vec<Verdict> = results.iter().filter_map(|(f, r)| judge(f, r)).collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== which engine for which workload (this run's medians; × ext4 = ops/s over ext4's, \
         run by run)"
    );
    let _ = writeln!(
        s,
        "   {:<15} {:<10} {:>12} {:>9}   {:<36} least CPU per op",
        "workload", "fastest", "ops/s", "× ext4", "next engine: fastest's lead"
    );
    for v in &verdicts {
        let _ = writeln!(s, "{}", line(v));
    }
    for (fig, res) in results {
        for (name, why) in failures(res) {
            let _ = writeln!(s, "   {}: {name} left out: {why}", fig.id);
        }
    }
    let json = verdicts
        .iter()
        .map(|v| {
            json!({
                "workload": v.workload,
                "fastest": v.fastest,
                "tx_per_s": v.per_s,
                "vs_ext4": v.vs_ext4,
                "next": v.next.as_ref().map(|(n, p, clear)| json!({
                    "engine": n, "tx_per_s": p, "clear_lead": clear,
                })),
                "least_cpu": v.least_cpu.as_ref().map(|(n, us)| json!({
                    "engine": n, "cpu_us_per_tx": us,
                })),
                "failed": v.failed,
            })
        })
        .collect();
    (s, Value::Array(json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::row;

    fn fig() -> Figure {
        Figure {
            id: "w".into(),
            title: String::new(),
            x_label: None,
            reference: EXT4.into(),
            metrics: Vec::new(),
            points: Vec::new(),
            systems: Vec::new(),
        }
    }

    fn rows(per_s: &[(&str, [f64; 3])], cpu: &[(&str, f64)]) -> FigureResult {
        let mut res = FigureResult::default();
        for (name, runs) in per_s {
            res.rows.push(row(
                "w",
                name,
                None,
                Metric::TxPerS,
                runs.to_vec(),
                vec![1; 3],
            ));
        }
        for (name, us) in cpu {
            res.rows
                .push(row("w", name, None, Metric::CpuUsPerTx, vec![*us], vec![1]));
        }
        let norm = crate::runner::normalized_rows(&res.rows, Metric::TxPerS, EXT4);
        res.rows.extend(norm);
        res
    }

    #[test]
    fn the_fastest_engine_wins_and_ext4_never_does() {
        let res = rows(
            &[
                ("ext4", [900.0, 1000.0, 1100.0]),
                ("a", [200.0, 300.0, 250.0]),
                ("b", [400.0, 500.0, 450.0]),
            ],
            &[("ext4", 1.0), ("a", 3.0), ("b", 5.0)],
        );
        let v = judge(&fig(), &res).expect("a verdict");
        assert_eq!(v.fastest, "b");
        assert_eq!(v.per_s, 450.0);
        assert_eq!(v.next, Some(("a".into(), 250.0, true)));
        assert_eq!(v.least_cpu, Some(("a".into(), 3.0)));
        // Run by run: 400/900, 500/1000, 450/1100; the median is 400/900.
        let vs = v.vs_ext4.expect("ratio to ext4");
        assert!((vs - 400.0 / 900.0).abs() < 1e-9, "{vs}");
    }

    #[test]
    fn overlapping_runs_are_not_a_clear_lead() {
        let res = rows(
            &[("a", [100.0, 300.0, 200.0]), ("b", [250.0, 190.0, 210.0])],
            &[],
        );
        let v = judge(&fig(), &res).expect("a verdict");
        assert_eq!(v.fastest, "b");
        assert_eq!(v.next, Some(("a".into(), 200.0, false)));
        assert_eq!(v.vs_ext4, None);
        let (table, json) = verdict(&[(fig(), res)]);
        assert!(table.contains("within noise"), "{table}");
        assert_eq!(json[0]["fastest"], "b");
        assert_eq!(json[0]["next"]["clear_lead"], false);
    }

    #[test]
    fn a_failed_engine_is_named_and_never_wins() {
        let mut res = rows(&[("a", [1.0, 2.0, 3.0])], &[]);
        res.skipped
            .push(("b".into(), format!("{FAILED} in run 2: torn page")));
        res.skipped.push(("c".into(), "no libsqlite3".into()));
        let v = judge(&fig(), &res).expect("a verdict");
        assert_eq!(
            (v.fastest.as_str(), v.failed.clone()),
            ("a", vec!["b".to_string()])
        );
        let (table, json) = verdict(&[(fig(), res)]);
        assert!(
            table.contains("w: b left out: FAILED in run 2: torn page"),
            "{table}"
        );
        assert!(!table.contains("no libsqlite3"), "{table}");
        assert_eq!(json[0]["failed"][0], "b");
    }

    #[test]
    fn no_engine_no_verdict() {
        let res = rows(&[("ext4", [1.0, 2.0, 3.0])], &[]);
        assert_eq!(judge(&fig(), &res), None);
    }
}
