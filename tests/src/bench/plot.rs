//! SVG plots of sweep results, drawn with `plotters`' SVG backend and its built-in text layout
//! (no system fonts): throughput, p50 and p99 latency and the coordinator's CPU per request
//! against clusters (one plot per hosts value, with the decision's size) and throughput and p99
//! against hosts per cluster (one plot per clusters value), one line per mode and number in
//! flight, both axes logarithmic.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::bench::report::{ModeResult, RunResult};

/// One line of a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its legend.
    pub name: String,
    /// Its points (x, y), both > 0 (others are dropped: the axes are logarithmic).
    pub points: Vec<(f64, f64)>,
}

/// A log-scale range around `lo..hi`, widened when empty or a single value.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi { (0.1, 10.0) } else { (lo / 1.5, hi * 1.5) }
}

/// The legend's corner: the one whose region (a third of each axis, on the log scales of
/// `x` and `y`) holds the fewest points, so the legend does not hide the data (a latency
/// growing with clusters ends in the upper right, a throughput falling with them in the lower
/// right). Ties go to the upper left, then the upper right, the lower left, the lower right.
fn legend_corner(series: &[Series], x: (f64, f64), y: (f64, f64)) -> SeriesLabelPosition {
    let at = |v: f64, (lo, hi): (f64, f64)| (v.ln() - lo.ln()) / (hi.ln() - lo.ln());
    let corners = [
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerLeft, false, false),
        (SeriesLabelPosition::LowerRight, true, false),
    ];
    let crowd = |right: bool, upper: bool| {
        series
            .iter()
            .flat_map(|s| &s.points)
            .filter(|&&(px, py)| {
                let (fx, fy) = (at(px, x), at(py, y));
                (if right { fx >= 2.0 / 3.0 } else { fx <= 1.0 / 3.0 })
                    && (if upper { fy >= 2.0 / 3.0 } else { fy <= 1.0 / 3.0 })
            })
            .count()
    };
    corners
        .into_iter()
        .min_by_key(|(_, right, upper)| crowd(*right, *upper))
        .map_or(SeriesLabelPosition::UpperLeft, |(corner, _, _)| corner)
}

/// Draws `series` as a log-log line chart into the SVG file `path`, its legend in the corner
/// with the fewest points ([`legend_corner`]).
///
/// Errors: nothing to draw, or the file cannot be written.
pub fn line_chart(path: &Path, title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s.points.iter().copied().filter(|&(x, y)| x > 0.0 && y > 0.0).collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return Err(format!("nothing to draw in {}", path.display()));
    }
    let (x0, x1) = log_bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (y0, y1) = log_bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| {
            if *y >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.2}")
            }
        })
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(legend_corner(&series, (x0, x1), (y0, y1)))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A plotted metric: its file-name stem, its axis label, and how to read it.
type Metric = (&'static str, &'static str, fn(&ModeResult) -> f64);

/// One series per (mode, in flight) of `results`, x from the configuration, y from the mode.
fn series_of(results: &[&RunResult], x: impl Fn(&RunResult) -> usize, y: impl Fn(&ModeResult) -> f64) -> Vec<Series> {
    let mut keys: Vec<(String, usize)> = Vec::new();
    for r in results {
        for m in &r.modes {
            let k = (m.mode.clone(), r.config.in_flight);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys.sort_by_key(|(mode, n)| (["plan", "submit", "raw"].iter().position(|m| m == mode), *n));
    keys.into_iter()
        .map(|(mode, n)| {
            let mut points: Vec<(f64, f64)> = results
                .iter()
                .filter(|r| r.config.in_flight == n)
                .filter_map(|r| r.mode(&mode).map(|m| (x(r) as f64, y(m))))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: format!("{mode}, {n} in flight"),
                points,
            }
        })
        .collect()
}

/// Draws every plot of `results` into `dir`: `throughput-vs-clusters-hosts<H>.svg`,
/// `p50-…`, `p99-…`, `coordinator-cpu-…` and `decision-kb-vs-clusters-hosts<H>.svg` for each
/// hosts value H measured with more than one number of clusters, and `throughput-vs-hosts-clusters<C>.svg`, `p99-vs-hosts-clusters<C>.svg` for
/// each clusters value C measured with more than one hosts value. Returns the files written.
///
/// Errors: a file cannot be written.
pub fn sweep_plots(dir: &Path, results: &[RunResult]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let hosts: BTreeSet<usize> = results.iter().map(|r| r.config.hosts).collect();
    let clusters: BTreeSet<usize> = results.iter().map(|r| r.config.clusters).collect();
    let metrics: [Metric; 2] = [
        ("throughput", "requests per second", |m| m.throughput_rps),
        ("p99", "p99 latency (ms)", |m| m.p99_ms),
    ];
    let by_clusters: [Metric; 4] = [
        metrics[0],
        ("p50", "p50 latency (ms)", |m| m.p50_ms),
        metrics[1],
        ("coordinator-cpu", "coordinator CPU per request (ms)", |m| {
            m.cpu_of("coordinator")
        }),
    ];
    let mut written = Vec::new();
    for &h in &hosts {
        let rs: Vec<&RunResult> = results.iter().filter(|r| r.config.hosts == h).collect();
        if rs.iter().map(|r| r.config.clusters).collect::<BTreeSet<_>>().len() < 2 {
            continue;
        }
        let mut sizes: Vec<(f64, f64)> = Vec::new();
        for r in &rs {
            let x = r.config.clusters as f64;
            if r.decision_bytes > 0 && !sizes.iter().any(|p| p.0 == x) {
                sizes.push((x, r.decision_bytes as f64 / 1000.0));
            }
        }
        sizes.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !sizes.is_empty() {
            let path = dir.join(format!("decision-kb-vs-clusters-hosts{h}.svg"));
            let title = format!("decision size against clusters ({h} hosts per cluster)");
            let line = Series {
                name: "a plan's decision (KB)".into(),
                points: sizes,
            };
            line_chart(&path, &title, "clusters", "KB", &[line])?;
            written.push(path);
        }
        for (name, y_desc, y) in by_clusters {
            let path = dir.join(format!("{name}-vs-clusters-hosts{h}.svg"));
            let title = format!("{name} against clusters ({h} hosts per cluster)");
            line_chart(
                &path,
                &title,
                "clusters",
                y_desc,
                &series_of(&rs, |r| r.config.clusters, y),
            )?;
            written.push(path);
        }
    }
    for &c in &clusters {
        let rs: Vec<&RunResult> = results.iter().filter(|r| r.config.clusters == c).collect();
        if rs.iter().map(|r| r.config.hosts).collect::<BTreeSet<_>>().len() < 2 {
            continue;
        }
        for (name, y_desc, y) in metrics {
            let path = dir.join(format!("{name}-vs-hosts-clusters{c}.svg"));
            let title = format!("{name} against hosts per cluster ({c} clusters)");
            line_chart(
                &path,
                &title,
                "hosts per cluster",
                y_desc,
                &series_of(&rs, |r| r.config.hosts, y),
            )?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::tests::sample;

    fn corner_of(points: &[(f64, f64)]) -> String {
        let s = [Series {
            name: "s".into(),
            points: points.to_vec(),
        }];
        let x = log_bounds(points.iter().map(|p| p.0));
        let y = log_bounds(points.iter().map(|p| p.1));
        format!("{:?}", legend_corner(&s, x, y))
    }

    /// The legend once hid the 1,000-cluster points of the p99 plot, in its upper right.
    #[test]
    fn the_legend_goes_where_the_lines_are_not() {
        let rising = [(4.0, 3.0), (16.0, 6.5), (64.0, 18.0), (256.0, 44.0), (1000.0, 167.0)];
        assert_eq!(corner_of(&rising), "UpperLeft");
        let falling = [(4.0, 846.0), (16.0, 375.0), (64.0, 135.0), (256.0, 38.0), (1000.0, 8.6)];
        assert_eq!(corner_of(&falling), "UpperRight");
        let flat = [(4.0, 10.0), (1000.0, 10.0)];
        assert_eq!(corner_of(&flat), "UpperLeft");
    }

    #[test]
    fn sweeps_become_svg_files_with_a_line_per_mode_and_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let results = vec![
            sample(1, 100, 1),
            sample(4, 100, 1),
            sample(1, 100, 64),
            sample(4, 100, 64),
            sample(1, 1000, 1),
        ];
        let files = sweep_plots(dir.path(), &results).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "decision-kb-vs-clusters-hosts100.svg",
                "throughput-vs-clusters-hosts100.svg",
                "p50-vs-clusters-hosts100.svg",
                "p99-vs-clusters-hosts100.svg",
                "coordinator-cpu-vs-clusters-hosts100.svg",
                "throughput-vs-hosts-clusters1.svg",
                "p99-vs-hosts-clusters1.svg"
            ]
        );
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("submit, 64 in flight"));
        assert!(line_chart(&dir.path().join("empty.svg"), "t", "x", "y", &[]).is_err());
    }
}
