//! Which device a trace or segment belongs to: a CUDA ordinal, or the host (pinned memory).

use std::fmt;

/// A device of the snapshot: `DeviceId(n)` is CUDA device `n` (its position in
/// `device_traces`); [`DeviceId::HOST`] is pinned host memory (`host_segments` /
/// `host_traces`). Ordered so that the host sorts after every CUDA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DeviceId(pub u32);

impl DeviceId {
    /// Pinned host memory. Stored on disk as this value (`u32::MAX - 1`).
    pub const HOST: DeviceId = DeviceId(u32::MAX - 1);

    pub fn is_host(self) -> bool {
        self == DeviceId::HOST
    }

    /// Parses a `--device` value: an ordinal or `host`.
    pub fn parse(s: &str) -> Result<DeviceId, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("host") {
            return Ok(DeviceId::HOST);
        }
        let digits = s.strip_prefix("cuda:").unwrap_or(s);
        match digits.parse::<u32>() {
            Ok(n) if n < DeviceId::HOST.0 => Ok(DeviceId(n)),
            _ => Err(format!("`{s}` is not a device: give its ordinal (0, 1, …) or `host`")),
        }
    }
}

/// The positions among `ordinals` (every device of a snapshot, in order) of the devices asked
/// for: all of them, or the one whose ordinal is `want`. The error names those there are; the
/// caller puts the input's name before it.
pub fn pick_devices(ordinals: &[DeviceId], want: Option<DeviceId>) -> Result<Vec<usize>, String> {
    match want {
        None if ordinals.is_empty() => Err("no device has trace events or segments".into()),
        None => Ok((0..ordinals.len()).collect()),
        Some(w) => match ordinals.iter().position(|&o| o == w) {
            Some(i) => Ok(vec![i]),
            None => {
                let have: Vec<String> = ordinals.iter().map(DeviceId::to_string).collect();
                Err(format!("device {w} has no trace events or segments (devices with data: {})", have.join(", ")))
            }
        },
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_host() { f.write_str("host") } else { write!(f, "{}", self.0) }
    }
}

/// JSON: the ordinal as a number, the host as `"host"`.
impl serde::Serialize for DeviceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_host() { s.serialize_str("host") } else { s.serialize_u32(self.0) }
    }
}

/// Its JSON schema: a CUDA ordinal, or `"host"`.
impl schemars::JsonSchema for DeviceId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DeviceId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "a CUDA device ordinal, or \"host\"",
            "oneOf": [{ "type": "integer", "minimum": 0 }, { "const": "host" }]
        })
    }
}

impl std::str::FromStr for DeviceId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DeviceId::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceId;

    #[test]
    fn parse_and_show() {
        assert_eq!(DeviceId::parse("1"), Ok(DeviceId(1)));
        assert_eq!(DeviceId::parse("cuda:2"), Ok(DeviceId(2)));
        assert_eq!(DeviceId::parse("HOST"), Ok(DeviceId::HOST));
        assert!(DeviceId::parse("foo").is_err());
        assert_eq!(DeviceId::HOST.to_string(), "host");
        assert_eq!(serde_json::to_string(&[DeviceId(3), DeviceId::HOST]).unwrap(), r#"[3,"host"]"#);
        assert!(DeviceId(7) < DeviceId::HOST);
    }
}
