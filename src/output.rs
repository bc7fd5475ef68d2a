//! Writing results: atomically to a file (temp file + rename), or to standard output; and where
//! memviz keeps what it writes for later (the user's cache folder).

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The user's memviz cache folder: `MEMVIZ_CACHE_DIR`, else `$XDG_CACHE_HOME/memviz` (an
/// absolute one), else `~/.cache/memviz`; `None` without any of them. Cached archives and model
/// configs live under it.
pub fn user_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("MEMVIZ_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("memviz"))
}

/// Writes `path` through `fill`: the data goes to a temporary file beside it
/// ([`crate::temp_files::TempFile`]: an unguessable name, never through a link, removed on a
/// signal) that is renamed over `path` only once complete, so a failure or a kill never leaves
/// a partial file. A FIFO or a character device (`/dev/stdout`, a pipe) is written into as it
/// is; any other file that is not a regular one (a socket, a block device, a folder) is refused.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let result = match output_kind(path)? {
        OutputKind::Stream => (|| {
            let file = fs::OpenOptions::new().write(true).open(path)?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            fill(&mut w)?;
            w.into_inner().map_err(|e| e.into_error())?;
            anyhow::Ok(())
        })(),
        OutputKind::File => (|| {
            let (tmp, file) = crate::temp_files::TempFile::beside(path)?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            fill(&mut w)?;
            let file = w.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            tmp.persist(path)?;
            anyhow::Ok(())
        })(),
    };
    // Errors name the file asked for, never the temporary one beside it.
    result.with_context(|| format!("cannot write {}", path.display()))
}

enum OutputKind {
    /// A new or regular file: written beside, then renamed over it.
    File,
    /// A FIFO or a character device: written into.
    Stream,
}

/// An output that is neither a file nor a stream (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}: not a regular file, a FIFO or a character device; refusing to write there")]
pub struct NotAnOutput(pub String);

fn output_kind(path: &Path) -> Result<OutputKind, NotAnOutput> {
    use std::os::unix::fs::FileTypeExt as _;
    match fs::metadata(path) {
        Err(_) => Ok(OutputKind::File),
        Ok(m) if m.is_file() => Ok(OutputKind::File),
        Ok(m) if m.file_type().is_fifo() || m.file_type().is_char_device() => Ok(OutputKind::Stream),
        Ok(_) => Err(NotAnOutput(path.display().to_string())),
    }
}

/// A command asked to write over one of its own inputs (`index run.pickle -o run.pickle`):
/// refused before any work, as a usage error.
#[derive(Debug, thiserror::Error)]
#[error("{output}: that is the input {input}; refusing to overwrite it (give another -o)")]
pub struct WouldOverwriteInput {
    pub output: String,
    pub input: String,
}

/// Refuses an output path that is (or resolves, through links, to) one of `inputs`.
pub fn refuse_overwriting(output: &Path, inputs: &[&Path]) -> Result<(), WouldOverwriteInput> {
    match inputs.iter().find(|input| same_file(output, input)) {
        Some(input) => {
            Err(WouldOverwriteInput { output: output.display().to_string(), input: input.display().to_string() })
        }
        None => Ok(()),
    }
}

/// True when both paths exist and name one file (symlinks and hard links followed).
fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
    }
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
