//! The layer table of ARCHITECTURE.md, checked on the source of both crates (`read/src`, the read
//! crate, and `src`, which re-exports its modules under their own names): a module imports only
//! the modules its row lists, all of a lower layer (never one beside it or above it). Test code
//! (`tests.rs`, `tiny.rs`, `fixtures.rs`, anything after `#[cfg(test)]`) may reach across, to
//! build fixtures.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::repo;

/// One row of ARCHITECTURE.md's layer table: its modules and the modules they may use.
struct Layer {
    modules: Vec<String>,
    /// `None`: everything below ("everything below", "everything").
    uses: Option<BTreeSet<String>>,
}

/// The table under "## Layers" in ARCHITECTURE.md, lowest first: `| N | modules | uses |`, each
/// module a backticked name; in the uses cell, backticked names of ours (`memviz-format` is a
/// crate, not a module), or "everything".
fn layers() -> Vec<Layer> {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let ticked = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .map(String::from)
            .collect()
    };
    let mut rows = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 || cells[1].parse::<usize>() != Ok(rows.len()) {
            continue;
        }
        let uses = if cells[3].starts_with("everything") { None } else { Some(ticked(cells[3]).into_iter().collect()) };
        rows.push(Layer { modules: ticked(cells[2]), uses });
    }
    rows
}

fn layer_of(layers: &[Layer], module: &str) -> Option<usize> {
    layers.iter().position(|row| row.modules.iter().any(|m| m == module))
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

/// Each module's imports as the table says: only modules its row lists (or, for "everything",
/// any module of a lower row), never one beside or above it; and every module a row lists as
/// used is used by one of the row's modules (the table says no more than is true).
#[test]
fn every_module_uses_what_the_layer_table_says() {
    let layers = layers();
    assert!(layers.len() >= 8, "read ARCHITECTURE.md's layer table ({} rows)", layers.len());
    let mut files = Vec::new();
    for src in ["read/src", "viewer/src", "src"] {
        let src = repo().join(src);
        let mut theirs = Vec::new();
        rust_files(&src, &mut theirs);
        files.extend(theirs.into_iter().map(|path| (src.clone(), path)));
    }
    // The viewer crate is one module of the table (`viewer`): its own modules are not rows, and
    // what it uses is what it imports of the read crate's (`crate::analysis`, …).
    let viewer_src = repo().join("viewer/src");
    let viewer_own: BTreeSet<String> = std::fs::read_dir(&viewer_src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    files.sort();
    let mut wrong = Vec::new();
    let mut used_by_row: Vec<BTreeSet<String>> = vec![BTreeSet::new(); layers.len()];
    let mut checked = 0;
    for (src, path) in files {
        let rel = path.strip_prefix(&src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        if rel.components().count() == 1 && (name == "main.rs" || name == "lib.rs") && src != viewer_src
            || name == "tests.rs"
            || name == "tiny.rs"
            || name == "fixtures.rs"
        {
            continue;
        }
        let in_viewer = src == viewer_src;
        let module = if in_viewer {
            "viewer".to_owned()
        } else {
            rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned()
        };
        let Some(mine) = layer_of(&layers, &module) else {
            wrong.push(format!("{}: module `{module}` has no row in ARCHITECTURE.md's layer table", rel.display()));
            continue;
        };
        checked += 1;
        for used in imports(&std::fs::read_to_string(&path).unwrap()) {
            if used == module || in_viewer && viewer_own.contains(&used) {
                continue;
            }
            used_by_row[mine].insert(used.clone());
            let below = layer_of(&layers, &used).is_some_and(|theirs| theirs < mine);
            let listed = layers[mine].uses.as_ref().is_none_or(|uses| uses.contains(&used));
            if !below || !listed {
                wrong.push(format!(
                    "{}: `{module}` uses `crate::{used}`, which its row of the table does not allow",
                    rel.display()
                ));
            }
        }
    }
    for (i, row) in layers.iter().enumerate() {
        for listed in row.uses.iter().flatten() {
            if !used_by_row[i].contains(listed) {
                wrong.push(format!("layer {i}: the table says {:?} use `{listed}`; none does", row.modules));
            }
        }
    }
    assert!(checked > 50, "read the source tree ({checked} files)");
    assert!(wrong.is_empty(), "the layer table is not the code's:\n{}", wrong.join("\n"));
}

#[test]
fn the_rule_catches_an_upward_import() {
    let text = "use crate::model::Snapshot;\nuse crate::viewer::Thing;\n#[cfg(test)]\nuse crate::commands::x;";
    assert_eq!(imports(text), ["model", "viewer"].into_iter().map(String::from).collect());
    let layers = layers();
    assert!(layer_of(&layers, "viewer") > layer_of(&layers, "archive"));
    let analysis = layer_of(&layers, "analysis").unwrap();
    assert!(
        layers[analysis].uses.as_ref().is_some_and(|u| !u.contains("archive")),
        "analysis does not use the archive"
    );
}
