//! Human-readable numbers: bytes (B/KiB/MiB/GiB), durations (µs/ms/s), thousands separators;
//! the signed change between two byte counts.

/// `to - from` for two totals of live bytes. A consistent archive keeps every total below 2^63
/// (`archive::consistency`), so the change is exact; one beyond is a damaged or hostile file, and
/// the panic here is what the command's guard turns into the check's one-line error
/// (`commands::reading`) rather than a wrapped number.
pub fn change(from: u64, to: u64) -> i64 {
    match (i64::try_from(from), i64::try_from(to)) {
        (Ok(a), Ok(b)) => b - a,
        _ => panic!("a total of {from} or {to} bytes is beyond any device: the archive is inconsistent"),
    }
}

/// `1536` → `"1.5 KiB"`; exact below 1000 B; never more than three digits before the point
/// (1012 MiB is `0.99 GiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 999.5 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {}", UNITS[unit])
}

/// Signed byte counts, e.g. deltas: `"+1.5 KiB"`, `"-20 B"`.
pub fn signed_bytes(n: i128) -> String {
    let sign = if n < 0 { "-" } else { "+" };
    format!("{sign}{}", bytes(n.unsigned_abs().min(u64::MAX as u128) as u64))
}

/// `"1 allocation"`, `"1,234 allocations"`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// `1234567` → `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in µs: `"850 µs"`, `"12.5 ms"`, `"3.20 s"`, `"2 min 5 s"`.
pub fn duration_us(us: i64) -> String {
    let a = us.unsigned_abs();
    let sign = if us < 0 { "-" } else { "" };
    if a < 1_000 {
        format!("{sign}{a} µs")
    } else if a < 1_000_000 {
        format!("{sign}{:.1} ms", a as f64 / 1e3)
    } else if a < 120_000_000 {
        format!("{sign}{:.2} s", a as f64 / 1e6)
    } else {
        format!("{sign}{} min {} s", a / 60_000_000, (a / 1_000_000) % 60)
    }
}

/// An instant in µs, to the µs, as `--time` reads it back: `"850 µs"`, `"686.213 ms"`,
/// `"5.148084 s"` — pasted, it selects the action printed with it (the last one recorded in
/// that µs).
pub fn instant_us(us: i64) -> String {
    let a = us.unsigned_abs();
    let sign = if us < 0 { "-" } else { "" };
    if a < 1_000 {
        format!("{sign}{a} µs")
    } else if a < 1_000_000 {
        format!("{sign}{}.{:03} ms", a / 1_000, a % 1_000)
    } else {
        format!("{sign}{}.{:06} s", a / 1_000_000, a % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1023), "1.00 KiB");
        assert_eq!(bytes(1012 << 20), "0.99 GiB");
        assert_eq!(bytes(999 << 20), "999 MiB");
        assert_eq!(count(1, "free", "frees"), "1 free");
        assert_eq!(count(1234, "free", "frees"), "1,234 frees");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(268_037_640), "256 MiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(signed_bytes(-2048), "-2.00 KiB");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(duration_us(850), "850 µs");
        assert_eq!(duration_us(12_500), "12.5 ms");
        assert_eq!(duration_us(3_200_000), "3.20 s");
        assert_eq!(duration_us(125_000_000), "2 min 5 s");
        assert_eq!(instant_us(686_213), "686.213 ms");
        assert_eq!(instant_us(686_003), "686.003 ms");
        assert_eq!(instant_us(125_000_010), "125.000010 s");
    }
}
