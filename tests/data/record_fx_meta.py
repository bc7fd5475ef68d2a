"""Extra real recordings for the 2026 schema: fx traces, annotate, user metadata, pinned host."""
import os, sys, json, time, pickle, inspect, traceback
import torch
out = sys.argv[1]
info = {"torch": torch.__version__}
mem = torch.cuda.memory
info["has"] = {n: hasattr(mem, n) for n in ["_annotate_tensor", "_set_memory_metadata", "_get_memory_metadata"]}
info["has_c"] = {n: hasattr(torch._C, n) for n in ["_cuda_setMemoryMetadata", "_cuda_getMemoryMetadata"]}
info["record_params"] = list(inspect.signature(mem._record_memory_history).parameters)
info["dump_params"] = list(inspect.signature(mem._dump_snapshot).parameters)
kw = dict(stacks="python")
if "global_record_annotations" in info["record_params"]:
    kw["global_record_annotations"] = True
if "record_pinned_host_memory" in info["record_params"]:
    kw["record_pinned_host_memory"] = True
mem._record_memory_history(**kw)
m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).cuda()
cm = torch.compile(m)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
def setmeta(s):
    for f in (getattr(mem, "_set_memory_metadata", None), getattr(torch._C, "_cuda_setMemoryMetadata", None)):
        if f is not None:
            try:
                f(s); return True
            except Exception as e:
                info.setdefault("meta_err", str(e))
    return False
for step in range(3):
    info["meta_ok"] = setmeta(f"step={step}")
    with torch.profiler.record_function(f"## step {step} ##"):
        x = torch.randn(64, 512, device="cuda")
        y = cm(x).sum(); y.backward(); opt.step(); opt.zero_grad()
setmeta("")
keep = torch.empty(1 << 20, device="cuda")
try:
    mem._annotate_tensor(keep, "kept buffer") if hasattr(mem, "_annotate_tensor") else None
    info["annotate_ok"] = hasattr(mem, "_annotate_tensor")
except Exception as e:
    info["annotate_err"] = repr(e)
    try:
        sig = str(inspect.signature(mem._annotate_tensor)); info["annotate_sig"] = sig
    except Exception:
        pass
try:
    pin = torch.empty(8 << 20, dtype=torch.uint8, pin_memory=True)
    pin2 = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True); del pin2
except Exception as e:
    info["pin_err"] = repr(e)
dk = {}
if "augment_with_fx_traces" in info["dump_params"]:
    dk["augment_with_fx_traces"] = True
try:
    mem._dump_snapshot(out, **dk)
except Exception as e:
    info["dump_err"] = traceback.format_exc()[-800:]
    mem._dump_snapshot(out)
mem._record_memory_history(enabled=None)
s = pickle.load(open(out, "rb"))
info["top_keys"] = list(s.keys())
ev = [e for t in s["device_traces"] for e in t]
info["actions"] = sorted(set(e["action"] for e in ev))
info["event_keys"] = sorted(set(k for e in ev for k in e))
fk = set(); lines = set()
for e in ev:
    for f in e.get("frames", []) or []:
        fk |= set(f); 
        if not isinstance(f.get("line"), int) or f["line"] < 0 or f["line"] > 2**63: lines.add(repr(f.get("line")))
info["frame_keys"] = sorted(fk); info["odd_lines"] = sorted(lines)[:5]
info["host"] = {k: (len(s[k]) if k in s else None) for k in ("host_segments", "host_traces")}
if s.get("host_traces"):
    ht = s["host_traces"]; info["host_traces_type"] = type(ht).__name__
    info["host_first"] = repr(ht[0])[:400] if ht else None
if s.get("host_segments"):
    info["host_seg0"] = repr(s["host_segments"][0])[:500]
info["seg_keys"] = sorted(set(k for sg in s["segments"] for k in sg))
info["meta_samples"] = sorted(set(repr(e.get("user_metadata")) for e in ev))[:6]
info["internal"] = sorted(set(repr(e.get("internal_metadata")) for e in ev if "internal_metadata" in e))[:6]
info["cc"] = sorted(set(repr(e.get("compile_context")) for e in ev))[:6]
ann = [e for e in ev if e["action"] == "annotate"]
info["annotate_events"] = [repr(a)[:300] for a in ann[:3]]
info["bytes"] = os.path.getsize(out)
print(json.dumps(info, indent=1))
