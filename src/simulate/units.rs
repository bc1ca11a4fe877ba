//! How the report writes amounts: durations in the unit that reads best, and
//! numbers with as many digits as matter.

/// Seconds as `42s`, `3.5m` or `21.0h`.
pub fn duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0}s")
    } else if s < 7200.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

/// A range of durations in one unit: `3.6–21.0h` (or one value when equal).
pub fn duration_range(low: f64, high: f64) -> String {
    let (low_text, high_text) = (duration(low), duration(high));
    if low_text == high_text {
        return high_text;
    }
    let unit = |t: &str| {
        t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
            .to_string()
    };
    if unit(&low_text) == unit(&high_text) {
        format!(
            "{}–{high_text}",
            low_text.trim_end_matches(char::is_alphabetic)
        )
    } else {
        format!("{low_text}–{high_text}")
    }
}

/// A quantity with the digits that matter: `1234`, `56.7`, `0.25`.
pub fn amount(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_one_unit() {
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(210.0), "3.5m");
        assert_eq!(duration_range(3.6 * 3600.0, 21.0 * 3600.0), "3.6–21.0h");
        assert_eq!(duration_range(30.0, 3.0 * 3600.0), "30s–3.0h");
        assert_eq!(duration_range(60.0, 60.0), "60s");
        assert_eq!(amount(1234.4), "1234");
        assert_eq!(amount(0.254), "0.25");
        assert_eq!(amount(7.0), "7");
    }
}
