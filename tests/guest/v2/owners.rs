//! Issue 37 on every kernel of the matrix: each root owner's seed and its
//! healthy case, the exclusive-beside-multi conflict the kernel refuses
//! (one attach mode per cgroup and hook, since 5.7's links), and a name
//! that proves nothing. The same scenarios as the host suite's.

use integration_tests::{guest, owners};

#[test]
fn every_root_owners_seed_is_its_own_with_its_fix_and_at_the_root_is_clean() {
    guest::require("v2");
    owners::every_root_owners_seed_is_its_own_with_its_fix_and_at_the_root_is_clean();
}

#[test]
fn merbridge_exclusive_at_the_root_beside_cilium_is_a_conflict_naming_both() {
    guest::require("v2");
    owners::merbridge_exclusive_at_the_root_beside_cilium_is_a_conflict_naming_both();
}

#[test]
fn a_program_named_like_ciliums_in_a_pod_raises_no_critical() {
    guest::require("v2");
    owners::a_program_named_like_ciliums_in_a_pod_raises_no_critical();
}
