//! The README's and the user guide's examples, run: every `$ memviz …` line of a code block
//! whose files are bundled (each argument with a `/` names a file of the repository) is run from
//! the repository's root, and the lines the document shows under it must be lines of what it
//! prints, in the same order (a document may leave lines out, and marks the gap with `…`). A
//! change to what a command prints that an example shows fails here until the document says it.

use std::path::Path;

use crate::support::*;

/// One `$ memviz …` example: where it is, its arguments, and the lines shown under it.
struct Example {
    at: String,
    args: Vec<String>,
    /// `| tail -N`: only the last N lines are shown.
    tail: Option<usize>,
    shown: Vec<String>,
}

/// Splits a shell command line: words, `'…'` and `"…"` quoting, a trailing `# comment` dropped.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (None, '#') if !any && word.is_empty() => break,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => (word.push(c), any = true).1,
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// The examples of one Markdown file.
fn examples(doc: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(doc).unwrap();
    let name = doc.file_name().unwrap().to_string_lossy().into_owned();
    let mut found: Vec<Example> = Vec::new();
    let (mut in_block, mut current) = (false, None::<Example>);
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            found.extend(current.take());
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            found.extend(current.take());
            let (command, tail) = match command.split_once(" | tail -") {
                Some((c, n)) => (c, n.trim().parse().ok()),
                None => (command, None),
            };
            let args = words(command);
            if args.first().map(String::as_str) == Some("memviz") {
                current =
                    Some(Example { at: format!("{name}:{}", i + 1), args: args[1..].to_vec(), tail, shown: vec![] });
            }
        } else if let Some(e) = current.as_mut() {
            e.shown.push(line.to_owned());
        }
    }
    found
}

/// Whether an example can run here: an answering command over bundled files, writing nothing.
fn runnable(e: &Example) -> bool {
    let command = e.args.first().map(String::as_str).unwrap_or("");
    let answers = ["stats", "at", "range", "steps", "diff", "find", "segments", "oom", "ranks"];
    answers.contains(&command)
        && !e.args.iter().any(|a| a == "-o" || a == "--output" || a == "--model")
        && e.args.iter().filter(|a| a.contains('/') && !a.starts_with("--") && !a.starts_with('/')).count() > 0
        && e.args.iter().filter(|a| a.contains('/') && !a.starts_with("--")).all(|a| repo().join(a).exists())
}

/// Whether `shown` (the document's lines, `…` marking a gap) are lines of `printed` in order.
fn shows(shown: &[String], printed: &str) -> Result<(), String> {
    let mut lines = printed.lines();
    for want in shown.iter().map(|l| l.trim_end()).filter(|l| !l.is_empty() && !matches!(l.trim(), "…" | "...")) {
        if !lines.any(|got| got.trim_end() == want) {
            return Err(format!("the line {want:?} is not printed (in this order)"));
        }
    }
    Ok(())
}

#[test]
fn the_documents_examples_print_what_they_show() {
    let cache = tempdir();
    let mut ran = 0;
    let mut wrong = Vec::new();
    for doc in ["README.md", "docs/guide.md"] {
        for e in examples(&repo().join(doc)).iter().filter(|e| runnable(e)) {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
                .current_dir(repo())
                .args(&e.args)
                .env("MEMVIZ_CACHE_DIR", cache.path())
                .output()
                .unwrap();
            // As a terminal shows it: the answer, then what went to standard error (`diff`'s
            // regression line).
            let mut printed = String::from_utf8_lossy(&out.stdout).into_owned();
            printed.push_str(&String::from_utf8_lossy(&out.stderr));
            if let Some(n) = e.tail {
                let lines: Vec<&str> = printed.lines().collect();
                printed = lines[lines.len().saturating_sub(n)..].join("\n");
            }
            if let Err(why) = shows(&e.shown, &printed) {
                wrong.push(format!("{} (memviz {}): {why}", e.at, e.args.join(" ")));
            }
            ran += 1;
        }
    }
    assert!(ran >= 15, "ran {ran} examples: read the documents' code blocks");
    assert!(wrong.is_empty(), "examples that do not print what they show:\n{}", wrong.join("\n"));
}

#[test]
fn words_split_as_a_shell_does() {
    assert_eq!(words(r###"steps a.pickle --annotation "## step""###), ["steps", "a.pickle", "--annotation", "## step"]);
    assert_eq!(
        words("stats run.pickle --annotation-filter '## step*'"),
        ["stats", "run.pickle", "--annotation-filter", "## step*"]
    );
    assert_eq!(words("stats a.pickle --model c.json     # n_embd 256"), ["stats", "a.pickle", "--model", "c.json"]);
    assert!(shows(&["b".into(), "…".into(), "d".into()], "a\nb\nc\nd\n").is_ok());
    assert!(shows(&["d".into(), "b".into()], "a\nb\nc\nd\n").is_err(), "in order");
}
