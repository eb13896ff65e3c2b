//! Names of states, runs, steps and orgs: 1-128 of `A-Z a-z 0-9 . _ -`, not starting with
//! `.`. A name never reaches storage unchecked, so `..`, slashes and encoded slashes can
//! never become a path.

use super::Refusal;

/// The longest name accepted.
pub const MAX_NAME_LEN: usize = 128;

/// A state's name, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateName(String);

impl StateName {
    /// # Errors
    /// `Refusal::InvalidName` naming what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, Refusal> {
        check_name("state", raw)?;
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for StateName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a name of the given kind ("state", "run", "step", "org") against the naming rule.
///
/// # Errors
/// `Refusal::InvalidName` with a reason a person can act on.
pub fn check_name(kind: &'static str, raw: &str) -> Result<(), Refusal> {
    let refuse = |reason: String| Err(Refusal::InvalidName { kind, reason });
    if raw.is_empty() {
        return refuse(format!("a {kind} name cannot be empty"));
    }
    if raw.len() > MAX_NAME_LEN {
        return refuse(format!(
            "a {kind} name is at most {MAX_NAME_LEN} characters; this one has {}",
            raw.len()
        ));
    }
    if raw.starts_with('.') {
        return refuse(format!("a {kind} name cannot start with '.'"));
    }
    if let Some(bad) = raw
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return refuse(format!(
            "a {kind} name may only hold A-Z, a-z, 0-9, '.', '_' and '-'; found {bad:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_letters_digits_dot_underscore_dash() {
        for ok in ["network-core", "a", "A.b_c-9", &"x".repeat(128)] {
            assert!(StateName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_empty_long_dotted_and_path_like_names() {
        for bad in [
            "",
            ".hidden",
            "..",
            "a/b",
            "a%2Fb",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            let err = StateName::parse(bad).unwrap_err();
            assert!(
                matches!(err, Refusal::InvalidName { kind: "state", .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_reason_names_the_offending_character() {
        let Err(Refusal::InvalidName { reason, .. }) = StateName::parse("a/b") else {
            panic!("expected a refusal")
        };
        assert!(reason.contains("'/'"), "{reason}");
    }
}
