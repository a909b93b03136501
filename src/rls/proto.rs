//! Envoy's rate-limit service messages, written by hand with Envoy's
//! package, names and field numbers (`envoy/service/ratelimit/v3/rls.proto`
//! and `envoy/extensions/common/ratelimit/v3/ratelimit.proto`), so that no
//! `protoc` runs at build time. Only the fields the locker reads or writes
//! are declared: prost skips the others when decoding, and an absent field
//! is Envoy's default on the other side.
//!
//! This module only declares messages; it decides nothing.

/// `envoy.service.ratelimit.v3.RateLimitRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitRequest {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    /// Hits the request adds to each matched limit; 0 (unset) means 1.
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitDescriptor {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
    /// A limit sent with the descriptor, in place of the config's.
    #[prost(message, optional, tag = "2")]
    pub limit: Option<RateLimitOverride>,
    /// This descriptor's own hits, when set (0 checks without counting).
    #[prost(message, optional, tag = "3")]
    pub hits_addend: Option<UInt64Value>,
}

/// A string key and value in fields 1 and 2: the shape of two of Envoy's
/// messages, which the aliases below name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry`.
pub type Entry = KeyValue;

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride`.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct RateLimitOverride {
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// `envoy.type.v3.RateLimitUnit`, numbered as [`Unit`] is.
    #[prost(int32, tag = "2")]
    pub unit: i32,
}

/// `google.protobuf.UInt64Value`.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct UInt64Value {
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitResponse {
    #[prost(enumeration = "Code", tag = "1")]
    pub overall_code: i32,
    #[prost(message, repeated, tag = "2")]
    pub statuses: Vec<DescriptorStatus>,
    /// Headers Envoy adds to the response (`--rls-headers`).
    #[prost(message, repeated, tag = "3")]
    pub response_headers_to_add: Vec<HeaderValue>,
}

/// `envoy.config.core.v3.HeaderValue`.
pub type HeaderValue = KeyValue;

/// `envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DescriptorStatus {
    #[prost(enumeration = "Code", tag = "1")]
    pub code: i32,
    #[prost(message, optional, tag = "2")]
    pub current_limit: Option<RateLimit>,
    #[prost(uint32, tag = "3")]
    pub limit_remaining: u32,
    #[prost(message, optional, tag = "4")]
    pub duration_until_reset: Option<Duration>,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.RateLimit`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimit {
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    #[prost(enumeration = "Unit", tag = "2")]
    pub unit: i32,
}

/// `google.protobuf.Duration`.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.Code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum Code {
    Unknown = 0,
    /// Under the limit: the request may go.
    Ok = 1,
    /// Over it.
    OverLimit = 2,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit`: the
/// window a rate limit of envoyproxy/ratelimit's config counts in.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
pub enum Unit {
    Unknown = 0,
    Second = 1,
    Minute = 2,
    Hour = 3,
    Day = 4,
    /// 30 days, as envoyproxy/ratelimit counts it.
    Month = 5,
    /// 365 days.
    Year = 6,
    /// Added after the others, hence its number.
    Week = 7,
}

impl Duration {
    /// `ms` milliseconds.
    pub fn from_millis(ms: u64) -> Duration {
        Duration { seconds: (ms / 1000) as i64, nanos: ((ms % 1000) * 1_000_000) as i32 }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn the_bytes_are_envoys() {
        // domain "d", one descriptor of entry ("k", "v") with hits_addend 0,
        // hits_addend 3: as protoc's encoder writes it for Envoy's messages.
        let bytes = b"\x0a\x01d\x12\x0a\x0a\x06\x0a\x01k\x12\x01v\x1a\x00\x18\x03";
        let request = RateLimitRequest::decode(&bytes[..]).unwrap();
        assert_eq!(request.domain, "d");
        assert_eq!(request.hits_addend, 3);
        let d = &request.descriptors[0];
        assert_eq!((d.entries[0].key.as_str(), d.entries[0].value.as_str()), ("k", "v"));
        assert_eq!(d.hits_addend, Some(UInt64Value { value: 0 }));
        assert_eq!(request.encode_to_vec(), bytes);
    }

    #[test]
    fn a_limit_override_is_read() {
        // A descriptor with a `limit` override (field 2): 5 per minute.
        let bytes = b"\x0a\x01d\x12\x0e\x0a\x06\x0a\x01k\x12\x01v\x12\x04\x08\x05\x10\x02";
        let request = RateLimitRequest::decode(&bytes[..]).unwrap();
        assert_eq!(request.descriptors[0].entries.len(), 1);
        assert_eq!(
            request.descriptors[0].limit,
            Some(RateLimitOverride { requests_per_unit: 5, unit: Unit::Minute as i32 })
        );
    }

    #[test]
    fn unknown_fields_are_skipped() {
        // A request with `hits_addend` and an unknown field 9 (varint).
        let bytes = b"\x0a\x01d\x48\x07\x18\x02";
        let request = RateLimitRequest::decode(&bytes[..]).unwrap();
        assert_eq!((request.domain.as_str(), request.hits_addend), ("d", 2));
    }

    #[test]
    fn a_status_has_envoys_numbers() {
        let status = DescriptorStatus {
            code: Code::OverLimit as i32,
            current_limit: Some(RateLimit { name: String::new(), requests_per_unit: 5, unit: Unit::Minute as i32 }),
            limit_remaining: 0,
            duration_until_reset: Some(Duration::from_millis(1500)),
        };
        assert_eq!(status.encode_to_vec(), b"\x08\x02\x12\x04\x08\x05\x10\x02\x22\x08\x08\x01\x10\x80\xca\xb5\xee\x01");
    }
}
