//! The summary table of `atomfs crashtest`: one row per workload kind (and one for the process
//! kills), then the total.

use crash::PlanResult;
use std::time::Duration;

const HEADERS: [&str; 10] = [
    "kind",
    "workloads",
    "crash points",
    "images",
    "recov. of recov.",
    "2nd recoveries",
    "kills",
    "violations",
    "time",
    "images/s",
];

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn rate(images: u64, d: Duration) -> String {
    let secs = d.as_secs_f64();
    if images == 0 || secs <= 0.0 {
        "-".into()
    } else {
        format!("{:.0}", images as f64 / secs)
    }
}

fn row(
    label: &str,
    r: &crash::CrashReport,
    elapsed: Duration,
    rate_of_images: bool,
) -> Vec<String> {
    vec![
        label.to_string(),
        grouped(r.workloads),
        grouped(r.crash_points),
        grouped(r.images),
        grouped(r.nested_images),
        grouped(r.second_recoveries),
        grouped(r.kills),
        grouped(r.violations.len() as u64),
        duration(elapsed),
        if rate_of_images {
            rate(r.images, elapsed)
        } else {
            "-".into()
        },
    ]
}

/// The table of `results` (simulator plans first, then kills), with a total row and a line
/// naming the engine, the worker count and the wall-clock time.
pub fn render(engine: &str, results: &[PlanResult], wall: Duration, jobs: usize) -> String {
    let mut rows: Vec<Vec<String>> = vec![HEADERS.iter().map(|h| h.to_string()).collect()];
    let mut total = crash::CrashReport::default();
    let (mut sim_images, mut sim_time) = (0, Duration::ZERO);
    for r in results {
        let sim = r.report.kills == 0 && !r.label.starts_with("process kills");
        rows.push(row(&r.label, &r.report, r.elapsed, sim));
        if sim {
            sim_images += r.report.images;
            sim_time += r.elapsed;
        }
        total.merge(r.report.clone());
    }
    let mut last = row("total", &total, wall, false);
    last[9] = rate(sim_images, sim_time);
    rows.push(last);
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = format!(
        "crash test of {engine}: {jobs} worker(s), {} wall-clock\n",
        duration(wall)
    );
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
        if i == 0 || i == rows.len() - 2 {
            out += &"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1));
            out.push('\n');
        }
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn table_has_a_row_per_result_and_a_total() {
        let sim = PlanResult {
            label: "1 thread x 24 units".into(),
            report: crash::CrashReport {
                workloads: 2,
                images: 4000,
                crash_points: 300,
                ..Default::default()
            },
            elapsed: Duration::from_secs(2),
            repro: None,
        };
        let kills = PlanResult {
            label: "process kills".into(),
            report: crash::CrashReport {
                workloads: 10,
                images: 10,
                kills: 10,
                ..Default::default()
            },
            elapsed: Duration::from_secs(5),
            repro: None,
        };
        let text = render("pool-fcfs", &[sim, kills], Duration::from_secs(7), 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[3].starts_with("1 thread x 24 units") && lines[3].ends_with("2000"));
        assert!(lines[4].starts_with("process kills") && lines[4].ends_with('-'));
        assert!(lines[6].starts_with("total") && lines[6].contains("4,010"));
        assert!(lines[6].ends_with("2000"), "{}", lines[6]);
    }
}
