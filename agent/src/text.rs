//! Text for a person's terminal. Most of what the agent prints was named by
//! someone else: a cgroup's name may hold any byte but `/` and newline, a
//! process's name any byte but NUL, a pod's name comes from a directory a
//! log shipper can write. Printed raw, such a name can clear the screen, move
//! the cursor or start a line of its own ("OK: ...") over the findings.
//!
//! So every line meant for a person goes out through [`escape`]: control
//! characters (C0, DEL, C1) and the Unicode marks that reorder text on
//! screen are written as `\xNN` or `\u{NNNN}`. JSON output needs none of it
//! (serde_json escapes control characters itself) and keeps names exact.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::io;

/// Characters that act on a terminal instead of showing: control
/// characters, and the bidirectional overrides and isolates that make a
/// line read differently from what it holds.
fn acts(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` as one word of a shell command a person copies: as it is when it
/// holds only characters no shell reads specially, else in single quotes
/// (a `'` in it closed, escaped and reopened). A device's name is any 15
/// bytes but `/`, NUL and white space: `e;touch${IFS}P` names one.
pub fn shell_word(s: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._@:+=,/-%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
}

/// `s` with every character that would act on a terminal escaped,
/// newlines included: the result is one line that shows what `s` holds.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(acts) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            _ if !acts(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => push_code(&mut out, c),
        }
    }
    Cow::Owned(out)
}

fn push_code(out: &mut String, c: char) {
    if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

/// Lines for a person, built one at a time: each is escaped as a whole, so
/// a newline inside a name cannot start a line of its own.
#[derive(Default)]
pub struct Lines(String);

impl Lines {
    pub fn line(&mut self, args: fmt::Arguments<'_>) {
        match args.as_str() {
            Some(s) => self.0.push_str(&escape(s)),
            None => self.0.push_str(&escape(&args.to_string())),
        }
        self.0.push('\n');
    }

    pub fn blank(&mut self) {
        self.0.push('\n');
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A writer for text logs: each write is one formatted event
/// (tracing-subscriber writes an event at once), escaped but for the
/// newline that ends it. tracing-subscriber escapes ESC in fields itself,
/// but not `\r`, newlines or the rest.
pub struct EscapingWriter<W>(pub W);

impl<W: io::Write> io::Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let escaped = escape(body);
        if matches!(escaped, Cow::Borrowed(_)) && matches!(text, Cow::Borrowed(_)) {
            self.0.write_all(buf)?;
        } else {
            self.0.write_all(format!("{escaped}{end}").as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// A cgroup name (or a path of them) as text: valid UTF-8 as it is, any
/// other byte as `\xNN`. Names stay bytes everywhere else.
pub fn shown(name: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(name) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for chunk in name.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_in_a_command_stays_one_word() {
        assert_eq!(shell_word("eni1a2b3c4d5e6"), "eni1a2b3c4d5e6");
        assert_eq!(shell_word("eth0.100"), "eth0.100");
        assert_eq!(shell_word("e;touch${IFS}P"), "'e;touch${IFS}P'");
        assert_eq!(shell_word("a'b"), r"'a'\''b'");
        assert_eq!(shell_word("`x`"), "'`x`'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn control_and_reordering_characters_are_shown_not_acted_on() {
        assert_eq!(escape("kubepods.slice"), "kubepods.slice");
        assert!(matches!(escape("pod-ünïcode"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b[2J\rb\nc\td\x7f"), r"a\x1b[2J\rb\nc\td\x7f");
        assert_eq!(escape("\u{9b}31m"), r"\u{9b}31m");
        assert_eq!(escape("evil\u{202e}txt.exe"), r"evil\u{202e}txt.exe");
    }

    #[test]
    fn a_line_cannot_be_split_by_what_it_holds() {
        let mut l = Lines::default();
        let name = "x\nOK: clean";
        l.line(format_args!("at {name}"));
        l.blank();
        l.line(format_args!("done"));
        assert_eq!(l.into_string(), "at x\\nOK: clean\n\ndone\n");
    }

    #[test]
    fn a_log_line_keeps_its_end_and_nothing_else() {
        let mut out = EscapingWriter(Vec::new());
        io::Write::write_all(&mut out, b"INFO root=/x\rOK\x1b[8m\n").unwrap();
        io::Write::write_all(&mut out, b"INFO plain\n").unwrap();
        assert_eq!(String::from_utf8(out.0).unwrap(), "INFO root=/x\\rOK\\x1b[8m\nINFO plain\n");
    }
}
