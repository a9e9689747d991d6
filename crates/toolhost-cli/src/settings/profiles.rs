//! Agent profiles named to the host, checked against those that exist.

use anyhow::bail;
use toolhost_runtime::policy::Policy;

use super::ConfigFile;

/// Checks a profile name given to the host (`--agent`, a token file's
/// line, named by `what`) against the profiles that exist: the policy's,
/// and the config file's `[agents.NAME]`. An unknown name stops the start,
/// since its calls would run under the base policy rather than the
/// profile meant (a typo such as `reviewr` would widen what a client may do).
pub fn check_profile(
    name: &str,
    what: &str,
    policy: &Policy,
    file: &ConfigFile,
) -> anyhow::Result<()> {
    let mut known: Vec<&str> = policy.profile_names();
    known.extend(file.agents.keys().map(String::as_str));
    known.sort_unstable();
    known.dedup();
    if known.contains(&name) {
        return Ok(());
    }
    bail!(
        "{what} names the profile `{}`, which neither the policy nor the config file defines \
         (profiles: {}); the host does not start with calls under a profile that does not exist",
        crate::shown::printable(name),
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    );
}
