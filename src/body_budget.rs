//! How much request body the server holds in memory at once, and for how long.
//!
//! A body is read whole before it is decoded, and a full-`Nodes` `/filter` body
//! may be tens of MiB, so the per-request cap (`--max-request-body`) alone lets a
//! few dozen concurrent clients take gigabytes. Bodies are therefore read by
//! [`read_body_within_budget`] before the handler runs, and every piece is charged
//! to a budget as it arrives and given back when the answer is ready:
//!
//! * A request is charged nothing before its body's first byte: a head that
//!   promises a body and sends none holds nothing, whatever its `Content-Length`
//!   says. With that first byte a body that declared its length takes all of it
//!   at once (bodies holding parts while waiting for more would hold each other
//!   up); a chunked body is charged piece by piece as it grows.
//! * A body that stalls or trickles is cut (see `body_pace`), so what it holds is
//!   held for seconds, not for the request time limit.
//! * Each class of route has a budget of its own: the extender verbs
//!   (`--max-request-bodies-in-flight`) and the webhook
//!   (`--max-admission-bodies-in-flight`). The webhook is open to anyone who can
//!   reach the port, so its bodies can never take kube-scheduler's share; and the
//!   extender's budget sits behind the client-certificate check, so with
//!   `--client-ca-file` only kube-scheduler's calls draw on it. Other routes read
//!   no body.
//! * A piece that cannot get its share within [`BUDGET_WAIT`] has the request
//!   refused; one whose `Content-Length` is over its route's cap, or whose body
//!   grows past it, is refused at once.
//!
//! Refusals use the shape of the route's answers (see `refusal`).

use crate::body_pace::{BODY_MIN_RATE, BODY_STALL, BodyPace, PaceFault};
use crate::refusal::refusal;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a piece of a body waits for its share of the budget before the
/// request is refused. Short: kube-scheduler's own timeout runs meanwhile, and a
/// refused call is retried, while a queue of waiting uploads would only hold their
/// connections (and what they already hold of the budget).
pub const BUDGET_WAIT: Duration = Duration::from_secs(5);

/// The body budget of one class of routes, and their body cap.
#[derive(Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
    cap: usize,
}

impl BodyBudget {
    /// A budget of `total` bytes in flight for bodies of at most `cap` bytes.
    pub fn new(total: usize, cap: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
            total,
            cap,
        }
    }

    /// The largest body accepted.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes not taken by bodies in flight.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

/// Why a body was not read whole.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyRefused {
    /// The body is, or grew, past the route's cap.
    #[error("request body of {length} bytes is over this route's limit of {cap} bytes")]
    OverCap { length: u64, cap: usize },
    /// The budget had no room for it in time.
    #[error("too many request bodies in flight; retry")]
    NoBudget,
    /// Nothing arrived for a while.
    #[error("request body stalled: nothing arrived for {}s", BODY_STALL.as_secs())]
    Stalled,
    /// It arrived too slowly.
    #[error("request body arrived slower than {} KiB/s", BODY_MIN_RATE / 1024)]
    TooSlow,
    /// The connection failed or sent a malformed body.
    #[error("cannot read request body: {0}")]
    Broken(String),
}

impl BodyRefused {
    fn status(&self) -> StatusCode {
        match self {
            Self::OverCap { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NoBudget => StatusCode::SERVICE_UNAVAILABLE,
            Self::Stalled | Self::TooSlow => StatusCode::REQUEST_TIMEOUT,
            Self::Broken(_) => StatusCode::BAD_REQUEST,
        }
    }
}

impl From<PaceFault> for BodyRefused {
    fn from(fault: PaceFault) -> Self {
        match fault {
            PaceFault::Stalled => Self::Stalled,
            PaceFault::TooSlow => Self::TooSlow,
        }
    }
}

/// A body read whole, and its share of the budget, held until the answer is ready.
pub struct HeldBody {
    pub bytes: Bytes,
    _share: Option<OwnedSemaphorePermit>,
}

/// The middleware for a class of routes: reads the body within `budget` and hands
/// the handler the bytes read, or refuses the request in its route's shape.
pub async fn read_body_within_budget(
    State(budget): State<Arc<BodyBudget>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let (parts, body) = request.into_parts();
    match read_within(&budget, &parts.headers, body).await {
        Ok(held) => {
            let request = Request::from_parts(parts, Body::from(held.bytes.clone()));
            let response = next.run(request).await;
            drop(held);
            response
        }
        Err(refused) => refusal(&path, refused.status(), refused.to_string()),
    }
}

/// Reads `body`, charging each piece to `budget` as it arrives.
pub async fn read_within(
    budget: &BodyBudget,
    headers: &HeaderMap,
    body: Body,
) -> Result<HeldBody, BodyRefused> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(length) = declared
        && length > budget.cap as u64
    {
        return Err(BodyRefused::OverCap {
            length,
            cap: budget.cap,
        });
    }
    let mut pace = BodyPace::new(Instant::now());
    let mut stream = body.into_data_stream();
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut received = 0usize;
    let mut share: Option<OwnedSemaphorePermit> = None;
    loop {
        let piece = match tokio::time::timeout_at(pace.deadline(), stream.next()).await {
            Err(_) => return Err(pace.fault().into()),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(BodyRefused::Broken(e.to_string())),
            Ok(Some(Ok(piece))) => piece,
        };
        received = received.saturating_add(piece.len());
        if received > budget.cap {
            return Err(BodyRefused::OverCap {
                length: received as u64,
                cap: budget.cap,
            });
        }
        let waiting = Instant::now();
        let charged = share.as_ref().map_or(0, |s| s.num_permits());
        // A body that declared its length takes all of it with its first byte, in
        // one wait: bodies that each held a part and waited for more would hold
        // each other up until every one of them was refused. A chunked body can
        // only be charged as it grows. A body larger than the whole budget is
        // charged all of it, no more.
        let wanted = match declared {
            Some(length) => usize::try_from(length).unwrap_or(usize::MAX).max(received),
            None => received,
        };
        let charge = wanted.min(budget.total).saturating_sub(charged);
        if charge > 0 {
            let more = take(budget, charge).await?;
            match share.as_mut() {
                Some(share) => share.merge(more),
                None => share = Some(more),
            }
        }
        let now = Instant::now();
        pace.arrived(piece.len(), now - waiting, now);
        pieces.push(piece);
    }
    Ok(HeldBody {
        bytes: join(pieces, received),
        _share: share,
    })
}

/// `bytes` of `budget`, waiting at most [`BUDGET_WAIT`].
async fn take(budget: &BodyBudget, bytes: usize) -> Result<OwnedSemaphorePermit, BodyRefused> {
    let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
    let acquired =
        tokio::time::timeout(BUDGET_WAIT, budget.bytes.clone().acquire_many_owned(bytes)).await;
    match acquired {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(BodyRefused::NoBudget),
    }
}

/// The pieces as one buffer; a body that came in one piece is not copied.
fn join(mut pieces: Vec<Bytes>, length: usize) -> Bytes {
    if pieces.len() <= 1 {
        return pieces.pop().unwrap_or_default();
    }
    let mut whole = Vec::with_capacity(length);
    for piece in pieces {
        whole.extend_from_slice(&piece);
    }
    Bytes::from(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked() -> HeaderMap {
        HeaderMap::new()
    }

    #[tokio::test]
    async fn a_body_is_charged_what_arrived_and_gives_it_back_when_dropped() {
        let budget = BodyBudget::new(64, 32);
        let held = read_within(&budget, &chunked(), Body::from("0123456789"))
            .await
            .expect("read");
        assert_eq!(held.bytes, "0123456789");
        assert_eq!(budget.available(), 54);
        drop(held);
        assert_eq!(budget.available(), 64);
    }

    #[tokio::test]
    async fn a_body_past_the_cap_is_refused_whatever_it_declared() {
        let budget = BodyBudget::new(64, 4);
        let refused = read_within(&budget, &chunked(), Body::from("too long")).await;
        assert_eq!(
            refused.err(),
            Some(BodyRefused::OverCap { length: 8, cap: 4 })
        );
        let mut declared = HeaderMap::new();
        declared.insert(header::CONTENT_LENGTH, "5".parse().expect("header"));
        let refused = read_within(&budget, &declared, Body::empty()).await;
        assert_eq!(
            refused.err(),
            Some(BodyRefused::OverCap { length: 5, cap: 4 })
        );
        assert_eq!(budget.available(), 64, "nothing stays charged");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_cannot_get_its_share_in_time_is_refused() {
        let budget = BodyBudget::new(8, 32);
        let first = read_within(&budget, &chunked(), Body::from("12345678"))
            .await
            .expect("read");
        let refused = read_within(&budget, &chunked(), Body::from("x")).await;
        assert_eq!(refused.err(), Some(BodyRefused::NoBudget));
        drop(first);
        assert!(
            read_within(&budget, &chunked(), Body::from("x"))
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_sends_nothing_is_cut_and_holds_nothing() {
        let budget = BodyBudget::new(8, 32);
        let silent = Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let refused = read_within(&budget, &chunked(), silent).await;
        assert_eq!(refused.err(), Some(BodyRefused::Stalled));
        assert_eq!(budget.available(), 8);
    }

    /// Two bodies that together are over the budget, each sent in two halves with
    /// a pause between: charged by halves they would each hold one half and wait
    /// for the other's until both were refused; charged their declared length at
    /// the first byte, one waits for the other and both are read.
    #[tokio::test(start_paused = true)]
    async fn bodies_that_declared_their_length_never_hold_each_other_up() {
        let budget = Arc::new(BodyBudget::new(100, 100));
        let halves = || {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
            let body = Body::from_stream(tokio_stream_of(rx));
            (tx, body)
        };
        let mut length = HeaderMap::new();
        length.insert(header::CONTENT_LENGTH, "80".parse().expect("header"));
        let (tx_a, body_a) = halves();
        let (tx_b, body_b) = halves();
        let read_a = tokio::spawn({
            let (budget, length) = (budget.clone(), length.clone());
            async move {
                read_within(&budget, &length, body_a)
                    .await
                    .map(|h| h.bytes.len())
            }
        });
        let read_b = tokio::spawn({
            let (budget, length) = (budget.clone(), length.clone());
            async move {
                read_within(&budget, &length, body_b)
                    .await
                    .map(|h| h.bytes.len())
            }
        });
        for tx in [&tx_a, &tx_b] {
            tx.send(Ok(Bytes::from(vec![b'x'; 40])))
                .await
                .expect("send");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for tx in [tx_a, tx_b] {
            tx.send(Ok(Bytes::from(vec![b'y'; 40])))
                .await
                .expect("send");
        }
        assert_eq!(read_a.await.expect("join"), Ok(80));
        assert_eq!(read_b.await.expect("join"), Ok(80));
        assert_eq!(budget.available(), 100);
    }

    /// The receiving end of a channel as a stream of body pieces.
    fn tokio_stream_of(
        mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    ) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
