//! The kinds of memory an allocation can be (`analysis::categories` says which each is).

use serde::Serialize;

/// What kind of memory an allocation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameter,
    Gradient,
    OptimizerState,
    Activation,
    Temporary,
    Autograd,
    Communication,
    CudaGraph,
    KvCache,
    Input,
    Unknown,
}

impl Category {
    pub const ALL: [Category; 11] = [
        Category::Parameter,
        Category::Gradient,
        Category::OptimizerState,
        Category::Activation,
        Category::Temporary,
        Category::Autograd,
        Category::Communication,
        Category::CudaGraph,
        Category::KvCache,
        Category::Input,
        Category::Unknown,
    ];

    /// The name in tables, JSON and rules files.
    pub fn name(self) -> &'static str {
        match self {
            Category::Parameter => "parameter",
            Category::Gradient => "gradient",
            Category::OptimizerState => "optimizer_state",
            Category::Activation => "activation",
            Category::Temporary => "temporary",
            Category::Autograd => "autograd",
            Category::Communication => "communication",
            Category::CudaGraph => "cuda_graph",
            Category::KvCache => "kv_cache",
            Category::Input => "input",
            Category::Unknown => "unknown",
        }
    }

    pub fn from_name(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The category a snapshot recorded on the event (MemoryViz-style re-exports, the
    /// profiler's names: `PARAMETER`, `AUTOGRAD_DETAIL`, …), if it is one of ours.
    pub fn from_recorded(s: &str) -> Option<Category> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "autograd_detail" => Some(Category::Autograd),
            "optimizer" | "optimizer_state" | "optimizer state" => Some(Category::OptimizerState),
            "kv cache" | "kvcache" => Some(Category::KvCache),
            "cuda graph" | "cudagraph" => Some(Category::CudaGraph),
            other => Category::from_name(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in Category::ALL {
            assert_eq!(Category::from_name(c.name()), Some(c));
        }
        assert_eq!(Category::from_recorded("AUTOGRAD_DETAIL"), Some(Category::Autograd));
        assert_eq!(Category::from_recorded("PARAMETER"), Some(Category::Parameter));
        assert_eq!(Category::from_recorded("weights"), None);
    }
}
