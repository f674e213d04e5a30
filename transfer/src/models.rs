//! Where `opsel` finds its models, so an installed `opsel` works outside a
//! checkout, and an OPS send from Python, Node or C (a [`crate::SendSpec`]
//! with `ops`) finds the same shipped models: the CLI and the bindings share
//! this rule.
//!
//! A model is named by a path (`--model PATH`, the spec's `ops.model`) or by
//! a shipped name
//! (`passive`, `active-s5c5s5b5`, …: the folders of the repo's `models/`).
//! A name, or a relative path that does not exist (such as the make
//! targets' `models/passive/model.json` run from elsewhere), is looked up
//! as `<root>/<name>/model.json` in, in order:
//!
//! 1. `$OPSEL_MODELS` (a folder laid out like the repo's `models/`);
//! 2. `<exe dir>/../share/opsel/models` (what `make install PREFIX=…`
//!    installs; for a binding the executable is the interpreter, so this
//!    only matters for the CLI);
//! 3. `./models` (run from a checkout);
//! 4. `<exe dir>/../../models` when the binary is a checkout's
//!    `target/release/opsel`;
//! 5. the copies built into the binary or the binding's library (the two
//!    default models and the passive model's probe gate, see [`EMBEDDED`]),
//!    so a lone binary or an installed Python or Node package still runs OPS.
//!
//! When nothing matches, the error names every place it looked.

use std::path::{Path, PathBuf};

use opsel::model::KnnModelFile;
use opsel::{Error, Result};

/// The default passive model (models/passive/MODEL_CARD.md: pooled over the
/// condition grid, w = 40).
pub const PASSIVE: &str = "passive";
/// The 5-Hz passive model (models/passive-200ms-two-stage/MODEL_CARD.md: a
/// sample every 200 ms, w = 50, decides after 10 s), which `auto` tries
/// first. Two stages, because OPS asks about the mix minus the transfer's
/// own flow, so the 6-class label decides, not "BBR present" alone
/// (docs/results/generalisation.md, "What OPS decides"). Not built into the
/// binary: found like any shipped model.
pub const PASSIVE_5HZ: &str = "passive-200ms-two-stage";
/// The model name that lets passive OPS choose between [`PASSIVE_5HZ`] and
/// [`PASSIVE`] on the live path (the default of passive OPS;
/// `opsel::sys::linux::ops_driver::AutoWatch` states the rule).
pub const AUTO: &str = "auto";
/// The default active model (S5-C5-S5-B5, 000 §5.6).
pub const ACTIVE: &str = "active-s5c5s5b5";
/// The default FastProb model of `opsel probe --throughput`
/// (models/fastprob-netlab/MODEL_CARD.md). Not built into the binary: it is
/// found like any shipped model, in the folders [`search_roots`] lists.
pub const FASTPROB: &str = "fastprob-netlab";

/// Models built into the binary (and the bindings' libraries): the defaults
/// of passive and active OPS, 0.63 MB of JSON together. Measured: the release binary (debug = 1) is
/// 43.0 MB, stripped 6.1 MB, so they add 1.5 % or 10 % respectively. Kept,
/// because a binary copied or installed without its `share/` folder still
/// classifies and runs OPS (docs/guide/cli.md, "Where models come from").
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        PASSIVE,
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/passive/model.json"
        )),
    ),
    (
        ACTIVE,
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/active-s5c5s5b5/model.json"
        )),
    ),
];

/// Probe gates built in beside [`EMBEDDED`] models (models/passive/gate.json,
/// 936 bytes): materialised next to the model by [`as_path`], so `gate:
/// "default"` (the `gate.json` beside the model) works with a built-in model.
pub const EMBEDDED_GATES: &[(&str, &str)] = &[(
    PASSIVE,
    include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/passive/gate.json"
    )),
)];

/// Where a model came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// One of [`EMBEDDED`], by name.
    Embedded(&'static str),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Embedded(n) => write!(f, "{n} (built into opsel)"),
        }
    }
}

/// The folders searched for a model name, each with why it is searched.
pub fn search_roots() -> Vec<(PathBuf, &'static str)> {
    let mut roots: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(d) = std::env::var_os("OPSEL_MODELS").filter(|d| !d.is_empty()) {
        roots.push((PathBuf::from(d), "$OPSEL_MODELS"));
    }
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    if let Some(dir) = &exe_dir {
        roots.push((
            dir.join("../share/opsel/models"),
            "installed beside the binary",
        ));
    }
    roots.push((PathBuf::from("models"), "the current directory's checkout"));
    // A binary run from a checkout's target/release (or target/debug).
    if let Some(target) = exe_dir
        .as_deref()
        .and_then(Path::parent)
        .filter(|t| t.file_name().is_some_and(|n| n == "target"))
    {
        roots.push((target.join("../models"), "the checkout of the binary"));
    }
    roots
}

/// The shipped name `arg` stands for: `passive`, `models/passive`,
/// `models/passive/model.json` and `passive/model.json` all name `passive`.
/// `None` for anything else (an absolute path, another file name).
pub fn model_name(arg: &Path) -> Option<String> {
    if arg.is_absolute() {
        return None;
    }
    let mut parts: Vec<&str> = arg.iter().filter_map(|c| c.to_str()).collect();
    if parts.first() == Some(&"models") {
        parts.remove(0);
    }
    if parts.last() == Some(&"model.json") {
        parts.pop();
    }
    match parts.as_slice() {
        [name] if !name.is_empty() && !name.ends_with(".json") && *name != "." => {
            Some(name.to_string())
        }
        _ => None,
    }
}

/// Find the model `arg` names (or `default_name` without `--model`): the
/// path itself when it exists, else the name in every search root, else the
/// built-in copy. The error lists every place looked at.
pub fn locate(arg: Option<&Path>, default_name: &str) -> Result<Source> {
    locate_in(arg, default_name, &search_roots())
}

pub(crate) fn locate_in(
    arg: Option<&Path>,
    default_name: &str,
    roots: &[(PathBuf, &str)],
) -> Result<Source> {
    let mut looked: Vec<String> = Vec::new();
    let name = match arg {
        Some(p) => {
            let file = if p.is_dir() {
                p.join("model.json")
            } else {
                p.to_path_buf()
            };
            if file.is_file() {
                return Ok(Source::File(file));
            }
            looked.push(format!("{} (as given)", file.display()));
            match model_name(p) {
                Some(n) => n,
                None => return Err(not_found(&p.display().to_string(), &looked)),
            }
        }
        None => default_name.to_string(),
    };
    for (root, why) in roots {
        let f = root.join(&name).join("model.json");
        if f.is_file() {
            // Shown in output and errors: without the `bin/..` detours.
            return Ok(Source::File(std::fs::canonicalize(&f).unwrap_or(f)));
        }
        looked.push(format!("{} ({why})", f.display()));
    }
    if let Some((n, _)) = EMBEDDED.iter().find(|(n, _)| *n == name) {
        return Ok(Source::Embedded(n));
    }
    looked.push(format!(
        "the models built into opsel ({})",
        EMBEDDED
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Err(not_found(&name, &looked))
}

fn not_found(what: &str, looked: &[String]) -> Error {
    Error::invalid(format!(
        "model {what:?} not found; looked in:\n  {}\nPass a model file's path (`--model PATH`; a send spec's `ops.model`), or set OPSEL_MODELS to a folder with <name>/model.json",
        looked.join("\n  ")
    ))
}

/// Load and validate the model at `src`.
pub fn load(src: &Source) -> Result<KnnModelFile> {
    match src {
        Source::File(p) => KnnModelFile::load(p),
        Source::Embedded(n) => {
            let text = EMBEDDED
                .iter()
                .find(|(e, _)| e == n)
                .map(|(_, t)| *t)
                .ok_or_else(|| Error::invalid(format!("no built-in model {n:?}")))?;
            KnnModelFile::from_json(text)
        }
    }
}

/// A file path for `src`, for code that takes a model path (the OPS
/// controller spec): a built-in model is written once to a per-user folder
/// under the temporary directory and that copy's path returned.
pub fn as_path(src: &Source) -> Result<PathBuf> {
    match src {
        Source::File(p) => Ok(p.clone()),
        Source::Embedded(n) => {
            let text = EMBEDDED
                .iter()
                .find(|(e, _)| e == n)
                .map(|(_, t)| *t)
                .ok_or_else(|| Error::invalid(format!("no built-in model {n:?}")))?;
            // SAFETY: getuid has no preconditions and cannot fail.
            let uid = unsafe { libc::getuid() };
            let dir = std::env::temp_dir()
                .join(format!("opsel-models-{uid}"))
                .join(n);
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
            if let Some((_, g)) = EMBEDDED_GATES.iter().find(|(e, _)| e == n) {
                materialise(&dir.join("gate.json"), g)?;
            }
            let file = dir.join("model.json");
            materialise(&file, text)?;
            Ok(file)
        }
    }
}

/// Write `text` to `file` unless it already holds it (write, then rename:
/// a concurrent reader never sees half a file).
fn materialise(file: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(file).ok().as_deref() == Some(text) {
        return Ok(());
    }
    let name = file
        .file_name()
        .map_or("file".into(), |n| n.to_string_lossy());
    let tmp = file.with_file_name(format!("{name}.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, file).map_err(|e| Error::io(format!("move into {}", file.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_repo_paths_name_the_same_model() {
        for a in [
            "passive",
            "models/passive",
            "models/passive/model.json",
            "passive/model.json",
        ] {
            assert_eq!(model_name(Path::new(a)).as_deref(), Some("passive"), "{a}");
        }
        for a in ["/abs/passive", "my.json", "a/b/c.json", "models"] {
            assert_eq!(model_name(Path::new(a)), None, "{a}");
        }
    }

    #[test]
    fn an_existing_path_wins_then_roots_in_order_then_the_built_in_copy() {
        let d = std::env::temp_dir().join(format!("opsel-models-test-{}", std::process::id()));
        let (r1, r2) = (d.join("r1"), d.join("r2"));
        std::fs::create_dir_all(r1.join("x")).unwrap();
        std::fs::create_dir_all(r2.join("x")).unwrap();
        std::fs::write(r2.join("x/model.json"), "{}").unwrap();
        let roots = vec![(r1.clone(), "first"), (r2.clone(), "second")];
        assert_eq!(
            locate_in(Some(Path::new("x")), PASSIVE, &roots).unwrap(),
            Source::File(std::fs::canonicalize(r2.join("x/model.json")).unwrap())
        );
        std::fs::write(r1.join("x/model.json"), "{}").unwrap();
        assert_eq!(
            locate_in(Some(Path::new("models/x/model.json")), PASSIVE, &roots).unwrap(),
            Source::File(std::fs::canonicalize(r1.join("x/model.json")).unwrap())
        );
        // A directory given as --model means its model.json.
        assert_eq!(
            locate_in(Some(&r1.join("x")), PASSIVE, &roots).unwrap(),
            Source::File(r1.join("x/model.json"))
        );
        assert_eq!(
            locate_in(None, PASSIVE, &roots).unwrap(),
            Source::Embedded(PASSIVE)
        );
        let e = locate_in(Some(Path::new("nope")), PASSIVE, &roots)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"nope\" not found"), "{e}");
        assert!(
            e.contains(&r1.join("nope/model.json").display().to_string()),
            "{e}"
        );
        assert!(
            e.contains(&r2.join("nope/model.json").display().to_string()),
            "{e}"
        );
        assert!(e.contains("built into opsel"), "{e}");
        let e = locate_in(Some(&d.join("missing.json")), PASSIVE, &roots)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.json (as given)"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn built_in_models_load_and_materialise() {
        for (n, _) in EMBEDDED {
            let src = Source::Embedded(n);
            let m = load(&src).unwrap();
            assert!(m.model.window() > 0);
            let p = as_path(&src).unwrap();
            assert_eq!(
                KnnModelFile::load(&p).unwrap().model.window(),
                m.model.window()
            );
            // The passive model's gate is materialised beside it.
            let gate = p.with_file_name("gate.json");
            assert_eq!(gate.is_file(), *n == PASSIVE, "{n}");
            if gate.is_file() {
                opsel::ops::ProbeGate::load(&gate).unwrap();
            }
        }
    }
}
