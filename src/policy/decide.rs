//! Policy: one read's decisions as a sequence of steps, sans-IO. A text SELECT, an execute of
//! a prepared SELECT and `QCACHE EXPLAIN` of either drive this one machine: each [`Step`] it
//! returns is a question for the driver (ask the server who the session is, say how the
//! read came, look the key up) or the decision itself; the driver answers with an
//! [`Answer`] and asks again. The order of the steps lives here only, so no path can skip
//! one or take them in another order; what each step decides is in `policy::read`.
//!
//! ```text
//! admit ──refused──▶ (text: Local?) ──▶ Decided(relay)
//!   │
//! Identify ─▶ Via ─keyable?─refused──▶ Decided(relay)
//!                   │
//!                  Key ─▶ Consult (when a view allows) ─served─▶ Served
//!                          │ missed
//!                         (text: Local?) ─answered─▶ Served
//!                          │
//!                         Plan ─▶ Decided(fill or relay, in the view)
//! ```

use super::read::{self, Planned, Session, Via};
use super::reason::Reason;
use super::snapshot::ReadView;
use crate::analysis::Hint;

/// What the driver does next, or the decision.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<S, P> {
    /// Ask who the session is, reading back first what a trigger may have changed
    /// (`Session::identify_for`): [`Answer::Identified`].
    Identify,
    /// Say how the read came (an execute's prepare-time context is compared now, after the
    /// read-back) and the session's read view: [`Answer::Came`].
    Via,
    /// The read can be keyed: build (or keep) its key: [`Answer::Keyed`].
    Key,
    /// Look the key up in this view and serve an entry the session may be served (L1,
    /// confirmed by L2 where entries are shared): [`Answer::Looked`].
    Consult(ReadView<S>),
    /// A text read qcache may answer itself (a session variable it follows):
    /// [`Answer::Local`].
    Local,
    /// Plan the miss (its tables, the operator's rules): [`Answer::Planned`].
    Plan,
    /// Served from the cache or answered locally: nothing goes upstream.
    Served,
    /// The decision: fill the cache with the result, or relay it counting why, in the view
    /// the cache was consulted in (None when it was not).
    Decided(Planned<P>, Option<ReadView<S>>),
}

/// The driver's answer to a [`Step`]. `P` is the plan; a driver on the hit path keeps its
/// plan itself and passes `()`, so that steps and answers stay a few words long.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer<S, P> {
    /// To [`Step::Identify`]: whether the session is identified.
    Identified(bool),
    /// To [`Step::Via`]: how the read came, the session's read view (None when it cannot
    /// use the cache at all) and whether hits are suspended (the binlog tail fell behind).
    Came {
        via: Via,
        view: Option<ReadView<S>>,
        hits_suspended: bool,
    },
    /// To [`Step::Key`].
    Keyed,
    /// To [`Step::Consult`]: whether an entry was served.
    Looked(bool),
    /// To [`Step::Local`]: whether qcache answered the read itself.
    Local(bool),
    /// To [`Step::Plan`]: the plan, or why the read cannot be cached.
    Planned(Result<P, Reason>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Identifying,
    Coming,
    Keying,
    Consulting,
    Local,
    Planning,
    Done,
}

/// One read's decisions in progress (see the module's doc).
#[derive(Debug)]
pub struct Decide<S> {
    stage: Stage,
    /// A COM_QUERY SELECT (or EXPLAIN of one): it may be answered locally.
    text: bool,
    /// The statement's own bytes were already looked up before the scan: not again.
    looked_up: bool,
    identified: bool,
    /// Why the read was refused at admission, while the text path asks [`Step::Local`].
    refused: Option<Reason>,
    view: Option<ReadView<S>>,
}

impl<S: Copy> Decide<S> {
    /// Starts a read: `s` what the session is, `hint` the statement's cache hint, `text`
    /// whether it came as text, `looked_up` whether its bytes were already looked up.
    #[inline(always)]
    pub fn start<P>(s: &Session, hint: Hint, text: bool, looked_up: bool) -> (Self, Step<S, P>) {
        let mut d = Decide {
            stage: Stage::Identifying,
            text,
            looked_up,
            identified: false,
            refused: None,
            view: None,
        };
        let step = match read::admit(s, hint) {
            Ok(()) => Step::Identify,
            Err(reason) => d.refuse(reason),
        };
        (d, step)
    }

    /// The next step, given the answer to the last one. An answer that does not fit the
    /// step asked is a driver's bug: the read is relayed uncached. Inlined: on an
    /// execute's hit path the calls cost about a hundred instructions per hit otherwise.
    #[inline(always)]
    pub fn next<P>(&mut self, answer: Answer<S, P>) -> Step<S, P> {
        match (self.stage, answer) {
            (Stage::Identifying, Answer::Identified(identified)) => {
                self.identified = identified;
                self.stage = Stage::Coming;
                Step::Via
            }
            (
                Stage::Coming,
                Answer::Came {
                    via,
                    view,
                    hits_suspended,
                },
            ) => match read::keyable(&via, self.identified) {
                Err(reason) => self.decided(read::refused(reason)),
                Ok(()) => {
                    self.view =
                        view.and_then(|v| read::consult_view(v, hits_suspended, self.identified));
                    self.stage = Stage::Keying;
                    Step::Key
                }
            },
            (Stage::Keying, Answer::Keyed) => match self.view {
                Some(view) if !self.looked_up => {
                    self.stage = Stage::Consulting;
                    Step::Consult(view)
                }
                _ => self.missed(),
            },
            (Stage::Consulting, Answer::Looked(true)) | (Stage::Local, Answer::Local(true)) => {
                self.stage = Stage::Done;
                Step::Served
            }
            (Stage::Consulting, Answer::Looked(false)) => self.missed(),
            (Stage::Local, Answer::Local(false)) => match self.refused {
                Some(reason) => self.decided(read::refused(reason)),
                None => {
                    self.stage = Stage::Planning;
                    Step::Plan
                }
            },
            (Stage::Planning, Answer::Planned(plan)) => {
                let planned = read::settle(plan, self.identified);
                let view = self.view;
                self.stage = Stage::Done;
                Step::Decided(planned, view)
            }
            _ => self.decided(read::refused(Reason::UnexpectedShape)),
        }
    }

    /// The machine's first steps at once, for a session with nothing to ask (identified,
    /// no setting to read back): `start`, `Identified(true)`, `Came` and `Keyed` as the
    /// machine takes them. Some(view) when the key is to be looked up in `view` now (the
    /// machine would ask [`Step::Consult`]); None when the machine must decide the read from
    /// its start. A hit's shortcut, which spares the driver a round of its loop per step
    /// (`one_step_at_once_consults_where_the_machine_does` proves it the machine's).
    #[inline(always)]
    pub fn consult_at_once(
        s: &Session,
        hint: Hint,
        via: &Via,
        view: Option<ReadView<S>>,
        hits_suspended: bool,
    ) -> Option<ReadView<S>> {
        read::admit(s, hint).ok()?;
        read::keyable(via, true).ok()?;
        read::consult_view(view?, hits_suspended, true)
    }

    /// Refused at admission: a text read may still be answered locally first.
    #[inline(always)]
    fn refuse<P>(&mut self, reason: Reason) -> Step<S, P> {
        if self.text {
            self.refused = Some(reason);
            self.stage = Stage::Local;
            Step::Local
        } else {
            self.decided(read::refused(reason))
        }
    }

    /// Not served from the cache: a text read may be answered locally, else it is planned.
    #[inline(always)]
    fn missed<P>(&mut self) -> Step<S, P> {
        if self.text {
            self.stage = Stage::Local;
            Step::Local
        } else {
            self.stage = Stage::Planning;
            Step::Plan
        }
    }

    #[inline(always)]
    fn decided<P>(&mut self, planned: Planned<P>) -> Step<S, P> {
        self.stage = Stage::Done;
        Step::Decided(planned, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QueryCacheType;
    use read::Execute;

    type St = Step<u32, &'static str>;
    type An = Answer<u32, &'static str>;

    fn on() -> Session {
        Session {
            qct: QueryCacheType::On,
            lost_track: false,
            temporaries_unknown: false,
            quiet: None,
        }
    }

    fn came<P>(via: Via, view: Option<ReadView<u32>>, hits_suspended: bool) -> Answer<u32, P> {
        Answer::Came {
            via,
            view,
            hits_suspended,
        }
    }

    fn relay(reason: Reason, cacheable: bool) -> St {
        Step::Decided(Planned::Relay { reason, cacheable }, None)
    }

    /// Drives a read: the steps the machine asks, in order, given the answers the driver
    /// gives (each answer answers the step before it).
    fn drive(s: Session, hint: Hint, text: bool, looked_up: bool, answers: Vec<An>) -> Vec<St> {
        let (mut d, first) = Decide::<u32>::start(&s, hint, text, looked_up);
        let mut steps = vec![first];
        for a in answers {
            steps.push(d.next(a));
        }
        steps
    }

    const EXEC: Execute = Execute {
        cursor: false,
        cursor_open: false,
        long_data: false,
        bulk_seen: false,
        context_moved: None,
        malformed: false,
    };

    /// One row per path through the machine.
    #[test]
    fn one_row_per_path() {
        let plain = Some(ReadView::Plain);
        let exec = Via::Execute(EXEC);
        let cursor = Via::Execute(Execute {
            cursor: true,
            ..EXEC
        });
        let off = Session {
            qct: QueryCacheType::Off,
            ..on()
        };
        #[allow(clippy::type_complexity)]
        let rows: Vec<(&str, Session, bool, bool, Vec<An>, Vec<St>)> = vec![
            (
                "text hit",
                on(),
                true,
                false,
                vec![
                    Answer::Identified(true),
                    came(Via::Text, plain, false),
                    Answer::Keyed,
                    Answer::Looked(true),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Consult(ReadView::Plain),
                    Step::Served,
                ],
            ),
            (
                "text miss, filled",
                on(),
                true,
                false,
                vec![
                    Answer::Identified(true),
                    came(Via::Text, plain, false),
                    Answer::Keyed,
                    Answer::Looked(false),
                    Answer::Local(false),
                    Answer::Planned(Ok("plan")),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Consult(ReadView::Plain),
                    Step::Local,
                    Step::Plan,
                    Step::Decided(Planned::Fill("plan"), plain),
                ],
            ),
            (
                "text already looked up before the scan: not again",
                on(),
                true,
                true,
                vec![
                    Answer::Identified(true),
                    came(Via::Text, plain, false),
                    Answer::Keyed,
                    Answer::Local(false),
                    Answer::Planned(Ok("plan")),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Local,
                    Step::Plan,
                    Step::Decided(Planned::Fill("plan"), plain),
                ],
            ),
            (
                "text answered locally after a miss",
                on(),
                true,
                false,
                vec![
                    Answer::Identified(true),
                    came(Via::Text, plain, false),
                    Answer::Keyed,
                    Answer::Looked(false),
                    Answer::Local(true),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Consult(ReadView::Plain),
                    Step::Local,
                    Step::Served,
                ],
            ),
            (
                "text refused at admission, not answered locally",
                off,
                true,
                false,
                vec![Answer::Local(false)],
                vec![Step::Local, relay(Reason::NotRequested, false)],
            ),
            (
                "text refused at admission, answered locally",
                off,
                true,
                false,
                vec![Answer::Local(true)],
                vec![Step::Local, Step::Served],
            ),
            (
                "execute refused at admission: no local answer",
                off,
                false,
                false,
                vec![],
                vec![relay(Reason::NotRequested, false)],
            ),
            (
                "execute hit",
                on(),
                false,
                false,
                vec![
                    Answer::Identified(true),
                    came(exec, plain, false),
                    Answer::Keyed,
                    Answer::Looked(true),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Consult(ReadView::Plain),
                    Step::Served,
                ],
            ),
            (
                "execute miss: planned without a local answer",
                on(),
                false,
                false,
                vec![
                    Answer::Identified(true),
                    came(exec, plain, false),
                    Answer::Keyed,
                    Answer::Looked(false),
                    Answer::Planned(Err(Reason::UnknownTable)),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Consult(ReadView::Plain),
                    Step::Plan,
                    Step::Decided(
                        Planned::Relay {
                            reason: Reason::UnknownTable,
                            cacheable: false,
                        },
                        plain,
                    ),
                ],
            ),
            (
                "execute not keyable: relayed before any key",
                on(),
                false,
                false,
                vec![Answer::Identified(true), came(cursor, plain, false)],
                vec![Step::Identify, Step::Via, relay(Reason::Cursor, false)],
            ),
            (
                "execute of an unidentified session: not keyable",
                on(),
                false,
                false,
                vec![Answer::Identified(false), came(exec, plain, false)],
                vec![
                    Step::Identify,
                    Step::Via,
                    relay(Reason::IdentityUnknown, false),
                ],
            ),
            (
                "text of an unidentified session: planned, then relayed as cacheable",
                on(),
                true,
                false,
                vec![
                    Answer::Identified(false),
                    came(Via::Text, plain, false),
                    Answer::Keyed,
                    Answer::Local(false),
                    Answer::Planned(Ok("plan")),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Local,
                    Step::Plan,
                    relay(Reason::IdentityUnknown, true),
                ],
            ),
            (
                "hits suspended: no lookup, the miss decides in no view",
                on(),
                false,
                false,
                vec![
                    Answer::Identified(true),
                    came(exec, plain, true),
                    Answer::Keyed,
                    Answer::Planned(Ok("plan")),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Plan,
                    Step::Decided(Planned::Fill("plan"), None),
                ],
            ),
            (
                "no read view: no lookup",
                on(),
                false,
                false,
                vec![
                    Answer::Identified(true),
                    came(exec, None, false),
                    Answer::Keyed,
                    Answer::Planned(Ok("plan")),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Plan,
                    Step::Decided(Planned::Fill("plan"), None),
                ],
            ),
            (
                "a transaction's view is consulted as it is",
                on(),
                false,
                false,
                vec![
                    Answer::Identified(true),
                    came(exec, Some(ReadView::Snapshot(7)), false),
                    Answer::Keyed,
                    Answer::Looked(false),
                    Answer::Planned(Ok("plan")),
                ],
                vec![
                    Step::Identify,
                    Step::Via,
                    Step::Key,
                    Step::Consult(ReadView::Snapshot(7)),
                    Step::Plan,
                    Step::Decided(Planned::Fill("plan"), Some(ReadView::Snapshot(7))),
                ],
            ),
            (
                "an answer out of turn: relayed uncached",
                on(),
                true,
                false,
                vec![Answer::Looked(true)],
                vec![Step::Identify, relay(Reason::UnexpectedShape, false)],
            ),
        ];
        for (what, s, text, looked_up, answers, want) in rows {
            assert_eq!(
                drive(s, Hint::None, text, looked_up, answers),
                want,
                "{what}"
            );
        }
    }

    /// The shortcut asks a lookup exactly where the machine, driven for an identified
    /// session, asks one: for every session, hint, via, view and suspension.
    #[test]
    fn one_step_at_once_consults_where_the_machine_does() {
        let sessions = [
            on(),
            Session {
                qct: QueryCacheType::Off,
                ..on()
            },
            Session {
                qct: QueryCacheType::Demand,
                ..on()
            },
            Session {
                lost_track: true,
                ..on()
            },
            Session {
                temporaries_unknown: true,
                ..on()
            },
            Session {
                quiet: Some(Reason::Profiling),
                ..on()
            },
        ];
        let vias = [
            Via::Text,
            Via::Execute(EXEC),
            Via::Execute(Execute {
                cursor: true,
                ..EXEC
            }),
            Via::Execute(Execute {
                cursor_open: true,
                ..EXEC
            }),
            Via::Execute(Execute {
                long_data: true,
                ..EXEC
            }),
            Via::Execute(Execute {
                bulk_seen: true,
                ..EXEC
            }),
            Via::Execute(Execute {
                context_moved: Some(Reason::PreparedContextMoved),
                ..EXEC
            }),
            Via::Execute(Execute {
                malformed: true,
                ..EXEC
            }),
        ];
        let views = [
            None,
            Some(ReadView::Plain),
            Some(ReadView::Snapshot(4)),
            Some(ReadView::Establishing(None)),
        ];
        for s in sessions {
            for hint in [Hint::None, Hint::SqlCache, Hint::SqlNoCache] {
                for via in vias {
                    for view in views {
                        for suspended in [false, true] {
                            let text = via == Via::Text;
                            let (mut d, mut step) =
                                Decide::<u32>::start::<()>(&s, hint, text, false);
                            let machine = loop {
                                let answer = match step {
                                    Step::Identify => Answer::Identified(true),
                                    Step::Via => came(via, view, suspended),
                                    Step::Key => Answer::Keyed,
                                    Step::Consult(v) => break Some(v),
                                    _ => break None,
                                };
                                step = d.next(answer);
                            };
                            assert_eq!(
                                Decide::consult_at_once(&s, hint, &via, view, suspended),
                                machine,
                                "{s:?} {hint:?} {via:?} {view:?} {suspended}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Every reason admission refuses with reaches the decision, on both paths.
    #[test]
    fn admission_refusals_reach_the_decision() {
        let sessions = [
            (
                Session {
                    lost_track: true,
                    ..on()
                },
                Reason::SessionUntracked,
            ),
            (
                Session {
                    temporaries_unknown: true,
                    ..on()
                },
                Reason::TemporariesUnknown,
            ),
            (
                Session {
                    quiet: Some(Reason::OptimizerTrace),
                    ..on()
                },
                Reason::OptimizerTrace,
            ),
        ];
        for (s, reason) in sessions {
            assert_eq!(
                drive(s, Hint::None, false, false, vec![]),
                vec![relay(reason, false)]
            );
            assert_eq!(
                drive(s, Hint::None, true, false, vec![Answer::Local(false)]),
                vec![Step::Local, relay(reason, false)]
            );
        }
        assert_eq!(
            drive(on(), Hint::SqlNoCache, false, false, vec![]),
            vec![relay(Reason::NotRequested, false)]
        );
    }

    /// A text read and a clean execute take the same decision for every session, hint and
    /// answer: the paths differ only by the local answer a text read may get.
    #[test]
    fn text_and_a_clean_execute_reach_the_same_decision() {
        let sessions = [
            on(),
            Session {
                qct: QueryCacheType::Demand,
                ..on()
            },
            Session {
                lost_track: true,
                ..on()
            },
        ];
        let plans: [Result<&'static str, Reason>; 2] = [Ok("plan"), Err(Reason::NoTable)];
        for s in sessions {
            for hint in [Hint::None, Hint::SqlCache, Hint::SqlNoCache] {
                for identified in [true, false] {
                    for view in [None, Some(ReadView::Plain), Some(ReadView::Snapshot(3))] {
                        for plan in plans {
                            let last = |text: bool| {
                                let via = if text { Via::Text } else { Via::Execute(EXEC) };
                                let (mut d, mut step) = Decide::<u32>::start(&s, hint, text, false);
                                loop {
                                    let answer = match step {
                                        Step::Identify => Answer::Identified(identified),
                                        Step::Via => came(via, view, false),
                                        Step::Key => Answer::Keyed,
                                        Step::Consult(_) => Answer::Looked(false),
                                        Step::Local => Answer::Local(false),
                                        Step::Plan => Answer::Planned(plan),
                                        done => return done,
                                    };
                                    step = d.next(answer);
                                }
                            };
                            let (t, e) = (last(true), last(false));
                            // An execute is not keyed for an unknown session; a text read is
                            // planned first, so that a read the cache could never hold
                            // counts its own reason: both are relayed.
                            let relayed =
                                |s: &St| matches!(s, Step::Decided(Planned::Relay { .. }, None));
                            let same = if identified {
                                t == e
                            } else {
                                relayed(&t) && relayed(&e)
                            };
                            assert!(
                                same,
                                "{s:?} {hint:?} {identified} {view:?} {plan:?}: {t:?} vs {e:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
