//! Tensor-shape guesses: explaining an allocation's bytes as a product of a model's dimensions
//! times a dtype size, e.g. `v×h fp32` for a tied embedding, `3×h×h bf16` for a fused QKV weight.
//!
//! The caching allocator rounds sizes up to multiples of 512 bytes, so a product `p` explains a
//! size `s` when `p ≤ s < p + 512` (exactly: `s - p ≤ 512`, the tolerance of a near miss).

use std::collections::HashMap;

use super::frames::FrameSource;

use serde::Serialize;

/// Allocator rounding tolerated between a tensor's bytes and the block that holds it.
pub const ROUNDING: u64 = 512;

/// A model's named dimensions (from its `config.json`, or inferred).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ModelDims {
    /// `(name, value)`: h, i, v, v+1, heads, ctx, head_dim — whatever is known.
    pub dims: Vec<(String, u64)>,
    /// Also try int8 and 4-bit.
    pub quantized: bool,
}

/// Element sizes in bytes, ×2 so that 4-bit (half a byte) stays an integer.
const DTYPES: [(&str, u64, bool); 4] = [("fp32", 8, false), ("bf16", 4, false), ("int8", 2, true), ("4-bit", 1, true)];

/// One explanation of a size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Factorization {
    /// e.g. `v×h fp32`.
    pub text: String,
    /// Bytes the product accounts for; the rest is allocator rounding.
    pub bytes: u64,
}

impl ModelDims {
    /// Reads h, i, v and heads from a Hugging Face `config.json` (several naming schemes).
    pub fn from_config(
        config: &serde_json::Value,
        vocab_override: Option<u64>,
        quantized: bool,
    ) -> Result<ModelDims, String> {
        let cfg = config.get("text_config").filter(|t| t.is_object()).unwrap_or(config);
        // The first of `keys` present; a present one that is not a positive integer is an error
        // (`null` counts as absent: configs write `"n_inner": null` for the default).
        let first = |keys: &[&str]| -> Result<Option<u64>, String> {
            for k in keys {
                match cfg.get(*k) {
                    None | Some(serde_json::Value::Null) => continue,
                    Some(v) => {
                        return match v.as_u64() {
                            Some(n) if n > 0 => Ok(Some(n)),
                            _ => Err(format!("config.json: `{k}` is {v}, expected a positive integer")),
                        };
                    }
                }
            }
            Ok(None)
        };
        let h = first(&["hidden_size", "n_embd", "d_model", "dim"])?
            .ok_or("config.json has no hidden_size / n_embd / d_model")?;
        let i = first(&["intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim"])?.unwrap_or(4 * h);
        let v = match vocab_override {
            Some(v) => Some(v),
            None => first(&["vocab_size", "n_vocab", "padded_vocab_size"])?,
        };
        let heads = first(&["num_attention_heads", "n_head", "num_heads", "encoder_attention_heads"])?;
        let kv_heads = first(&["num_key_value_heads"])?;
        let ctx = first(&["max_position_embeddings", "n_positions", "n_ctx", "max_seq_len"])?;
        let mut dims = vec![("h".to_owned(), h), ("i".to_owned(), i)];
        if let Some(v) = v {
            dims.push(("v".into(), v));
            dims.push(("v+1".into(), v + 1));
        }
        if let Some(n) = heads.filter(|&n| n > 0) {
            dims.push(("heads".into(), n));
            if h % n == 0 {
                dims.push(("head_dim".into(), h / n));
                if let Some(kv) = kv_heads.filter(|&kv| kv > 0 && kv != n) {
                    dims.push(("kv_dim".into(), kv * (h / n)));
                }
            }
        }
        if let Some(c) = ctx {
            dims.push(("ctx".into(), c));
        }
        Ok(ModelDims { dims, quantized })
    }

    /// Every way (up to three dimensions, a small integer factor and a dtype) to account for
    /// `size` bytes within allocator rounding; simplest first, at most `limit`.
    pub fn explain(&self, size: u64, limit: usize) -> Vec<Factorization> {
        let mut found: Vec<(u32, Factorization)> = Vec::new();
        let dims = &self.dims;
        let mut terms: Vec<(Vec<usize>, u64)> = Vec::new();
        for a in 0..dims.len() {
            terms.push((vec![a], dims[a].1));
            for b in a..dims.len() {
                terms.push((vec![a, b], dims[a].1 * dims[b].1));
                for c in b..dims.len() {
                    terms.push((vec![a, b, c], dims[a].1 * dims[b].1 * dims[c].1));
                }
            }
        }
        for (idx, product) in &terms {
            for &(dtype, half_bytes, quant) in &DTYPES {
                if quant && !self.quantized {
                    continue;
                }
                for k in 1..=4u64 {
                    let bytes = (k * product * half_bytes).div_ceil(2);
                    if bytes == 0 || bytes > size || size - bytes > ROUNDING {
                        continue;
                    }
                    // Largest dimension first, as weights are written (`v×h`, `i×h`).
                    let mut order = idx.clone();
                    order.sort_by(|&x, &y| dims[y].1.cmp(&dims[x].1).then(x.cmp(&y)));
                    let names: Vec<&str> = order.iter().map(|&j| dims[j].0.as_str()).collect();
                    let coef = if k > 1 { format!("{k}×") } else { String::new() };
                    let text = format!("{coef}{} {dtype}", names.join("×"));
                    // Simpler is likelier: fewer dims, no coefficient, full-precision dtypes,
                    // and h / i / v before the rest.
                    let rarity = idx.iter().map(|&j| if j < 4 { 0 } else { 2 }).sum::<u32>();
                    let score = idx.len() as u32 * 10 + (k as u32 - 1) * 4 + u32::from(quant) * 6 + rarity;
                    found.push((score, Factorization { text, bytes }));
                }
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.text.cmp(&b.1.text)));
        found.dedup_by(|a, b| a.1.text == b.1.text);
        found.into_iter().take(limit).map(|(_, f)| f).collect()
    }

    /// `h=768 i=3072 v=50257 heads=12`.
    pub fn summary(&self) -> String {
        self.dims.iter().filter(|(n, _)| n != "v+1").map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ")
    }
}

/// Candidate dimensions guessed from the most frequent allocation sizes, when no model is given:
/// square `h×h` and `h×4h` matrices vote for `h`, then `h×i` and `h×v` shapes for `i` and `v`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Candidates {
    pub h: Option<u64>,
    pub i: Option<u64>,
    pub v: Option<u64>,
}

/// Frames of convolution and batch-norm code (torch.nn, torch.nn.functional, torchvision).
const CONV_FILES: [&str; 3] = ["conv.py", "batchnorm.py", "torchvision/ops/"];
const CONV_NAMES: [&str; 6] = ["conv1d", "conv2d", "conv3d", "_conv_forward", "batch_norm", "conv_transpose2d"];

/// True when at least a quarter of the allocations (`sites`: one stack id per allocation) were
/// made in convolution or batch-norm code. A convnet's activation sizes are k·h² by coincidence
/// (32×128×28×28 fp32 = 1792² × 4 B), so transformer candidates mean nothing there.
pub fn is_convnet(src: &impl FrameSource, sites: impl Iterator<Item = u32>) -> bool {
    let mut verdict: HashMap<u32, bool> = HashMap::new();
    let (mut conv, mut total) = (0u64, 0u64);
    for site in sites {
        let hit = *verdict.entry(site).or_insert_with(|| {
            src.stack(site).iter().any(|&f| {
                let (name, file) = (src.name(f), src.file(f));
                CONV_NAMES.contains(&name) || CONV_FILES.iter().any(|c| file.ends_with(c) || file.contains(c))
            })
        });
        conv += u64::from(hit);
        total += 1;
    }
    total > 0 && conv * 4 >= total
}

/// h / i / v from the allocations `(size, site)` made in the trace; nothing for a convnet.
pub fn infer_allocations(src: &impl FrameSource, allocations: &[(u64, u32)]) -> Candidates {
    if is_convnet(src, allocations.iter().map(|a| a.1)) {
        return Candidates::default();
    }
    infer(allocations.iter().map(|a| a.0))
}

/// The allocations of `layout` a model's shapes show in: those alive for at least a quarter of
/// the trace (parameters, gradients, optimizer state). Activations come and go every step, and
/// their sizes are the batch's tokens times a dimension, which look like square matrices by
/// coincidence (1,024 tokens × 256 fp32 = 512² × 4 B). All of them when too few live that long.
pub fn long_lived(layout: crate::layout::LayoutRef<'_>, limit: usize) -> Vec<usize> {
    use crate::layout::{BEFORE_TRACE, NEVER};
    let e = layout.elements;
    let n = layout.actions.len() as u64;
    let all: Vec<usize> =
        (0..e.len().min(limit)).filter(|&i| e.origin[i] == crate::layout::Origin::Alloc as u8).collect();
    let span = |i: usize| {
        let start = if e.start[i] == BEFORE_TRACE { 0 } else { u64::from(e.start[i]) };
        let end = if e.end[i] == NEVER { n } else { u64::from(e.end[i]) };
        end.saturating_sub(start)
    };
    let long: Vec<usize> = all.iter().copied().filter(|&i| 4 * span(i) >= n).collect();
    if long.len() >= MIN_LONG_LIVED { long } else { all }
}

/// The fewest long-lived allocations to guess shapes from (else every allocation counts).
const MIN_LONG_LIVED: usize = 8;
/// The share of the bytes the candidates must explain to be shown…
pub const EXPLAINED: f64 = 0.5;
/// … or of the allocations.
pub const EXPLAINED_COUNT: f64 = 0.75;

pub fn infer(sizes: impl Iterator<Item = u64>) -> Candidates {
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for s in sizes {
        *counts.entry(s).or_default() += 1;
    }
    let all: Vec<(u64, u64)> = counts.iter().map(|(&s, &n)| (s, n)).collect();
    let mut common: Vec<(u64, u64)> = counts.into_iter().filter(|&(_, n)| n >= 2).collect();
    common.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    common.truncate(64);
    let elements = |s: u64, dtype: u64| s.is_multiple_of(dtype).then_some(s / dtype);
    let isqrt = |n: u64| {
        let r = (n as f64).sqrt().round() as u64;
        (r * r == n).then_some(r)
    };
    let nice = |d: u64| d >= 64 && d.is_multiple_of(64);
    let vote = |votes: &mut HashMap<u64, u64>, d: u64, w: u64| *votes.entry(d).or_default() += w;
    // Candidates for h: square roots of sizes that look like k×h×h (k = 1, 3, 4: projections,
    // fused QKV, MLP). Each candidate is then scored by every size it explains, so a 4h² matrix
    // that is also (2h)² does not let 2h win over h.
    let mut candidates: Vec<u64> = Vec::new();
    for &(s, _) in &common {
        for dtype in [4, 2] {
            let Some(e) = elements(s, dtype) else { continue };
            for k in [1, 3, 4] {
                if let Some(r) = (e % k == 0).then(|| isqrt(e / k)).flatten().filter(|&r| nice(r)) {
                    candidates.push(r);
                }
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let mut hv: HashMap<u64, u64> = HashMap::new();
    for &h in &candidates {
        for &(s, n) in &common {
            let explained = [4, 2]
                .iter()
                .any(|&dtype| elements(s, dtype).is_some_and(|e| [1, 3, 4].iter().any(|&k| e == k * h * h)));
            if explained {
                vote(&mut hv, h, n);
            }
        }
    }
    let best =
        |votes: HashMap<u64, u64>| votes.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(d, _)| d);
    // A transformer holds vectors of exactly h elements (norm weights and biases, projection
    // biases, with their gradients and optimizer states): a candidate with none is not its h.
    let block = |bytes: u64| bytes.div_ceil(512) * 512;
    let vectors = |h: u64| -> u64 {
        let of = |dtype: u64| common.iter().filter(|&&(s, _)| s == block(h * dtype)).map(|&(_, n)| n).sum::<u64>();
        of(4) + of(2)
    };
    hv.retain(|&h, _| vectors(h) >= 2);
    let h = best(hv);
    let (mut iv, mut vv) = (HashMap::new(), HashMap::new());
    if let Some(h) = h {
        for &(s, n) in &common {
            for dtype in [4, 2] {
                let Some(e) = elements(s, dtype) else { continue };
                if e % h != 0 {
                    continue;
                }
                let other = e / h;
                if other >= 2 * h && other <= 8 * h && other % 64 == 0 {
                    vote(&mut iv, other, n);
                } else if other > 8 * h {
                    vote(&mut vv, other, n);
                }
            }
        }
    }
    let c = Candidates { h, i: best(iv).or(h.map(|h| 4 * h)), v: best(vv) };
    // Shown only when they explain most of the bytes: vectors of h or i, k×h² (k = 1, 3, 4),
    // h×i and h×v matrices, in fp32 or bf16.
    let Some(h) = c.h else { return c };
    let mut products = vec![h, h * h, 3 * h * h, 4 * h * h];
    products.extend(c.i.into_iter().flat_map(|i| [i, h * i]));
    products.extend(c.v.map(|v| h * v));
    let explains = |s: u64| products.iter().any(|&p| [4, 2].iter().any(|&dtype| block(p * dtype) == block(s)));
    // Most of the bytes — or, where a few large buffers that are no tensor of the model's (a
    // cuBLAS workspace) weigh as much as the weights, most of the allocations by far.
    let (mut bytes, mut count) = ((0u64, 0u64), (0u64, 0u64));
    for &(s, n) in &all {
        bytes.1 += s * n;
        count.1 += n;
        if explains(s) {
            bytes.0 += s * n;
            count.0 += n;
        }
    }
    let most = |(part, whole): (u64, u64), share: f64| part as f64 >= share * whole as f64;
    if most(bytes, EXPLAINED) || most(count, EXPLAINED_COUNT) { c } else { Candidates::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt2_like(quantized: bool) -> ModelDims {
        let cfg =
            serde_json::json!({"n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024, "n_inner": null});
        ModelDims::from_config(&cfg, None, quantized).unwrap()
    }

    fn texts(d: &ModelDims, size: u64) -> Vec<String> {
        d.explain(size, 8).into_iter().map(|f| f.text).collect()
    }

    #[test]
    fn config_naming_schemes() {
        let d = gpt2_like(false);
        assert_eq!(d.summary(), "h=768 i=3072 v=50257 heads=12 head_dim=64 ctx=1024");
        let llama = serde_json::json!({"hidden_size": 4096, "intermediate_size": 11008, "vocab_size": 32000, "num_attention_heads": 32, "num_key_value_heads": 8});
        let d = ModelDims::from_config(&llama, Some(32064), false).unwrap();
        assert!(d.dims.contains(&("v".into(), 32064)), "--vocab-size overrides");
        assert!(d.dims.contains(&("kv_dim".into(), 1024)));
        assert!(ModelDims::from_config(&serde_json::json!({"foo": 1}), None, false).is_err());
    }

    #[test]
    fn tied_embedding_and_mlp_weights() {
        let d = gpt2_like(false);
        // 50257 × 768 × 4 = 154,389,504 bytes, rounded up to 512: +0.
        let tied: u64 = 50257 * 768 * 4;
        assert_eq!(texts(&d, tied.div_ceil(512) * 512)[0], "v×h fp32");
        assert_eq!(texts(&d, 768 * 3072 * 2)[0], "i×h bf16");
        assert!(texts(&d, 3 * 768 * 768 * 4).contains(&"3×h×h fp32".to_owned()));
        // v+1 (a padded vocabulary) is a dimension of its own.
        let padded = (50258 * 768 * 2u64).div_ceil(512) * 512;
        assert!(texts(&d, padded).contains(&"v+1×h bf16".to_owned()), "{:?}", texts(&d, padded));
    }

    #[test]
    fn near_misses_within_rounding_only() {
        let d = gpt2_like(false);
        let exact = 768 * 4;
        assert_eq!(texts(&d, exact)[0], "h fp32");
        assert!(texts(&d, exact + 512).contains(&"h fp32".to_owned()), "512 bytes of rounding are tolerated");
        assert!(!texts(&d, exact + 513).contains(&"h fp32".to_owned()), "513 are not");
        assert!(!texts(&d, exact - 4).contains(&"h fp32".to_owned()), "never smaller than the product");
    }

    #[test]
    fn quantized_dtypes_only_when_asked() {
        let size = 768 * 3072; // int8 h×i, or 4-bit 2×h×i
        assert!(!texts(&gpt2_like(false), size).iter().any(|t| t.ends_with("int8")));
        let q = texts(&gpt2_like(true), size);
        assert!(q.contains(&"i×h int8".to_owned()), "{q:?}");
        assert!(texts(&gpt2_like(true), 768 * 3072 / 2).contains(&"i×h 4-bit".to_owned()));
    }

    #[test]
    fn inference_from_frequent_sizes() {
        let mut sizes = Vec::new();
        for _ in 0..10 {
            sizes.extend([256 * 256 * 4, 256 * 1024 * 4, 256 * 1024 * 4, 8192 * 256 * 4, 4 * 256]);
        }
        let c = infer(sizes.into_iter());
        assert_eq!((c.h, c.i, c.v), (Some(256), Some(1024), Some(8192)));
    }
}
