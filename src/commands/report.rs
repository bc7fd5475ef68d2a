//! What an answering command returns — a typed document — and the one place that prints it.
//! The text a person reads, `--json` and `--csv` are renderers of the same [`Answer`];
//! `memviz mcp` returns its document as structured content (with the JSON as text), never
//! capturing what a command prints.

use std::io::Write;

use serde::Serialize;

use crate::analysis::table::Table;

/// How an answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

impl Format {
    /// From the `--json` / `--csv` flags (clap keeps them apart).
    pub fn of(json: bool, csv: bool) -> Format {
        match (json, csv) {
            (true, _) => Format::Json,
            (_, true) => Format::Csv,
            _ => Format::Text,
        }
    }
}

/// Most answers' document: the input and one report per device.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PerDevice<T> {
    pub input: String,
    pub devices: Vec<T>,
}

type Render<T> = Box<dyn Fn(&T) -> String>;
type Csv<T> = Box<dyn Fn(&T, &mut dyn Write) -> anyhow::Result<()>>;

/// A command's answer: its document, how it reads as text and as CSV, and the verdict that makes
/// the command exit with code 3 (a threshold crossed: `diff`'s [`super::PeakGrew`], `ranks`'
/// [`super::RankOutlier`]) — an answer all the same.
pub struct Answer<T> {
    pub doc: T,
    text: Render<T>,
    csv: Option<Csv<T>>,
    pub verdict: Option<anyhow::Error>,
    /// What to do once the answer is out (`stats` caches the archive it built).
    after: Option<Box<dyn FnOnce()>>,
}

impl<T: Serialize> Answer<T> {
    pub fn new(doc: T, text: impl Fn(&T) -> String + 'static) -> Answer<T> {
        Answer { doc, text: Box::new(text), csv: None, verdict: None, after: None }
    }

    /// With a CSV form: the tables of `tables(doc)`, the first one's header, then every row.
    pub fn with_csv<R: Table>(mut self, tables: impl Fn(&T) -> Vec<&R> + 'static) -> Answer<T> {
        self.csv = Some(Box::new(move |doc, w| write_csv(&tables(doc), w)));
        self
    }

    pub fn with_verdict(mut self, verdict: Option<anyhow::Error>) -> Answer<T> {
        self.verdict = verdict;
        self
    }

    /// With `then` to run once the answer is out.
    pub fn then(mut self, then: impl FnOnce() + 'static) -> Answer<T> {
        self.after = Some(Box::new(then));
        self
    }

    /// Runs what was to be done once the answer is out (see [`Self::then`]).
    pub fn finish(&mut self) {
        if let Some(after) = self.after.take() {
            after();
        }
    }

    pub fn text(&self) -> String {
        (self.text)(&self.doc)
    }

    /// The document as `--json` prints it: pretty, in the document's field order.
    pub fn json(&self) -> anyhow::Result<String> {
        let mut out = serde_json::to_string_pretty(&self.doc)?;
        out.push('\n');
        Ok(out)
    }

    /// The document as a JSON value (`memviz mcp`'s structured content).
    pub fn value(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::to_value(&self.doc)?)
    }

    /// Prints the answer to standard output in `format`, then hands back its verdict as the
    /// error that sets the exit code.
    pub fn print(mut self, format: Format) -> anyhow::Result<()> {
        crate::output::write_to(None, |w| match format {
            Format::Json => Ok(w.write_all(self.json()?.as_bytes())?),
            Format::Text => Ok(w.write_all(self.text().as_bytes())?),
            Format::Csv => match &self.csv {
                Some(csv) => csv(&self.doc, w),
                None => anyhow::bail!("this answer has no CSV form"),
            },
        })?;
        self.finish();
        self.verdict.map_or(Ok(()), Err)
    }
}

/// The tables as one CSV: the first one's header, then every table's rows.
fn write_csv<R: Table>(tables: &[&R], w: &mut dyn Write) -> anyhow::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    if let Some(first) = tables.first() {
        out.write_record(first.header())?;
    }
    for t in tables {
        for row in t.rows() {
            out.write_record(&row)?;
        }
    }
    out.flush()?;
    Ok(())
}
