//! The size arguments of the command line, parsed by pure functions (tested and fuzzed from
//! the integration tests through the hidden `monomorph::cli::args`): byte counts
//! (`--memory-limit 8G`) and grid or volume sizes (`64x64x64`).

/// Parses a byte count: a number with an optional unit `K`, `M`, `G`, `T` (powers of 1024;
/// `KB`, `KiB`, … and a bare `B` are accepted too). Fractions work with a unit (`0.5G` is
/// 512 MiB) and round down to whole bytes; a count below one byte, a negative, non-finite or
/// out-of-range number, or an unknown unit is an error saying what was expected.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => {
            return Err(format!(
                "'{s}': unknown unit '{unit}', expected a byte count like 4G, 512M, 0.5G or 1000000"
            ));
        }
    };
    let num = num.trim();
    if num.is_empty()
        || !num
            .bytes()
            .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b))
    {
        return Err(format!(
            "'{s}' is not a byte count, expected e.g. 4G, 512M, 0.5G or 1000000"
        ));
    }
    let v: f64 = num.parse().map_err(|_| {
        format!("'{s}' is not a byte count, expected e.g. 4G, 512M, 0.5G or 1000000")
    })?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("'{s}': expected a positive byte count"));
    }
    let bytes = v * mult as f64;
    // 2^64 is exactly representable; anything at or above it does not fit.
    if bytes >= 18_446_744_073_709_551_616.0 {
        return Err(format!(
            "'{s}': more than 2^64 bytes, expected a byte count"
        ));
    }
    let b = bytes as u64;
    if b == 0 {
        return Err(format!(
            "'{s}' is less than one byte, expected a byte count (units: K, M, G, T, e.g. 0.5G)"
        ));
    }
    Ok(b)
}

/// Parses a grid or volume size `N`, `NxN` or `NxNxN` (`x`, `X` or `,` between sizes): one to
/// three positive sizes whose product (the number of cells) fits in memory addressing
/// (`isize::MAX`). The caller decides what a single `N` means.
pub fn parse_dims(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("'{s}': expected N, NxN or NxNxN of positive sizes");
    let v: Vec<usize> = s
        .split(['x', 'X', ','])
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    if v.is_empty() || v.len() > 3 || v.contains(&0) {
        return Err(bad());
    }
    let cells = v
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&c| c <= isize::MAX as usize);
    if cells.is_none() {
        return Err(format!(
            "'{s}': {} cells overflow, expected a size this machine can address",
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("×")
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4G"), Ok(4 << 30));
        assert_eq!(parse_bytes("0.5G"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes(" 1000000 "), Ok(1_000_000));
        assert_eq!(parse_bytes("1e6"), Ok(1_000_000));
        for bad in [
            "0", "0.5", "-1G", "inf", "NaN", "", "G", "4Q", "1e30T", "1..2", "0x10",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dims() {
        assert_eq!(parse_dims("64"), Ok(vec![64]));
        assert_eq!(parse_dims("4x5X6"), Ok(vec![4, 5, 6]));
        assert_eq!(parse_dims("4,5"), Ok(vec![4, 5]));
        for bad in [
            "",
            "0",
            "4x0",
            "1x2x3x4",
            "-1",
            "99999999999x99999999999x99999999",
        ] {
            assert!(parse_dims(bad).is_err(), "{bad}");
        }
    }
}
