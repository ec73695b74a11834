//! A turn run as a request of the session's event bus: its events published there for every
//! follower, whichever front end started it.

use crate::error::Error;
use crate::follow::Following;
use crate::host::Host;
use crate::{bus, elicit, events, messages, reply};
use std::sync::Arc;

/// A turn's sink that also publishes every event to the session's bus under `request_id`, so
/// a follower of `/sessions/{id}/events` sees a turn another front end (ACP) runs.
pub fn also_on_bus(
    host: &Host,
    session_id: &str,
    request_id: &str,
    main: Arc<dyn events::Sink>,
) -> Arc<dyn events::Sink> {
    let bus = bus::BusSink { bus: host.buses.get_or_create(session_id), request_id: request_id.to_string() };
    Arc::new(bus::Also { main, bus })
}

/// The threads that run the turns `start_request` starts, kept between turns (a thread
/// started per turn cost a `clone` and its stack every turn); one ends after `KEEP` without a
/// turn.
static SESSION_TURNS: gosling_util::Workers = gosling_util::Workers::new("session-turn", KEEP);

/// The threads of the turns a front end streams itself (`Host::start_turn`: `/reply`, an ACP
/// prompt), kept as `start_request`'s are.
static TURNS: gosling_util::Workers = gosling_util::Workers::new("turn", KEEP);

/// How long a kept turn thread waits for the next turn before it ends: longer than a person
/// takes to read an answer and write the next message, so a conversation starts no thread.
const KEEP: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs a turn in the background as request `request_id` of the session's bus: its events are
/// published there, a failure to start is an Error event, and Finish always comes last
/// (after completion, cancel and error). `Err(Error::RequestActive)` when a request is already
/// active.
pub fn start_request(
    bus: &Arc<bus::Bus>,
    request_id: &str,
    turn: Result<reply::Turn, Error>,
    elicitations: Arc<elicit::Elicitations>,
) -> Result<(), Error> {
    let (cancel, done) = bus.begin(request_id).ok_or(Error::RequestActive)?;
    let sink: Arc<dyn events::Sink> = Arc::new(bus::BusSink { bus: bus.clone(), request_id: request_id.to_string() });
    let (b, rid) = (bus.clone(), request_id.to_string());
    let spawned = SESSION_TURNS.run(move || {
        let outcome = match turn {
            Ok(turn) => turn.run(sink.clone(), cancel, &elicitations),
            Err(e) => {
                sink.emit(events::Event::Error(e.to_string()));
                reply::Outcome::Failed
            }
        };
        if outcome.failed() {
            sink.emit(events::Event::Finish(messages::Tokens::default()));
        }
        b.end(&rid);
        drop(done);
    });
    if let Err(e) = spawned {
        log::error!("session turn: cannot start a thread: {e}");
        bus.end(request_id);
        bus.publish(&events::Event::Error(format!("cannot start the turn: {e}")), request_id);
        bus.publish(&events::Event::Finish(messages::Tokens::default()), request_id);
    }
    Ok(())
}

impl Host {
    /// Runs `turn` on a kept turn thread, its events into `sink` (`Turn::run`); its outcome
    /// comes on the returned channel when it ends (none if it panicked). The error is the
    /// thread's that could not start.
    pub fn start_turn(
        self: &Arc<Self>,
        turn: reply::Turn,
        sink: Arc<dyn events::Sink>,
        cancel: crossbeam_channel::Receiver<()>,
    ) -> std::io::Result<crossbeam_channel::Receiver<reply::Outcome>> {
        let (done, outcome) = crossbeam_channel::bounded(1);
        let host = self.clone();
        TURNS.run(move || {
            let _ = done.send(host.run_turn(turn, sink, cancel));
        })?;
        Ok(outcome)
    }
}

/// Following a session (`follow`): what front ends call.
impl Host {
    /// The session's event bus with its follower registered: it carries this process's turns
    /// and, while the registration lives, the messages other processes append to the session.
    /// `SessionNotFound` when there is no such session.
    pub fn follow_live(&self, id: &str) -> Result<(Arc<bus::Bus>, Following), Error> {
        let bus = self.buses.get_or_create(id);
        let following = self.live.join(id, Some(bus.clone()), None)?;
        Ok((bus, following))
    }

    /// Hands `sink` every message another process appends to session `id` from now on, as an
    /// `Event::Message`, until the registration drops or `sink` answers false.
    pub fn follow_others(&self, id: &str, sink: Arc<dyn events::Sink>) -> Result<Following, Error> {
        self.live.join(id, None, Some(sink))
    }
}
