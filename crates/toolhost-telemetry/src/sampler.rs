//! Which traces are kept: `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG`, read as OpenTelemetry's SDK reads them
//! (`always_on`, `always_off`, `traceidratio`, and the `parentbased_`
//! forms of each; `parentbased_always_on` when unset or unknown), and
//! decided the SDK's way: a parent-based sampler follows the parent's
//! sampled flag, a ratio compares the trace id's low 63 bits with the
//! ratio's share of them.
//!
//! The decision is made once per span, when its ids are fixed
//! (`layer.rs`): an unsampled span is still given ids, so a request it
//! makes carries `traceparent` with the flag off and the next service
//! follows.

/// The sampler for spans without a parent (or for every span, when not
/// parent-based).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Root {
    AlwaysOn,
    AlwaysOff,
    /// Keep this share of traces (0.0–1.0), chosen by trace id.
    Ratio(f64),
}

/// The sampler the variables name ([module doc](self)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampler {
    root: Root,
    parent_based: bool,
}

impl Default for Sampler {
    /// `parentbased_always_on`, the SDK's default.
    fn default() -> Self {
        Sampler {
            root: Root::AlwaysOn,
            parent_based: true,
        }
    }
}

impl Sampler {
    /// The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name,
    /// read through `var`; an unknown name or a missing ratio is said once
    /// and the SDK's fallback taken.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Sampler {
        let Some(name) = var("OTEL_TRACES_SAMPLER") else {
            return Sampler::default();
        };
        let ratio = || {
            let arg = var("OTEL_TRACES_SAMPLER_ARG");
            match arg
                .as_deref()
                .map(str::trim)
                .and_then(|a| a.parse::<f64>().ok())
            {
                Some(r) if !r.is_nan() => r,
                _ => {
                    tracing::warn!(
                        "OTEL_TRACES_SAMPLER_ARG is missing or not a number: every trace is sampled"
                    );
                    1.0
                }
            }
        };
        let (parent_based, root) = match name.trim() {
            "always_on" => (false, Root::AlwaysOn),
            "always_off" => (false, Root::AlwaysOff),
            "traceidratio" => (false, Root::Ratio(ratio())),
            "parentbased_always_on" => (true, Root::AlwaysOn),
            "parentbased_always_off" => (true, Root::AlwaysOff),
            "parentbased_traceidratio" => (true, Root::Ratio(ratio())),
            other => {
                let shown: String = other.chars().take(64).collect();
                tracing::warn!(
                    sampler = %shown,
                    "OTEL_TRACES_SAMPLER is not one toolhost knows (always_on, always_off, \
                     traceidratio, or parentbased_ and one of them): parentbased_always_on is used"
                );
                (true, Root::AlwaysOn)
            }
        };
        Sampler { root, parent_based }
    }

    /// Whether a span of trace `trace_id` is sampled, given its parent's
    /// sampled flag (`None`: a root span).
    pub(crate) fn sampled(&self, parent: Option<bool>, trace_id: u128) -> bool {
        if self.parent_based
            && let Some(parent) = parent
        {
            return parent;
        }
        match self.root {
            Root::AlwaysOn => true,
            Root::AlwaysOff => false,
            Root::Ratio(ratio) => by_ratio(ratio, trace_id),
        }
    }
}

/// The SDK's `TraceIdRatioBased`: the trace id's low 64 bits, shifted to
/// 63, below the ratio's share of 2^63.
fn by_ratio(ratio: f64, trace_id: u128) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    // In range: `ratio` is below 1.0 and at least 0.0 here, so the
    // product is below 2^63; `as` saturates NaN-free floats.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let bound = (ratio.max(0.0) * (1u64 << 63) as f64) as u64;
    #[allow(clippy::cast_possible_truncation)]
    let low = trace_id as u64;
    (low >> 1) < bound
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(vars: &[(&str, &str)]) -> Sampler {
        Sampler::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn unset_or_unknown_is_parent_based_always_on() {
        assert_eq!(named(&[]), Sampler::default());
        assert_eq!(
            named(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]),
            Sampler::default()
        );
        let s = Sampler::default();
        assert!(s.sampled(None, 1));
        assert!(s.sampled(Some(true), 1));
        assert!(!s.sampled(Some(false), 1), "follows an unsampled parent");
    }

    #[test]
    fn always_on_and_off_ignore_the_parent_unless_parent_based() {
        let on = named(&[("OTEL_TRACES_SAMPLER", "always_on")]);
        assert!(on.sampled(Some(false), 1));
        let off = named(&[("OTEL_TRACES_SAMPLER", "always_off")]);
        assert!(!off.sampled(Some(true), 1));
        assert!(!off.sampled(None, 1));
        let parent_off = named(&[("OTEL_TRACES_SAMPLER", "parentbased_always_off")]);
        assert!(!parent_off.sampled(None, 1));
        assert!(parent_off.sampled(Some(true), 1));
    }

    #[test]
    fn a_ratio_keeps_its_share_of_trace_ids_as_the_sdk_does() {
        let half = named(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
        ]);
        // The low 64 bits decide: below 2^63 (after the shift) by half.
        assert!(half.sampled(None, 0xffff_0000_0000_0000_0000_0000_0000_0002));
        assert!(!half.sampled(None, 0xffff_u128 | (u128::from(u64::MAX))));
        let kept = (0..10_000u128)
            .filter(|i| {
                half.sampled(
                    None,
                    i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
                )
            })
            .count();
        assert!((4_000..6_000).contains(&kept), "{kept}");
        let none = named(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ]);
        assert!(!none.sampled(None, 0));
        // A missing or junk ratio samples everything, as the SDK does.
        for junk in ["", "half", "NaN"] {
            let s = named(&[
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", junk),
            ]);
            assert!(s.sampled(None, u128::MAX), "{junk}");
            assert!(!s.sampled(Some(false), u128::MAX), "{junk}");
        }
    }
}
