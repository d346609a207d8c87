//! One PNG per figure and metric, drawn with plotters' bitmap backend. Text uses the
//! ab_glyph renderer with a TrueType font read at run time (DejaVu Sans from Debian's
//! fonts-dejavu-core, or `ATOMFS_BENCH_FONT`), so no system font library is linked.

use crate::error::{BenchError, Result};
use crate::runner::{Figure, FigureResult, Metric, Row};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers the font once; Err says why plots cannot have text.
fn font() -> std::result::Result<(), String> {
    static FONT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let env = std::env::var("ATOMFS_BENCH_FONT").ok();
        let path = env
            .iter()
            .map(String::as_str)
            .chain(FONT_PATHS.iter().copied())
            .find(|p| Path::new(p).is_file())
            .ok_or("no TrueType font found (install fonts-dejavu-core or set ATOMFS_BENCH_FONT)")?;
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        // register_font needs 'static bytes: the font lives for the whole process anyway.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{path}: not a usable TrueType font"))
    })
    .clone()
}

fn out_err<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Output(format!("plot: {e}"))
}

fn systems_of(rows: &[&Row]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !names.contains(&r.system) {
            names.push(r.system.clone());
        }
    }
    names
}

/// Values spread over more than this factor get a log10 y axis.
const LOG_SPREAD: f64 = 50.0;

struct Axis {
    log: bool,
}

impl Axis {
    fn y(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-9).log10()
        } else {
            v
        }
    }
    fn label(&self, v: f64) -> String {
        let x = if self.log { 10f64.powf(v) } else { v };
        if x >= 100.0 {
            format!("{x:.0}")
        } else if x >= 1.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.3}")
        }
    }
}

/// Draw `metric` of `fig`; returns the PNG path, or None when the figure has no such rows.
pub fn plot(
    fig: &Figure,
    res: &FigureResult,
    metric: Metric,
    dir: &Path,
) -> Result<Option<PathBuf>> {
    let rows: Vec<&Row> = res.rows.iter().filter(|r| r.metric == metric).collect();
    if rows.is_empty() {
        return Ok(None);
    }
    font().map_err(BenchError::Output)?;
    let path = dir.join(format!("{}_{}.png", fig.id, metric.as_str()));
    let positive: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.min, r.max])
        .filter(|v| *v > 0.0)
        .collect();
    let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = positive.iter().copied().fold(0.0, f64::max).max(1e-9);
    let axis = Axis {
        log: lo.is_finite() && hi / lo > LOG_SPREAD,
    };
    let (y0, y1) = if axis.log {
        (axis.y(lo) - 0.3, axis.y(hi) + 0.3)
    } else {
        (0.0, hi * 1.15)
    };
    let root = BitMapBackend::new(path.as_path(), (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(out_err)?;
    let params: Vec<Option<f64>> = {
        let mut ps = Vec::new();
        for r in &rows {
            if !ps.contains(&r.param) {
                ps.push(r.param);
            }
        }
        ps
    };
    let systems = systems_of(&rows);
    let categorical = params.iter().all(Option::is_none);
    let n = if categorical {
        systems.len()
    } else {
        params.len()
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{} — {}", fig.id, fig.title), ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)
        .map_err(out_err)?;
    let x_names: Vec<String> = if categorical {
        systems.clone()
    } else {
        params
            .iter()
            .map(|p| p.map(|v| format!("{v}")).unwrap_or_default())
            .collect()
    };
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                x_names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| axis.label(*y))
        .x_desc(if categorical {
            "system".to_string()
        } else {
            fig.x_label.clone().unwrap_or_default()
        })
        .y_desc(format!(
            "{}{}",
            metric.label(),
            if axis.log { " — log scale" } else { "" }
        ))
        .disable_x_mesh()
        .draw()
        .map_err(out_err)?;
    if categorical {
        for (i, r) in rows.iter().enumerate() {
            let x = systems.iter().position(|s| s == &r.system).unwrap_or(i) as f64;
            let color = Palette99::pick(i).to_rgba();
            let base = if axis.log { y0 } else { 0.0 };
            chart
                .draw_series([Rectangle::new(
                    [(x - 0.35, base), (x + 0.35, axis.y(r.median))],
                    color.filled(),
                )])
                .map_err(out_err)?;
            chart
                .draw_series([PathElement::new(
                    vec![(x, axis.y(r.min)), (x, axis.y(r.max))],
                    BLACK.stroke_width(2),
                )])
                .map_err(out_err)?;
        }
    } else {
        for (i, name) in systems.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| &r.system == name)
                .filter_map(|r| {
                    params
                        .iter()
                        .position(|p| *p == r.param)
                        .map(|x| (x as f64, axis.y(r.median)))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(out_err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
                )
                .map_err(out_err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(out_err)?;
    }
    root.present().map_err(out_err)?;
    drop(chart);
    drop(root);
    Ok(Some(path))
}
