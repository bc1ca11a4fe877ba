//! Durations written the way Go's `time.ParseDuration` reads them (`1h30m`, `1.5h`,
//! `90s`, `1h2m3s4ms5µs6ns`). Volcano reads its duration arguments and annotations
//! with that function, so a value a Volcano user already wrote must mean the same
//! here: decimal fractions are allowed, days are not, and every number needs a unit
//! except a lone `0`.

use std::time::Duration;

/// Nanoseconds per unit, as Go spells the units (both micro signs included).
const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's limit: a duration is an `int64` of nanoseconds.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Reads a Go duration as signed nanoseconds; the error says what is wrong with the
/// text.
pub fn parse_nanos(text: &str) -> Result<i64, String> {
    let invalid = || format!("invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(f) => {
                let len = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(len)
            }
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(after.len(), |(i, _)| i);
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!("missing unit in duration {text:?}"));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(format!("unknown unit {unit:?} in duration {text:?}"));
        };
        let scale = u128::from(scale);
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut nanos = whole.checked_mul(scale).ok_or_else(invalid)?;
        // The fraction's digits past what the unit can resolve are dropped, as Go
        // drops them.
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            nanos += u128::from(digit - b'0') * place;
        }
        total = total.checked_add(nanos).ok_or_else(invalid)?;
        if total > MAX_NANOS + u128::from(negative) {
            return Err(invalid());
        }
        rest = after;
    }
    let signed = i128::try_from(total).map_err(|_| invalid())?;
    let signed = if negative { -signed } else { signed };
    i64::try_from(signed).map_err(|_| invalid())
}

/// Reads a Go duration that must be longer than zero (what a waiting time or a
/// timeout has to be).
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    let nanos = parse_nanos(text.trim())?;
    if nanos <= 0 {
        return Err(format!("duration {text:?} must be longer than zero"));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_go_reads() {
        assert_eq!(parse_nanos("0"), Ok(0));
        assert_eq!(parse_nanos("90s"), Ok(90_000_000_000));
        assert_eq!(parse_nanos("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_nanos("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_nanos(".5s"), Ok(500_000_000));
        assert_eq!(parse_nanos("1.s"), Ok(1_000_000_000));
        assert_eq!(parse_nanos("-2m"), Ok(-120_000_000_000));
        assert_eq!(parse_nanos("+2m"), Ok(120_000_000_000));
        assert_eq!(
            parse_nanos("1h2m3s4ms5\u{b5}s6ns"),
            Ok(3_723_004_005_006),
            "the example of Volcano's sla plugin"
        );
        assert_eq!(parse_nanos("5us"), parse_nanos("5\u{3bc}s"));
        assert_eq!(parse_nanos("1.0000000001s"), Ok(1_000_000_000));
        assert_eq!(
            parse_nanos("9223372036854775807ns"),
            Ok(i64::MAX),
            "the largest duration Go has"
        );
        assert_eq!(parse_nanos("-9223372036854775808ns"), Ok(i64::MIN));
    }

    #[test]
    fn refuses_what_go_refuses() {
        for text in [
            "",
            "-",
            "1",
            "10",
            "1d",
            "1 h",
            "h",
            ".s",
            "1h 30m",
            "9223372036854775808ns",
            "3000000h",
        ] {
            assert!(parse_nanos(text).is_err(), "{text:?} parsed");
        }
        assert_eq!(
            parse_nanos("1d").unwrap_err(),
            "unknown unit \"d\" in duration \"1d\""
        );
        assert_eq!(
            parse_nanos("10").unwrap_err(),
            "missing unit in duration \"10\""
        );
    }

    #[test]
    fn a_waiting_time_must_be_longer_than_zero() {
        assert_eq!(parse_positive(" 10m "), Ok(Duration::from_secs(600)));
        assert!(parse_positive("0").is_err());
        assert!(parse_positive("0s").is_err());
        assert!(parse_positive("-1h").is_err());
    }
}
