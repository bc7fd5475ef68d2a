//! What kind of memory each allocation is: parameter, gradient, optimizer state, activation,
//! temporary, autograd workspace, communication buffer, CUDA-graph pool memory, KV cache,
//! input, or unknown — from a plain snapshot, without a profiler run.
//!
//! The signals, and why each means what it is taken to mean:
//!
//! 1. **The phase of the loop** each action falls in (forward, backward, optimizer, other user
//!    code). Spans named like a phase (`## forward ##`, `fwd`, `backward`, `Optimizer.step#…`,
//!    `zero_grad`) decide first, the innermost winning: the user (or torch's own
//!    `Optimizer.step` record_function) said so. Elsewhere the stack of the allocation decides:
//!    a frame of `Tensor.backward` / `torch.autograd.backward` / the autograd engine means
//!    backward (the main thread blocks there while the engine runs); a frame under
//!    `torch/optim/` means the optimizer; a module call (`Module._call_impl`, `forward`) means
//!    forward; other Python code is "other". An allocation with no Python stack, or a Python
//!    stack that does not start at a `<module>` (the main thread's always does), comes from
//!    another thread — in training, the autograd engine's, running backward hooks — and a free
//!    has no stack of its own: all three continue the phase they fall in. Each run of actions in one
//!    phase is an *instance* (one forward, one backward, …).
//! 2. **Lifetimes against the instances**: memory born and freed inside one instance is a
//!    temporary (an autograd workspace when the instance is a backward); memory born in a
//!    forward that lives on into the backward is saved for it (an activation, as is an output
//!    a variable holds until the next iteration's forward replaces it); memory that outlives the
//!    next forward too belongs to no one iteration (a workspace such as cuBLAS's, or a cache:
//!    unknown unless the frames say more).
//! 3. **The frames of the allocation site**: modules being built, moved or loaded
//!    (`Module._apply` / `.to` / `.cuda`, `reset_parameters`, `__init__` under `torch/nn/`,
//!    `load_state_dict`, `from_pretrained`) make parameters; the optimizer's state
//!    initialisation (`_init_group`) or memory an optimizer step allocates and keeps makes
//!    optimizer state (what a step allocates and frees is a temporary: foreach buffers);
//!    collectives (`torch.distributed`, NCCL, FSDP's all-gather / reduce-scatter) make
//!    communication buffers while they come and go with the phase that needs them — what that
//!    code makes and keeps is the model's state: sharded parameters (FSDP's `FSDPParam`), and
//!    the sharded gradients a reduce-scatter leaves past the backward; KV-cache code (`cache_utils.py`, `kv_cache`, `past_key_values`)
//!    makes KV cache when it is kept from one forward to the next (decoding) or no backward
//!    runs (in a training step the cache's tensors are saved for the backward and die there:
//!    activations).
//! 4. **Sizes**: a gradient has its parameter's size — memory the autograd engine allocates in a
//!    backward and keeps past it, with a parameter's size, is a gradient; kept but of no
//!    parameter's size, autograd memory.
//! 5. **Repetition**: a backward the trace ends inside (a dump mid-step) cannot show which of
//!    its allocations outlive it. Training repeats itself, so its k-th allocation takes the
//!    category of the k-th allocation of the previous backward when their sizes agree.
//! 6. **Pools**: memory in a private pool (CUDA graphs, `MemPool`) is CUDA-graph memory: it is
//!    the graph's, whatever the frames say.
//! 7. **Inputs**: memory user code (no module, optimizer or backward frame) makes outside the
//!    loop's phases and that lives into a later phase is an input (a batch moved to the GPU).
//!
//! A user rules file (`--categories FILE`) runs before all of these, and a category the snapshot
//! recorded on the event (a re-export that carries one) is taken as it is.

use std::collections::{HashMap, HashSet};

use super::frames::FrameSource;
use crate::derive::timeline::TimelineRef;
use crate::layout::{BEFORE_TRACE, NEVER};
pub use crate::model::Category;
use crate::model::{ElementId, NONE};

/// The phase of the training loop an action falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Forward,
    Backward,
    Optimizer,
    Other,
}

/// What the frames of one allocation site say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SiteSignals {
    pub no_stack: bool,
    /// Python frames but no `<module>` at the bottom: not the main thread's stack (a backward
    /// hook on the autograd engine's thread, a data-loader thread).
    pub off_main: bool,
    pub module_setup: bool,
    pub optimizer: bool,
    pub optimizer_init: bool,
    pub backward: bool,
    pub forward: bool,
    pub communication: bool,
    /// Frames of DistributedDataParallel's own code (`torch/nn/parallel/distributed.py`): its
    /// gradient buckets, made at construction and rebuilt in the second step's `_pre_forward`.
    pub ddp: bool,
    /// Frames of a sharded or flattened parameter being made (FSDP's `FSDPParam`, `FlatParamHandle`,
    /// `distribute_tensor`): the model's state, though collectives' code makes it.
    pub sharded_param: bool,
    pub kv_cache: bool,
}

impl SiteSignals {
    pub fn of<F: FrameSource>(frames: &F, site: u32) -> SiteSignals {
        let stack = if site == NONE { &[][..] } else { frames.stack(site) };
        let mut s = SiteSignals { no_stack: stack.is_empty(), ..SiteSignals::default() };
        let python = stack.iter().any(|&f| frames.file(f).ends_with(".py"));
        s.off_main = python && !stack.iter().any(|&f| frames.name(f) == "<module>");
        // DDP's forward wraps the model's: only memory its own code allocates (the innermost
        // Python frame is DDP's) is its buckets.
        s.ddp = stack
            .iter()
            .find(|&&f| frames.file(f).ends_with(".py"))
            .is_some_and(|&f| frames.file(f).replace('\\', "/").ends_with("torch/nn/parallel/distributed.py"));
        s.communication = s.ddp;
        for &f in stack {
            let (name, file) = (frames.name(f), frames.file(f).replace('\\', "/"));
            let torch_nn = file.contains("torch/nn/");
            s.module_setup |= (file.ends_with("torch/nn/modules/module.py")
                && matches!(name, "_apply" | "to" | "cuda" | "to_empty" | "load_state_dict" | "_load_from_state_dict"))
                || matches!(
                    name,
                    "reset_parameters"
                        | "_init_weights"
                        | "init_weights"
                        | "post_init"
                        | "from_pretrained"
                        | "load_state_dict"
                        | "_load_from_state_dict"
                        | "_load_state_dict_into_meta_model"
                        | "load_checkpoint"
                        | "materialize"
                )
                || (torch_nn && name == "__init__")
                || file.ends_with("torch/nn/init.py")
                || file.ends_with("torch/nn/parameter.py");
            let optim = file.contains("torch/optim/")
                || file.contains("/optimizers/")
                || file.contains("bitsandbytes/optim")
                || file.contains("deepspeed/ops/adam")
                || file.ends_with("transformers/optimization.py");
            s.optimizer |= optim;
            s.optimizer_init |= optim && matches!(name, "_init_group" | "_init_state" | "init_state" | "_lazy_init");
            s.backward |= (file.ends_with("torch/_tensor.py") && name == "backward")
                || (file.ends_with("torch/autograd/__init__.py") && matches!(name, "backward" | "grad"))
                || name.contains("_engine_run_backward")
                || name.contains("run_backward")
                || name.contains("autograd::Engine")
                || name.contains("evaluate_function")
                || (name.contains("torch::autograd::generated::") && name.contains("Backward"))
                || (file.contains("torch/_functorch/") && name.contains("backward"));
            s.forward |= (file.ends_with("torch/nn/modules/module.py") && matches!(name, "_call_impl" | "__call__"))
                || name == "forward";
            s.sharded_param |= file.ends_with("_fsdp_param.py")
                || file.ends_with("_flat_param.py")
                || name.contains("_init_sharded_param")
                || name.contains("distribute_tensor")
                || name == "fully_shard";
            s.communication |= file.contains("torch/distributed/")
                || file.contains("/fsdp/")
                || ["nccl", "c10d::", "ProcessGroup", "all_gather", "reduce_scatter", "all_reduce", "allreduce"]
                    .iter()
                    .any(|p| name.contains(p));
            s.kv_cache |= file.ends_with("cache_utils.py")
                || file.contains("kv_cache")
                || name.contains("kv_cache")
                || name.contains("KVCache")
                || name.contains("past_key_value");
        }
        s
    }

    /// The phase an allocation with these frames says it is in (`None`: it does not say).
    fn phase(&self) -> Option<Phase> {
        if self.backward {
            Some(Phase::Backward)
        } else if self.no_stack || self.off_main {
            None
        } else if self.optimizer {
            Some(Phase::Optimizer)
        } else if self.forward {
            Some(Phase::Forward)
        } else {
            Some(Phase::Other)
        }
    }
}

/// The phase a span's name says (`None`: none): whole words, any case.
pub fn span_phase(name: &str) -> Option<Phase> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').collect();
    let has = |w: &[&str]| words.iter().any(|x| w.contains(x));
    if has(&["backward", "bwd"]) {
        Some(Phase::Backward)
    } else if lower.starts_with("optimizer.") || has(&["optimizer", "optim", "zero_grad"]) {
        Some(Phase::Optimizer)
    } else if has(&["forward", "fwd"]) {
        Some(Phase::Forward)
    } else {
        None
    }
}

/// The frames of an allocation site as user rules match them: each frame as `name file:line`
/// (`name file` without a recorded line), and each frame's file.
#[derive(Debug, Default)]
pub struct SiteFrames {
    pub lines: Vec<String>,
    pub files: Vec<String>,
}

impl SiteFrames {
    pub fn of<F: FrameSource>(frames: &F, site: u32) -> SiteFrames {
        let stack = if site == NONE { &[][..] } else { frames.stack(site) };
        let line = |f| match frames.line(f) {
            crate::model::NO_LINE => format!("{} {}", frames.name(f), frames.file(f)),
            l => format!("{} {}:{l}", frames.name(f), frames.file(f)),
        };
        SiteFrames {
            lines: stack.iter().map(|&f| line(f)).collect(),
            files: stack.iter().map(|&f| frames.file(f).to_owned()).collect(),
        }
    }
}

/// A user rule: the first one whose pattern matches an allocation decides its category.
pub trait Rules {
    fn category(&self, t: &TimelineRef<'_>, id: ElementId, site: &SiteFrames) -> Option<Category>;
    fn is_empty(&self) -> bool;
}

/// No user rules.
impl Rules for () {
    fn category(&self, _: &TimelineRef<'_>, _: ElementId, _: &SiteFrames) -> Option<Category> {
        None
    }
    fn is_empty(&self) -> bool {
        true
    }
}

/// The category of every element of `t`, and the phase of every action.
pub struct Classified {
    pub of: Vec<Category>,
    pub phases: Vec<Phase>,
}

/// Classifies every element. `pools` is each element's private pool (empty: not known).
pub fn classify<F: FrameSource>(
    t: &TimelineRef<'_>,
    frames: &F,
    pools: &[Option<(i64, i64)>],
    rules: &dyn Rules,
) -> Classified {
    let l = t.layout;
    let e = l.elements;
    let n = l.actions.len();
    let mut signals: HashMap<u32, SiteSignals> = HashMap::new();
    let mut signal = |site: u32| *signals.entry(site).or_insert_with(|| SiteSignals::of(frames, site));

    // 1. Phases: named spans first (outer to inner), then the frames of each allocation.
    let mut named: Vec<Option<Phase>> = vec![None; n];
    let mut spans: Vec<_> = t.spans.iter().filter(|s| !s.is_point()).collect();
    spans.sort_by_key(|s| s.depth);
    for s in spans {
        if let Some(p) = span_phase(s.name) {
            let (a0, a1) = t.span_actions(s);
            named[a0 as usize..(a1 as usize).min(n)].fill(Some(p));
        }
    }
    let mut phases = Vec::with_capacity(n);
    let mut instance = Vec::with_capacity(n);
    let (mut current, mut inst) = (Phase::Other, 0u32);
    for (k, (&action, &said)) in l.actions.iter().zip(&named).enumerate() {
        let id = action as usize;
        let born_here = e.start[id] as usize == k;
        let from_frames = if born_here { signal(t.site(ElementId::at(id))).phase() } else { None };
        let p = said.or(from_frames).unwrap_or(current);
        if k > 0 && p != current {
            inst += 1;
        }
        current = p;
        phases.push(p);
        instance.push(inst);
    }

    // The instances in order, each with its phase, and where forwards start.
    let last_instance = instance.last().copied().unwrap_or(0);
    let next_forward_after = {
        // For each instance, the first later forward instance (u32::MAX: none).
        let mut phase_of = vec![Phase::Other; last_instance as usize + 1];
        for k in 0..n {
            phase_of[instance[k] as usize] = phases[k];
        }
        let mut next = vec![u32::MAX; phase_of.len()];
        let mut seen = u32::MAX;
        for i in (0..phase_of.len()).rev() {
            next[i] = seen;
            if phase_of[i] == Phase::Forward {
                seen = i as u32;
            }
        }
        next
    };
    let first_action_of = {
        let mut first = vec![u32::MAX; last_instance as usize + 1];
        for k in (0..n).rev() {
            first[instance[k] as usize] = k as u32;
        }
        first
    };
    // Kept past the next forward (or never freed): no one iteration's.
    let kept = |id: usize| {
        let (start, end) = (e.start[id], e.end[id]);
        end == NEVER
            || (start != BEFORE_TRACE && instance[end as usize] > next_forward_after[instance[start as usize] as usize])
    };

    // Lives until a forward that starts after its birth's instance (or to the end, when one does).
    let lives_into_forward = |id: usize| {
        let next = next_forward_after[instance[e.start[id] as usize] as usize];
        next != u32::MAX && (e.end[id] == NEVER || e.end[id] >= first_action_of[next as usize])
    };

    // Parameters first: their sizes tell gradients.
    let mut of = vec![Category::Unknown; e.len()];
    let mut decided = vec![false; e.len()];
    if !rules.is_empty() {
        let mut by_site: HashMap<u32, SiteFrames> = HashMap::new();
        for id in 0..e.len() {
            let site = t.site(ElementId::at(id));
            let text = by_site.entry(site).or_insert_with(|| SiteFrames::of(frames, site));
            if let Some(c) = rules.category(t, ElementId::at(id), text) {
                (of[id], decided[id]) = (c, true);
            }
        }
    }
    for id in 0..e.len() {
        if decided[id] {
            continue;
        }
        let s = signal(t.site(ElementId::at(id)));
        let born = (e.start[id] != BEFORE_TRACE).then(|| phases[e.start[id] as usize]);
        let recorded = Category::from_recorded(t.attrs.attrs(ElementId::at(id)).category);
        let c = if recorded.is_some() {
            recorded
        } else if pools.get(id).copied().flatten().is_some() {
            Some(Category::CudaGraph)
        } else if (s.module_setup && !s.communication && born != Some(Phase::Backward))
            || (s.sharded_param && matches!(born, None | Some(Phase::Other | Phase::Forward)) && kept(id))
        {
            Some(Category::Parameter)
        } else {
            None
        };
        if let Some(c) = c {
            (of[id], decided[id]) = (c, true);
        }
    }
    // Gradients' sizes as the backwards show them: what the autograd engine allocates in a
    // backward and keeps past it. A tensor user code makes before the loop, keeps to the end and
    // whose size such a gradient has is a parameter too (adapters such as LoRA's, made by hand).
    let grad_sizes: HashSet<u64> = (0..e.len())
        .filter(|&id| {
            let (start, end) = (e.start[id], e.end[id]);
            let s = signal(t.site(ElementId::at(id)));
            start != BEFORE_TRACE
                && end != NEVER
                && phases[start as usize] == Phase::Backward
                && instance[end as usize] != instance[start as usize]
                && (s.no_stack || s.backward)
                && !s.communication
        })
        .map(|id| e.size[id])
        .collect();
    let first_loop_action = phases.iter().position(|&p| p != Phase::Other).unwrap_or(n);
    for id in 0..e.len() {
        let start = e.start[id];
        if decided[id] || e.end[id] != NEVER || start == BEFORE_TRACE || start as usize >= first_loop_action {
            continue;
        }
        let s = signal(t.site(ElementId::at(id)));
        if !(s.forward || s.backward || s.optimizer || s.no_stack || s.communication)
            && grad_sizes.contains(&e.size[id])
        {
            (of[id], decided[id]) = (Category::Parameter, true);
        }
    }
    let param_sizes: HashSet<u64> = (0..e.len()).filter(|&i| of[i] == Category::Parameter).map(|i| e.size[i]).collect();

    let has_backward = phases.contains(&Phase::Backward);
    // With no loop at all (no forward, backward or optimizer phase), "outside the loop" and
    // "inside one phase" say nothing: user code's memory there is unknown.
    let has_loop = first_loop_action < n;
    let mut ddp_kept = Vec::new();
    // The trace ends inside the last instance: what is live at the end was not seen to die.
    let unfinished = |i: u32| i == last_instance;

    // Every element born in each backward, in birth order (element ids are creation order).
    let mut backward_births: Vec<Vec<usize>> = vec![Vec::new(); last_instance as usize + 1];
    for id in 0..e.len() {
        let start = e.start[id];
        if start != BEFORE_TRACE && phases[start as usize] == Phase::Backward {
            backward_births[instance[start as usize] as usize].push(id);
        }
    }
    for id in 0..e.len() {
        if decided[id] {
            continue;
        }
        let s = signal(t.site(ElementId::at(id)));
        let start = e.start[id];
        if start == BEFORE_TRACE {
            // Live before the trace: only its frames can say (handled above); else unknown.
            continue;
        }
        let (k0, end) = (start as usize, e.end[id]);
        let (born, i0) = (phases[k0], instance[k0]);
        let died_in = (end != NEVER).then(|| instance[end as usize]);
        let same_instance = died_in == Some(i0);
        if s.ddp && kept(id) {
            // DDP's gradient buckets: decided below, once it is known whether the backwards
            // keep gradients of their own.
            ddp_kept.push(id);
            continue;
        }
        if s.communication {
            // Collectives' buffers come and go with the phase that needs them (an all-gather's
            // output, a reduce-scatter's input); what their code makes and keeps is the model's
            // state: a sharded parameter, or a sharded gradient kept past its backward.
            of[id] = match born {
                Phase::Backward if died_in != Some(i0) && !unfinished(i0) => Category::Gradient,
                Phase::Backward if unfinished(i0) && end == NEVER => Category::Communication, // by repetition
                _ => Category::Communication,
            };
            continue;
        }
        of[id] = match born {
            Phase::Optimizer if s.optimizer_init => Category::OptimizerState,
            Phase::Optimizer if same_instance => Category::Temporary,
            Phase::Optimizer if s.optimizer => Category::OptimizerState,
            Phase::Optimizer => Category::Temporary,
            Phase::Backward => {
                match died_in {
                    Some(j) if j == i0 => Category::Autograd,
                    None if unfinished(i0) => Category::Autograd, // decided below, by repetition
                    _ if s.no_stack || s.backward => {
                        if param_sizes.is_empty() || param_sizes.contains(&e.size[id]) {
                            Category::Gradient
                        } else {
                            Category::Autograd
                        }
                    }
                    _ => Category::Autograd,
                }
            }
            Phase::Forward => {
                // Saved for the backward, or an output a variable holds until the next
                // iteration's forward replaces it: gone by the end of the next forward.
                let next_forward = next_forward_after[i0 as usize];
                let next_forward_end = first_action_of.get(next_forward as usize + 1).copied().unwrap_or(n as u32);
                let dies_before_next_forward = match end {
                    NEVER => next_forward == u32::MAX,
                    k => next_forward == u32::MAX || k < next_forward_end,
                };
                // A KV cache is kept from one forward to the next (decoding); cache code in a
                // training forward whose tensors die in the backward made activations.
                if same_instance {
                    Category::Temporary
                } else if s.kv_cache && (!dies_before_next_forward || !has_backward) {
                    Category::KvCache
                } else if dies_before_next_forward {
                    Category::Activation
                } else {
                    Category::Unknown
                }
            }
            Phase::Other => {
                if !has_loop {
                    Category::Unknown
                } else if same_instance {
                    Category::Temporary
                } else if !s.forward && !s.backward && !s.optimizer && !s.no_stack && lives_into_forward(id) {
                    Category::Input
                } else {
                    Category::Unknown
                }
            }
        };
    }

    // DDP's buckets kept across steps are the gradients (`gradient_as_bucket_view=True`: the
    // parameters' `.grad` are views of them) unless the backwards keep gradients of their own,
    // which the buckets then only carry to the all-reduce.
    let own_gradients = (0..e.len()).any(|id| {
        of[id] == Category::Gradient && e.start[id] != BEFORE_TRACE && phases[e.start[id] as usize] == Phase::Backward
    });
    for id in ddp_kept {
        of[id] = if own_gradients { Category::Communication } else { Category::Gradient };
    }

    // 5. A backward the trace ends inside: its allocations still live take the category of the
    // same allocation (by order and size) of the previous backward.
    let backwards: Vec<usize> = (0..backward_births.len()).filter(|&i| !backward_births[i].is_empty()).collect();
    if let [.., prev, last] = backwards[..]
        && unfinished(last as u32)
    {
        for (j, &id) in backward_births[last].iter().enumerate() {
            if e.end[id] != NEVER || decided[id] {
                continue;
            }
            let same = backward_births[prev].get(j).filter(|&&p| e.size[p] == e.size[id]);
            of[id] = match same {
                Some(&p) => of[p],
                None if param_sizes.contains(&e.size[id]) => Category::Gradient,
                None => Category::Autograd,
            };
        }
    }
    Classified { of, phases }
}

/// One category's share of a set of allocations.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CategoryBytes {
    pub category: Category,
    pub bytes: u64,
    pub count: u64,
    pub share_pct: f64,
}

/// Bytes per category of the elements `ids` (sizes `sizes`), largest first; categories with
/// none left out.
pub fn breakdown(sizes: &[u64], of: &[Category], ids: impl IntoIterator<Item = ElementId>) -> Vec<CategoryBytes> {
    let mut sums: HashMap<Category, (u64, u64)> = HashMap::new();
    for id in ids {
        let c = of.get(id.index()).copied().unwrap_or(Category::Unknown);
        let cell = sums.entry(c).or_default();
        cell.0 += sizes[id.index()];
        cell.1 += 1;
    }
    let total: u64 = sums.values().map(|v| v.0).sum();
    let mut out: Vec<CategoryBytes> = sums
        .into_iter()
        .map(|(category, (bytes, count))| CategoryBytes {
            category,
            bytes,
            count,
            share_pct: super::groups::share(bytes, total),
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.category.cmp(&b.category)));
    out
}

/// `40.1% optimizer_state (42.6 MiB), 22.3% activation (…), …` on one line.
pub fn one_line(b: &[CategoryBytes]) -> String {
    let parts: Vec<String> = b
        .iter()
        .map(|c| format!("{:.1}% {} ({})", c.share_pct, c.category.name(), super::units::bytes(c.bytes)))
        .collect();
    parts.join(", ")
}

/// Classifies the elements of one device of an in-memory model (no archive: `stats` of a
/// snapshot read afresh): its sites, spans, action times, attributes and pools from the model,
/// by the rules an archive's answers use.
pub fn classify_model(
    snap: &crate::model::Snapshot,
    layout: crate::layout::LayoutRef<'_>,
    rules: &dyn Rules,
) -> Vec<Category> {
    let sites = crate::derive::sites::element_stacks(snap, layout);
    let times = crate::derive::timeline::model_action_times(snap, layout);
    let device = layout.device;
    let all = crate::derive::spans::spans(snap);
    let spans: Vec<crate::derive::timeline::NamedSpan<'_>> =
        all.iter().filter(|s| s.on(device)).map(|s| s.named(snap)).collect();
    // The classifier never rebuilds a live stack: one checkpoint, the initial state.
    let every = (layout.actions.len() as u32).max(1).next_power_of_two();
    let cps = crate::layout::Checkpoints::build_every(layout, every);
    let attrs = crate::derive::attrs::ModelAttrs { snap, layout };
    let seg = crate::layout::Layout::segments(snap, device);
    let seg_attrs = crate::derive::attrs::ModelAttrs { snap, layout: seg.view() };
    let dump = crate::derive::attrs::dump_pools(snap, device);
    use crate::derive::timeline::Attributes as _;
    let seg_pools = crate::derive::attrs::segment_pools(seg.view(), |id| seg_attrs.attrs(id).pool, &dump);
    let pools = crate::derive::attrs::element_pools(layout, |id| attrs.attrs(id).pool, seg.view(), &seg_pools);
    let t = TimelineRef {
        layout,
        checkpoints: cps.view(),
        sites: &sites,
        spans: &spans,
        times: &times,
        trace_start_us: None,
        time_base_us: None,
        attrs: &attrs,
        steps: None,
        categories: None,
        pools: None,
    };
    classify(&t, snap, &pools, rules).of
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_say_their_phase() {
        assert_eq!(span_phase("## forward ##"), Some(Phase::Forward));
        assert_eq!(span_phase("## backward ##"), Some(Phase::Backward));
        assert_eq!(span_phase("Optimizer.step#AdamW.step"), Some(Phase::Optimizer));
        assert_eq!(span_phase("Optimizer.zero_grad#AdamW.zero_grad"), Some(Phase::Optimizer));
        assert_eq!(span_phase("model_fwd"), None, "whole words only");
        assert_eq!(span_phase("fwd pass"), Some(Phase::Forward));
        assert_eq!(span_phase("## step 3 ##"), None);
        assert_eq!(span_phase("ProfilerStep#4"), None);
    }
}
