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

/// Where the legend goes and the top of the y axis: a corner of the plot that holds none of
/// the points (the legend's box, about 30% of the width and 3.3% of the height per line, in
/// each corner; on the log scales of `x` and `y`), tried upper left, upper right, lower left,
/// lower right. When every corner holds a point, the y axis is raised until the upper left is
/// free (a latency growing with clusters used to end under the legend).
fn legend_place(series: &[Series], x: (f64, f64), y: (f64, f64)) -> (SeriesLabelPosition, f64) {
    let at = |v: f64, (lo, hi): (f64, f64)| (v.ln() - lo.ln()) / (hi.ln() - lo.ln());
    let (w, h) = (0.3, 0.05 + 0.033 * series.len() as f64);
    let corners = [
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerLeft, false, false),
        (SeriesLabelPosition::LowerRight, true, false),
    ];
    let points = || series.iter().flat_map(|s| s.points.iter().copied());
    let holds = |right: bool, upper: bool, (px, py): (f64, f64)| {
        let (fx, fy) = (at(px, x), at(py, y));
        (if right { fx >= 1.0 - w } else { fx <= w }) && (if upper { fy >= 1.0 - h } else { fy <= h })
    };
    for (corner, right, upper) in corners {
        if !points().any(|p| holds(right, upper, p)) {
            return (corner, y.1);
        }
    }
    // Raise the top so that every point of the left part is below the legend's box.
    let top = points()
        .filter(|&(px, _)| at(px, x) <= w)
        .map(|(_, py)| py.ln())
        .fold(f64::MIN, f64::max);
    let low = y.0.ln();
    let raised = (low + (top - low) / (1.0 - h)).exp() * 1.2;
    (SeriesLabelPosition::UpperLeft, raised.max(y.1))
}

/// Draws `series` as a log-log line chart into the SVG file `path`, its legend where it hides
/// no point ([`legend_place`]).
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
    let (legend, y1) = legend_place(&series, (x0, x1), (y0, y1));
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
        .position(legend)
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

    fn place(points: &[&[(f64, f64)]]) -> (String, f64, f64) {
        let s: Vec<Series> = points
            .iter()
            .map(|p| Series {
                name: "s".into(),
                points: p.to_vec(),
            })
            .collect();
        let x = log_bounds(points.iter().flat_map(|p| p.iter().map(|q| q.0)));
        let y = log_bounds(points.iter().flat_map(|p| p.iter().map(|q| q.1)));
        let (corner, top) = legend_place(&s, x, y);
        (format!("{corner:?}"), top, y.1)
    }

    /// The legend once hid the 1,000-cluster points of the p99 plot, in its upper right.
    #[test]
    fn the_legend_goes_where_the_points_are_not() {
        let rising: &[(f64, f64)] = &[(4.0, 3.0), (16.0, 6.5), (64.0, 18.0), (256.0, 44.0), (1000.0, 167.0)];
        let (corner, top, was) = place(&[rising]);
        assert_eq!((corner.as_str(), top), ("UpperLeft", was));
        let falling: &[(f64, f64)] = &[(4.0, 846.0), (16.0, 375.0), (64.0, 135.0), (256.0, 38.0), (1000.0, 8.6)];
        assert_eq!(place(&[falling]).0, "UpperRight");
        // Points in every corner (p99 against hosts at 4 clusters): the axis is raised so
        // that the left part is below the legend.
        let crowded: [&[(f64, f64)]; 6] = [
            &[(100.0, 3.6), (1000.0, 3.3), (10000.0, 6.8)],
            &[(100.0, 45.0), (1000.0, 68.0), (10000.0, 230.0)],
            &[(100.0, 13.0), (1000.0, 13.0), (10000.0, 17.0)],
            &[(100.0, 170.0), (1000.0, 190.0), (10000.0, 480.0)],
            &[(100.0, 0.57), (1000.0, 0.66), (10000.0, 0.66)],
            &[(100.0, 5.6), (1000.0, 5.7), (10000.0, 5.7)],
        ];
        let (corner, top, was) = place(&crowded);
        assert_eq!(corner, "UpperLeft");
        assert!(top > was, "{top} > {was}");
        let h = 0.05 + 0.033 * 6.0;
        let y0 = log_bounds(crowded.iter().flat_map(|p| p.iter().map(|q| q.1))).0;
        let frac = (190.0f64.ln() - y0.ln()) / (top.ln() - y0.ln());
        assert!(frac < 1.0 - h, "the highest left point sits at {frac} of the height");
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
