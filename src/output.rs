//! Writing results: atomically to a file (temp file + rename), or to standard output.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Writes `path` through `fill`: the data goes to a temporary file beside it that is renamed
/// over `path` only once complete, so a failure or a kill never leaves a partial file.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let tmp = temp_path(path);
    let result = (|| {
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// `dir/.name.tmp-PID` beside the target, so the rename stays on one file system.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes to `path` atomically, or to standard output when `path` is `None`.
pub fn write_to(path: Option<&Path>, fill: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>) -> anyhow::Result<()> {
    match path {
        Some(p) => write_atomic(p, fill),
        None => {
            let stdout = io::stdout();
            let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
            fill(&mut w)?;
            w.flush()?;
            Ok(())
        }
    }
}
