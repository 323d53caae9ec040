//! Structured-field lists (RFC 9651, section 4.2), as far as the rate-limit fields
//! need: every bare-item type parses, so a valid field is never rejected, but only
//! integers, strings and tokens keep their values.

use http::{HeaderMap, HeaderName};

use super::parse::saturating_digits;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Bare {
    Integer(i64),
    String(String),
    Token(String),
    /// A decimal, byte sequence, boolean, date or display string.
    Other,
}

impl Bare {
    pub(super) fn into_name(self) -> Option<String> {
        match self {
            Bare::String(s) | Bare::Token(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Debug, Default, PartialEq)]
pub(super) struct Params(Vec<(String, Bare)>);

impl Params {
    pub(super) fn get(&self, key: &str) -> Option<&Bare> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn insert(&mut self, key: String, value: Bare) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
}

#[derive(Debug, PartialEq)]
pub(super) enum Member {
    Item(Bare, Params),
    InnerList,
}

/// The members of every line of the field `name`, joined; empty when any line is not
/// a valid list.
pub(super) fn field_list(headers: &HeaderMap, name: HeaderName) -> Vec<Member> {
    let mut joined = String::new();
    for value in headers.get_all(name) {
        let Ok(line) = value.to_str() else {
            return Vec::new();
        };
        if !joined.is_empty() {
            joined.push(',');
        }
        joined.push_str(line);
    }
    parse_list(&joined).unwrap_or_default()
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
}

pub(super) fn parse_list(s: &str) -> Option<Vec<Member>> {
    let mut p = Parser {
        input: s.as_bytes(),
        pos: 0,
    };
    p.skip_sp();
    let mut members = Vec::new();
    if p.at_end() {
        return Some(members);
    }
    loop {
        members.push(p.member()?);
        p.skip_ows();
        if p.at_end() {
            return Some(members);
        }
        p.expect(b',')?;
        p.skip_ows();
        if p.at_end() {
            return None;
        }
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.input.len()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn skip_sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn member(&mut self) -> Option<Member> {
        if self.peek() == Some(b'(') {
            self.inner_list()?;
            return Some(Member::InnerList);
        }
        let bare = self.bare_item()?;
        let params = self.params()?;
        Some(Member::Item(bare, params))
    }

    fn inner_list(&mut self) -> Option<()> {
        self.expect(b'(')?;
        loop {
            self.skip_sp();
            if self.peek() == Some(b')') {
                self.pos += 1;
                self.params()?;
                return Some(());
            }
            self.bare_item()?;
            self.params()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    fn params(&mut self) -> Option<Params> {
        let mut params = Params::default();
        while self.peek() == Some(b';') {
            self.pos += 1;
            self.skip_sp();
            let key = self.key()?;
            let value = if self.peek() == Some(b'=') {
                self.pos += 1;
                self.bare_item()?
            } else {
                Bare::Other
            };
            params.insert(key, value);
        }
        Some(params)
    }

    fn key(&mut self) -> Option<String> {
        let start = self.pos;
        match self.next()? {
            b'a'..=b'z' | b'*' => {}
            _ => return None,
        }
        while matches!(
            self.peek(),
            Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*')
        ) {
            self.pos += 1;
        }
        Some(self.text(start))
    }

    fn text(&self, start: usize) -> String {
        String::from_utf8_lossy(&self.input[start..self.pos]).into_owned()
    }

    fn bare_item(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(Bare::String),
            b'*' | b'A'..=b'Z' | b'a'..=b'z' => Some(Bare::Token(self.token())),
            b':' => self.byte_sequence(),
            b'?' => self.boolean(),
            b'@' => {
                self.pos += 1;
                match self.number()? {
                    Bare::Integer(_) => Some(Bare::Other),
                    _ => None,
                }
            }
            b'%' => self.display_string(),
            _ => None,
        }
    }

    fn number(&mut self) -> Option<Bare> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let start = self.pos;
        let mut dot = None;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => {}
                b'.' if dot.is_none() => {
                    if self.pos - start > 12 {
                        return None;
                    }
                    dot = Some(self.pos);
                }
                _ => break,
            }
            self.pos += 1;
            if dot.is_none() && self.pos - start > 15 {
                return None;
            }
            if dot.is_some() && self.pos - start > 16 {
                return None;
            }
        }
        let digits = &self.input[start..self.pos];
        if !matches!(digits.first(), Some(c) if c.is_ascii_digit()) {
            return None;
        }
        match dot {
            None => {
                let n = saturating_digits(digits) as i64;
                Some(Bare::Integer(if negative { -n } else { n }))
            }
            Some(dot) => {
                let fraction = self.pos - dot - 1;
                (1..=3).contains(&fraction).then_some(Bare::Other)
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            match self.next()? {
                b'\\' => match self.next()? {
                    c @ (b'"' | b'\\') => out.push(char::from(c)),
                    _ => return None,
                },
                b'"' => return Some(out),
                c @ 0x20..=0x7e => out.push(char::from(c)),
                _ => return None,
            }
        }
    }

    fn token(&mut self) -> String {
        let start = self.pos;
        self.pos += 1;
        while let Some(c) = self.peek() {
            let tchar = c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&c);
            if !tchar {
                break;
            }
            self.pos += 1;
        }
        self.text(start)
    }

    fn byte_sequence(&mut self) -> Option<Bare> {
        self.expect(b':')?;
        loop {
            match self.next()? {
                b':' => return Some(Bare::Other),
                c if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=') => {}
                _ => return None,
            }
        }
    }

    fn boolean(&mut self) -> Option<Bare> {
        self.expect(b'?')?;
        matches!(self.next()?, b'0' | b'1').then_some(Bare::Other)
    }

    fn display_string(&mut self) -> Option<Bare> {
        self.expect(b'%')?;
        self.expect(b'"')?;
        let mut bytes = Vec::new();
        loop {
            match self.next()? {
                b'%' => {
                    let hex = |c: u8| match c {
                        b'0'..=b'9' => Some(c - b'0'),
                        b'a'..=b'f' => Some(c - b'a' + 10),
                        _ => None,
                    };
                    let high = hex(self.next()?)?;
                    let low = hex(self.next()?)?;
                    bytes.push((high << 4) | low);
                }
                b'"' => return String::from_utf8(bytes).ok().map(|_| Bare::Other),
                c @ 0x20..=0x7e => bytes.push(c),
                _ => return None,
            }
        }
    }
}
