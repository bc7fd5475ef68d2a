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

/// Classifies every element. `pools` is each element's private pool (empty: not known). The
/// rules are ARCHITECTURE.md's, one function each, numbered as it lists them; they run in this
/// order (a rule decides only what the rules before it left):
pub fn classify<F: FrameSource>(
    t: &TimelineRef<'_>,
    frames: &F,
    pools: &[Option<(i64, i64)>],
    rules: &dyn Rules,
) -> Classified {
    let mut c = Classifier::new(t, frames);
    c.rule_1_users_rules(rules);
    c.rule_2_recorded();
    c.rule_3_private_pool(pools);
    // Before 4: a sharded parameter is made by collectives' code.
    c.rule_5_modules_built();
    c.rule_6_ddp_buckets_deferred();
    c.rule_4_collectives();
    c.rule_6_phase_of_the_loop();
    c.rule_6_ddp_buckets();
    c.rule_7_repetition();
    Classified { of: c.of, phases: c.phases }
}

/// What the rules share: the timeline, each site's signals (read once), the phase and instance
/// of every action, and each element's category so far.
struct Classifier<'t, 'f, F> {
    t: &'t TimelineRef<'t>,
    frames: &'f F,
    signals: HashMap<u32, SiteSignals>,
    n: usize,
    phases: Vec<Phase>,
    /// Each action's run of one phase (an instance), numbered in order.
    instance: Vec<u32>,
    last_instance: u32,
    /// For each instance, the first later forward instance (`u32::MAX`: none).
    next_forward_after: Vec<u32>,
    /// Each instance's first action.
    first_action_of: Vec<u32>,
    /// The first action of the loop (not [`Phase::Other`]); `n` when there is no loop.
    first_loop_action: usize,
    of: Vec<Category>,
    /// Decided by rules 1–3 and 5: rule 7 leaves them as they are.
    decided: Vec<bool>,
    /// Taken by rule 4 or 6 (or deferred to [`Self::rule_6_ddp_buckets`]).
    taken: Vec<bool>,
    ddp_kept: Vec<usize>,
    /// Sizes of the parameters found by rule 5: a gradient has its parameter's size.
    param_sizes: HashSet<u64>,
}

impl<'t, 'f, F: FrameSource> Classifier<'t, 'f, F> {
    /// The phases of the loop (rule 6's first half): named spans first (outer to inner), then
    /// the frames of each allocation; an action with neither continues the current phase.
    fn new(t: &'t TimelineRef<'t>, frames: &'f F) -> Self {
        let (l, e) = (t.layout, t.layout.elements);
        let n = l.actions.len();
        let mut c = Classifier {
            t,
            frames,
            signals: HashMap::new(),
            n,
            phases: Vec::with_capacity(n),
            instance: Vec::with_capacity(n),
            last_instance: 0,
            next_forward_after: Vec::new(),
            first_action_of: Vec::new(),
            first_loop_action: n,
            of: vec![Category::Unknown; e.len()],
            decided: vec![false; e.len()],
            taken: vec![false; e.len()],
            ddp_kept: Vec::new(),
            param_sizes: HashSet::new(),
        };
        let mut named: Vec<Option<Phase>> = vec![None; n];
        let mut spans: Vec<_> = t.spans.iter().filter(|s| !s.is_point()).collect();
        spans.sort_by_key(|s| s.depth);
        for s in spans {
            if let Some(p) = span_phase(s.name) {
                let (a0, a1) = t.span_actions(s);
                named[a0 as usize..(a1 as usize).min(n)].fill(Some(p));
            }
        }
        let (mut current, mut inst) = (Phase::Other, 0u32);
        for (k, (&action, &said)) in l.actions.iter().zip(&named).enumerate() {
            let id = action as usize;
            let born_here = e.start[id] as usize == k;
            let from_frames = if born_here { c.signal(id).phase() } else { None };
            let p = said.or(from_frames).unwrap_or(current);
            if k > 0 && p != current {
                inst += 1;
            }
            current = p;
            c.phases.push(p);
            c.instance.push(inst);
        }
        c.last_instance = c.instance.last().copied().unwrap_or(0);
        let mut phase_of = vec![Phase::Other; c.last_instance as usize + 1];
        for k in 0..n {
            phase_of[c.instance[k] as usize] = c.phases[k];
        }
        let mut next = vec![u32::MAX; phase_of.len()];
        let mut seen = u32::MAX;
        for i in (0..phase_of.len()).rev() {
            next[i] = seen;
            if phase_of[i] == Phase::Forward {
                seen = i as u32;
            }
        }
        c.next_forward_after = next;
        let mut first = vec![u32::MAX; c.last_instance as usize + 1];
        for k in (0..n).rev() {
            first[c.instance[k] as usize] = k as u32;
        }
        c.first_action_of = first;
        c.first_loop_action = c.phases.iter().position(|&p| p != Phase::Other).unwrap_or(n);
        c
    }

    /// The signals of element `id`'s site.
    fn signal(&mut self, id: usize) -> SiteSignals {
        let site = self.t.site(ElementId::at(id));
        let frames = self.frames;
        *self.signals.entry(site).or_insert_with(|| SiteSignals::of(frames, site))
    }

    fn elements(&self) -> crate::layout::ElementsRef<'t> {
        self.t.layout.elements
    }

    fn decide(&mut self, id: usize, c: Category) {
        (self.of[id], self.decided[id]) = (c, true);
    }

    /// Kept past the next forward (or never freed): no one iteration's.
    fn kept(&self, id: usize) -> bool {
        let e = self.elements();
        let (start, end) = (e.start[id], e.end[id]);
        end == NEVER
            || (start != BEFORE_TRACE
                && self.instance[end as usize] > self.next_forward_after[self.instance[start as usize] as usize])
    }

    /// Lives until a forward that starts after its birth's instance (or to the end, when one does).
    fn lives_into_forward(&self, id: usize) -> bool {
        let e = self.elements();
        let next = self.next_forward_after[self.instance[e.start[id] as usize] as usize];
        next != u32::MAX && (e.end[id] == NEVER || e.end[id] >= self.first_action_of[next as usize])
    }

    /// The trace ends inside the last instance: what is live at the end was not seen to die.
    fn unfinished(&self, instance: u32) -> bool {
        instance == self.last_instance
    }

    /// The elements rules 4 and 6 decide: born in the trace, left by rules 1–3 and 5 and by the
    /// rules before them.
    fn open(&self) -> Vec<usize> {
        let e = self.elements();
        (0..e.len()).filter(|&id| !self.decided[id] && !self.taken[id] && e.start[id] != BEFORE_TRACE).collect()
    }

    /// Rule 1: the user's rules (`--categories FILE`) first: they know their code.
    fn rule_1_users_rules(&mut self, rules: &dyn Rules) {
        if rules.is_empty() {
            return;
        }
        let mut by_site: HashMap<u32, SiteFrames> = HashMap::new();
        for id in 0..self.elements().len() {
            let site = self.t.site(ElementId::at(id));
            let text = by_site.entry(site).or_insert_with(|| SiteFrames::of(self.frames, site));
            if let Some(c) = rules.category(self.t, ElementId::at(id), text) {
                self.decide(id, c);
            }
        }
    }

    /// Rule 2: a category the snapshot recorded on the event is taken as it is.
    fn rule_2_recorded(&mut self) {
        for id in 0..self.elements().len() {
            if self.decided[id] {
                continue;
            }
            if let Some(c) = Category::from_recorded(self.t.attrs.attrs(ElementId::at(id)).category) {
                self.decide(id, c);
            }
        }
    }

    /// Rule 3: a private pool makes `cuda_graph`: graph memory is the graph's whatever the frames say.
    fn rule_3_private_pool(&mut self, pools: &[Option<(i64, i64)>]) {
        for id in 0..self.elements().len() {
            if self.decided[id] {
                continue;
            }
            if pools.get(id).copied().flatten().is_some() {
                self.decide(id, Category::CudaGraph);
            }
        }
    }

    /// Rule 4: frames of collectives make `communication`: their buffers come and go with the phase
    /// that needs them (an all-gather's output, a reduce-scatter's input), but what their code
    /// makes in a backward and keeps past it is a sharded gradient.
    fn rule_4_collectives(&mut self) {
        for id in self.open() {
            if !self.signal(id).communication {
                continue;
            }
            let e = self.elements();
            let (k0, end) = (e.start[id] as usize, e.end[id]);
            let i0 = self.instance[k0];
            let died_in = (end != NEVER).then(|| self.instance[end as usize]);
            self.of[id] = match self.phases[k0] {
                Phase::Backward if died_in != Some(i0) && !self.unfinished(i0) => Category::Gradient,
                Phase::Backward if self.unfinished(i0) && end == NEVER => Category::Communication, // by repetition
                _ => Category::Communication,
            };
            self.taken[id] = true;
        }
    }

    /// Rule 5: frames of modules being built, moved or loaded, outside a backward, make `parameter`
    /// (module buffers with them), as do frames making a sharded parameter kept across steps;
    /// then, before the loop, a tensor user code keeps to the end with a gradient's size
    /// (adapters such as LoRA's, made by hand).
    fn rule_5_modules_built(&mut self) {
        let e = self.elements();
        for id in 0..e.len() {
            if self.decided[id] {
                continue;
            }
            let s = self.signal(id);
            let born = (e.start[id] != BEFORE_TRACE).then(|| self.phases[e.start[id] as usize]);
            if (s.module_setup && !s.communication && born != Some(Phase::Backward))
                || (s.sharded_param && matches!(born, None | Some(Phase::Other | Phase::Forward)) && self.kept(id))
            {
                self.decide(id, Category::Parameter);
            }
        }
        // Gradients' sizes as the backwards show them: what the autograd engine allocates in a
        // backward and keeps past it.
        let mut grad_sizes = HashSet::new();
        for id in 0..e.len() {
            let (start, end) = (e.start[id], e.end[id]);
            if start == BEFORE_TRACE || end == NEVER || self.phases[start as usize] != Phase::Backward {
                continue;
            }
            let s = self.signal(id);
            if self.instance[end as usize] != self.instance[start as usize]
                && (s.no_stack || s.backward)
                && !s.communication
            {
                grad_sizes.insert(e.size[id]);
            }
        }
        for id in 0..e.len() {
            let start = e.start[id];
            if self.decided[id]
                || e.end[id] != NEVER
                || start == BEFORE_TRACE
                || start as usize >= self.first_loop_action
            {
                continue;
            }
            let s = self.signal(id);
            if !(s.forward || s.backward || s.optimizer || s.no_stack || s.communication)
                && grad_sizes.contains(&e.size[id])
            {
                self.decide(id, Category::Parameter);
            }
        }
        self.param_sizes = (0..e.len()).filter(|&i| self.of[i] == Category::Parameter).map(|i| e.size[i]).collect();
    }

    /// Rule 6, DDP: DDP's own buckets kept across steps wait for [`Self::rule_6_ddp_buckets`], which
    /// needs to know whether the backwards keep gradients of their own.
    fn rule_6_ddp_buckets_deferred(&mut self) {
        for id in self.open() {
            if self.signal(id).ddp && self.kept(id) {
                self.ddp_kept.push(id);
                self.taken[id] = true;
            }
        }
    }

    /// Rule 6: the phase of the loop an element was born in and the instance it died in.
    fn rule_6_phase_of_the_loop(&mut self) {
        let e = self.elements();
        let n = self.n;
        let has_backward = self.phases.contains(&Phase::Backward);
        // With no loop at all (no forward, backward or optimizer phase), "outside the loop" and
        // "inside one phase" say nothing: user code's memory there is unknown.
        let has_loop = self.first_loop_action < n;
        for id in self.open() {
            let s = self.signal(id);
            let (k0, end) = (e.start[id] as usize, e.end[id]);
            let (born, i0) = (self.phases[k0], self.instance[k0]);
            let died_in = (end != NEVER).then(|| self.instance[end as usize]);
            let same_instance = died_in == Some(i0);
            self.of[id] = match born {
                Phase::Optimizer if s.optimizer_init => Category::OptimizerState,
                Phase::Optimizer if same_instance => Category::Temporary,
                Phase::Optimizer if s.optimizer => Category::OptimizerState,
                Phase::Optimizer => Category::Temporary,
                Phase::Backward => match died_in {
                    Some(j) if j == i0 => Category::Autograd,
                    None if self.unfinished(i0) => Category::Autograd, // decided by rule 7
                    _ if s.no_stack || s.backward => {
                        if self.param_sizes.is_empty() || self.param_sizes.contains(&e.size[id]) {
                            Category::Gradient
                        } else {
                            Category::Autograd
                        }
                    }
                    _ => Category::Autograd,
                },
                Phase::Forward => {
                    // Saved for the backward, or an output a variable holds until the next
                    // iteration's forward replaces it: gone by the end of the next forward.
                    let next_forward = self.next_forward_after[i0 as usize];
                    let next_forward_end =
                        self.first_action_of.get(next_forward as usize + 1).copied().unwrap_or(n as u32);
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
                    } else if !s.forward && !s.backward && !s.optimizer && !s.no_stack && self.lives_into_forward(id) {
                        Category::Input
                    } else {
                        Category::Unknown
                    }
                }
            };
            self.taken[id] = true;
        }
    }

    /// Rule 6, DDP: DDP's buckets kept across steps are the gradients (`gradient_as_bucket_view=True`:
    /// the parameters' `.grad` are views of them) unless the backwards keep gradients of their
    /// own, which the buckets then only carry to the all-reduce.
    fn rule_6_ddp_buckets(&mut self) {
        let e = self.elements();
        let own_gradients = (0..e.len()).any(|id| {
            self.of[id] == Category::Gradient
                && e.start[id] != BEFORE_TRACE
                && self.phases[e.start[id] as usize] == Phase::Backward
        });
        for &id in &self.ddp_kept {
            self.of[id] = if own_gradients { Category::Communication } else { Category::Gradient };
        }
    }

    /// Rule 7: repetition: a backward the trace ends inside cannot show what outlives it, so its
    /// allocations still live take the category of the same allocation (by order and size) of
    /// the previous backward.
    fn rule_7_repetition(&mut self) {
        let e = self.elements();
        // Every element born in each backward, in birth order (element ids are creation order).
        let mut backward_births: Vec<Vec<usize>> = vec![Vec::new(); self.last_instance as usize + 1];
        for id in 0..e.len() {
            let start = e.start[id];
            if start != BEFORE_TRACE && self.phases[start as usize] == Phase::Backward {
                backward_births[self.instance[start as usize] as usize].push(id);
            }
        }
        let backwards: Vec<usize> = (0..backward_births.len()).filter(|&i| !backward_births[i].is_empty()).collect();
        if let [.., prev, last] = backwards[..]
            && self.unfinished(last as u32)
        {
            for (j, &id) in backward_births[last].iter().enumerate() {
                if e.end[id] != NEVER || self.decided[id] {
                    continue;
                }
                let same = backward_births[prev].get(j).filter(|&&p| e.size[p] == e.size[id]);
                self.of[id] = match same {
                    Some(&p) => self.of[p],
                    None if self.param_sizes.contains(&e.size[id]) => Category::Gradient,
                    None => Category::Autograd,
                };
            }
        }
    }
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
    let seg = crate::layout::Layout::segments(snap, &snap.events, device);
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
