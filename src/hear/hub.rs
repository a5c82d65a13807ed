//! The server's side of hearing: which asks are still unheard, which hook run of this session
//! gets them, and the evidence that marks them heard.
//!
//! An ask sent on the channel is offered to the hooks once it is clear the channel did not
//! carry it: at once where Claude Code was started without a channel flag (no channel was
//! asked for), after [`CHANNEL_GRACE`] where it was (the message shows in the transcript
//! within that time if the channel works; if it does not, the channel is taken as deaf for
//! the rest of the session), and after [`CHANNEL_LATE`] once the channel is known to work (a
//! message Claude Code dropped). Asks of earlier sessions still unheard are offered at once.
//! Each offer goes to one hook run at a time; it is heard when that run says it printed it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::transcript::Transcript;
use super::wire::{self, Ack, Endpoint, Offer, Reply, Request};
use crate::asks::{AskRecord, Asks};
use crate::id::MarkerId;

/// Where a channel was asked for, how long an ask sent on it may take to show in the
/// transcript before the hooks offer it instead.
pub const CHANNEL_GRACE: Duration = Duration::from_millis(1000);

/// Once the channel is known to carry asks, how long one may take (Claude Code holds channel
/// messages while a turn runs) before it is taken as dropped and offered by the hooks.
pub const CHANNEL_LATE: Duration = Duration::from_secs(20);

/// How long a hook run may take to send its request, and to say what it printed.
const HOOK_REPLY: Duration = Duration::from_secs(2);

/// Whether this session's channel carries asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelState {
    /// No channel was asked for (no channel flag on Claude Code's command line), or one sent
    /// while the session was idle never reached the transcript.
    Deaf,
    /// A channel was asked for; nothing has reached the transcript yet.
    Unknown,
    /// An ask sent on it reached the transcript.
    Works,
}

/// The hub of one server: shared by the announcer, the tools and every hook connection.
pub struct Hub {
    root: PathBuf,
    trigger: String,
    asks: Asks,
    token: String,
    state: Mutex<State>,
    /// Told of every change a waiting hook may care about.
    changed: Notify,
}

struct State {
    owner: bool,
    /// Asks not heard yet, in the order they came.
    offers: Vec<Pending>,
    /// Handed to a hook run that has not said yet what it printed.
    in_flight: HashSet<MarkerId>,
    channel: ChannelState,
    transcript: Option<Transcript>,
    /// The newest waiting hook: older ones are told to exit.
    waiter: u64,
    /// Told the ids of asks once heard (the live worker: their tags may be written).
    heard_to: Option<std::sync::mpsc::Sender<Vec<MarkerId>>>,
    /// Where the endpoint file is, once written.
    endpoint: Option<(PathBuf, Endpoint)>,
}

/// An ask waiting to be heard.
struct Pending {
    offer: Offer,
    /// When the hooks may offer it.
    due: Instant,
    /// Sent on the channel (it may show in the transcript by itself).
    sent: bool,
}

impl Hub {
    /// The hub of a server on `root` for `trigger`, with the root's asks. `channel` says
    /// whether Claude Code was started with a channel flag ([`ChannelState::Unknown`]) or not.
    pub fn new(root: &Path, trigger: &str, asks: Asks, channel: ChannelState) -> Arc<Hub> {
        let state = State {
            owner: false,
            offers: Vec::new(),
            in_flight: HashSet::new(),
            channel,
            transcript: None,
            waiter: 0,
            heard_to: None,
            endpoint: None,
        };
        Arc::new(Hub {
            root: root.to_path_buf(),
            trigger: trigger.to_string(),
            asks,
            token: wire::new_token(),
            state: Mutex::new(state),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Listens on 127.0.0.1 and writes the endpoint file into `dir`, for the hooks of this
    /// session to find. `ancestors` are the processes above this one (Claude Code among them).
    pub async fn listen(
        self: &Arc<Hub>,
        dir: &Path,
        ancestors: Vec<u32>,
    ) -> std::io::Result<PathBuf> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let endpoint = Endpoint {
            pid: std::process::id(),
            port: listener.local_addr()?.port(),
            token: self.token.clone(),
            root: self.root.clone(),
            trigger: self.trigger.clone(),
            owner: self.lock().owner,
            ancestors,
            session_id: std::env::var("CLAUDE_CODE_SESSION_ID").ok(),
        };
        let path = endpoint.write(dir)?;
        self.lock().endpoint = Some((dir.to_path_buf(), endpoint));
        let hub = self.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                tokio::spawn(serve_hook(hub.clone(), stream));
            }
        });
        tracing::info!("hooks find this server at {}", path.display());
        Ok(path)
    }

    /// Removes the endpoint file (the server is ending).
    pub fn close(&self) {
        if let Some((dir, endpoint)) = self.lock().endpoint.take() {
            let _ = std::fs::remove_file(Endpoint::path(&dir, endpoint.pid));
        }
    }

    /// This server now owns the root (it announces): the asks of earlier sessions that nobody
    /// heard are offered at once.
    pub fn own(&self) {
        let records = self.asks.snapshot();
        let unheard: Vec<&AskRecord> =
            records.iter().filter(|r| r.is_pending() && !r.is_heard()).collect();
        let (heard, offers) = self.still_asked(&unheard);
        self.asks.hear(&heard);
        let mut state = self.lock();
        state.owner = true;
        let now = Instant::now();
        for offer in offers {
            if state.offers.iter().all(|p| p.offer.id != offer.id) {
                state.offers.push(Pending { offer, due: now, sent: false });
            }
        }
        if let Some((dir, endpoint)) = state.endpoint.as_mut() {
            endpoint.owner = true;
            if let Err(e) = endpoint.write(dir) {
                tracing::warn!("{}: {e}", dir.display());
            }
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Of asks recorded by earlier sessions and never heard, those whose file shows them
    /// heard after all — tagged: a tag is written only once an ask was heard (and a version
    /// before hearing tagged every ask it sent) — and, to offer, those still in their file as
    /// they were asked. One gone from its file is left to the next save of it to close.
    fn still_asked(&self, records: &[&AskRecord]) -> (Vec<MarkerId>, Vec<Offer>) {
        let (mut heard, mut offers) = (Vec::new(), Vec::new());
        for r in records {
            let Ok(source) = crate::fsio::read_source(&self.root.join(&r.file)) else { continue };
            let tagged = format!("{}{}", self.trigger, r.id.tag());
            let first_line = r.text.lines().next().unwrap_or_default();
            let holds = |needle: &str| memchr::memmem::find(&source.bytes, needle.as_bytes());
            if holds(&tagged).is_some() {
                heard.push(r.id);
            } else if holds(first_line).is_some() {
                offers.push(offer_of(r));
            }
        }
        (heard, offers)
    }

    /// Where the ids of heard asks go (the live worker, which then tags them).
    pub fn tell_heard(&self, to: std::sync::mpsc::Sender<Vec<MarkerId>>) {
        self.lock().heard_to = Some(to);
    }

    /// An ask went out on the channel (or, with `sent` false, could not): the hooks offer it
    /// unless the transcript shows it arrived. A revision replaces what is offered under its id.
    pub fn sent(&self, offer: Offer, sent: bool) {
        let mut state = self.lock();
        let now = Instant::now();
        let due = match (sent, state.channel) {
            (false, _) | (true, ChannelState::Deaf) => now,
            (true, ChannelState::Unknown) => now + CHANNEL_GRACE,
            (true, ChannelState::Works) => now + CHANNEL_LATE,
        };
        state.offers.retain(|p| p.offer.id != offer.id);
        state.offers.push(Pending { offer, due, sent });
        drop(state);
        self.changed.notify_waiters();
    }

    /// Claude named these asks in a call of a filewatch tool: heard.
    pub fn heard_by_tool(&self, ids: &[MarkerId]) {
        let mut state = self.lock();
        let ids: Vec<MarkerId> = ids
            .iter()
            .copied()
            .filter(|id| state.offers.iter().any(|p| p.offer.id == *id))
            .collect();
        self.heard(&mut state, &ids, "a filewatch tool call");
    }

    /// Marks `ids` heard: no longer offered, recorded in the ledger, and told to the worker.
    fn heard(&self, state: &mut State, ids: &[MarkerId], by: &str) {
        if ids.is_empty() {
            return;
        }
        state.offers.retain(|p| !ids.contains(&p.offer.id));
        for id in ids {
            state.in_flight.remove(id);
            tracing::info!("{id}: heard ({by})");
        }
        self.asks.hear(ids);
        if let Some(to) = &state.heard_to {
            let _ = to.send(ids.to_vec());
        }
    }

    /// Learns what a hook run says of its session (its transcript, its Claude Code process)
    /// and what the transcript now shows.
    fn note(&self, request: &Request) {
        let mut state = self.lock();
        if let Some(path) = &request.transcript_path {
            if state.transcript.as_ref().is_none_or(|t| t.path() != path) {
                state.transcript = Some(Transcript::new(path));
            }
        }
        self.read_transcript(&mut state);
    }

    /// Marks heard the offers whose ids the transcript now holds; one that was sent on the
    /// channel and never handed to a hook proves the channel works.
    fn read_transcript(&self, state: &mut State) {
        let ids: HashSet<MarkerId> = state.offers.iter().map(|p| p.offer.id).collect();
        let Some(transcript) = state.transcript.as_mut() else { return };
        let found = transcript.find(&ids);
        if found.is_empty() {
            return;
        }
        let by_channel = state.offers.iter().any(|p| {
            p.sent && found.contains(&p.offer.id) && !state.in_flight.contains(&p.offer.id)
        });
        if by_channel && state.channel != ChannelState::Works {
            tracing::info!("the channel carries asks in this session");
            state.channel = ChannelState::Works;
        }
        self.heard(state, &found, "in the transcript");
    }

    /// The offers due now, at most [`wire::MAX_OFFERS`], taken out for one hook run (they
    /// come back if it does not say it printed them). An ask sent on an unproven channel that
    /// is due and not in the transcript makes the channel deaf: the rest are due at once.
    fn take_due(&self, state: &mut State, now: Instant) -> Vec<Offer> {
        if !state.owner {
            return Vec::new();
        }
        self.read_transcript(state);
        self.drop_closed(state);
        let overdue_on_channel = state
            .offers
            .iter()
            .any(|p| p.sent && p.due <= now && !state.in_flight.contains(&p.offer.id));
        if overdue_on_channel && state.channel == ChannelState::Unknown {
            tracing::info!(
                "an ask sent on the channel is not in the transcript: the hooks carry them"
            );
            state.channel = ChannelState::Deaf;
            for p in state.offers.iter_mut().filter(|p| p.sent) {
                p.due = p.due.min(now);
            }
        }
        let State { offers, in_flight, .. } = state;
        let mut room = wire::MAX_TEXT;
        let due: Vec<Offer> = offers
            .iter()
            .filter(|p| p.due <= now && !in_flight.contains(&p.offer.id))
            .take(wire::MAX_OFFERS)
            .take_while(|p| {
                // The element around an ask is a few hundred bytes; the first always goes.
                let size = p.offer.text.len() + p.offer.file.len() + 200;
                let fits = size <= room || room == wire::MAX_TEXT;
                room = room.saturating_sub(size);
                fits
            })
            .map(|p| p.offer.clone())
            .collect();
        in_flight.extend(due.iter().map(|o| o.id));
        due
    }

    /// Drops the offers whose asks are no longer waiting to be heard, as the ledger now says:
    /// resolved (by hand, its marker deleted), or heard through another process.
    fn drop_closed(&self, state: &mut State) {
        if state.offers.is_empty() {
            return;
        }
        let offered: HashSet<MarkerId> = state.offers.iter().map(|p| p.offer.id).collect();
        let waiting: HashSet<MarkerId> = self.asks.view(|records| {
            let open = |r: &&AskRecord| r.is_pending() && !r.is_heard() && offered.contains(&r.id);
            records.iter().filter(open).map(|r| r.id).collect()
        });
        state.offers.retain(|p| waiting.contains(&p.offer.id));
    }

    /// When the next offer falls due, if one is waiting.
    fn next_due(state: &State) -> Option<Instant> {
        if !state.owner {
            return None;
        }
        state.offers.iter().filter(|p| !state.in_flight.contains(&p.offer.id)).map(|p| p.due).min()
    }

    /// A hook run printed `printed` of `handed`; the rest are offered again.
    fn acked(&self, handed: &[Offer], printed: &[MarkerId]) {
        let mut state = self.lock();
        for offer in handed {
            state.in_flight.remove(&offer.id);
        }
        let printed: Vec<MarkerId> =
            printed.iter().copied().filter(|id| handed.iter().any(|o| o.id == *id)).collect();
        self.heard(&mut state, &printed, "printed by a hook");
        drop(state);
        if printed.len() < handed.len() {
            self.changed.notify_waiters();
        }
    }

    /// How many asks are waiting to be heard (for `doctor` and tests).
    pub fn unheard(&self) -> usize {
        self.lock().offers.len()
    }
}

/// The offer of an ask recorded by an earlier session.
fn offer_of(r: &AskRecord) -> Offer {
    Offer {
        id: r.id,
        file: r.file.clone(),
        line: r.line,
        end_line: r.line + r.lines.saturating_sub(1),
        text: r.text.clone(),
        symbol: None,
        symbol_lines: None,
        revised: false,
    }
}

/// One hook run's connection: its request, then what it is handed, then its ack.
async fn serve_hook(hub: Arc<Hub>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read.take(wire::MAX_LINE as u64 * 2));
    let Some(request) = read_json::<Request>(&mut read).await else { return };
    if !wire::same_token(&request.token, &hub.token) {
        tracing::debug!("a hook connection with a wrong token; closed");
        return;
    }
    hub.note(&request);
    let handed = if request.wait {
        match wait_for_offers(&hub, &mut read, &mut write).await {
            Some(handed) => handed,
            None => return,
        }
    } else {
        let handed = {
            let mut state = hub.lock();
            hub.take_due(&mut state, Instant::now())
        };
        if !send(&mut write, &Reply::Asks(handed.clone())).await {
            hub.acked(&handed, &[]);
            return;
        }
        handed
    };
    if handed.is_empty() {
        return;
    }
    let ack = tokio::time::timeout(HOOK_REPLY, read_json::<Ack>(&mut read)).await;
    let printed = ack.ok().flatten().map(|a| a.printed).unwrap_or_default();
    hub.acked(&handed, &printed);
}

/// A waiting hook run: blocks (no timer while nothing is due) until there are asks to hand it
/// — returned, already sent — or it is superseded by a newer one (told to exit) or gone.
async fn wait_for_offers(
    hub: &Arc<Hub>,
    read: &mut (impl AsyncBufReadExt + AsyncReadExt + Unpin),
    write: &mut OwnedWriteHalf,
) -> Option<Vec<Offer>> {
    let me = {
        let mut state = hub.lock();
        state.waiter += 1;
        state.waiter
    };
    hub.changed.notify_waiters(); // an older waiter of this session may exit now
    let mut probe = [0u8; 1];
    loop {
        let notified = hub.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (superseded, handed, next) = {
            let mut state = hub.lock();
            if state.waiter != me {
                (true, Vec::new(), None)
            } else {
                let handed = hub.take_due(&mut state, Instant::now());
                (false, handed, Hub::next_due(&state))
            }
        };
        if superseded {
            let _ = send(write, &Reply::Exit).await;
            return None;
        }
        if !handed.is_empty() {
            if send(write, &Reply::Asks(handed.clone())).await {
                return Some(handed);
            }
            hub.acked(&handed, &[]);
            return None;
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut notified => {}
            () = sleep => {}
            // The hook sends nothing before its reply: anything here is its end (killed, or its
            // session ended).
            _ = read.read(&mut probe) => return None,
        }
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(
    read: &mut (impl AsyncBufReadExt + Unpin),
) -> Option<T> {
    let mut line = String::new();
    match tokio::time::timeout(HOOK_REPLY, read.read_line(&mut line)).await {
        Ok(Ok(n)) if n > 0 && line.len() <= wire::MAX_LINE => serde_json::from_str(&line).ok(),
        _ => None,
    }
}

async fn send(write: &mut OwnedWriteHalf, reply: &Reply) -> bool {
    write.write_all(&wire::line(reply)).await.is_ok() && write.flush().await.is_ok()
}

/// The hub's own view for `doctor`: the channel as this session has shown it.
impl Hub {
    /// Whether this session's channel carries asks, as far as shown.
    pub fn channel(&self) -> ChannelState {
        self.lock().channel
    }
}
