//! plot.svg and plot.png: per DUT configuration, the median with a min-max
//! bar, one series (colour) per traffic profile.
use super::report::Results;
use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// Text needs a font; DejaVu Sans comes with Debian's fonts-dejavu-core.
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = std::fs::read(FONT)
            .map_err(|e| anyhow!("font {FONT}: {e} (install fonts-dejavu-core)"))
            .and_then(|bytes| {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                    .map_err(|_| anyhow!("font {FONT}: not a usable TrueType font"))
            });
    });
    result
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

pub fn draw(out: &Path, r: &Results) -> Result<()> {
    if r.results.is_empty() {
        return Err(anyhow!("no finished run to plot"));
    }
    register_font()?;
    let size = (960, 540);
    {
        let path = out.join("plot.svg");
        let svg = SVGBackend::new(&path, size).into_drawing_area();
        chart(&svg, r)?;
        svg.present().map_err(|e| anyhow!("plot.svg: {e}"))?;
    }
    let path = out.join("plot.png");
    let png = BitMapBackend::new(&path, size).into_drawing_area();
    chart(&png, r)?;
    png.present().map_err(|e| anyhow!("plot.png: {e}"))?;
    Ok(())
}

fn chart<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &Results) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("plot: {e}");
    area.fill(&WHITE).map_err(e)?;
    let top = r.results.iter().map(|x| x.max_mpps).fold(0.0, f64::max) * 1.15;
    let n = r.duts.len();
    let profiles: Vec<&str> = r.profiles.iter().map(|p| p.0.as_str()).collect();
    let mut c = ChartBuilder::on(area)
        .caption(
            format!("{}: {}", r.scenario, method_short(r)),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top.max(0.001))
        .map_err(e)?;
    let duts = r.duts.clone();
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(2) * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < duts.len() {
                duts[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc("Mpps (median, min-max)")
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    let k = profiles.len() as f64;
    for (pi, profile) in profiles.iter().enumerate() {
        let colour = COLOURS[pi % COLOURS.len()];
        // Series side by side within each DUT's slot.
        let offset = if k > 1.0 {
            (pi as f64 - (k - 1.0) / 2.0) * 0.5 / k
        } else {
            0.0
        };
        let points: Vec<(f64, f64, f64, f64)> = r
            .results
            .iter()
            .filter(|x| x.profile == *profile)
            .filter_map(|x| {
                let i = r.duts.iter().position(|d| *d == x.dut)?;
                Some((i as f64 + offset, x.min_mpps, x.median_mpps, x.max_mpps))
            })
            .collect();
        c.draw_series(points.iter().map(|&(x, lo, mid, hi)| {
            ErrorBar::new_vertical(x, lo, mid, hi, colour.filled().stroke_width(2), 12)
        }))
        .map_err(e)?
        .label(*profile)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
        c.draw_series(points.iter().map(|&(x, _, mid, _)| {
            Text::new(
                format!("{mid:.2}"),
                (x + 0.04, mid),
                ("sans-serif", 14).into_font(),
            )
        }))
        .map_err(e)?;
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    Ok(())
}

fn method_short(r: &Results) -> &'static str {
    use super::scenario::Method::*;
    match r.method {
        Overload => "forwarding rate under overload",
        Equilibrium => "equilibrium throughput",
        Rfc2544 => "RFC 2544 throughput",
        Ndr => "NDR (MLRsearch)",
        Pdr => "PDR (MLRsearch)",
    }
}
