//! `memviz export html`: one page that opens an archive from `file://` — the viewer's page with
//! its glue, wasm and the archive inline ([`crate::web_page::WebFiles::standalone`]).

use std::path::PathBuf;

use anyhow::{Context as _, anyhow, bail};

use crate::analysis::units;
use crate::archive::Session;
use crate::web_page::{MISSING, MOST_INLINE, WebFiles};

pub fn export_html(args: &crate::cli::HtmlArgs, cache: bool) -> anyhow::Result<()> {
    let input = &args.input;
    let web = WebFiles::find()?.ok_or_else(|| anyhow!(MISSING))?;
    let context = || input.display().to_string();
    let session = if crate::file::is_archive(input) {
        Session::from_archive(crate::file::open(input).with_context(context)?)
    } else {
        crate::index::cache::open_session(input, cache, &|_| {})?
    };
    let size = session.archive.file_len();
    if size > MOST_INLINE {
        bail!(
            "{}: its archive is {}: a page holds archives up to {} inline (the browser decodes it whole); \
             show it in a browser with `memviz serve {}` instead, or send the .memviz for `memviz open`",
            input.display(),
            units::bytes(size),
            units::bytes(MOST_INLINE),
            input.display()
        );
    }
    // A colleague opens what is sent: it must be what was written.
    session.archive.verify().with_context(context)?;
    let name = crate::index::cache::file_name(input);
    let html = web.standalone(session.archive.source().bytes(), &name)?;
    let out = args.output.clone().unwrap_or_else(|| {
        let stem = crate::ingest::snapshot_stem(&name);
        PathBuf::from(format!("{}.html", stem.strip_suffix(".memviz").unwrap_or(stem)))
    });
    crate::output::write_atomic(&out, |w| Ok(w.write_all(html.as_bytes())?))?;
    eprintln!(
        "wrote {} ({}): open it in Chromium or Firefox, no server needed",
        out.display(),
        units::bytes(html.len() as u64)
    );
    Ok(())
}
