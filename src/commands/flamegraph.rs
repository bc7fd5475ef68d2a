//! `memviz export flamegraph`: the live bytes at one instant as folded stacks or an SVG.

use anyhow::bail;

use super::answers::{check_action_exists, devices, open_input};
use super::reading::Opening;
use crate::analysis::{flamegraph, units};
use crate::archive::DeviceData;
use crate::cli::{ActionArg, FlamegraphArgs};

pub fn flamegraph_cmd(args: &FlamegraphArgs, opening: &Opening<'_>) -> anyhow::Result<()> {
    let input = &args.export.input;
    if let Some(out) = &args.export.output {
        crate::output::refuse_overwriting(out, &[input])?;
    }
    let session = open_input(input, opening)?;
    let chosen = devices(&session, args.export.device, input)?;
    if let Some(ActionArg::Index(k)) = args.action {
        check_action_exists(&session, &chosen, k, input)?;
    }
    let several = chosen.len() > 1;
    let (mut lines, mut instants) = (Vec::new(), Vec::new());
    for d in chosen {
        let data = DeviceData::new(&session, d);
        let t = data.timeline();
        let (n, device) = (i64::from(t.actions()), t.layout.device);
        let k = match (args.action, args.oom) {
            _ if args.end => n - 1,
            _ if args.peak => t.layout.peak_k(),
            (Some(ActionArg::Last), _) => n - 1,
            (Some(ActionArg::Index(k)), _) => k,
            (None, Some(nth)) => {
                let ooms = session.oom_events(d);
                let Some(&event) = (if nth == 0 { ooms.last() } else { ooms.get(nth - 1) }) else {
                    bail!("{}: device {device} has {} OOM events (asked for OOM {nth})", input.display(), ooms.len());
                };
                // The last action before the OOM event.
                let before = crate::layout::partition(t.actions(), |k| {
                    session.event_of_action(d, crate::model::ActionIdx(k)) < event
                });
                i64::from(before) - 1
            }
            (None, None) => unreachable!("clap requires an instant"),
        };
        let root = several.then(|| format!("device {device}"));
        lines.extend(flamegraph::folded(&t, session.root(), k, root.as_deref()));
        instants.push(if k < 0 {
            format!("device {device} before the first action")
        } else {
            format!("device {device} after action {}", units::thousands(k as u64))
        });
    }
    let title = format!("live bytes: {} — {}", crate::index::cache::file_name(input), instants.join(", "));
    // What it answers from is checked before anything is written.
    opening.check_what_was_read()?;
    crate::output::write_to(args.export.output.as_deref(), |w| {
        if args.svg {
            write_svg(&lines, &title, w)?;
        } else {
            flamegraph::write_folded(&lines, w)?;
        }
        Ok(())
    })
}

/// The folded lines drawn as an SVG flame graph (inferno), titled `title`.
pub fn write_svg(lines: &[(String, u64)], title: &str, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let text: Vec<String> = lines.iter().map(|(s, b)| format!("{s} {b}")).collect();
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_owned();
    opt.count_name = "bytes".to_owned();
    opt.name_type = "Frame:".to_owned();
    opt.colors = inferno::flamegraph::color::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    inferno::flamegraph::from_lines(&mut opt, text.iter().map(String::as_str), w)
}
