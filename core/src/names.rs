//! The names the front ends give the core's option enums (Python keyword
//! strings, Node option strings, log fields): one table per enum, so a binding
//! parses a name with [`Named::parse`] and shows a value with [`Named::name`]
//! instead of repeating the table in each language (`docs/architecture.md`,
//! "Front ends convert").

/// An enum whose values each have one fixed name.
pub trait Named: Sized + Copy + PartialEq + 'static {
    /// Every value with its name, in the order an error message lists them.
    /// The C API's constants for the enum are the indices in this table
    /// (`ffi/src/bwe.rs` tests that they stay so).
    const NAMES: &'static [(&'static str, Self)];

    /// The value's name.
    fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("other", |(n, _)| n)
    }

    /// The value named `s`; an unknown name is an invalid-input error that
    /// names the option (`what`) and lists the known names.
    fn parse(what: &str, s: &str) -> crate::Result<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::NAMES.iter().map(|(n, _)| *n).collect();
                crate::Error::invalid(format!("{what} {s:?} is unknown; use one of {names:?}"))
            })
    }
}

/// `named!(Type { "name" => Type::Value, ... })` implements [`Named`].
macro_rules! named {
    ($t:ty { $($n:literal => $v:expr),+ $(,)? }) => {
        impl $crate::names::Named for $t {
            const NAMES: &'static [(&'static str, Self)] = &[$(($n, $v)),+];
        }
    };
}
pub(crate) use named;

#[cfg(test)]
mod tests {
    use super::Named;
    use crate::bwe::pathload::Trend;

    #[test]
    fn parse_and_name_round_trip_and_unknown_lists_names() {
        for (n, v) in Trend::NAMES {
            assert_eq!(Trend::parse("trend", n).unwrap(), *v);
            assert_eq!(v.name(), *n);
        }
        let e = Trend::parse("trend", "up").unwrap_err().to_string();
        assert!(e.contains("trend \"up\" is unknown"), "{e}");
        assert!(e.contains("no_trend"), "{e}");
    }
}
