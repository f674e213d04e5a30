//! Inline SVG charts for the report: a time axis, a value axis, lines,
//! shaded spans and markers. Written out as text (no plotting library, no
//! script), so the report is one self-contained file.

use std::fmt::Write as _;

/// Escape text for HTML/SVG content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round upper bound for an axis: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8
/// × 10^k at or above `v` (a 100 Mbit/s link gets 120, not 200).
pub fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if m * p >= v * 0.999_999 {
            return m * p;
        }
    }
    10.0 * p
}

/// About `n` round tick values in [lo, hi].
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || n == 0 {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// A plot area mapping data (x: seconds, y: a value) to SVG pixels.
pub struct Chart {
    pub width: f64,
    pub height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    body: String,
}

impl Chart {
    pub fn new(width: f64, height: f64, (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> Self {
        Self {
            width,
            height,
            left: 58.0,
            right: 14.0,
            top: 30.0,
            bottom: 36.0,
            x0,
            x1: if x1 > x0 { x1 } else { x0 + 1.0 },
            y0,
            y1: if y1 > y0 { y1 } else { y0 + 1.0 },
            body: String::new(),
        }
    }

    pub fn x(&self, v: f64) -> f64 {
        let v = v.clamp(self.x0, self.x1);
        self.left + (v - self.x0) / (self.x1 - self.x0) * (self.width - self.left - self.right)
    }

    pub fn y(&self, v: f64) -> f64 {
        let v = v.clamp(self.y0, self.y1);
        self.height
            - self.bottom
            - (v - self.y0) / (self.y1 - self.y0) * (self.height - self.top - self.bottom)
    }

    fn plot_top(&self) -> f64 {
        self.top
    }

    fn plot_bottom(&self) -> f64 {
        self.height - self.bottom
    }

    /// A shaded band over [a, b] on the time axis, full height, with an
    /// optional label inside at its top.
    pub fn span(&mut self, a: f64, b: f64, fill: &str, opacity: f64, label: Option<&str>) {
        let (xa, xb) = (self.x(a), self.x(b));
        let (t, h) = (self.plot_top(), self.plot_bottom() - self.plot_top());
        let _ = write!(
            self.body,
            r#"<rect x="{xa:.1}" y="{t:.1}" width="{:.1}" height="{h:.1}" fill="{fill}" fill-opacity="{opacity}"/>"#,
            (xb - xa).max(0.5)
        );
        if let Some(l) = label {
            let _ = write!(
                self.body,
                r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#222">{}</text>"##,
                xa + 4.0,
                t + 14.0,
                esc(l)
            );
        }
    }

    /// A vertical marker at time `t` with a label above the plot.
    pub fn marker(&mut self, t: f64, stroke: &str, dashed: bool, label: Option<&str>) {
        let x = self.x(t);
        let _ = write!(
            self.body,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{stroke}" stroke-width="1.5"{}/>"#,
            self.plot_top(),
            self.plot_bottom(),
            if dashed {
                r#" stroke-dasharray="5,4""#
            } else {
                ""
            }
        );
        if let Some(l) = label {
            // Keep the label inside the picture near either edge.
            let half = 3.5 * l.chars().count() as f64;
            let anchor = if x + half > self.width - 2.0 {
                "end"
            } else if x - half < 2.0 {
                "start"
            } else {
                "middle"
            };
            let _ = write!(
                self.body,
                r#"<text x="{:.1}" y="{:.1}" font-size="12" fill="{stroke}" text-anchor="{anchor}">{}</text>"#,
                x,
                self.plot_top() - 6.0,
                esc(l)
            );
        }
    }

    /// A polyline through (t, v) points; gaps (NaN) break the line.
    pub fn line(&mut self, pts: &[(f64, f64)], stroke: &str, width: f64) {
        let mut seg = String::new();
        let flush = |seg: &mut String, body: &mut String| {
            if !seg.is_empty() {
                let _ = write!(
                    body,
                    r#"<polyline fill="none" stroke="{stroke}" stroke-width="{width}" stroke-linejoin="round" points="{}"/>"#,
                    seg.trim_end()
                );
                seg.clear();
            }
        };
        for &(t, v) in pts {
            if v.is_finite() && t.is_finite() {
                let _ = write!(seg, "{:.1},{:.1} ", self.x(t), self.y(v));
            } else {
                flush(&mut seg, &mut self.body);
            }
        }
        flush(&mut seg, &mut self.body);
    }

    /// Finish: grid, axes with ticks and labels, the body. (Legends are
    /// HTML beside the chart: inside the plot they covered the lines.)
    pub fn finish(self, x_label: &str, y_label: &str) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" role="img" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif">"#,
            w = self.width,
            h = self.height
        );
        let (l, r) = (self.left, self.width - self.right);
        let (t, b) = (self.plot_top(), self.plot_bottom());
        let _ = write!(
            s,
            r##"<rect x="{l}" y="{t}" width="{:.1}" height="{:.1}" fill="#fff" stroke="#999"/>"##,
            r - l,
            b - t
        );
        for v in ticks(self.y0, self.y1, 5) {
            let y = self.y(v);
            let _ = write!(
                s,
                r##"<line x1="{l}" y1="{y:.1}" x2="{r:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end" fill="#444">{}</text>"##,
                l - 6.0,
                y + 4.0,
                fmt_tick(v)
            );
        }
        for v in ticks(self.x0, self.x1, 10) {
            let x = self.x(v);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{b:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#444">{}</text>"##,
                b + 5.0,
                b + 18.0,
                fmt_tick(v)
            );
        }
        s.push_str(&self.body);
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#222">{}</text>"##,
            (l + r) / 2.0,
            self.height - 4.0,
            esc(x_label)
        );
        let _ = write!(
            s,
            r##"<text transform="translate(14 {:.1}) rotate(-90)" font-size="12" text-anchor="middle" fill="#222">{}</text>"##,
            (t + b) / 2.0,
            esc(y_label)
        );
        s.push_str("</svg>");
        s
    }
}

fn fmt_tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_round() {
        assert_eq!(nice_max(87.0), 100.0);
        assert_eq!(nice_max(105.0), 120.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(
            ticks(0.0, 100.0, 5),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(
            ticks(0.0, 70.0, 10),
            vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
        );
    }

    #[test]
    fn text_is_escaped_and_points_are_in_the_plot() {
        let mut c = Chart::new(400.0, 200.0, (0.0, 10.0), (0.0, 100.0));
        c.line(&[(0.0, 0.0), (10.0, 100.0), (11.0, f64::NAN)], "#00f", 2.0);
        c.span(2.0, 4.0, "#f00", 0.2, Some("B1-C0 <probe>"));
        let s = c.finish("time (s)", "Mbit/s");
        assert!(s.contains("B1-C0 &lt;probe&gt;"));
        assert!(s.contains(r#"points="58.0,164.0 386.0,30.0""#), "{s}");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
    }
}
