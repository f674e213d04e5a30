//! `opsel demo --report DIR`: the demo's runs recorded ([`record`]) and
//! drawn as one self-contained HTML page ([`html`], charts in [`svg`]).
//! `DIR/record.json` keeps the data, `DIR/report.html` is rendered from it
//! alone, so `opsel demo --report DIR --replay record.json` redraws a page
//! without the lab.

pub mod html;
pub mod record;
pub mod svg;

use std::path::{Path, PathBuf};

use opsel::{Error, Result};

pub use record::{DemoRecord, RunRecord, Setup};

/// Write `rec` to `dir/record.json` and its page to `dir/report.html`;
/// returns the page's path.
pub fn write(dir: &Path, rec: &DemoRecord) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let data = serde_json::to_string(rec).map_err(|e| Error::invalid(e.to_string()))?;
    let rp = dir.join("record.json");
    std::fs::write(&rp, data).map_err(|e| Error::io(format!("write {}", rp.display()), e))?;
    let page = dir.join("report.html");
    std::fs::write(&page, html::render(rec))
        .map_err(|e| Error::io(format!("write {}", page.display()), e))?;
    Ok(page)
}

/// Read a recorded `record.json` back.
pub fn read(path: &Path) -> Result<DemoRecord> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("read the demo record {}", path.display()), e))?;
    let rec: DemoRecord = serde_json::from_str(&text).map_err(|e| {
        Error::invalid(format!(
            "{} is not an opsel demo record ({e}); give the record.json that `opsel demo --report DIR` wrote",
            path.display()
        ))
    })?;
    if rec.format != record::FORMAT {
        return Err(Error::invalid(format!(
            "{}: format {:?}, expected {:?}",
            path.display(),
            rec.format,
            record::FORMAT
        )));
    }
    Ok(rec)
}
