//! The response state machine: fed the server's packets one by one, it says where a
//! response ends, what it contained, and when the client must speak (LOCAL INFILE).

use super::packets::{self, status};

/// What kind of answer a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// OK, ERR, EOF, LOCAL INFILE request, or result sets (COM_QUERY, COM_STMT_EXECUTE,
    /// COM_STMT_BULK_EXECUTE, COM_PROCESS_INFO and commands qcache does not know).
    Results,
    /// COM_STMT_PREPARE: OK with parameter and column definitions, or ERR.
    Prepare,
    /// COM_STMT_FETCH: rows then EOF, or ERR.
    Rows,
    /// COM_FIELD_LIST: column definitions then EOF, or ERR.
    FieldList,
    /// One packet whatever it holds (COM_STATISTICS answers a bare string).
    OnePacket,
    /// No answer at all (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA, COM_QUIT).
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    Columns(u64),
    ColumnsEof,
    Rows,
    PrepareParams { params: u64, columns: u64 },
    PrepareParamsEof { columns: u64 },
    PrepareColumns(u64),
    PrepareColumnsEof,
    Done,
}

/// What the caller does after feeding a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More packets of this response follow.
    More,
    /// The server asked for a LOCAL INFILE: relay the client's packets up to and including
    /// an empty one, then keep feeding the server's answer.
    LocalInfile,
    /// The response is complete.
    Done,
}

/// Where and how a terminating packet reported the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusAt {
    pub status: u16,
    /// Offset of the status bytes in that packet's payload.
    pub offset: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed server response: {0}")]
pub struct ResponseError(pub &'static str);

/// The error code of an ERR packet's payload.
fn err_code(p: &[u8]) -> Option<u16> {
    p.get(1..3).map(|c| u16::from_le_bytes([c[0], c[1]]))
}

/// Tracks one response. Summary fields are filled as packets go by.
#[derive(Debug, Clone)]
pub struct Response {
    expect: Expect,
    deprecate_eof: bool,
    state: State,
    /// Result sets seen (column count packets).
    pub result_sets: u32,
    /// The first result set's column count: for an execute, the columns of the statement
    /// as the server holds it now (after any re-prepare).
    pub columns: Option<u64>,
    /// OK packets seen that were not result-set terminators.
    pub oks: u32,
    pub error: bool,
    /// The error code of the final ERR, when the response ended in one.
    pub err_code: Option<u16>,
    /// Sum of warnings reported by OKs and EOFs.
    pub warnings: u32,
    /// Status flags of the last OK/EOF seen.
    pub last_status: Option<u16>,
    /// Status and its offset when the packet just fed carried one (OK/EOF); lets the relay
    /// act before that packet reaches the client.
    pub status_here: Option<StatusAt>,
    /// Rows seen.
    pub rows: u64,
    /// A cursor was opened (COM_STMT_EXECUTE with a cursor flag).
    pub cursor: bool,
    /// For COM_STMT_PREPARE: statement id, columns and parameters.
    pub prepared: Option<(u32, u16, u16)>,
    /// MariaDB progress reports seen (never part of a cached result).
    pub progress: u32,
    /// Bytes of the packets fed, with their 4-byte headers (as the client receives them
    /// on an uncompressed leg).
    pub bytes: u64,
}

impl Response {
    pub fn new(expect: Expect, deprecate_eof: bool) -> Response {
        Response {
            expect,
            deprecate_eof,
            state: match expect {
                Expect::Rows => State::Rows,
                Expect::FieldList => State::Rows,
                Expect::Nothing => State::Done,
                _ => State::Start,
            },
            result_sets: 0,
            columns: None,
            oks: 0,
            error: false,
            err_code: None,
            warnings: 0,
            last_status: None,
            status_here: None,
            rows: 0,
            cursor: false,
            prepared: None,
            progress: 0,
            bytes: 0,
        }
    }

    /// True right after a result of a multi-result ended (the next packet starts another).
    pub fn between_results(&self) -> bool {
        self.state == State::Start && self.last_status.is_some()
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn terminator(&mut self, p: &[u8], eof_form: bool) -> Result<u16, ResponseError> {
        let t =
            packets::read_terminator(p, eof_form).ok_or(ResponseError("short OK/EOF packet"))?;
        self.warnings = self.warnings.saturating_add(t.warnings as u32);
        self.last_status = Some(t.status);
        self.status_here = Some(StatusAt {
            status: t.status,
            offset: t.status_at,
        });
        Ok(t.status)
    }

    /// The end of a result or OK: more results follow when the server says so.
    fn after_status(&mut self, st: u16) -> Step {
        if st & status::MORE_RESULTS != 0 && self.expect == Expect::Results {
            self.state = State::Start;
            Step::More
        } else {
            self.state = State::Done;
            Step::Done
        }
    }

    /// Feeds the next server packet's payload.
    pub fn feed(&mut self, p: &[u8]) -> Result<Step, ResponseError> {
        self.status_here = None;
        self.bytes += p.len() as u64 + 4;
        let first = *p.first().ok_or(ResponseError("empty packet"))?;
        if first == 0xff && p.len() >= 3 && p[1] == 0xff && p[2] == 0xff {
            // MariaDB's progress report (error code 0xFFFF) for clients with
            // MARIADB_CLIENT_PROGRESS: informational, the response goes on.
            self.progress += 1;
            return Ok(Step::More);
        }
        match self.state {
            State::Done => Err(ResponseError("packet after the end of the response")),
            State::Start => self.start(first, p),
            State::Columns(n) => {
                let left = n - 1;
                self.state = if left > 0 {
                    State::Columns(left)
                } else if self.deprecate_eof {
                    State::Rows
                } else {
                    State::ColumnsEof
                };
                Ok(Step::More)
            }
            State::ColumnsEof => {
                if !packets::is_eof(p, false) {
                    return Err(ResponseError("expected EOF after column definitions"));
                }
                let st = self.terminator(p, true)?;
                if st & status::CURSOR_EXISTS != 0 {
                    self.cursor = true;
                    self.state = State::Done;
                    return Ok(Step::Done);
                }
                self.state = State::Rows;
                Ok(Step::More)
            }
            State::Rows => {
                if first == 0xff {
                    self.error = true;
                    self.err_code = err_code(p);
                    self.state = State::Done;
                    return Ok(Step::Done);
                }
                if packets::is_eof(p, self.deprecate_eof) {
                    // A classic EOF is 5 bytes; the OK that replaces it is at least 7.
                    let st = self.terminator(p, p.len() < 7)?;
                    if st & status::CURSOR_EXISTS != 0 && self.rows == 0 {
                        self.cursor = true;
                    }
                    return Ok(self.after_status(st));
                }
                self.rows += 1;
                Ok(Step::More)
            }
            State::PrepareParams { params, columns } => {
                self.state = State::PrepareParams {
                    params: params - 1,
                    columns,
                };
                if params - 1 == 0 {
                    self.state = if self.deprecate_eof {
                        State::PrepareColumns(columns)
                    } else {
                        State::PrepareParamsEof { columns }
                    };
                }
                Ok(self.prepare_next())
            }
            State::PrepareParamsEof { columns } => {
                if !packets::is_eof(p, false) {
                    return Err(ResponseError("expected EOF after parameter definitions"));
                }
                self.state = State::PrepareColumns(columns);
                Ok(self.prepare_next())
            }
            State::PrepareColumns(n) => {
                self.state = State::PrepareColumns(n - 1);
                if n - 1 == 0 {
                    self.state = if self.deprecate_eof {
                        State::Done
                    } else {
                        State::PrepareColumnsEof
                    };
                }
                Ok(self.prepare_next())
            }
            State::PrepareColumnsEof => {
                if !packets::is_eof(p, false) {
                    return Err(ResponseError("expected EOF after column definitions"));
                }
                self.state = State::Done;
                Ok(Step::Done)
            }
        }
    }

    /// The first packet of a response: what it is depends on what the command expects.
    #[inline]
    fn start(&mut self, first: u8, p: &[u8]) -> Result<Step, ResponseError> {
        match self.expect {
            Expect::OnePacket => {
                if first == 0x00 && p.len() >= 7 {
                    if self.terminator(p, false).is_ok() {
                        self.oks += 1;
                    }
                } else if first == 0xff {
                    self.error = true;
                    self.err_code = err_code(p);
                } else if packets::is_eof(p, false) {
                    let _ = self.terminator(p, true);
                }
                self.state = State::Done;
                Ok(Step::Done)
            }
            Expect::Prepare => match first {
                0xff => {
                    self.error = true;
                    self.err_code = err_code(p);
                    self.state = State::Done;
                    Ok(Step::Done)
                }
                0x00 => {
                    if p.len() < 12 {
                        return Err(ResponseError("short prepare OK"));
                    }
                    let id = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
                    let columns = u16::from_le_bytes([p[5], p[6]]);
                    let params = u16::from_le_bytes([p[7], p[8]]);
                    self.warnings = self
                        .warnings
                        .saturating_add(u16::from_le_bytes([p[10], p[11]]) as u32);
                    self.prepared = Some((id, columns, params));
                    self.state = State::PrepareParams {
                        params: params as u64,
                        columns: columns as u64,
                    };
                    Ok(self.prepare_next())
                }
                _ => Err(ResponseError("unexpected prepare response")),
            },
            _ => match first {
                0x00 => {
                    self.oks += 1;
                    let st = self.terminator(p, false)?;
                    Ok(self.after_status(st))
                }
                0xff => {
                    self.error = true;
                    self.err_code = err_code(p);
                    self.state = State::Done;
                    Ok(Step::Done)
                }
                0xfb => Ok(Step::LocalInfile),
                0xfe if p.len() < 9 => {
                    let st = self.terminator(p, true)?;
                    Ok(self.after_status(st))
                }
                _ => {
                    let (n, used) =
                        packets::read_lenenc(p).ok_or(ResponseError("bad column count"))?;
                    if used != p.len() || n == 0 {
                        return Err(ResponseError("bad column count"));
                    }
                    self.result_sets += 1;
                    self.columns.get_or_insert(n);
                    self.state = State::Columns(n);
                    Ok(Step::More)
                }
            },
        }
    }

    /// Skips the prepare phases that have nothing in them.
    fn prepare_next(&mut self) -> Step {
        loop {
            match self.state {
                State::PrepareParams { params: 0, columns } => {
                    self.state = State::PrepareColumns(columns);
                }
                State::PrepareColumns(0) => {
                    self.state = State::Done;
                }
                State::Done => return Step::Done,
                _ => return Step::More,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::packets::{eof_payload, ok_payload};

    fn run(r: &mut Response, packets: &[Vec<u8>]) -> Vec<Step> {
        packets.iter().map(|p| r.feed(p).unwrap()).collect()
    }

    fn coldef() -> Vec<u8> {
        crate::protocol::packets::column_def("c", 0xfd, 10, false).to_vec()
    }

    #[test]
    fn ok_ends() {
        let mut r = Response::new(Expect::Results, false);
        assert_eq!(
            run(&mut r, &[ok_payload(1, 0, 2, 0).to_vec()]),
            [Step::Done]
        );
        assert_eq!(r.oks, 1);
        assert_eq!(r.last_status, Some(2));
    }

    #[test]
    fn result_set_classic_eof() {
        let mut r = Response::new(Expect::Results, false);
        let steps = run(
            &mut r,
            &[
                vec![2],
                coldef(),
                coldef(),
                eof_payload(2, false).to_vec(),
                vec![1, b'a', 1, b'b'],
                eof_payload(2, false).to_vec(),
            ],
        );
        assert_eq!(steps.last(), Some(&Step::Done));
        assert_eq!(steps.iter().filter(|s| **s == Step::Done).count(), 1);
        assert_eq!((r.result_sets, r.rows), (1, 1));
        assert_eq!(r.columns, Some(2), "the result's column count");
    }

    #[test]
    fn result_set_deprecate_eof_and_more_results() {
        let mut r = Response::new(Expect::Results, true);
        let steps = run(
            &mut r,
            &[
                vec![1],
                coldef(),
                vec![1, b'x'],
                eof_payload(status::MORE_RESULTS | 2, true).to_vec(),
                vec![1],
                coldef(),
                eof_payload(2, true).to_vec(),
                ok_payload(0, 0, 2, 0).to_vec(),
            ][..7],
        );
        assert_eq!(steps[6], Step::Done);
        assert_eq!(r.result_sets, 2);
        assert_eq!(r.columns, Some(1), "the first result set's");
    }

    #[test]
    fn err_in_rows_ends() {
        let mut r = Response::new(Expect::Results, true);
        let e = crate::protocol::packets::err_payload(1317, "70100", "interrupted").to_vec();
        let steps = run(&mut r, &[vec![1], coldef(), vec![1, b'x'], e]);
        assert_eq!(steps[3], Step::Done);
        assert!(r.error);
    }

    #[test]
    fn mariadb_progress_report_is_not_the_end() {
        let mut r = Response::new(Expect::Results, false);
        assert_eq!(r.feed(b"\xfb/tmp/x").unwrap(), Step::LocalInfile);
        let progress = b"\xff\xff\xff\x01\x02\x02\x00\x00\x00\x03abc";
        assert_eq!(r.feed(progress).unwrap(), Step::More);
        assert!(!r.error);
        assert_eq!(r.feed(&ok_payload(3, 0, 2, 0)).unwrap(), Step::Done);
        assert_eq!(r.progress, 1);
    }

    #[test]
    fn local_infile_then_ok() {
        let mut r = Response::new(Expect::Results, false);
        assert_eq!(r.feed(b"\xfbfile.csv").unwrap(), Step::LocalInfile);
        assert_eq!(r.feed(&ok_payload(3, 0, 2, 0)).unwrap(), Step::Done);
    }

    #[test]
    fn cursor_open_ends_after_metadata() {
        let mut r = Response::new(Expect::Results, false);
        let steps = run(
            &mut r,
            &[
                vec![1],
                coldef(),
                eof_payload(status::CURSOR_EXISTS | 2, false).to_vec(),
            ],
        );
        assert_eq!(steps[2], Step::Done);
        assert!(r.cursor);
    }

    #[test]
    fn prepare_shapes() {
        let prep = |cols: u16, params: u16| {
            let mut p = vec![0u8];
            p.extend_from_slice(&7u32.to_le_bytes());
            p.extend_from_slice(&cols.to_le_bytes());
            p.extend_from_slice(&params.to_le_bytes());
            p.extend_from_slice(&[0, 0, 0]);
            p
        };
        let mut r = Response::new(Expect::Prepare, false);
        assert_eq!(r.feed(&prep(0, 0)).unwrap(), Step::Done);
        let mut r = Response::new(Expect::Prepare, false);
        let steps = run(
            &mut r,
            &[
                prep(1, 2),
                coldef(),
                coldef(),
                eof_payload(2, false).to_vec(),
                coldef(),
                eof_payload(2, false).to_vec(),
            ],
        );
        assert_eq!(steps.last(), Some(&Step::Done));
        assert_eq!(r.prepared, Some((7, 1, 2)));
        let mut r = Response::new(Expect::Prepare, true);
        let steps = run(&mut r, &[prep(2, 1), coldef(), coldef(), coldef()]);
        assert_eq!(steps.last(), Some(&Step::Done));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut r = Response::new(Expect::Results, false);
        assert!(r.feed(&[]).is_err());
        assert!(r.feed(&[0xfc, 1]).is_err());
        let mut r = Response::new(Expect::Results, false);
        assert!(r.feed(&[0x00]).is_err());
        let mut r = Response::new(Expect::Prepare, false);
        assert!(r.feed(&[0x00, 1]).is_err());
    }

    /// A server may send any number of results with 65535 warnings each (a long CALL); the
    /// sum saturates instead of overflowing (a panic in debug builds).
    #[test]
    fn warnings_saturate_instead_of_overflowing() {
        let mut r = Response::new(Expect::Results, false);
        let more = ok_payload(0, 0, status::MORE_RESULTS, u16::MAX);
        for _ in 0..70_000 {
            assert_eq!(r.feed(&more).unwrap(), Step::More);
        }
        assert_eq!(r.warnings, u32::MAX);
    }

    /// Packets shaped like a server's: OK/ERR/EOF/LOCAL INFILE markers, length-encoded
    /// counts, column definitions, or random bytes.
    fn server_packet() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let tail = proptest::collection::vec(any::<u8>(), 0..40);
        prop_oneof![
            (
                prop_oneof![
                    Just(0x00u8),
                    Just(0xfe),
                    Just(0xff),
                    Just(0xfb),
                    Just(0xfc),
                    1u8..5
                ],
                tail.clone()
            )
                .prop_map(|(h, t)| {
                    let mut v = vec![h];
                    v.extend(t);
                    v
                }),
            Just(coldef()),
            (any::<u16>(), any::<bool>()).prop_map(|(st, d)| eof_payload(st, d).to_vec()),
            (any::<u16>(), any::<u16>()).prop_map(|(st, w)| ok_payload(1, 2, st, w).to_vec()),
            tail,
        ]
    }

    fn expect() -> impl proptest::strategy::Strategy<Value = Expect> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Expect::Results),
            Just(Expect::Prepare),
            Just(Expect::Rows),
            Just(Expect::FieldList),
            Just(Expect::OnePacket),
            Just(Expect::Nothing),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]

        /// Whatever a server sends, the machine answers More, LocalInfile, Done or an error;
        /// it never panics, and once Done it stays done.
        #[test]
        fn any_packet_sequence_never_panics(
            e in expect(),
            deprecate_eof: bool,
            packets in proptest::collection::vec(server_packet(), 0..40),
        ) {
            let mut r = Response::new(e, deprecate_eof);
            for p in &packets {
                let was_done = r.is_done();
                match r.feed(p) {
                    Ok(_) => proptest::prop_assert!(!was_done || r.is_done()),
                    Err(_) => break,
                }
            }
        }
    }
}
