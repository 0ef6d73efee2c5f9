//! Durations (`90s`, `15m`, `1h`, `2d`) and sizes (`50MiB`, `1GB`, `4096`).

use std::time::Duration;

/// `"15m"` → `(15, "m")`; `what` names the expected form in the error.
fn number_and_unit<'a>(text: &'a str, what: &str) -> Result<(u64, &'a str), String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n = num
        .parse()
        .map_err(|_| format!("invalid {what} {text:?}"))?;
    Ok((n, unit.trim()))
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (n, unit) = number_and_unit(text, "duration (expected e.g. 90s, 15m, 1h, 7d)")?;
    let secs = match unit {
        "s" | "sec" | "" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => {
            return Err(format!(
                "invalid duration unit in {text:?} (use s, m, h, d or w)"
            ));
        }
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("duration {text:?} is too large"))
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (n, unit) = number_and_unit(text, "size (expected e.g. 50MiB)")?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "KB" => 1_000,
        "M" | "MiB" => 1 << 20,
        "MB" => 1_000_000,
        "G" | "GiB" => 1 << 30,
        "GB" => 1_000_000_000,
        _ => {
            return Err(format!(
                "invalid size unit in {text:?} (use B, KiB, MiB, GiB)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

pub use bh_checkpoint::human_size;

pub fn human_age(ms: i64) -> String {
    let secs = (ms / 1000).max(0);
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86_399 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// A wait for a person: `800ms`, `2s`, `1.5s`, `2m 5s`.
pub fn human_duration_ms(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m {}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_people() {
        assert_eq!(human_duration_ms(800), "800ms");
        assert_eq!(human_duration_ms(2000), "2s");
        assert_eq!(human_duration_ms(1500), "1.5s");
        assert_eq!(human_duration_ms(125_000), "2m 5s");
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_size("50MiB").unwrap(), 50 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("12 parsecs").is_err());
    }
}
