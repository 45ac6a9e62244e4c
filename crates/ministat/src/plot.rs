//! ministat's ASCII plot: points stacked as symbols, then one bar per data
//! set (or one shared bar) with `|___M___A___|` for mean +- stddev, median
//! and mean. A transcription of FreeBSD's SetupPlot/AdjPlot/PlotSet/DumpPlot,
//! including its quirk that the plot keeps the height of the *last* data set
//! drawn (a taller earlier set loses its top rows).
use crate::stats::Dataset;

/// Symbols: data set i (1-based) is `SYMBOL[i]`; points of several sets in
/// one cell combine by OR of their indexes.
pub const SYMBOL: [u8; 8] = [b' ', b'x', b'+', b'*', b'%', b'#', b'@', b'O'];

struct Plot {
    min: f64,
    max: f64,
    span: f64,
    width: i64,
    x0: f64,
    dx: f64,
    height: usize,
    data: Vec<u8>,
    bars: Vec<Option<Vec<u8>>>,
    separate: bool,
}

/// C's double-to-int conversion (truncation), saturating where C is undefined.
fn cint(v: f64) -> i64 {
    v as i64
}

impl Plot {
    fn new(width: i64, separate: bool, num_datasets: usize) -> Self {
        Plot {
            min: 999e99,
            max: -999e99,
            span: 0.0,
            width,
            x0: 0.0,
            dx: 0.0,
            height: 0,
            data: Vec::new(),
            bars: vec![None; num_datasets],
            separate,
        }
    }

    fn adj(&mut self, a: f64) {
        if a < self.min {
            self.min = a;
        }
        if a > self.max {
            self.max = a;
        }
        self.span = self.max - self.min;
        self.dx = self.span / (self.width as f64 - 1.0);
        self.x0 = self.min - 0.5 * self.dx;
    }

    fn dim(&mut self, ds: &Dataset) {
        self.adj(ds.min());
        self.adj(ds.max());
        self.adj(ds.avg() - ds.stddev());
        self.adj(ds.avg() + ds.stddev());
    }

    fn col(&self, v: f64) -> i64 {
        cint((v - self.x0) / self.dx)
    }

    fn set_data(&mut self, row: usize, x: i64, val: u8) {
        let w = self.width.max(0) as usize;
        if x >= 0 && (x as usize) < w {
            if let Some(c) = self.data.get_mut(row * w + x as usize) {
                *c |= val;
            }
        }
    }

    fn plot_set(&mut self, ds: &Dataset, val: u8) {
        if self.span == 0.0 {
            return;
        }
        let w = self.width.max(0) as usize;
        let bar = if self.separate { val as usize - 1 } else { 0 };
        if self.bars[bar].is_none() {
            self.bars[bar] = Some(vec![0u8; w]);
        }
        // Height needed: the longest run of points in one column, plus one.
        let (mut m, mut i, mut j) = (1usize, -1i64, 0usize);
        for &p in ds.points() {
            let x = self.col(p);
            if x == i {
                j += 1;
                m = m.max(j);
            } else {
                j = 1;
                i = x;
            }
        }
        m += 1;
        if m > self.height {
            // realloc() to m rows, then zero from the old height up.
            self.data.resize(w * m, 0);
            for c in &mut self.data[self.height * w..m * w] {
                *c = 0;
            }
        }
        self.height = m;
        i = -1;
        for &p in ds.points() {
            let x = self.col(p);
            if x == i {
                j += 1;
            } else {
                j = 1;
                i = x;
            }
            self.set_data(j, x, val);
        }
        let (av, sd) = (ds.avg(), ds.stddev());
        let b = self.bars[bar].as_mut().unwrap();
        let mut put = |x: i64, c: u8, only_empty: bool| {
            if x >= 0 && (x as usize) < w && (!only_empty || b[x as usize] == 0) {
                b[x as usize] = c;
            }
        };
        if !sd.is_nan() {
            let x = cint(((av - sd) - self.x0) / self.dx);
            let m = cint(((av + sd) - self.x0) / self.dx);
            put(m, b'|', false);
            put(x, b'|', false);
            for z in x + 1..m {
                put(z, b'_', true);
            }
        }
        put(cint((ds.median() - self.x0) / self.dx), b'M', false);
        put(cint((av - self.x0) / self.dx), b'A', false);
    }

    fn dump(&self, out: &mut String) {
        if self.span == 0.0 {
            out.push_str("[no plot, span is zero width]\n");
            return;
        }
        let w = self.width.max(0) as usize;
        let rule = format!("+{}+\n", "-".repeat(w));
        out.push_str(&rule);
        for z in 1..self.height {
            out.push('|');
            let row = self.height - z;
            for j in 0..w {
                let k = self.data.get(row * w + j).copied().unwrap_or(0);
                match SYMBOL.get(k as usize) {
                    Some(s) => out.push(*s as char),
                    None => out.push_str(&format!("[{k:02x}]")),
                }
            }
            out.push_str("|\n");
        }
        for b in self.bars.iter().flatten() {
            out.push('|');
            out.extend(b.iter().map(|&k| if k == 0 { ' ' } else { k as char }));
            out.push_str("|\n");
        }
        out.push_str(&rule);
    }
}

/// The plot of up to 7 data sets, `width` columns inside the frame.
pub fn plot(sets: &[Dataset], width: usize, separate_bars: bool) -> String {
    let mut p = Plot::new(width as i64, separate_bars, sets.len());
    for ds in sets {
        p.dim(ds);
    }
    for (i, ds) in sets.iter().enumerate() {
        p.plot_set(ds, (i + 1) as u8);
    }
    let mut out = String::new();
    p.dump(&mut out);
    out
}
