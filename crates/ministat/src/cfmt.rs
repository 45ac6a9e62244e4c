//! C's `printf("%g")` family, which ministat's output is made of.
//!
//! Rust's float formatting is exact (it rounds the true binary value), as
//! glibc's and FreeBSD's printf are, so the digits agree; this module adds
//! %g's choice between fixed and exponent notation, its trailing-zero
//! stripping and the two-digit signed exponent.

/// `%.<prec>g`.
pub fn g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = prec.max(1);
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let e_form = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = e_form.split_once('e').expect("exponent");
    let x: i32 = exp.parse().expect("exponent digits");
    if x < -4 || x >= p as i32 {
        let m = strip_zeros(mantissa);
        format!("{m}e{}{:02}", if x < 0 { '-' } else { '+' }, x.abs())
    } else {
        strip_zeros(&format!("{:.*}", (p as i32 - 1 - x) as usize, v)).to_string()
    }
}

/// `%<width>.<prec>g`: right-aligned in `width` columns.
pub fn g_width(v: f64, width: usize, prec: usize) -> String {
    format!("{:>width$}", g(v, prec))
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings are what glibc's printf prints for the same values.
    #[test]
    fn like_printf_g() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (1.0, "1"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (123456789.0, "1.23457e+08"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000123456, "0.000123456"),
            (-3.5, "-3.5"),
            (238.0476142, "238.048"),
            (2.5, "2.5"),
            (1e100, "1e+100"),
            (-0.0, "-0"),
        ];
        for (v, want) in cases {
            assert_eq!(g(*v, 6), *want, "{v}");
        }
    }

    #[test]
    fn like_printf_13_8g() {
        assert_eq!(g_width(238.04761, 13, 8), "    238.04761");
        assert_eq!(g_width(300.0, 13, 8), "          300");
        assert_eq!(g_width(1.0 / 3.0, 13, 8), "   0.33333333");
        assert_eq!(g_width(123456789.0, 13, 8), "1.2345679e+08");
    }
}
