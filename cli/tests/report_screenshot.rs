//! The demo report as a person sees it: the page drawn from a recorded
//! fixture (a real `opsel demo --quick --report` run, trimmed) is rendered by
//! headless chromium and the screenshot checked: the expected size, not
//! blank, and the foreground's and background's line colours present (the
//! charts were drawn, not an error page). Skips, saying so, when chromium is
//! not installed (`make sys-deps` installs it).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const W: u32 = 1280;
const H: u32 = 2000;
/// The report's foreground and background line colours (cli/src/report/html.rs).
const FG_RGB: [u8; 3] = [0x1f, 0x6f, 0xc5];
const BG_RGB: [u8; 3] = [0xd9, 0x48, 0x0f];

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|n| {
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join(n))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .find(|p| p.is_file())
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-report/record.json")
}

/// Run `cmd` in its own process group; kill the whole group (chromium's
/// helper processes too) if it is not done within `limit`.
fn run_bounded(cmd: &mut Command, limit: Duration) -> (bool, String) {
    let child = cmd
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let start = Instant::now();
    let mut child = child;
    let ok = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.success();
        }
        if start.elapsed() > limit {
            // SAFETY: kill(2) on the process group this test created.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    // Helpers of a finished chromium may outlive it for a moment.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    (
        ok,
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn near(p: &[u8], c: [u8; 3], tol: i32) -> bool {
    (0..3).all(|i| (p[i] as i32 - c[i] as i32).abs() <= tol)
}

#[test]
fn the_report_renders_in_chromium_with_its_charts() {
    let Some(chrome) = chromium() else {
        eprintln!(
            "SKIP the_report_renders_in_chromium_with_its_charts: chromium not found \
             (apt-get install chromium, or make sys-deps; CHROMIUM=PATH to point at one)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("opsel-report-shot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let st = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["demo", "--report"])
        .arg(&dir)
        .arg("--replay")
        .arg(fixture())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let page = dir.join("report.html");
    let shot = dir.join("shot.png");
    let (ok, log) = run_bounded(
        Command::new(&chrome)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--disable-extensions",
            ])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("--window-size={W},{H}"))
            .arg(format!("file://{}", page.display())),
        Duration::from_secs(120),
    );
    assert!(ok && shot.is_file(), "chromium failed or timed out:\n{log}");

    let dec = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (W, H), "screenshot size");
    let ch = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks_exact(ch).collect();
    let n = px.len() as f64;
    let non_white = px
        .iter()
        .filter(|p| p[..3].iter().any(|&v| v < 235))
        .count() as f64
        / n;
    let fg = px.iter().filter(|p| near(p, FG_RGB, 40)).count();
    let bg = px.iter().filter(|p| near(p, BG_RGB, 40)).count();
    eprintln!(
        "screenshot {W}x{H}: non-white {:.1} %, FG-coloured {fg} px, BG-coloured {bg} px ({})",
        100.0 * non_white,
        shot.display()
    );
    // A blank page or an error page is nearly all white; a page whose
    // charts failed has text only (a few %). The fixture's report fills
    // its width with shaded probe bands and charts.
    assert!(
        non_white > 0.08,
        "looks blank: {:.1} % non-white",
        100.0 * non_white
    );
    assert!(
        non_white < 0.9,
        "looks filled: {:.1} % non-white",
        100.0 * non_white
    );
    assert!(fg > 1500, "foreground line missing: {fg} px of its colour");
    assert!(bg > 1500, "background line missing: {bg} px of its colour");
    let _ = std::fs::remove_dir_all(&dir);
}
