//! Sizes on the command line: `512M`, `4G`, `1.5G`, `65536`.

/// Digits of a fraction that count: 10^-18 of the largest unit (1 TiB) is far below a byte.
const FRACTION_DIGITS_MAX: usize = 18;

/// Parse a size with an optional fraction and binary suffix (K, M, G, T; an optional
/// trailing `B` or `iB` is accepted: `4GiB`, `512MB`). A fraction is rounded to the nearest
/// byte: `1.5G` is 1610612736, `0.1K` is 102.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let stripped = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (number, shift) = match stripped.strip_suffix(['K', 'M', 'G', 'T']) {
        Some(number) => (number, unit_shift(stripped)),
        None => (stripped, 0),
    };
    let bad = || {
        format!(
            "invalid size {text:?}: expected a number with an optional fraction and suffix \
             K, M, G or T (e.g. 512M, 1.5G, 4G)"
        )
    };
    let too_large = || format!("size {text:?} is too large");
    let (whole, fraction) = split_number(number.trim()).ok_or_else(bad)?;
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let whole_bytes = whole.checked_mul(1u64 << shift).ok_or_else(too_large)?;
    whole_bytes
        .checked_add(fraction_bytes(fraction, shift))
        .ok_or_else(too_large)
}

/// log2 of the unit named by the last letter of `stripped` (K, M, G or T).
fn unit_shift(stripped: &str) -> u32 {
    match stripped.chars().last() {
        Some('K') => 10,
        Some('M') => 20,
        Some('G') => 30,
        Some('T') => 40,
        _ => 0,
    }
}

/// `12.5` → ("12", "5"); `12` → ("12", ""); `.5` → ("", "5"). None unless the text is
/// decimal digits with at most one point and at least one digit on each side of it that
/// has one (`12.` and `.` are refused).
fn split_number(number: &str) -> Option<(&str, &str)> {
    let (whole, fraction) = match number.split_once('.') {
        Some((_, "")) => return None,
        Some((whole, fraction)) => (whole, fraction),
        None if number.is_empty() => return None,
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    (digits(whole) && digits(fraction)).then_some((whole, fraction))
}

/// The bytes of `0.<fraction>` units of `1 << shift` bytes, rounded to the nearest byte.
fn fraction_bytes(fraction: &str, shift: u32) -> u64 {
    let used = &fraction[..fraction.len().min(FRACTION_DIGITS_MAX)];
    let numerator: u128 = used.bytes().fold(0, |n, b| n * 10 + u128::from(b - b'0'));
    let denominator = 10u128.pow(used.len() as u32);
    // numerator < denominator ≤ 10^18 and 1 << shift ≤ 2^40: no overflow in u128.
    let scaled = numerator * (1u128 << shift);
    let rounded = (2 * scaled + denominator) / (2 * denominator);
    // Below 1 << shift ≤ 2^40.
    rounded as u64
}

/// A size for people: `512 MiB`, `4.0 GiB`, `900 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("-5M").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert_eq!(human(512 << 20), "512 MiB");
        assert_eq!(human(1536), "1.5 KiB");
    }

    #[test]
    fn sizes_with_a_fraction_round_to_bytes() {
        assert_eq!(parse_size("1.5G"), Ok(1_610_612_736));
        assert_eq!(parse_size("1.5GiB"), Ok(1_610_612_736));
        assert_eq!(parse_size("0.5M"), Ok(512 << 10));
        assert_eq!(parse_size(".25K"), Ok(256));
        assert_eq!(parse_size("24.5M"), Ok(25_690_112));
        // 0.1 KiB = 102.4 bytes -> 102; 0.15 KiB = 153.6 -> 154; 2.5 bytes -> 3.
        assert_eq!(parse_size("0.1K"), Ok(102));
        assert_eq!(parse_size("0.15k"), Ok(154));
        assert_eq!(parse_size("2.5"), Ok(3));
        assert_eq!(parse_size("1.0000000000000000000001T"), Ok(1 << 40));
        assert_eq!(parse_size("1.999999999999999999999T"), Ok(2 << 40));
        assert_eq!(parse_size("16383.5T"), Ok((16383 << 40) + (1 << 39)));
    }

    #[test]
    fn garbage_is_refused_with_the_expected_form() {
        for bad in [
            "1.5.5G", "1,5G", "1.G", ".G", ".", "G", "1.5X", "-1.5G", "1e9", "0x10M", "1.-5M",
            "1. 5M", "abc",
        ] {
            let e = parse_size(bad).expect_err(bad);
            assert!(
                e.contains("invalid size") && e.contains("1.5G"),
                "{bad}: {e}"
            );
        }
        let e = parse_size("17179869184.5G").expect_err("overflow");
        assert!(e.contains("too large"), "{e}");
    }
}
