//! `--categories FILE`: the user's own category rules, tried in order before the built-in ones
//! (as Mosaic's custom rules are). A TOML file of `[[rule]]` tables, each with a `category` and
//! at least one regular expression; a rule matches an allocation when every expression it gives
//! matches (searched, not anchored):
//!
//! ```toml
//! [[rule]]
//! category = "kv_cache"
//! frame = "vllm/worker/cache_engine\\.py"   # any frame's "name file:line" of the allocation
//!
//! [[rule]]
//! category = "communication"
//! file = "deepspeed/runtime/zero"           # any frame's file
//! annotation = "^allgather"                 # a record_function span open when it was allocated
//!
//! [[rule]]
//! category = "input"
//! metadata = "batch"                        # its annotate label, else user_metadata
//! ```

use regex::Regex;
use serde::Deserialize;

use super::categories::{Category, Rules, SiteFrames};
use crate::derive::timeline::TimelineRef;
use crate::model::ElementId;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    category: String,
    frame: Option<String>,
    file: Option<String>,
    annotation: Option<String>,
    metadata: Option<String>,
}

/// One rule, compiled.
#[derive(Debug)]
pub struct Rule {
    pub category: Category,
    frame: Option<Regex>,
    file: Option<Regex>,
    annotation: Option<Regex>,
    metadata: Option<Regex>,
}

/// The user's rules, in file order.
#[derive(Debug, Default)]
pub struct UserRules {
    pub rules: Vec<Rule>,
    /// Some rule matches annotations (then the spans open at each allocation are looked up).
    needs_annotation: bool,
}

impl UserRules {
    /// Parses a rules file's text; `Err` is one line saying which rule and what is wrong.
    pub fn parse(text: &str) -> Result<UserRules, String> {
        let file: File = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut rules = Vec::with_capacity(file.rule.len());
        for (i, r) in file.rule.into_iter().enumerate() {
            let at = |what: &str| format!("rule {}: {what}", i + 1);
            let category = Category::from_name(&r.category).ok_or_else(|| {
                let names: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
                at(&format!("unknown category {:?} (one of {})", r.category, names.join(", ")))
            })?;
            let compile = |p: Option<String>, field: &str| {
                p.map(|p| {
                    Regex::new(&p).map_err(|e| at(&format!("{field}: {}", super::find::last_line(&e.to_string()))))
                })
                .transpose()
            };
            let rule = Rule {
                category,
                frame: compile(r.frame, "frame")?,
                file: compile(r.file, "file")?,
                annotation: compile(r.annotation, "annotation")?,
                metadata: compile(r.metadata, "metadata")?,
            };
            if rule.frame.is_none() && rule.file.is_none() && rule.annotation.is_none() && rule.metadata.is_none() {
                return Err(at("needs at least one of frame, file, annotation, metadata"));
            }
            rules.push(rule);
        }
        let needs_annotation = rules.iter().any(|r| r.annotation.is_some());
        Ok(UserRules { rules, needs_annotation })
    }
}

impl Rules for UserRules {
    fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    fn category(&self, t: &TimelineRef<'_>, id: ElementId, site: &SiteFrames) -> Option<Category> {
        let open = match (self.needs_annotation, t.layout.element(id).start_opt()) {
            (true, Some(k)) => t.open_at_action(k.0),
            _ => Vec::new(),
        };
        let attrs = t.attrs.attrs(id);
        self.rules
            .iter()
            .find(|r| {
                r.frame.as_ref().is_none_or(|re| site.lines.iter().any(|l| re.is_match(l)))
                    && r.file.as_ref().is_none_or(|re| site.files.iter().any(|f| re.is_match(f)))
                    && r.annotation.as_ref().is_none_or(|re| open.iter().any(|a| re.is_match(a)))
                    && r.metadata.as_ref().is_none_or(|re| re.is_match(attrs.metadata()))
            })
            .map(|r| r.category)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_refuse_in_one_line() {
        let ok = UserRules::parse("[[rule]]\ncategory = \"kv_cache\"\nframe = \"cache_engine\"\n").unwrap();
        assert_eq!(ok.rules.len(), 1);
        assert_eq!(ok.rules[0].category, Category::KvCache);
        let bad = UserRules::parse("[[rule]]\ncategory = \"weights\"\nframe = \"x\"\n").unwrap_err();
        assert!(bad.starts_with("rule 1: unknown category \"weights\""), "{bad}");
        let bad = UserRules::parse("[[rule]]\ncategory = \"input\"\nframe = \"(\"\n").unwrap_err();
        assert!(bad.starts_with("rule 1: frame:") && !bad.contains('\n'), "{bad}");
        let bad = UserRules::parse("[[rule]]\ncategory = \"input\"\n").unwrap_err();
        assert!(bad.contains("needs at least one"), "{bad}");
        assert!(UserRules::parse("[[rule]]\ncategory = \"input\"\nfarme = \"x\"\n").is_err());
    }
}
