//! `memviz segments` and `memviz oom`: the allocator's state, from the archive of the input (its
//! saved states: one chunk decoded and fewer than K events undone per state).

use super::reading::Opening;
use super::report::{Answer, PerDevice};
use crate::analysis::{oom, segments};
use crate::archive::events::ArchiveEvents;
use crate::archive::{DeviceData, Session};
use crate::cli::{ActionArg, OomArgs, SegmentsArgs};
use crate::derive::timeline::TimelineRef;
use crate::model::{ActionIdx, DeviceIdx};
use anyhow::bail;

/// `memviz oom` answers from the archive: the state before each OOM from the saved states, what
/// was live from the nearest checkpoint.
pub fn oom(args: &OomArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<PerDevice<oom::OomReport>>> {
    let input = &args.input;
    let session = super::answers::open_input(input, opening)?;
    let root = session.root();
    let expandable = oom::expandable(session.allocator_settings().as_ref());
    let events = ArchiveEvents::new(root);
    let mut per_device = Vec::new();
    for d in super::answers::devices(&session, args.common.device, input)? {
        let Some(states) = session.oom_states(d) else {
            bail!(
                "{}: made before archive format 3, without the allocator's states: re-index to see this",
                input.display()
            );
        };
        let data = DeviceData::new(&session, d);
        let first = session.trace(d).start;
        let event = |e| (events.time_us(e), events.stack(e));
        let mut reports = oom::reports_in(&data.timeline(), root, &states, first, event, expandable);
        if args.stacks {
            reports.iter_mut().for_each(|r| r.with_stacks(root));
        }
        per_device.push((session.ordinal(d), reports));
    }
    // The document lists the reports; the text groups them by device, saying which had none.
    let counts: Vec<_> = per_device.iter().map(|(device, reps)| (*device, reps.len())).collect();
    let reports: Vec<oom::OomReport> = per_device.into_iter().flat_map(|(_, r)| r).collect();
    let doc = PerDevice { input: input.display().to_string(), devices: reports };
    let text = move |doc: &PerDevice<oom::OomReport>| {
        let mut out = format!("{}\n", doc.input);
        let mut reports = doc.devices.iter();
        for &(device, n) in &counts {
            out.push('\n');
            if n == 0 {
                out.push_str(&format!("device {device} — no OOM event\n"));
            }
            for (i, r) in reports.by_ref().take(n).enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                oom::render_text(&mut out, r, i, n);
            }
        }
        out
    };
    Ok(Answer::new(doc, text).with_csv(|doc: &PerDevice<oom::OomReport>| doc.devices.iter().collect()))
}

/// `memviz segments` answers from the archive's saved allocator states: one chunk decoded and
/// fewer than K events undone, whatever the trace's length.
pub fn segments(args: &SegmentsArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<PerDevice<segments::MemoryMap>>> {
    let input = &args.input;
    let session = super::answers::open_input(input, opening)?;
    let mut maps = Vec::new();
    for d in super::answers::devices(&session, args.common.device, input)? {
        let device = session.ordinal(d);
        let data = DeviceData::new(&session, d);
        let event = which_event(&session, d, &data.timeline(), args, input)?;
        let Some(state) = session.allocator_state(d, event) else {
            bail!(
                "{}: made before archive format 3, without the allocator's states: re-index to see this",
                input.display()
            );
        };
        maps.push(segments::memory_map(device, &state.summary(event)));
    }
    let top = args.common.top;
    Ok(super::answers::per_device(input, maps, move |out, m| segments::render_text(out, m, top)))
}

/// The device-relative raw event the memory map is taken after.
fn which_event(
    s: &Session,
    d: DeviceIdx,
    t: &TimelineRef<'_>,
    args: &SegmentsArgs,
    input: &std::path::Path,
) -> anyhow::Result<i64> {
    let l = t.layout;
    let n = s.trace(d).len() as i64;
    let actions = i64::from(t.actions());
    let of_action = |k: i64| -> anyhow::Result<i64> {
        if !(-1..actions).contains(&k) {
            bail!("{}: action {k} is out of range on device {} (-1..{actions})", input.display(), l.device);
        }
        if k < 0 {
            return Ok(-1);
        }
        Ok(s.event_of_action(d, ActionIdx(k as u32)))
    };
    if let Some(e) = args.event {
        if !(-1..n).contains(&e) {
            bail!("{}: event {e} is out of range on device {} (-1..{n})", input.display(), l.device);
        }
        return Ok(e);
    }
    if let Some(a) = args.action {
        return of_action(match a {
            ActionArg::Index(k) => k,
            ActionArg::Last => actions - 1,
        });
    }
    if let Some(time) = args.time {
        let Some(base) = t.time_base_us else {
            bail!("{}: no times recorded; use --event", input.display());
        };
        return of_action(i64::from(t.actions_until(base.saturating_add(time.us + time.half_step_us))) - 1);
    }
    if let Some(nth) = args.oom {
        let ooms = s.oom_events(d);
        let pick = if nth == 0 { ooms.last() } else { ooms.get(nth - 1) };
        return match pick {
            Some(&i) => Ok(i - 1),
            None => bail!(
                "{}: device {} has {} (asked for OOM {})",
                input.display(),
                l.device,
                crate::analysis::units::count(ooms.len() as u64, "OOM event", "OOM events"),
                if nth == 0 { "last".to_owned() } else { nth.to_string() }
            ),
        };
    }
    Ok(n - 1)
}
