//! The one count over every test binary and kernel: cargo's last `test
//! result:` line is only the last binary's.

/// Test counts summed over every `test result:` line cargo printed.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) passed: u64,
    pub(crate) failed: u64,
    pub(crate) ignored: u64,
}

impl Tally {
    pub(crate) fn add_line(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else { return };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else { continue };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn tally_sums_every_result_line() {
        let mut t = Tally::default();
        t.add_line("test result: ok. 41 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s");
        t.add_line("test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.37s");
        t.add_line("running 3 tests");
        assert_eq!((t.passed, t.failed, t.ignored), (43, 1, 2));
    }
}
