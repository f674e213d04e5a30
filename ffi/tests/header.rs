//! The checked-in C header must equal what cbindgen generates from the
//! current sources ("a test fails if it is stale").
//! Regenerate: `make header` (sets OPSEL_UPDATE_HEADER=1 for this test).

use std::path::Path;

fn generate() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(Path::new(dir).join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("header is UTF-8")
}

#[test]
fn header_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/opsel.h");
    let fresh = generate();
    if std::env::var_os("OPSEL_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/opsel.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "ffi/include/opsel.h is stale: the C API in ffi/src changed. Run `make header` and commit the result."
    );
}

#[test]
fn header_has_version_macros_and_no_rust_types() {
    let h = generate();
    for m in [
        "OPSEL_VERSION_MAJOR",
        "OPSEL_VERSION_MINOR",
        "OPSEL_VERSION_PATCH",
    ] {
        assert!(h.contains(&format!("#define {m} ")), "{m} missing");
    }
    // Opaque handles only: no Rust container or core type names leak.
    for leak in [
        "Vec<",
        "String",
        "KnnModelFile",
        "Workspace ",
        "Box<",
        "Option<",
    ] {
        assert!(!h.contains(leak), "{leak} leaks into opsel.h");
    }
    assert!(h.contains("typedef struct opsel_model opsel_model;"));
    assert!(h.contains("typedef struct opsel_workspace opsel_workspace;"));
}
