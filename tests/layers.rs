//! The layer rule of ARCHITECTURE.md, checked on the source: a module imports only modules of a
//! lower layer (never one beside it or above it). Test code (`tests.rs`, `tiny.rs`, anything
//! after `#[cfg(test)]`) may reach across, to build fixtures.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::repo;

/// Lowest first. A module may use any module of an earlier row.
const LAYERS: [&[&str]; 9] = [
    &["temp_files"],
    &["model", "output", "spill"],
    &["ingest", "layout"],
    &["lod", "derive", "allocator"],
    &["archive"],
    &["analysis"],
    &["hub"],
    &["viewer", "cli"],
    &["commands"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

/// `crate::X` paths used by a file's non-test code.
fn imports(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `memviz_crate::`, not ours
        }
        let name: String = code[i + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for path in files {
        let rel = path.strip_prefix(&src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        if rel.components().count() == 1 && (name == "main.rs" || name == "lib.rs")
            || name == "tests.rs"
            || name == "tiny.rs"
        {
            continue;
        }
        let module = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
        let Some(mine) = layer_of(&module) else {
            wrong.push(format!(
                "{}: module `{module}` has no layer in LAYERS (add it, and to ARCHITECTURE.md)",
                rel.display()
            ));
            continue;
        };
        checked += 1;
        for used in imports(&std::fs::read_to_string(&path).unwrap()) {
            if used == module {
                continue;
            }
            match layer_of(&used) {
                Some(theirs) if theirs < mine => {}
                Some(_) => {
                    wrong.push(format!("{}: `{module}` uses `crate::{used}`, which is not below it", rel.display()))
                }
                None => wrong.push(format!("{}: uses `crate::{used}`, which has no layer", rel.display())),
            }
        }
    }
    assert!(checked > 50, "read the source tree ({checked} files)");
    assert!(wrong.is_empty(), "layer rule broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_rule_catches_an_upward_import() {
    let text = "use crate::model::Snapshot;\nuse crate::viewer::Thing;\n#[cfg(test)]\nuse crate::commands::x;";
    assert_eq!(imports(text), ["model", "viewer"].into_iter().map(String::from).collect());
    assert!(layer_of("viewer") > layer_of("archive"));
}
