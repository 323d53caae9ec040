//! Values with `*`: each `*` matches zero or more characters, anywhere in the value,
//! as many as the value holds (envoy's ratelimit service matches them so).

/// A descriptor value holding at least one `*`, split on `*` once, when the file is
/// read.
#[derive(Clone, Debug)]
pub(crate) struct Pattern {
    text: String,
    /// The literal pieces between the stars: `a*b*` is `["a", "b", ""]`.
    parts: Vec<String>,
}

impl Pattern {
    /// The pattern of `value`, if it holds a `*`.
    pub(crate) fn new(value: &str) -> Option<Pattern> {
        value.contains('*').then(|| Pattern {
            text: value.to_owned(),
            parts: value.split('*').map(str::to_owned).collect(),
        })
    }

    /// The value as the file wrote it.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether `value` matches. The first piece must start it and the last end it;
    /// the pieces between are found leftmost, in order, in what lies between (with
    /// only `*` as a metacharacter, the leftmost choice never misses a match).
    pub(crate) fn matches(&self, value: &str) -> bool {
        let (first, rest) = self
            .parts
            .split_first()
            .expect("a pattern has a star, so two parts");
        let (last, middle) = rest.split_last().expect("a pattern has two parts");
        if value.len() < first.len() + last.len()
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        let mut between = &value[first.len()..value.len() - last.len()];
        for part in middle {
            match between.find(part.as_str()) {
                Some(at) => between = &between[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, value: &str) -> bool {
        Pattern::new(pattern).unwrap().matches(value)
    }

    /// A backtracking reference: `*` tries every length.
    fn reference(pattern: &[u8], value: &[u8]) -> bool {
        match pattern.split_first() {
            None => value.is_empty(),
            Some((b'*', rest)) => (0..=value.len()).any(|i| reference(rest, &value[i..])),
            Some((c, rest)) => value.first() == Some(c) && reference(rest, &value[1..]),
        }
    }

    #[test]
    fn stars_match_anywhere_and_may_match_nothing() {
        // envoy's test/config/wildcard.yaml and share_threshold.yaml cases.
        assert!(matches("foo*", "foo1") && matches("foo*", "foo"));
        assert!(!matches("foo*", "bar"));
        assert!(matches("bar*b", "barab") && matches("bar*b", "bar123b"));
        assert!(matches("bar*b", "barb"));
        assert!(!matches("bar*b", "bara") && !matches("bar*b", "xbarb"));
        assert!(matches("foo*bar*baz", "foo123bar456baz") && matches("foo*bar*baz", "foobarbaz"));
        assert!(!matches("foo*bar*baz", "foo123baz") && !matches("foo*bar*baz", "bar456baz"));
        assert!(matches("svc*ep*rpc", "svceprpc") && !matches("svc*ep*rpc", "svcABCrpc"));
        assert!(matches("*", "") && matches("*", "anything"));
        // The prefix and the suffix may not overlap.
        assert!(!matches("ab*ba", "aba"));
        assert!(matches("ab*ba", "abba"));
        assert_eq!(Pattern::new("*x").unwrap().text(), "*x");
        assert!(Pattern::new("plain").is_none());
    }

    #[test]
    fn multibyte_values_cut_on_character_boundaries() {
        assert!(matches("é*é", "éé") && matches("é*ü*é", "éaüé"));
        assert!(!matches("é*é", "é"));
    }

    proptest::proptest! {
        /// The leftmost scan agrees with trying every split.
        #[test]
        fn agrees_with_backtracking(pattern in "[ab*]{1,7}", value in "[ab]{0,8}") {
            if let Some(p) = Pattern::new(&pattern) {
                proptest::prop_assert_eq!(
                    p.matches(&value),
                    reference(pattern.as_bytes(), value.as_bytes()),
                    "{} on {}", pattern, value
                );
            }
        }
    }
}
