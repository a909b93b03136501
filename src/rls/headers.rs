//! The response headers a rate-limit reply asks Envoy to add
//! (`response_headers_to_add`), from its statuses, when `--rls-headers`
//! says which:
//!
//! - `draft-03`: `x-ratelimit-limit`, `x-ratelimit-remaining` and
//!   `x-ratelimit-reset`, written as Envoy's own ratelimit filter writes
//!   them (`enable_x_ratelimit_headers: DRAFT_VERSION_03`): the status with
//!   the fewest remaining (the first of equals) gives the three numbers,
//!   and the limit lists every status's quota policy (`10, 10;w=60,
//!   100;w=86400;name="daily"`);
//! - `ietf`: `ratelimit-policy` and `ratelimit`
//!   (draft-ietf-httpapi-ratelimit-headers), one list item per status,
//!   named and written as the Python client writes them
//!   (`"name";q=10;w=60` and `"name";r=9;t=42`, times rounded up).
//!
//! Only statuses with a `current_limit` count, as in Envoy's filter. This
//! module is pure: statuses in, text out.

use super::proto::{DescriptorStatus, HeaderValue, Unit};

/// Which headers a reply carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum HeaderStyle {
    /// `X-RateLimit-*`, as Envoy's filter writes them.
    #[serde(rename = "draft-03")]
    Draft03,
    /// `RateLimit-Policy` and `RateLimit`.
    #[serde(rename = "ietf")]
    Ietf,
}

impl std::str::FromStr for HeaderStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<HeaderStyle, String> {
        match s {
            "draft-03" => Ok(HeaderStyle::Draft03),
            "ietf" => Ok(HeaderStyle::Ietf),
            _ => Err(format!("unknown rate-limit headers {s:?} (draft-03 or ietf)")),
        }
    }
}

/// One status, with what the IETF fields need besides: the name its
/// policy goes by and its window in seconds.
pub struct Labelled<'a> {
    pub status: &'a DescriptorStatus,
    pub name: &'a str,
    pub window_s: f64,
}

/// The headers of `statuses` in `style`; none when no status has a limit.
pub fn write(style: HeaderStyle, statuses: &[Labelled]) -> Vec<HeaderValue> {
    let limited: Vec<&Labelled> = statuses.iter().filter(|l| l.status.current_limit.is_some()).collect();
    if limited.is_empty() {
        return Vec::new();
    }
    match style {
        HeaderStyle::Draft03 => draft_03(&limited),
        HeaderStyle::Ietf => ietf(&limited),
    }
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue { key: key.to_owned(), value }
}

fn draft_03(limited: &[&Labelled]) -> Vec<HeaderValue> {
    let mut least = limited[0].status;
    let mut policies = String::new();
    for l in limited {
        let (status, limit) = (l.status, l.status.current_limit.as_ref().expect("limited"));
        if status.limit_remaining < least.limit_remaining {
            least = status;
        }
        let window = envoy_window(limit.unit);
        if window > 0 {
            policies.push_str(&format!(", {};w={window}", limit.requests_per_unit));
            if !limit.name.is_empty() {
                policies.push_str(&format!(";name=\"{}\"", limit.name));
            }
        }
    }
    let limit = least.current_limit.as_ref().expect("limited").requests_per_unit;
    let reset = least.duration_until_reset.map_or(0, |d| d.seconds);
    vec![
        header("x-ratelimit-limit", format!("{limit}{policies}")),
        header("x-ratelimit-remaining", least.limit_remaining.to_string()),
        header("x-ratelimit-reset", reset.to_string()),
    ]
}

/// A unit's window in seconds as Envoy's filter counts it: 0 (left out)
/// for one it does not know.
fn envoy_window(unit: i32) -> u64 {
    match Unit::try_from(unit) {
        Ok(Unit::Second) => 1,
        Ok(Unit::Minute) => 60,
        Ok(Unit::Hour) => 3_600,
        Ok(Unit::Day) => 86_400,
        Ok(Unit::Month) => 30 * 86_400,
        Ok(Unit::Year) => 365 * 86_400,
        _ => 0,
    }
}

fn ietf(limited: &[&Labelled]) -> Vec<HeaderValue> {
    let mut policies = Vec::with_capacity(limited.len());
    let mut states = Vec::with_capacity(limited.len());
    for l in limited {
        let limit = l.status.current_limit.as_ref().expect("limited");
        let name = sf_string(l.name);
        let window = (l.window_s.ceil() as u64).max(1);
        policies.push(format!("{name};q={};w={window}", limit.requests_per_unit));
        let reset_ms =
            l.status.duration_until_reset.map_or(0, |d| d.seconds as u64 * 1000 + d.nanos as u64 / 1_000_000);
        states.push(format!("{name};r={};t={}", l.status.limit_remaining, reset_ms.div_ceil(1000)));
    }
    vec![header("ratelimit-policy", policies.join(", ")), header("ratelimit", states.join(", "))]
}

/// `name` as a structured-field String (RFC 8941): quoted, `"` and `\`
/// escaped, and any character outside printable ASCII written as its
/// UTF-8 bytes percent-encoded (as the Python client writes it).
fn sf_string(name: &str) -> String {
    let mut out = String::from('"');
    for c in name.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::super::proto::{Code, Duration, RateLimit};
    use super::*;

    fn status(name: &str, requests_per_unit: u32, unit: Unit, remaining: u32, reset_ms: u64) -> DescriptorStatus {
        DescriptorStatus {
            code: Code::Ok as i32,
            current_limit: Some(RateLimit { name: name.into(), requests_per_unit, unit: unit as i32 }),
            limit_remaining: remaining,
            duration_until_reset: Some(Duration::from_millis(reset_ms)),
        }
    }

    fn labelled<'a>(status: &'a DescriptorStatus, name: &'a str, window_s: f64) -> Labelled<'a> {
        Labelled { status, name, window_s }
    }

    fn pairs(headers: &[HeaderValue]) -> Vec<(&str, &str)> {
        headers.iter().map(|h| (h.key.as_str(), h.value.as_str())).collect()
    }

    #[test]
    fn draft_03_is_envoys() {
        let a = status("", 10, Unit::Minute, 7, 30_500);
        let b = status("daily", 100, Unit::Day, 3, 4_000_900);
        let free = DescriptorStatus { code: Code::Ok as i32, ..DescriptorStatus::default() };
        let labelled = [labelled(&a, "d.a", 60.0), labelled(&free, "", 0.0), labelled(&b, "daily", 86_400.0)];
        assert_eq!(
            pairs(&write(HeaderStyle::Draft03, &labelled)),
            [
                ("x-ratelimit-limit", "100, 10;w=60, 100;w=86400;name=\"daily\""),
                ("x-ratelimit-remaining", "3"),
                ("x-ratelimit-reset", "4000"),
            ]
        );
        assert!(write(HeaderStyle::Draft03, &labelled[1..2]).is_empty(), "no limit, no headers");
    }

    #[test]
    fn ietf_lists_every_limit() {
        let a = status("", 10, Unit::Minute, 7, 30_500);
        let b = status("x", 5, Unit::Second, 0, 250);
        let labelled = [labelled(&a, "d.a \"é\"", 60.0), labelled(&b, "x", 0.25)];
        assert_eq!(
            pairs(&write(HeaderStyle::Ietf, &labelled)),
            [
                ("ratelimit-policy", "\"d.a \\\"%C3%A9\\\"\";q=10;w=60, \"x\";q=5;w=1"),
                ("ratelimit", "\"d.a \\\"%C3%A9\\\"\";r=7;t=31, \"x\";r=0;t=1"),
            ]
        );
        assert_eq!("ietf".parse(), Ok(HeaderStyle::Ietf));
        assert!("draft".parse::<HeaderStyle>().unwrap_err().contains("draft-03 or ietf"));
    }
}
