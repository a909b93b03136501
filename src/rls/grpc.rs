//! The gRPC side: tonic serving `envoy.service.ratelimit.v3.RateLimitService`
//! and `grpc.health.v1.Health` on the connections `sockets` accepts, in a
//! tokio runtime the loop drives on its own thread (`rls::Running`). The
//! service glue is written by hand, as `tonic-build` would generate it, so
//! no `protoc` runs at build time.
//!
//! A call is planned (`decide::plan`), handed to the loop (`bridge`) and
//! awaited without a thread of its own, and answered (`decide::answer`).
//! The health service follows what the loop says of itself (`GrpcHealth`).
//!
//! This module owns no decision and no socket but gRPC's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tonic::codegen::{http, BoxFuture, Context, Poll, Service};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tracing::{debug, warn};

use super::bridge::Bridge;
use super::config::Table;
use super::counts::{CallOutcome, Counts};
use super::decide::{self, Answering, BadRequest, Unanswered};
use super::proto::{Code, RateLimitRequest, RateLimitResponse};
use crate::wire;

/// The service's full name, as Envoy calls it.
pub const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
const METHOD: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The largest request message accepted, in bytes: room for the most
/// descriptors one request may carry, with long values.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// How long open connections may take to close after a stop.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// Whether the locker serves, as the loop last said: what the health
/// service reports, told of each change.
#[derive(Debug, Clone, Default)]
pub struct GrpcHealth(Arc<(AtomicBool, tokio::sync::Notify)>);

impl GrpcHealth {
    /// Says whether the locker serves now. Never blocks.
    pub fn set(&self, serving: bool) {
        if self.0 .0.swap(serving, Ordering::Relaxed) != serving {
            self.0 .1.notify_one();
        }
    }

    pub fn serving(&self) -> bool {
        self.0 .0.load(Ordering::Relaxed)
    }

    /// Until the next change (or at once, when one came since the last).
    async fn changed(&self) {
        self.0 .1.notified().await;
    }
}

/// What every call shares.
pub struct Shared {
    pub table: Arc<std::sync::RwLock<Arc<Table>>>,
    pub bridge: Bridge,
    pub answering: Answering,
    pub counts: Counts,
    /// Calls the locker did not answer, logged at most once a second.
    pub unanswered: MissedCalls,
}

/// Calls the locker did not answer (a full queue, a timeout, a stop),
/// counted so that an overload logs one line a second, not one a call.
#[derive(Debug, Default)]
pub struct MissedCalls(std::sync::Mutex<(u64, Option<std::time::Instant>)>);

impl MissedCalls {
    /// Counts one at `now`; returns how many to log, the first since the
    /// last line or a second after it.
    pub fn count(&self, now: std::time::Instant) -> Option<u64> {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (calls, logged_at) = &mut *state;
        *calls += 1;
        let due = logged_at.is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1));
        if !due {
            return None;
        }
        *logged_at = Some(now);
        Some(std::mem::take(calls))
    }
}

/// `RateLimitService` over `Shared`.
#[derive(Clone)]
pub struct RateLimitServer(pub Arc<Shared>);

impl NamedService for RateLimitServer {
    const NAME: &'static str = SERVICE;
}

impl<B> Service<http::Request<B>> for RateLimitServer
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != METHOD {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        let method = ShouldRateLimit(self.0.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<RateLimitResponse, RateLimitRequest>::default();
            let mut grpc = Grpc::new(codec).apply_max_message_size_config(Some(MAX_REQUEST_BYTES), None);
            Ok(grpc.unary(method, req).await)
        })
    }
}

/// The one method.
struct ShouldRateLimit(Arc<Shared>);

impl UnaryService<RateLimitRequest> for ShouldRateLimit {
    type Response = RateLimitResponse;
    type Future = BoxFuture<Response<RateLimitResponse>, Status>;

    fn call(&mut self, request: Request<RateLimitRequest>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            let request = request.into_inner();
            let answered = should_rate_limit(&shared, &request).await;
            let outcome = match &answered {
                Ok(r) if r.overall_code == Code::OverLimit as i32 => CallOutcome::OverLimit,
                Ok(_) => CallOutcome::Ok,
                Err(_) => CallOutcome::Error,
            };
            let configured = shared.table.read().unwrap_or_else(|e| e.into_inner()).has_domain(&request.domain);
            shared.counts.record(&request.domain, configured, outcome);
            answered.map(Response::new)
        })
    }
}

async fn should_rate_limit(shared: &Shared, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
    let table = shared.table.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut plan = decide::plan(&table, request, &shared.answering).map_err(|e| match e {
        BadRequest::NoRuntimeLimits(_) => Status::failed_precondition(e.to_string()),
        e => Status::invalid_argument(e.to_string()),
    })?;
    let body = plan.take_body();
    let reply = if body.is_empty() {
        Vec::new()
    } else {
        match shared.bridge.ask(body).await {
            Ok(reply) => reply,
            Err(e) => {
                if let Some(calls) = shared.unanswered.count(std::time::Instant::now()) {
                    warn!(error = %e, calls, "rate-limit calls got no answer from the locker since the last such line");
                }
                return Err(Status::unavailable(e.to_string()));
            }
        }
    };
    for body in decide::charges(&plan, &reply) {
        // The answer stands whatever becomes of a charge: the descriptor
        // was over either way.
        match shared.bridge.ask(body).await {
            Ok(charged) if wire::decode_charge_reply(&charged).is_ok_and(|r| matches!(r, wire::Reply::Answer(_))) => {}
            Ok(_) => warn!(domain = %request.domain, "a refused descriptor's hits could not be charged"),
            Err(e) => warn!(error = %e, "a refused descriptor's charge got no answer from the locker"),
        }
    }
    decide::answer(&plan, &reply).map_err(|e| {
        debug!(error = %e, domain = %request.domain, "a rate-limit call refused");
        match e {
            Unanswered::Refused(_) | Unanswered::Entry(_) => Status::unavailable(e.to_string()),
            Unanswered::Unreadable(_) => Status::internal(e.to_string()),
        }
    })
}

/// Serves `server` and the health service on the connections of
/// `incoming` until `stop` fires, following `health`.
pub async fn serve(
    incoming: super::sockets::Incoming,
    server: RateLimitServer,
    health: GrpcHealth,
    mut stop: tokio::sync::watch::Receiver<bool>,
    tls: Option<super::Tls>,
) -> Result<(), String> {
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let follow = async move {
        use tonic_health::ServingStatus;
        let mut last = None;
        loop {
            let now = health.serving();
            if last != Some(now) {
                let status = if now { ServingStatus::Serving } else { ServingStatus::NotServing };
                reporter.set_service_status("", status).await;
                reporter.set_service_status(SERVICE, status).await;
                last = Some(now);
            }
            health.changed().await;
        }
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let mut config = ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem));
        if let Some(ca) = &tls.client_ca_pem {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        builder = builder.tls_config(config).map_err(|e| e.to_string())?;
    }
    let routes = builder.add_service(server).add_service(health_service);
    let mut stopping = stop.clone();
    let signal = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    // Connections get this long to end after a stop, then are dropped.
    let grace = async move {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    tokio::select! {
        served = routes.serve_with_incoming_shutdown(incoming, signal) => served.map_err(|e| e.to_string()),
        () = follow => Ok(()),
        () = grace => Ok(()),
    }
}

/// Binds `addr` for the gRPC listener, before anything is served.
pub fn bind(addr: &str) -> std::io::Result<(std::net::TcpListener, SocketAddr)> {
    let listener = std::net::TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A flood of unanswered calls logs the first, then one line a second
    /// with how many came since.
    #[test]
    fn unanswered_calls_log_once_a_second_with_their_count() {
        let unanswered = MissedCalls::default();
        let t0 = Instant::now();
        assert_eq!(unanswered.count(t0), Some(1));
        for ms in 1..1_000 {
            assert_eq!(unanswered.count(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(unanswered.count(t0 + Duration::from_secs(1)), Some(1_000));
        assert_eq!(unanswered.count(t0 + Duration::from_millis(1_500)), None);
    }
}
