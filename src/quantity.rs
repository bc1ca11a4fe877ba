//! Kubernetes resource quantities (`16`, `3k`, `16Gi`, `1e3`, `500m`) as they appear in
//! container resource requests and limits for device resources such as
//! `nvidia.com/gpu`, `nvidia.com/gpumem` and `nvidia.com/gpucores`.
//!
//! The API server rewrites quantities into canonical form before the scheduler or the
//! webhook sees them: a user's `nvidia.com/gpumem: 3000` arrives as `3k`, `2000000` as
//! `2M`. The conversions below therefore read decimal suffixes and exponents as plain
//! multipliers of the number, and only binary suffixes (`Ki`..`Ei`) as byte amounts.

use thiserror::Error;

/// Why a quantity string could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// The text does not follow the Kubernetes quantity grammar.
    #[error("invalid quantity {input:?}: {reason}")]
    Invalid {
        /// The offending text.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The quantity is negative where only non-negative values make sense.
    #[error("invalid quantity {input:?}: must not be negative")]
    Negative {
        /// The offending text.
        input: String,
    },
    /// The quantity has a fractional part where a whole number is required.
    #[error("invalid quantity {input:?}: not a whole number")]
    NotWhole {
        /// The offending text.
        input: String,
    },
    /// A byte amount (binary suffix) that is not a whole number of MiB.
    #[error("invalid quantity {input:?}: not a whole number of MiB")]
    NotWholeMib {
        /// The offending text.
        input: String,
    },
    /// The value does not fit the target integer type.
    #[error("invalid quantity {input:?}: out of range")]
    OutOfRange {
        /// The offending text.
        input: String,
    },
}

/// Which kind of suffix a quantity was written with. It decides whether a
/// `nvidia.com/gpumem` value is a MiB count or a byte amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuffixKind {
    /// No suffix: a plain number such as `3000` or `1.5`.
    None,
    /// Decimal SI suffix: `n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSi,
    /// Binary SI suffix: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySi,
    /// Decimal exponent such as `1e3` or `5E-1`.
    DecimalExponent,
}

/// Why a quantity has no exact integer value in the requested unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotExact {
    /// The value has a fractional part in that unit.
    Fraction,
    /// The value does not fit an `i128`.
    OutOfRange,
}

/// An exactly represented quantity.
///
/// Every Kubernetes quantity is a decimal number times a power of ten or of two, so
/// its value is `mantissa × 2^pow2 × 5^pow5` with an integer `mantissa` that is not
/// divisible by 2 or 5 (or is zero). That representation is exact, avoids floating
/// point, and makes "is this a whole number of X" a matter of checking exponents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantityValue {
    mantissa: i128,
    pow2: i64,
    pow5: i64,
    suffix: SuffixKind,
}

impl QuantityValue {
    /// The kind of suffix the quantity was written with.
    pub fn suffix(&self) -> SuffixKind {
        self.suffix
    }

    /// Whether the value is below zero (`-0` is zero, not negative).
    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// The value as an integer, if it is a whole number that fits an `i128`.
    pub fn to_integer(&self) -> Result<i128, NotExact> {
        self.scaled(0)
    }

    /// The value divided by `2^shift`, if that is a whole number that fits an `i128`
    /// (used to turn byte amounts into MiB with `shift = 20`).
    pub fn to_integer_divided_by_pow2(&self, shift: u32) -> Result<i128, NotExact> {
        self.scaled(i64::from(shift))
    }

    /// The value times 1000, rounded up to a whole number, like Kubernetes'
    /// `Quantity.MilliValue()` (`500m` => 500, `2` => 2000, `1n` => 1). Only
    /// [`NotExact::OutOfRange`] is returned: rounding replaces the fraction error.
    pub fn to_milli_ceil(&self) -> Result<i128, NotExact> {
        if self.mantissa == 0 {
            return Ok(0);
        }
        let pow2 = self.pow2 + 3;
        let pow5 = self.pow5 + 3;
        let num2 = pow_i128(2, pow2.max(0)).ok_or(NotExact::OutOfRange)?;
        let num5 = pow_i128(5, pow5.max(0)).ok_or(NotExact::OutOfRange)?;
        let numerator = self
            .mantissa
            .checked_mul(num2)
            .and_then(|v| v.checked_mul(num5))
            .ok_or(NotExact::OutOfRange)?;
        let denominator = pow_i128(2, (-pow2).max(0))
            .and_then(|d2| pow_i128(5, (-pow5).max(0)).and_then(|d5| d2.checked_mul(d5)));
        match denominator {
            Some(d) => {
                let quotient = numerator.div_euclid(d);
                Ok(if numerator.rem_euclid(d) == 0 {
                    quotient
                } else {
                    quotient + 1
                })
            }
            // A denominator beyond i128 means |value × 1000| < 1: the ceiling is 1 for a
            // positive value and 0 for a negative one.
            None => Ok(if numerator > 0 { 1 } else { 0 }),
        }
    }

    fn scaled(&self, shift2: i64) -> Result<i128, NotExact> {
        if self.mantissa == 0 {
            return Ok(0);
        }
        let pow2 = self.pow2 - shift2;
        if pow2 < 0 || self.pow5 < 0 {
            return Err(NotExact::Fraction);
        }
        let factor2 = pow_i128(2, pow2).ok_or(NotExact::OutOfRange)?;
        let factor5 = pow_i128(5, self.pow5).ok_or(NotExact::OutOfRange)?;
        self.mantissa
            .checked_mul(factor2)
            .and_then(|v| v.checked_mul(factor5))
            .ok_or(NotExact::OutOfRange)
    }
}

fn pow_i128(base: i128, exp: i64) -> Option<i128> {
    base.checked_pow(u32::try_from(exp).ok()?)
}

/// Parses a quantity following the Kubernetes grammar: optional `+`/`-`, a decimal
/// number (`16`, `16.5`, `5.`, `.5`), then nothing, a binary suffix (`Ki` `Mi` `Gi`
/// `Ti` `Pi` `Ei`), a decimal suffix (`n` `u` `m` `k` `M` `G` `T` `P` `E`) or a
/// decimal exponent (`e3`, `E-3`). Surrounding whitespace is ignored. Up to 38
/// significant digits are kept exactly; more are rejected rather than rounded.
pub fn parse_quantity(value: &str) -> Result<QuantityValue, QuantityError> {
    let invalid = |reason: &str| QuantityError::Invalid {
        input: value.to_owned(),
        reason: reason.to_owned(),
    };
    let text = value.trim();
    if text.is_empty() {
        return Err(invalid("empty"));
    }

    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };

    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, after_int) = rest.split_at(int_len);
    let (frac_digits, suffix) = match after_int.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            after_dot.split_at(frac_len)
        }
        None => ("", after_int),
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(invalid("expected a number"));
    }

    let (suffix_kind, suffix_pow2, suffix_pow10) = parse_suffix(suffix).map_err(|r| invalid(&r))?;

    // Significant digits without leading zeros; trailing zeros move into the exponent.
    let digits = format!("{int_digits}{frac_digits}");
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    let trailing_zeros = digits.len() - significant.len();

    let frac_len = i64::try_from(frac_digits.len()).map_err(|_| invalid("too many digits"))?;
    let trailing = i64::try_from(trailing_zeros).map_err(|_| invalid("too many digits"))?;
    let pow10 = suffix_pow10
        .checked_sub(frac_len)
        .and_then(|p| p.checked_add(trailing))
        .ok_or_else(|| invalid("exponent out of range"))?;

    if significant.is_empty() {
        return Ok(QuantityValue {
            mantissa: 0,
            pow2: 0,
            pow5: 0,
            suffix: suffix_kind,
        });
    }
    if significant.len() > 38 {
        return Err(invalid("too many significant digits"));
    }
    let mut mantissa: i128 = significant
        .parse()
        .map_err(|_| invalid("too many significant digits"))?;

    // Move factors of 2 and 5 out of the mantissa so the representation is canonical.
    let mut pow2 = pow10 + suffix_pow2;
    let mut pow5 = pow10;
    while mantissa % 2 == 0 {
        mantissa /= 2;
        pow2 += 1;
    }
    while mantissa % 5 == 0 {
        mantissa /= 5;
        pow5 += 1;
    }
    if negative {
        mantissa = -mantissa;
    }
    Ok(QuantityValue {
        mantissa,
        pow2,
        pow5,
        suffix: suffix_kind,
    })
}

/// Maps a suffix to (kind, power of two, power of ten), or says why it is invalid.
fn parse_suffix(suffix: &str) -> Result<(SuffixKind, i64, i64), String> {
    let binary = |pow2| Ok((SuffixKind::BinarySi, pow2, 0));
    let decimal = |pow10| Ok((SuffixKind::DecimalSi, 0, pow10));
    match suffix {
        "" => Ok((SuffixKind::None, 0, 0)),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        _ => {
            let unknown = || {
                format!(
                    "unknown suffix {suffix:?} (expected one of Ki Mi Gi Ti Pi Ei n u m k M G T P E or an exponent like e3)"
                )
            };
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or_else(unknown)?;
            let unsigned = exponent
                .strip_prefix('-')
                .or_else(|| exponent.strip_prefix('+'))
                .unwrap_or(exponent);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(unknown());
            }
            // Exponents beyond i32 are meaningless for any real quantity.
            let pow10 = exponent
                .parse::<i32>()
                .map_err(|_| format!("exponent out of range in {suffix:?}"))?;
            Ok((SuffixKind::DecimalExponent, 0, i64::from(pow10)))
        }
    }
}

/// Reads a `nvidia.com/gpumem` quantity as MiB.
///
/// A plain number is a MiB count (HAMi's meaning), and so is a number with a decimal
/// suffix or exponent, because the API server canonicalizes `3000` to `3k`: `3k` is
/// 3000 MiB, as in HAMi. A binary suffix means bytes, converted to MiB when that is
/// exact (`16Gi` => 16384, `512Mi` => 512, `1Ki` is an error). Negative values,
/// fractions and values beyond `u64` are errors.
pub fn quantity_to_mib(value: &str) -> Result<u64, QuantityError> {
    let q = parse_quantity(value)?;
    if q.is_negative() {
        return Err(QuantityError::Negative {
            input: value.to_owned(),
        });
    }
    let mib = match q.suffix() {
        SuffixKind::BinarySi => q.to_integer_divided_by_pow2(20).map_err(|e| match e {
            NotExact::Fraction => QuantityError::NotWholeMib {
                input: value.to_owned(),
            },
            NotExact::OutOfRange => QuantityError::OutOfRange {
                input: value.to_owned(),
            },
        })?,
        SuffixKind::None | SuffixKind::DecimalSi | SuffixKind::DecimalExponent => whole(&q, value)?,
    };
    u64::try_from(mib).map_err(|_| QuantityError::OutOfRange {
        input: value.to_owned(),
    })
}

/// Reads a count (e.g. `nvidia.com/gpu`): a non-negative whole number. Integer-valued
/// quantities in any notation are accepted (`1k` => 1000, `1Ki` => 1024); fractions
/// (`0.5`, `500m`) are errors.
pub fn quantity_to_count(value: &str) -> Result<u64, QuantityError> {
    let q = parse_quantity(value)?;
    if q.is_negative() {
        return Err(QuantityError::Negative {
            input: value.to_owned(),
        });
    }
    u64::try_from(whole(&q, value)?).map_err(|_| QuantityError::OutOfRange {
        input: value.to_owned(),
    })
}

/// Reads a percentage (e.g. `nvidia.com/gpumem-percentage`, `nvidia.com/gpucores`)
/// as a whole number. Negative values and values above 100 are returned as they are;
/// the caller decides whether to clamp or reject them. Fractions are errors.
pub fn quantity_to_percent(value: &str) -> Result<i64, QuantityError> {
    let q = parse_quantity(value)?;
    i64::try_from(whole(&q, value)?).map_err(|_| QuantityError::OutOfRange {
        input: value.to_owned(),
    })
}

fn whole(q: &QuantityValue, input: &str) -> Result<i128, QuantityError> {
    q.to_integer().map_err(|e| match e {
        NotExact::Fraction => QuantityError::NotWhole {
            input: input.to_owned(),
        },
        NotExact::OutOfRange => QuantityError::OutOfRange {
            input: input.to_owned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_grammar() {
        // Expected integer value; `None` when the value has a fractional part.
        let cases: &[(&str, Option<i128>, SuffixKind)] = &[
            ("16", Some(16), SuffixKind::None),
            ("+16", Some(16), SuffixKind::None),
            ("-16", Some(-16), SuffixKind::None),
            ("16.", Some(16), SuffixKind::None),
            ("016", Some(16), SuffixKind::None),
            ("0", Some(0), SuffixKind::None),
            ("-0", Some(0), SuffixKind::None),
            ("0.0", Some(0), SuffixKind::None),
            ("1.5k", Some(1500), SuffixKind::DecimalSi),
            ("3k", Some(3000), SuffixKind::DecimalSi),
            ("2M", Some(2_000_000), SuffixKind::DecimalSi),
            ("1G", Some(1_000_000_000), SuffixKind::DecimalSi),
            ("1T", Some(1_000_000_000_000), SuffixKind::DecimalSi),
            ("1P", Some(1_000_000_000_000_000), SuffixKind::DecimalSi),
            ("1E", Some(1_000_000_000_000_000_000), SuffixKind::DecimalSi),
            ("1000m", Some(1), SuffixKind::DecimalSi),
            ("1000000u", Some(1), SuffixKind::DecimalSi),
            ("1000000000n", Some(1), SuffixKind::DecimalSi),
            ("1Ki", Some(1024), SuffixKind::BinarySi),
            ("1Mi", Some(1 << 20), SuffixKind::BinarySi),
            ("1Gi", Some(1 << 30), SuffixKind::BinarySi),
            ("1Ti", Some(1 << 40), SuffixKind::BinarySi),
            ("1Pi", Some(1 << 50), SuffixKind::BinarySi),
            ("1Ei", Some(1 << 60), SuffixKind::BinarySi),
            ("0.5Ki", Some(512), SuffixKind::BinarySi),
            ("1e3", Some(1000), SuffixKind::DecimalExponent),
            ("1E3", Some(1000), SuffixKind::DecimalExponent),
            ("1e+3", Some(1000), SuffixKind::DecimalExponent),
            ("15e-1", None, SuffixKind::DecimalExponent),
            ("1500e-3", None, SuffixKind::DecimalExponent),
            ("2500e-3", None, SuffixKind::DecimalExponent),
            ("3000e-3", Some(3), SuffixKind::DecimalExponent),
            (" 7 ", Some(7), SuffixKind::None),
        ];
        for (text, expected, kind) in cases {
            let q = parse_quantity(text).unwrap();
            assert_eq!(q.suffix(), *kind, "{text}");
            assert_eq!(q.to_integer().ok(), *expected, "{text}");
        }
    }

    #[test]
    fn fractions_are_exact() {
        let q = parse_quantity(".5").unwrap();
        assert_eq!(q.to_integer(), Err(NotExact::Fraction));
        assert!(!q.is_negative());
        let q = parse_quantity("-.5").unwrap();
        assert!(q.is_negative());
        assert_eq!(
            parse_quantity("500m").unwrap().to_integer(),
            Err(NotExact::Fraction)
        );
        assert_eq!(
            parse_quantity("1e100").unwrap().to_integer(),
            Err(NotExact::OutOfRange)
        );
        assert_eq!(parse_quantity("0e999999").unwrap().to_integer(), Ok(0));
        assert!(parse_quantity("-0").unwrap().is_zero());
        // Many trailing zeros are fine: they move into the exponent.
        let q = parse_quantity(&format!("1{}e-60", "0".repeat(60))).unwrap();
        assert_eq!(q.to_integer(), Ok(1));
    }

    #[test]
    fn milli_values_round_up() {
        let cases: &[(&str, Option<i128>)] = &[
            ("500m", Some(500)),
            ("2", Some(2000)),
            ("0.5", Some(500)),
            ("1Gi", Some(1_073_741_824_000)),
            ("1Ki", Some(1_024_000)),
            ("1n", Some(1)),
            ("1u", Some(1)),
            ("1500u", Some(2)),
            ("-1n", Some(0)),
            ("-1500m", Some(-1500)),
            ("0", Some(0)),
            ("1e-999", Some(1)),
            ("3k", Some(3_000_000)),
            ("1e100", None),
        ];
        for (text, expected) in cases {
            let got = parse_quantity(text).unwrap().to_milli_ceil().ok();
            assert_eq!(got, *expected, "{text}");
        }
    }

    #[test]
    fn rejects_bad_syntax() {
        for bad in [
            "", " ", "abc", ".", "+", "-", "--1", "+-1", "1.2.3", "1 k", "1Kii", "1ki", "1K", "1e",
            "1e+", "1e1.5", "1ee3", "Gi", "1,000", "0x10", "1_000", "NaN", "inf",
        ] {
            let err = parse_quantity(bad).unwrap_err();
            assert!(
                matches!(err, QuantityError::Invalid { .. }),
                "{bad:?} gave {err:?}"
            );
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid quantity {bad:?}: ")),
                "{err}"
            );
        }
        let err = parse_quantity("1".repeat(39).as_str()).unwrap_err();
        assert!(
            err.to_string().contains("too many significant digits"),
            "{err}"
        );
        assert!(
            parse_quantity("abc")
                .unwrap_err()
                .to_string()
                .starts_with("invalid quantity \"abc\": expected a number")
        );
        assert!(
            parse_quantity("16GB")
                .unwrap_err()
                .to_string()
                .starts_with("invalid quantity \"16GB\": unknown suffix \"GB\"")
        );
        assert!(
            parse_quantity("1e99999999999")
                .unwrap_err()
                .to_string()
                .contains("exponent out of range")
        );
    }

    #[test]
    fn mib_table() {
        let ok: &[(&str, u64)] = &[
            ("3000", 3000),
            ("3k", 3000),
            ("1.5k", 1500),
            ("4096", 4096),
            ("16Gi", 16384),
            ("512Mi", 512),
            ("1Ti", 1_048_576),
            ("1.5Gi", 1536),
            ("0", 0),
            ("1e3", 1000),
            ("2048Ki", 2),
        ];
        for (text, mib) in ok {
            assert_eq!(quantity_to_mib(text), Ok(*mib), "{text}");
        }
        let err = quantity_to_mib("1Ki").unwrap_err();
        assert_eq!(
            err,
            QuantityError::NotWholeMib {
                input: "1Ki".into()
            }
        );
        assert!(err.to_string().contains("not a whole number of MiB"));
        assert_eq!(
            quantity_to_mib("0.5Mi"),
            Err(QuantityError::NotWholeMib {
                input: "0.5Mi".into()
            })
        );
        assert_eq!(
            quantity_to_mib("1.5"),
            Err(QuantityError::NotWhole {
                input: "1.5".into()
            })
        );
        assert_eq!(
            quantity_to_mib("500m"),
            Err(QuantityError::NotWhole {
                input: "500m".into()
            })
        );
        assert_eq!(
            quantity_to_mib("-1"),
            Err(QuantityError::Negative { input: "-1".into() })
        );
        assert_eq!(
            quantity_to_mib("-16Gi"),
            Err(QuantityError::Negative {
                input: "-16Gi".into()
            })
        );
        assert_eq!(
            quantity_to_mib("100E"),
            Err(QuantityError::OutOfRange {
                input: "100E".into()
            })
        );
        assert_eq!(
            quantity_to_mib("99999999999999999999999999Ei"),
            Err(QuantityError::OutOfRange {
                input: "99999999999999999999999999Ei".into()
            })
        );
        assert!(matches!(
            quantity_to_mib("16GB"),
            Err(QuantityError::Invalid { .. })
        ));
    }

    #[test]
    fn count_table() {
        assert_eq!(quantity_to_count("2"), Ok(2));
        assert_eq!(quantity_to_count("1k"), Ok(1000));
        assert_eq!(quantity_to_count("2000m"), Ok(2));
        assert_eq!(quantity_to_count("0"), Ok(0));
        assert_eq!(
            quantity_to_count("0.5"),
            Err(QuantityError::NotWhole {
                input: "0.5".into()
            })
        );
        assert_eq!(
            quantity_to_count("500m"),
            Err(QuantityError::NotWhole {
                input: "500m".into()
            })
        );
        assert_eq!(
            quantity_to_count("-1"),
            Err(QuantityError::Negative { input: "-1".into() })
        );
        assert_eq!(
            quantity_to_count("18446744073709551616"),
            Err(QuantityError::OutOfRange {
                input: "18446744073709551616".into()
            })
        );
        assert_eq!(quantity_to_count("18446744073709551615"), Ok(u64::MAX));
        assert!(
            quantity_to_count("two")
                .unwrap_err()
                .to_string()
                .starts_with("invalid quantity \"two\": ")
        );
    }

    #[test]
    fn percent_table() {
        assert_eq!(quantity_to_percent("50"), Ok(50));
        assert_eq!(quantity_to_percent("150"), Ok(150));
        assert_eq!(quantity_to_percent("-5"), Ok(-5));
        assert_eq!(quantity_to_percent("1e2"), Ok(100));
        assert_eq!(
            quantity_to_percent("12.5"),
            Err(QuantityError::NotWhole {
                input: "12.5".into()
            })
        );
        assert_eq!(quantity_to_percent("1E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(
            quantity_to_percent("10E"),
            Err(QuantityError::OutOfRange {
                input: "10E".into()
            })
        );
    }

    proptest! {
        #[test]
        fn never_panics(s in any::<String>()) {
            let _ = parse_quantity(&s);
            let _ = quantity_to_mib(&s);
            let _ = quantity_to_count(&s);
            let _ = quantity_to_percent(&s);
        }

        #[test]
        fn shaped_input_never_panics(s in "[-+0-9.eEKMGTPinumk ]{0,40}") {
            let _ = quantity_to_mib(&s);
            let _ = quantity_to_count(&s);
            let _ = quantity_to_percent(&s);
        }

        #[test]
        fn unsigned_integers_round_trip(n in any::<u64>()) {
            prop_assert_eq!(quantity_to_count(&n.to_string()), Ok(n));
            prop_assert_eq!(quantity_to_mib(&n.to_string()), Ok(n));
        }

        #[test]
        fn signed_integers_round_trip(n in any::<i64>()) {
            prop_assert_eq!(quantity_to_percent(&n.to_string()), Ok(n));
        }

        #[test]
        fn binary_mib_round_trip(n in 0u64..(1 << 40)) {
            prop_assert_eq!(quantity_to_mib(&format!("{n}Mi")), Ok(n));
            prop_assert_eq!(quantity_to_mib(&format!("{}Ki", u128::from(n) * 1024)), Ok(n));
        }

        #[test]
        fn decimal_suffix_is_a_multiplier(n in 0u64..1_000_000_000) {
            prop_assert_eq!(quantity_to_mib(&format!("{n}k")), Ok(n * 1000));
            prop_assert_eq!(quantity_to_count(&format!("{n}e3")), Ok(n * 1000));
        }
    }
}
