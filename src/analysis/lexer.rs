//! The byte-level MySQL tokenizer shared by the hit-path scan, the digest and the fallbacks.
//!
//! It never allocates and never panics: every read is bounds-checked, unterminated strings and
//! comments simply run to the end of the input, and invalid UTF-8 is just bytes. Comments are
//! skipped, except executable ones (`/*! … */`, `/*!40001 … */`, MariaDB `/*M! … */`), whose
//! content the server runs as code, so it is lexed as code here too.

use super::version::ServerVersion;

/// What a token is; its bytes are `sql[start..end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// Unquoted keyword or identifier (may start with a digit, like MySQL identifiers can).
    Word,
    /// Integer or decimal or float literal.
    Number,
    /// Single-quoted string literal.
    Str,
    /// `"…"`: a string, or an identifier under ANSI_QUOTES — so never treated as a literal.
    DoubleQuoted,
    /// `` `…` `` identifier.
    Backquoted,
    /// `[…]`: a quoted name under MariaDB's sql_mode=MSSQL (`]]` is a `]` in it). Only the
    /// readings that assume that mode ([`other_lexers`]) make one; elsewhere `[` is a
    /// [`Tok::Punct`] (outside MSSQL mode the server refuses it).
    Bracketed,
    /// `X'…'`, `B'…'`, `0x…`, `0b…`.
    HexBin,
    /// `@name`, `@@name`, `@'name'`, `` @`name` ``.
    Var,
    /// Any other single byte (operators, parentheses, `;`, `?` placeholders…).
    Punct(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn bytes<'a>(&self, sql: &'a [u8]) -> &'a [u8] {
        sql.get(self.start..self.end).unwrap_or(&[])
    }

    /// Case-insensitive keyword test (`kw` is upper-case ASCII).
    pub fn is_kw(&self, sql: &[u8], kw: &str) -> bool {
        self.tok == Tok::Word && self.bytes(sql).eq_ignore_ascii_case(kw.as_bytes())
    }

    pub fn is_punct(&self, c: u8) -> bool {
        self.tok == Tok::Punct(c)
    }
}

/// Whether `b`, right after `--`, makes the `--` a comment: whitespace or a control byte, as
/// the server's `my_isspace || my_iscntrl` reads it, DEL (0x7f) included (checked against
/// MariaDB 10.11: `SELECT 1 --<DEL> x` + a new line + `+ 10` answers 11).
pub(crate) fn opens_dash_comment(b: u8) -> bool {
    b <= b' ' || b == 0x7f
}

pub(crate) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

#[derive(Clone)]
pub(crate) struct Lexer<'a> {
    sql: &'a [u8],
    pos: usize,
    /// Inside `/*! … */`: the next `*/` closes the executable comment instead of being code.
    in_exec: bool,
    /// When set, byte ranges of executable-comment markers (`/*!NNNNN` and its `*/`) are
    /// collected, so the sqlparser path can blank them and see the code they wrap.
    marks: Option<Vec<std::ops::Range<usize>>>,
    /// Lex as under sql_mode NO_BACKSLASH_ESCAPES, where `\` does not escape a quote.
    no_backslash_escapes: bool,
    /// Lex as under sql_mode ANSI_QUOTES, where `"…"` is an identifier: like a backquoted
    /// one, `\` escapes nothing in it.
    ansi_quotes: bool,
    /// The server whose rules decide which versioned executable comments run. None: every
    /// executable comment is code (the text was already made the server's by
    /// [`super::comments::server_text`], or the caller wants the widest reading).
    server: Option<ServerVersion>,
    /// Byte ranges of the versioned comments `server` skips, when recording.
    skipped: Option<Vec<std::ops::Range<usize>>>,
    /// Lex strings as under a multi-byte client character set whose second byte may be a
    /// backslash (GBK, BIG5, SJIS, GB18030): such a backslash is part of a character, no
    /// escape.
    mb: Option<MbCharset>,
    /// Lex as under MariaDB's sql_mode=MSSQL, where `[…]` quotes a name: `[x']` is the
    /// column x', whose quote opens no string ([`Tok::Bracketed`]).
    brackets: bool,
}

/// The multi-byte client character sets in which the second byte of a character may be a
/// backslash (0x5c), which the server then does not read as an escape in a string: `'中\'`
/// read as GBK is the string of 中 (e4 b8) and the character ad 5c.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MbCharset {
    Gbk,
    Big5,
    /// SJIS and CP932.
    Sjis,
    Gb18030,
}

impl MbCharset {
    pub(crate) const ALL: [MbCharset; 4] = [
        MbCharset::Gbk,
        MbCharset::Big5,
        MbCharset::Sjis,
        MbCharset::Gb18030,
    ];

    /// The length of the multi-byte character at `s[i..]`, or None for a single byte (as
    /// the server's `my_ismbchar` reads it).
    fn char_len(self, s: &[u8], i: usize) -> Option<usize> {
        let b = |k: usize| s.get(i + k).copied();
        let (lead, next) = (b(0)?, b(1)?);
        let in_ = |x: u8, r: &[std::ops::RangeInclusive<u8>]| r.iter().any(|r| r.contains(&x));
        match self {
            MbCharset::Gbk => {
                (in_(lead, &[0x81..=0xfe]) && in_(next, &[0x40..=0x7e, 0x80..=0xfe])).then_some(2)
            }
            MbCharset::Big5 => {
                (in_(lead, &[0xa1..=0xf9]) && in_(next, &[0x40..=0x7e, 0xa1..=0xfe])).then_some(2)
            }
            MbCharset::Sjis => (in_(lead, &[0x81..=0x9f, 0xe0..=0xfc])
                && in_(next, &[0x40..=0x7e, 0x80..=0xfc]))
            .then_some(2),
            MbCharset::Gb18030 => {
                if !in_(lead, &[0x81..=0xfe]) {
                    None
                } else if in_(next, &[0x30..=0x39])
                    && b(2).is_some_and(|x| in_(x, &[0x81..=0xfe]))
                    && b(3).is_some_and(|x| in_(x, &[0x30..=0x39]))
                {
                    Some(4)
                } else {
                    in_(next, &[0x40..=0x7e, 0x80..=0xfe]).then_some(2)
                }
            }
        }
    }
}

impl<'a> Lexer<'a> {
    pub fn new(sql: &'a [u8]) -> Self {
        Lexer {
            sql,
            pos: 0,
            in_exec: false,
            marks: None,
            no_backslash_escapes: false,
            ansi_quotes: false,
            server: None,
            skipped: None,
            mb: None,
            brackets: false,
        }
    }

    /// Lexes as `server` does: a versioned executable comment it skips is a comment, and its
    /// range is recorded for [`Lexer::take_skipped`].
    pub fn for_server(sql: &'a [u8], server: ServerVersion) -> Self {
        Lexer {
            server: Some(server),
            skipped: Some(Vec::new()),
            ..Lexer::new(sql)
        }
    }

    pub fn take_skipped(&mut self) -> Vec<std::ops::Range<usize>> {
        self.skipped.take().unwrap_or_default()
    }

    /// The same text as a server under a sql_mode with (or without) ANSI_QUOTES and
    /// NO_BACKSLASH_ESCAPES would split it: for code stored with its own sql_mode.
    pub fn with_modes(sql: &'a [u8], ansi_quotes: bool, no_backslash_escapes: bool) -> Self {
        Lexer {
            ansi_quotes,
            no_backslash_escapes,
            ..Lexer::new(sql)
        }
    }

    /// The same lexer, reading `[…]` as a name when `on` (MariaDB's sql_mode=MSSQL): for
    /// code stored with its own sql_mode.
    pub(crate) fn with_brackets(self, on: bool) -> Self {
        Lexer {
            brackets: on,
            ..self
        }
    }

    pub fn recording_marks(sql: &'a [u8]) -> Self {
        Lexer {
            marks: Some(Vec::new()),
            ..Lexer::new(sql)
        }
    }

    pub fn take_marks(&mut self) -> Vec<std::ops::Range<usize>> {
        self.marks.take().unwrap_or_default()
    }

    fn at(&self, i: usize) -> u8 {
        self.sql.get(i).copied().unwrap_or(0)
    }

    fn mark(&mut self, start: usize, end: usize) {
        if let Some(m) = self.marks.as_mut() {
            m.push(start..end);
        }
    }

    /// Skips whitespace and comments; returns with `pos` on the first byte of code.
    fn skip_trivia(&mut self) {
        let n = self.sql.len();
        while self.pos < n {
            let b = self.at(self.pos);
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'#' => self.skip_line(),
                // MySQL wants whitespace (or a control byte, or the end) after `--`.
                b'-' if self.at(self.pos + 1) == b'-'
                    && (self.pos + 2 >= n || opens_dash_comment(self.at(self.pos + 2))) =>
                {
                    self.skip_line()
                }
                b'/' if self.at(self.pos + 1) == b'*' => {
                    let start = self.pos;
                    let c2 = self.at(self.pos + 2);
                    let exec_len = if c2 == b'!' {
                        Some(3)
                    } else if c2 == b'M' && self.at(self.pos + 3) == b'!' {
                        // Only an upper-case M: MariaDB reads `/*m!` as a plain comment
                        // (checked against 10.11: `SELECT 1 /*m! + 1 */` answers 1).
                        Some(4)
                    } else {
                        None
                    };
                    let plain_for_server =
                        exec_len == Some(4) && self.server.is_some_and(|s| !s.mariadb);
                    match exec_len {
                        Some(len) if !self.in_exec && !plain_for_server => {
                            self.pos += len;
                            // The optional server version: exactly 5 digits, or 6. Fewer
                            // digits are no version: they are code, as the server reads them.
                            let digits = (0..6)
                                .take_while(|&d| self.at(self.pos + d).is_ascii_digit())
                                .count();
                            let (version, d) = if digits >= 5 {
                                let mut v = 0u32;
                                for k in 0..digits {
                                    v = v * 10 + u32::from(self.at(self.pos + k) - b'0');
                                }
                                (Some(v), digits)
                            } else {
                                (None, 0)
                            };
                            let runs = match (self.server, version) {
                                (Some(s), Some(v)) => s.runs(v, len == 4),
                                _ => true,
                            };
                            if runs {
                                self.pos += d;
                                self.in_exec = true;
                                self.mark(start, self.pos);
                            } else {
                                self.pos = start;
                                self.skip_versioned();
                                let end = self.pos;
                                if let Some(s) = self.skipped.as_mut() {
                                    s.push(start..end);
                                }
                            }
                        }
                        _ => {
                            self.skip_block();
                            if plain_for_server && !self.in_exec {
                                let end = self.pos;
                                if let Some(s) = self.skipped.as_mut() {
                                    s.push(start..end);
                                }
                            }
                        }
                    }
                }
                b'*' if self.in_exec && self.at(self.pos + 1) == b'/' => {
                    self.mark(self.pos, self.pos + 2);
                    self.pos += 2;
                    self.in_exec = false;
                }
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        match self.sql[self.pos.min(self.sql.len())..]
            .iter()
            .position(|&c| c == b'\n')
        {
            Some(off) => self.pos += off + 1,
            None => self.pos = self.sql.len(),
        }
    }

    /// Skips a versioned comment the server does not run. The server allows one level of
    /// `/* … */` nested inside such a comment (unlike a plain comment).
    fn skip_versioned(&mut self) {
        let n = self.sql.len();
        let mut i = self.pos + 2;
        let mut depth = 0u8;
        while i + 1 < n {
            if self.at(i) == b'/' && self.at(i + 1) == b'*' && depth == 0 {
                depth = 1;
                i += 2;
            } else if self.at(i) == b'*' && self.at(i + 1) == b'/' {
                i += 2;
                if depth == 0 {
                    self.pos = i;
                    return;
                }
                depth -= 1;
            } else {
                i += 1;
            }
        }
        self.pos = n;
    }

    fn skip_block(&mut self) {
        let mut i = self.pos + 2;
        let n = self.sql.len();
        while i + 1 < n {
            if self.at(i) == b'*' && self.at(i + 1) == b'/' {
                self.pos = i + 2;
                return;
            }
            i += 1;
        }
        self.pos = n;
    }

    /// Skips a quoted run opened at `pos` by `q`; backslash escapes apply to strings but not
    /// to backquoted identifiers; a doubled quote stands for itself.
    fn skip_quoted(&mut self, q: u8, backslash: bool) {
        let backslash = backslash && !self.no_backslash_escapes;
        let n = self.sql.len();
        let mut i = self.pos + 1;
        while i < n {
            let c = self.at(i);
            let mb = match self.mb {
                Some(cs) if backslash && c >= 0x80 => cs.char_len(self.sql, i),
                _ => None,
            };
            if let Some(len) = mb {
                i += len;
            } else if backslash && c == b'\\' {
                i += 2;
            } else if c == q {
                if self.at(i + 1) == q && i + 1 < n {
                    i += 2;
                } else {
                    self.pos = i + 1;
                    return;
                }
            } else {
                i += 1;
            }
        }
        self.pos = n;
    }

    /// Skips a `[…]` name opened at `pos` (sql_mode=MSSQL): it ends at the first `]` not
    /// doubled (`]]` stands for `]`), and a multi-byte character of the client character set
    /// is one character whatever its second byte, as the server's `scan_ident_delimited`
    /// reads it (checked against MariaDB 10.11.19: `[a]]b]` is the name `a]b`, `[x']` the
    /// name x').
    fn skip_bracketed(&mut self) {
        let n = self.sql.len();
        let mut i = self.pos + 1;
        while i < n {
            let c = self.at(i);
            let mb = match self.mb {
                Some(cs) if c >= 0x80 => cs.char_len(self.sql, i),
                _ => None,
            };
            if let Some(len) = mb {
                i += len;
            } else if c == b']' {
                if self.at(i + 1) == b']' && i + 1 < n {
                    i += 2;
                } else {
                    self.pos = i + 1;
                    return;
                }
            } else {
                i += 1;
            }
        }
        self.pos = n;
    }

    fn ident_run(&self, from: usize) -> usize {
        let mut i = from;
        while i < self.sql.len() && is_ident_byte(self.at(i)) {
            i += 1;
        }
        i
    }

    fn lex_digits(&self, from: usize) -> usize {
        let mut i = from;
        while self.at(i).is_ascii_digit() && i < self.sql.len() {
            i += 1;
        }
        i
    }

    /// A token starting with a digit: a number, a hex/bit literal, or an identifier such as
    /// `1t` (MySQL identifiers may start with digits). After `name.` a digit run is a name.
    fn lex_digit_start(&mut self, start: usize) -> Tok {
        let run_end = self.ident_run(start);
        let run = &self.sql[start..run_end];
        let after_dot = start > 0 && self.at(start - 1) == b'.' && start >= 2 && {
            let p = self.at(start - 2);
            is_ident_byte(p) || p == b'`' || p == b'"'
        };
        if after_dot {
            self.pos = run_end;
            return Tok::Word;
        }
        let body = run.get(2..).unwrap_or(&[]);
        let literal = match run.get(..2) {
            Some(b"0x" | b"0X") => !body.is_empty() && body.iter().all(u8::is_ascii_hexdigit),
            Some(b"0b" | b"0B") => !body.is_empty() && body.iter().all(|&c| c == b'0' || c == b'1'),
            _ => false,
        };
        if literal {
            self.pos = run_end;
            return Tok::HexBin;
        }
        let mut i = self.lex_digits(start);
        if i == run_end || self.at(i) == b'e' || self.at(i) == b'E' || self.at(i) == b'.' {
            // Plain number, maybe with a fraction and an exponent.
            if self.at(i) == b'.' {
                i = self.lex_digits(i + 1);
            }
            if self.at(i) == b'e' || self.at(i) == b'E' {
                let mut j = i + 1;
                if self.at(j) == b'+' || self.at(j) == b'-' {
                    j += 1;
                }
                if self.at(j).is_ascii_digit() {
                    i = self.lex_digits(j);
                }
            }
            if !is_ident_byte(self.at(i)) || i >= self.sql.len() {
                self.pos = i;
                return Tok::Number;
            }
        }
        self.pos = run_end.max(start + 1);
        Tok::Word
    }

    /// The next token, or None at the end of the input.
    pub fn next_token(&mut self) -> Option<Token> {
        self.skip_trivia();
        let n = self.sql.len();
        if self.pos >= n {
            return None;
        }
        let start = self.pos;
        let b = self.at(start);
        let tok = match b {
            b'\'' => {
                self.skip_quoted(b'\'', true);
                Tok::Str
            }
            b'"' => {
                self.skip_quoted(b'"', !self.ansi_quotes);
                Tok::DoubleQuoted
            }
            b'`' => {
                self.skip_quoted(b'`', false);
                Tok::Backquoted
            }
            b'[' if self.brackets => {
                self.skip_bracketed();
                Tok::Bracketed
            }
            b'0'..=b'9' => self.lex_digit_start(start),
            b'.' if self.at(start + 1).is_ascii_digit()
                && !(start > 0 && {
                    let p = self.at(start - 1);
                    is_ident_byte(p) || p == b'`' || p == b'"' || p == b')'
                }) =>
            {
                let mut i = self.lex_digits(start + 1);
                if self.at(i) == b'e' || self.at(i) == b'E' {
                    let mut j = i + 1;
                    if self.at(j) == b'+' || self.at(j) == b'-' {
                        j += 1;
                    }
                    if self.at(j).is_ascii_digit() {
                        i = self.lex_digits(j);
                    }
                }
                self.pos = i;
                Tok::Number
            }
            b'@' => {
                let mut i = start + 1;
                if self.at(i) == b'@' {
                    i += 1;
                }
                match self.at(i) {
                    q @ (b'\'' | b'"' | b'`') if i < n => {
                        self.pos = i;
                        self.skip_quoted(q, q != b'`');
                    }
                    _ => self.pos = self.ident_run(i),
                }
                Tok::Var
            }
            c if is_ident_byte(c) => {
                let end = self.ident_run(start);
                // X'…' and B'…' are literals, not a word followed by a string.
                if end == start + 1
                    && matches!(c, b'x' | b'X' | b'b' | b'B')
                    && self.at(end) == b'\''
                    && end < n
                {
                    self.pos = end;
                    self.skip_quoted(b'\'', false);
                    Tok::HexBin
                } else {
                    self.pos = end;
                    Tok::Word
                }
            }
            c => {
                self.pos = start + 1;
                Tok::Punct(c)
            }
        };
        Some(Token {
            tok,
            start,
            end: self.pos.min(n),
        })
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;
    fn next(&mut self) -> Option<Token> {
        self.next_token()
    }
}

/// The statement as a server in NO_BACKSLASH_ESCAPES mode reads it, respelled so that the
/// default (backslash-escaping) rules read it the same way: every backslash inside a quoted
/// string is doubled. None when both readings cut the same tokens (string values may differ,
/// names do not), and when that reading leaves a quote open: the server rejects such a
/// statement in that mode, so it runs nothing.
///
/// Why: where a string ends depends on the session's sql_mode, and analysing under both
/// readings (then keeping every table either names) is right whichever mode the statement
/// ran under — a session's, or a binlog event's — with no mode to get wrong.
#[cfg(test)]
pub(crate) fn no_backslash_escapes_reading(sql: &[u8]) -> Option<Vec<u8>> {
    reading_under(
        sql,
        Reading {
            nbe: true,
            ..Reading::DEFAULT
        },
    )
}

/// The statement as a server in ANSI_QUOTES mode (backslash escapes still on) reads it,
/// respelled for the default rules as [`no_backslash_escapes_reading`] does: there `"…"`
/// is an identifier, in which a backslash is a byte, while `'…'` still escapes. A third
/// reading, which neither of the other two gives: `'\' "' + "\" + f(3) -- "` runs `f(3)`
/// under ANSI_QUOTES only. None when it cuts the same tokens as the default reading, or
/// leaves a quote open.
#[cfg(test)]
pub(crate) fn ansi_quotes_reading(sql: &[u8]) -> Option<Vec<u8>> {
    reading_under(
        sql,
        Reading {
            ansi: true,
            ..Reading::DEFAULT
        },
    )
}

/// Every reading of `sql` other than the default one that cuts other tokens, respelled for
/// the default rules: NO_BACKSLASH_ESCAPES', ANSI_QUOTES', and under each multi-byte client
/// character set whose characters may end in a backslash byte ([`MbCharset`]), with and
/// without ANSI_QUOTES. Analysing each and keeping what any names is right under whichever
/// sql_mode and client character set the statement ran.
pub(crate) fn other_readings(sql: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for alt in readings(sql)
        .into_iter()
        .filter_map(|r| reading_under(sql, r))
    {
        if !out.contains(&alt) {
            out.push(alt);
        }
    }
    out
}

/// The statement as a server reads it under a single-byte client character set (latin1,
/// cp1250, koi8r, …), respelled for the default rules: there a byte of 0x80 or above may be
/// whitespace or a control character (0xa0 in latin1, 0xff in cp852, 0x80 in cp1250, …,
/// by `character_set_client`), and `--` followed by one opens a comment, as `-- ` does.
/// So a space is put after each `--` followed by such a byte. None when there is none:
/// every other text reads alike. A `--` inside a string changes only that string's value,
/// which names no table.
pub(crate) fn single_byte_reading(sql: &[u8]) -> Option<Vec<u8>> {
    let at = |i: usize| dash_then_high_byte(sql, i);
    let first = (0..sql.len().saturating_sub(2)).find(|&i| at(i))?;
    let mut out = Vec::with_capacity(sql.len() + 4);
    let mut copied = 0;
    for i in first..sql.len() - 2 {
        if at(i) {
            out.extend_from_slice(&sql[copied..i + 2]);
            out.push(b' ');
            copied = i + 2;
        }
    }
    out.extend_from_slice(&sql[copied..]);
    Some(out)
}

/// Whether `sql` has a `--` followed by a byte of 0x80 or above, which a single-byte client
/// character set may read as a comment ([`single_byte_reading`]).
pub(crate) fn reads_otherwise_single_byte(sql: &[u8]) -> bool {
    (0..sql.len().saturating_sub(2)).any(|i| dash_then_high_byte(sql, i))
}

fn dash_then_high_byte(sql: &[u8], i: usize) -> bool {
    sql[i] == b'-' && sql[i + 1] == b'-' && sql[i + 2] >= 0x80
}

/// The lexers of every reading of `sql` other than the default one
/// ([`other_readings`]' modes): none for a text without a backslash or a `[`, where all
/// read alike.
pub(crate) fn other_lexers(sql: &[u8]) -> Vec<Lexer<'_>> {
    readings(sql)
        .into_iter()
        .map(|r| reading_lexer(sql, r))
        .collect()
}

/// The readings of `sql` other than the default one that may cut other tokens: none
/// without a backslash or a `[`; the character sets' only with a byte of a multi-byte
/// character; MSSQL's (`[…]` names) only with a `[`.
fn readings(sql: &[u8]) -> Vec<Reading> {
    let backslash = sql.contains(&b'\\');
    let bracket = sql.contains(&b'[');
    if !backslash && !bracket {
        return Vec::new();
    }
    let high = sql.iter().any(|&b| b >= 0x80);
    let mut out = Vec::new();
    for brackets in [false, true] {
        if brackets && !bracket {
            continue;
        }
        let plain = Reading {
            brackets,
            ..Reading::DEFAULT
        };
        if brackets {
            out.push(plain);
        }
        if !backslash {
            continue;
        }
        out.push(Reading { nbe: true, ..plain });
        out.push(Reading {
            ansi: true,
            ..plain
        });
        if high {
            for cs in MbCharset::ALL {
                for ansi in [false, true] {
                    out.push(Reading {
                        cs: Some(cs),
                        ansi,
                        ..plain
                    });
                }
            }
        }
    }
    out
}

/// A way the server may read a statement's quotes other than the default one: under
/// NO_BACKSLASH_ESCAPES (`nbe`), ANSI_QUOTES (`ansi`), a multi-byte client character set
/// (`cs`, with backslash escapes on) and MariaDB's sql_mode=MSSQL (`brackets`: `[…]` is a
/// name), alone or together as a session may have them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reading {
    nbe: bool,
    ansi: bool,
    cs: Option<MbCharset>,
    brackets: bool,
}

impl Reading {
    const DEFAULT: Reading = Reading {
        nbe: false,
        ansi: false,
        cs: None,
        brackets: false,
    };
}

fn reading_lexer(sql: &[u8], r: Reading) -> Lexer<'_> {
    Lexer {
        no_backslash_escapes: r.nbe,
        ansi_quotes: r.ansi,
        mb: r.cs,
        brackets: r.brackets,
        ..Lexer::new(sql)
    }
}

fn reading_under(sql: &[u8], r: Reading) -> Option<Vec<u8>> {
    let bracketed = r.brackets && sql.contains(&b'[');
    if !(sql.contains(&b'\\') || bracketed) {
        return None;
    }
    // Same token boundaries: only string values differ, which name no table.
    let mut std = Lexer::new(sql);
    let mut alt = reading_lexer(sql, r);
    loop {
        let (x, y) = (std.next_token(), alt.next_token());
        if x.map(|t| (t.start, t.end)) != y.map(|t| (t.start, t.end)) {
            break;
        }
        // Both ended together: every token the same.
        y?;
    }
    let mut lx = reading_lexer(sql, r);
    let mut out = Vec::with_capacity(sql.len() + 8);
    let mut copied = 0;
    let mut changed = false;
    while let Some(t) = lx.next_token() {
        let b = t.bytes(sql);
        // Where the quoted run starts: `'…'`, `"…"`, `` `…` ``, `[…]`, or after one byte in
        // `X'…'`, `B'…'` and `@'…'`.
        let q = match t.tok {
            Tok::Str | Tok::DoubleQuoted | Tok::Backquoted | Tok::Bracketed => Some(0),
            Tok::HexBin | Tok::Var => b.iter().position(|&c| c == b'\'' || c == b'"'),
            _ => None,
        };
        let Some(q) = q else { continue };
        // Only the last token can run to the end of the input unclosed.
        let closer = if t.tok == Tok::Bracketed {
            Some(&b']')
        } else {
            b.get(q)
        };
        if t.end == sql.len() && (b.len() < q + 2 || b.last() != closer) {
            return None;
        }
        if t.tok == Tok::Bracketed {
            // A name: respelled backquoted, so that every reading names it alike.
            out.extend_from_slice(&sql[copied..t.start]);
            out.push(b'`');
            let inner = &b[1..b.len() - 1];
            let mut i = 0;
            while i < inner.len() {
                match inner[i] {
                    b']' if inner.get(i + 1) == Some(&b']') => {
                        out.push(b']');
                        i += 2;
                    }
                    b'`' => {
                        out.extend_from_slice(b"``");
                        i += 1;
                    }
                    c => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            out.push(b'`');
            copied = t.end;
            changed = true;
            continue;
        }
        if t.tok == Tok::Backquoted || !b.contains(&b'\\') {
            continue;
        }
        let double = match r.cs {
            // Only in a double-quoted identifier; a backslash that ends a multi-byte
            // character elsewhere is a byte: respelled as another byte below.
            Some(_) => r.ansi && t.tok == Tok::DoubleQuoted,
            // Every backslash in a string is a byte: doubled, the default rules read it so.
            None if r.nbe => true,
            // Only in a double-quoted identifier.
            None => r.ansi && t.tok == Tok::DoubleQuoted,
        };
        match (double, r.cs) {
            (true, _) => {}
            (false, None) => continue,
            // A backslash that ends a multi-byte character is a byte: respelled as another
            // byte; the others escape as by default.
            (false, Some(cs)) => {
                out.extend_from_slice(&sql[copied..t.start]);
                let mut i = 0;
                while i < b.len() {
                    match (b[i] >= 0x80).then(|| cs.char_len(b, i)).flatten() {
                        Some(len) => {
                            out.extend(
                                b[i..i + len]
                                    .iter()
                                    .map(|&c| if c == b'\\' { b'_' } else { c }),
                            );
                            i += len;
                        }
                        None if b[i] == b'\\' && i + 1 < b.len() => {
                            out.extend_from_slice(&b[i..i + 2]);
                            i += 2;
                        }
                        None => {
                            out.push(b[i]);
                            i += 1;
                        }
                    }
                }
                copied = t.end;
                changed = true;
                continue;
            }
        }
        out.extend_from_slice(&sql[copied..t.start]);
        for &c in b {
            out.push(c);
            if c == b'\\' {
                out.push(b'\\');
            }
        }
        copied = t.end;
        changed = true;
    }
    if !changed {
        return None;
    }
    out.extend_from_slice(&sql[copied..]);
    Some(out)
}

/// The name a [`Tok::Bracketed`] token spells (`[a]]b]` is `a]b`), from its bytes.
pub(crate) fn bracketed_name(b: &[u8]) -> Vec<u8> {
    let inner = b.get(1..b.len().saturating_sub(1)).unwrap_or(&[]);
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        out.push(inner[i]);
        i += if inner[i] == b']' && inner.get(i + 1) == Some(&b']') {
            2
        } else {
            1
        };
    }
    out
}

/// Whether a server under sql_mode=MSSQL would read `sql` otherwise than the default rules:
/// a `[` outside strings, comments and quoted names, which MSSQL's reading makes a name
/// (`[x']` is the column x', its quote opens no string) and every other mode refuses.
/// Checked where a shape of the default reading would otherwise be trusted (the digest,
/// row slices); the analysis reads every reading ([`other_readings`]).
pub(crate) fn brackets_read_otherwise(sql: &[u8]) -> bool {
    sql.contains(&b'[') && Lexer::new(sql).any(|t| t.is_punct(b'['))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(sql: &str) -> Vec<(Tok, String)> {
        Lexer::new(sql.as_bytes())
            .map(|t| {
                (
                    t.tok,
                    String::from_utf8_lossy(t.bytes(sql.as_bytes())).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn words_numbers_strings() {
        let t = toks("SELECT a1, 42, 4.5e-3, 'it''s \\' x', \"q\", `b``c` FROM t");
        let kinds: Vec<Tok> = t.iter().map(|x| x.0).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::Word,
                Tok::Word,
                Tok::Punct(b','),
                Tok::Number,
                Tok::Punct(b','),
                Tok::Number,
                Tok::Punct(b','),
                Tok::Str,
                Tok::Punct(b','),
                Tok::DoubleQuoted,
                Tok::Punct(b','),
                Tok::Backquoted,
                Tok::Word,
                Tok::Word
            ]
        );
        assert_eq!(t[7].1, "'it''s \\' x'");
        assert_eq!(t[11].1, "`b``c`");
    }

    #[test]
    fn identifiers_starting_with_digits_and_after_dots() {
        let t = toks("select * from 1t join db.12 on x.5e3");
        assert_eq!(t[3], (Tok::Word, "1t".into()));
        assert_eq!(t[7], (Tok::Word, "12".into()));
        assert_eq!(t[11], (Tok::Word, "5e3".into()));
    }

    #[test]
    fn hex_and_bit_literals() {
        let t = toks("x'4142' 0x41 b'01' 0b01 0xZZ");
        let kinds: Vec<Tok> = t.iter().map(|x| x.0).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::HexBin,
                Tok::HexBin,
                Tok::HexBin,
                Tok::HexBin,
                Tok::Word
            ]
        );
    }

    #[test]
    fn comments_and_executable_comments() {
        let t = toks("-- c\n# c\n/* c */ SELECT /*!40001 SQL_NO_CACHE */ /*M!100100 a */ --1");
        let words: Vec<String> = t.into_iter().map(|x| x.1).collect();
        assert_eq!(words, vec!["SELECT", "SQL_NO_CACHE", "a", "-", "-", "1"]);
    }

    /// `/*m! … */` is a plain comment to MariaDB (and MySQL): a quote in it opens no string
    /// that could hide the code after it (issue #35 class 5, adversary13b).
    #[test]
    fn lower_case_m_comment_is_plain() {
        let t = toks("UPDATE t1 SET a = 1 /*m! ' */ + f(3) -- ' */");
        let words: Vec<String> = t.into_iter().map(|x| x.1).collect();
        assert_eq!(
            words,
            vec!["UPDATE", "t1", "SET", "a", "=", "1", "+", "f", "(", "3", ")"]
        );
        let t = toks("SELECT /*M!100100 a */ /*m!100100 b */ c");
        let words: Vec<String> = t.into_iter().map(|x| x.1).collect();
        assert_eq!(words, vec!["SELECT", "a", "c"]);
    }

    /// `--` followed by DEL is a comment to the server: the quote after it opens no string.
    #[test]
    fn dash_dash_then_del_is_a_comment() {
        let t = toks("UPDATE t1 SET a = 1 --\x7f '\n + f(3) -- '\n");
        let words: Vec<String> = t.into_iter().map(|x| x.1).collect();
        assert_eq!(
            words,
            vec!["UPDATE", "t1", "SET", "a", "=", "1", "+", "f", "(", "3", ")"]
        );
        // Any other byte after `--` leaves two minus signs.
        let t = toks("1 --x");
        let words: Vec<String> = t.into_iter().map(|x| x.1).collect();
        assert_eq!(words, vec!["1", "-", "-", "x"]);
    }

    /// ANSI_QUOTES' reading: `"\\"` is an identifier, `'\\'…'` still escapes; it shows a call
    /// that both other readings put inside a string.
    #[test]
    fn ansi_quotes_reading_shows_what_both_others_hide() {
        let sql = br#"UPDATE t1 SET a = LENGTH('\' "') + "\" + f(3) -- ""#;
        let words = |b: &[u8]| -> Vec<String> {
            Lexer::new(b)
                .filter(|t| t.tok == Tok::Word)
                .map(|t| String::from_utf8_lossy(t.bytes(b)).into_owned())
                .collect()
        };
        assert!(!words(sql).contains(&"f".to_string()));
        let nbe = no_backslash_escapes_reading(sql).unwrap();
        assert!(!words(&nbe).contains(&"f".to_string()));
        let ansi = ansi_quotes_reading(sql).unwrap();
        assert!(
            words(&ansi).contains(&"f".to_string()),
            "{}",
            String::from_utf8_lossy(&ansi)
        );
        assert_eq!(other_readings(sql).len(), 2);
        // No backslash in a double-quoted run: the same tokens, no other reading.
        assert_eq!(ansi_quotes_reading(br"SELECT 'a\'b'"), None);
    }

    /// Under GBK (and the other multi-byte client character sets) a backslash may end a
    /// character: `'中\\\\'-- '` is one string there, and the call after it is code.
    #[test]
    fn charset_readings_show_what_utf8_hides() {
        let sql = "UPDATE t1 SET a = 1 + LENGTH(CONCAT('中\\\\'-- ', f(3)\n))".as_bytes();
        let has_f = |b: &[u8]| Lexer::new(b).any(|t| t.tok == Tok::Word && t.bytes(b) == b"f");
        assert!(!has_f(sql));
        let readings = other_readings(sql);
        assert!(readings.iter().any(|r| has_f(r)), "{readings:?}");
        // ASCII only: no character set reading.
        assert_eq!(other_readings(br"SELECT 'a\\'"), Vec::<Vec<u8>>::new());
    }

    /// Under sql_mode=MSSQL `[…]` is a name, which no other reading knows: `[x']` hides no
    /// string there. One row per rule: (rule, text, the MSSQL reading respelled for the
    /// default rules, or None when every reading cuts the default's tokens).
    #[test]
    fn mssql_brackets_reading() {
        type Row<'a> = (&'a str, &'a [u8], Option<&'a [u8]>);
        let rows: &[Row] = &[
            (
                "a quote in a bracket opens no string",
                b"SELECT [x'] FROM t2 -- '] FROM t1",
                Some(b"SELECT `x'` FROM t2 -- '] FROM t1"),
            ),
            (
                "`]]` is a `]` in the name, a backquote is doubled",
                b"SELECT [a]]`b'] FROM t2 -- '",
                Some(b"SELECT `a]``b'` FROM t2 -- '"),
            ),
            (
                "a call hidden from the default reading",
                b"SELECT [x'] AS a, f() AS ['] FROM t2",
                Some(b"SELECT `x'` AS a, f() AS `'` FROM t2"),
            ),
            ("a `[` in a string is a byte", b"SELECT '$[0]' FROM t", None),
            ("in a comment too", b"SELECT a FROM t -- [x'", None),
            ("in a backquoted name too", b"SELECT `[x'` FROM t", None),
            (
                "an unclosed bracket: the server refuses the statement",
                b"SELECT a FROM t WHERE [x",
                None,
            ),
        ];
        for (rule, sql, want) in rows {
            let mssql = reading_under(
                sql,
                Reading {
                    brackets: true,
                    ..Reading::DEFAULT
                },
            );
            assert_eq!(mssql.as_deref(), *want, "{rule}");
            assert_eq!(
                other_readings(sql)
                    .iter()
                    .any(|r| Some(r.as_slice()) == *want),
                want.is_some(),
                "{rule}"
            );
        }
        assert!(brackets_read_otherwise(b"SELECT [x] FROM t"));
        assert!(!brackets_read_otherwise(b"SELECT '[x]' FROM t"));
        assert_eq!(bracketed_name(b"[a]]b]"), b"a]b".to_vec());
        // With a backslash too, each mode's reading may or may not quote with brackets.
        let sql = br"SELECT [x'] FROM t2 WHERE s = 'a\' -- '";
        let all = other_readings(sql);
        assert!(all.iter().any(|r| r.starts_with(b"SELECT `x'`")), "{all:?}");
    }

    #[test]
    fn variables() {
        let t = toks("@a @@session.x @'q r' @`b`");
        assert_eq!(t[0], (Tok::Var, "@a".into()));
        assert_eq!(t[1], (Tok::Var, "@@session".into()));
        assert_eq!(t[4], (Tok::Var, "@'q r'".into()));
        assert_eq!(t[5], (Tok::Var, "@`b`".into()));
    }

    #[test]
    fn ansi_quotes_and_no_backslash_escapes() {
        let spans = |l: Lexer| -> Vec<(usize, usize)> { l.map(|t| (t.start, t.end)).collect() };
        let sql = br#""a\" 'b\' c"#;
        // Default: both quoted runs take the backslash as an escape; the second runs on.
        assert_eq!(spans(Lexer::new(sql)), vec![(0, 11)]);
        // ANSI_QUOTES: `"a\"` is an identifier, where a backslash is a byte.
        assert_eq!(
            spans(Lexer::with_modes(sql, true, false)),
            vec![(0, 4), (5, 11)]
        );
        assert_eq!(
            spans(Lexer::with_modes(sql, true, true)),
            vec![(0, 4), (5, 9), (10, 11)]
        );
    }

    #[test]
    fn unterminated_everything() {
        for s in [
            "'abc", "\"abc", "`abc", "/* abc", "/*! abc", "x'", "@'", "0x", "1e", "1.", "--",
        ] {
            let _ = toks(s);
        }
    }

    /// Under a single-byte client character set `--` and a high byte open a comment: the
    /// reading puts a space after each such `--`, and there is none without one.
    #[test]
    fn single_byte_reading_opens_dash_comments_at_high_bytes() {
        // (rule, text, the reading)
        type Row<'a> = (&'a str, &'a [u8], Option<&'a [u8]>);
        let rows: &[Row] = &[
            ("no dash", b"SELECT 1", None),
            ("a plain comment", b"SELECT 1 -- x", None),
            ("dashes then ASCII", b"SELECT 1--2", None),
            (
                "latin1's no-break space",
                b"UPDATE t SET a = 1 --\xa0'\n + f(3) -- '",
                Some(b"UPDATE t SET a = 1 -- \xa0'\n + f(3) -- '"),
            ),
            (
                "three dashes",
                b"SELECT 1 ---\xff",
                Some(b"SELECT 1 --- \xff"),
            ),
            (
                "each of two",
                b"--\x80a --\x81b",
                Some(b"-- \x80a -- \x81b"),
            ),
            ("at the very end", b"SELECT 1 --", None),
        ];
        for (rule, sql, want) in rows {
            assert_eq!(single_byte_reading(sql).as_deref(), *want, "{rule}");
        }
    }
}
