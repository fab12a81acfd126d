//! The answer to a statement qcache sends for itself (identity, privileges, context
//! read-back, the diagnostics resetter, a replay), kept as far as qcache reads it: the
//! response's summary, the ERR payload, the first rows. Sans-IO: the session feeds it the
//! packets it reads and relays none of them.

use super::response::{Expect, Response, ResponseError, Step};
use super::rows::{self, Values};

/// More rows than any private question asks for (a read-back is one row, a probe a few); a
/// replay's or a resetter's rows beyond these are read and dropped.
pub const MAX_ROWS: usize = 64;

/// One private statement's answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The response machine's summary: error, warnings, last status flags.
    pub resp: Response,
    /// The payloads of its first [`MAX_ROWS`] rows.
    pub rows: Vec<Vec<u8>>,
    /// The ERR payload, when it ended in one.
    pub err: Option<Vec<u8>>,
}

impl Answer {
    pub fn new(deprecate_eof: bool) -> Answer {
        Answer {
            resp: Response::new(Expect::Results, deprecate_eof),
            rows: Vec::new(),
            err: None,
        }
    }

    /// Feeds one packet of the answer.
    pub fn feed(&mut self, p: &[u8]) -> Result<Step, ResponseError> {
        let before = self.resp.rows;
        let step = self.resp.feed(p)?;
        if self.resp.rows > before {
            if self.rows.len() < MAX_ROWS {
                self.rows.push(p.to_vec());
            }
        } else if p.first() == Some(&0xff) {
            // No row or column definition starts with 0xff (not a length prefix).
            self.err = Some(p.to_vec());
        }
        Ok(step)
    }

    /// Answered without an error or a warning.
    pub fn clean(&self) -> bool {
        !self.resp.error && self.resp.warnings == 0
    }

    /// A one-row, one-column question answering 1 or 0 (an error is a no).
    pub fn yes(&self) -> bool {
        !self.resp.error
            && self
                .first_row()
                .is_some_and(|r| r.first() == Some(&Some("1".to_string())))
    }

    /// The first row's columns up to the first that cannot be read (None: an error, or no
    /// row): an identity question reads its columns by position, a missing one is unknown.
    pub fn first_row(&self) -> Option<Values> {
        if self.resp.error {
            return None;
        }
        self.rows.first().map(|p| rows::text_row_prefix(p))
    }

    /// Its rows, each whole (a row cut short is dropped); None for an error.
    pub fn text_rows(&self) -> Option<Vec<Values>> {
        if self.resp.error {
            return None;
        }
        Some(self.rows.iter().filter_map(|p| rows::text_row(p)).collect())
    }

    /// The server's ERR payload, if it refused the statement.
    pub fn refusal(self) -> Option<Vec<u8>> {
        if self.resp.error {
            self.err
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lenenc(v: &str) -> Vec<u8> {
        let mut p = vec![v.len() as u8];
        p.extend_from_slice(v.as_bytes());
        p
    }

    fn row(values: &[Option<&str>]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|v| v.map_or(vec![0xfb], lenenc))
            .collect()
    }

    const OK: &[u8] = &[0x00, 0, 0, 0x02, 0, 0, 0];
    const EOF: &[u8] = &[0xfe, 0, 0, 0x02, 0];
    const EOF_WARNED: &[u8] = &[0xfe, 1, 0, 0x02, 0];
    const ERR: &[u8] = &[
        0xff, 0x16, 0x04, b'#', b'4', b'2', b'0', b'0', b'0', b'n', b'o',
    ];

    /// A result set of `rows` (classic protocol: EOF after the columns and after the rows),
    /// ending in `end`.
    fn result(rows: &[Vec<u8>], end: &[u8]) -> Vec<Vec<u8>> {
        let width = 1;
        let mut out = vec![vec![width]];
        out.push(
            b"\x03def\x00\x00\x00\x01a\x00\x0c\x21\x00\x01\x00\x00\x00\xfd\x00\x00\x00\x00\x00"
                .to_vec(),
        );
        out.push(EOF.to_vec());
        out.extend(rows.iter().cloned());
        out.push(end.to_vec());
        out
    }

    fn answer(packets: &[Vec<u8>]) -> Answer {
        let mut a = Answer::new(false);
        for (i, p) in packets.iter().enumerate() {
            let step = a.feed(p).unwrap();
            assert_eq!(step == Step::Done, i + 1 == packets.len(), "packet {i}");
        }
        a
    }

    /// What each kind of answer means to each question: one row per answer.
    #[test]
    fn what_an_answer_says() {
        struct Row {
            name: &'static str,
            packets: Vec<Vec<u8>>,
            yes: bool,
            first: Option<Vec<Option<&'static str>>>,
            rows: Option<usize>,
            refused: bool,
            clean: bool,
        }
        let rows = [
            Row {
                name: "a 1",
                packets: result(&[row(&[Some("1")])], EOF),
                yes: true,
                first: Some(vec![Some("1")]),
                rows: Some(1),
                refused: false,
                clean: true,
            },
            Row {
                name: "a 0",
                packets: result(&[row(&[Some("0")])], EOF),
                yes: false,
                first: Some(vec![Some("0")]),
                rows: Some(1),
                refused: false,
                clean: true,
            },
            Row {
                name: "a NULL",
                packets: result(&[row(&[None])], EOF),
                yes: false,
                first: Some(vec![None]),
                rows: Some(1),
                refused: false,
                clean: true,
            },
            Row {
                name: "no row",
                packets: result(&[], EOF),
                yes: false,
                first: None,
                rows: Some(0),
                refused: false,
                clean: true,
            },
            Row {
                name: "warned",
                packets: result(&[row(&[Some("1")])], EOF_WARNED),
                yes: true,
                first: Some(vec![Some("1")]),
                rows: Some(1),
                refused: false,
                clean: false,
            },
            Row {
                name: "an OK",
                packets: vec![OK.to_vec()],
                yes: false,
                first: None,
                rows: Some(0),
                refused: false,
                clean: true,
            },
            Row {
                name: "an ERR",
                packets: vec![ERR.to_vec()],
                yes: false,
                first: None,
                rows: None,
                refused: true,
                clean: false,
            },
            Row {
                name: "a row cut short",
                packets: result(&[vec![0x01, b'1', 0x05, b'x']], EOF),
                yes: true,
                first: Some(vec![Some("1")]),
                rows: Some(0),
                refused: false,
                clean: true,
            },
        ];
        for r in rows {
            let a = answer(&r.packets);
            let first = r
                .first
                .map(|f| f.iter().map(|v| v.map(str::to_string)).collect::<Values>());
            assert_eq!(a.yes(), r.yes, "{}: yes", r.name);
            assert_eq!(a.first_row(), first, "{}: first row", r.name);
            assert_eq!(a.text_rows().map(|v| v.len()), r.rows, "{}: rows", r.name);
            assert_eq!(a.clean(), r.clean, "{}: clean", r.name);
            assert_eq!(a.refusal().is_some(), r.refused, "{}: refusal", r.name);
        }
    }

    /// A refusal is the ERR payload itself; rows beyond [`MAX_ROWS`] are dropped.
    #[test]
    fn keeps_the_refusal_and_the_first_rows() {
        assert_eq!(answer(&[ERR.to_vec()]).refusal().as_deref(), Some(ERR));
        let many: Vec<Vec<u8>> = (0..MAX_ROWS + 5)
            .map(|i| row(&[Some(&i.to_string())]))
            .collect();
        let a = answer(&result(&many, EOF));
        assert_eq!(a.resp.rows, (MAX_ROWS + 5) as u64);
        assert_eq!(a.text_rows().unwrap().len(), MAX_ROWS);
    }
}
