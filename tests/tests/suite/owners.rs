//! Issue 37: every owner in the registry judged by what it intends, through
//! stand-ins with its names, types, hooks and attach flags, attached by a
//! process named as its agent: the seed (below the root, through a cgroup2
//! mount the agent made in a private cgroup namespace) and the healthy case
//! (at the root). And the conflict at the root, and a name that proves
//! nothing.

use integration_tests::can_run;
use integration_tests::owners;

#[test]
fn every_root_owners_seed_is_its_own_with_its_fix_and_at_the_root_is_clean() {
    if can_run(&[]) {
        owners::every_root_owners_seed_is_its_own_with_its_fix_and_at_the_root_is_clean();
    }
}

#[test]
fn merbridge_exclusive_at_the_root_beside_cilium_is_a_conflict_naming_both() {
    if can_run(&[]) {
        owners::merbridge_exclusive_at_the_root_beside_cilium_is_a_conflict_naming_both();
    }
}

#[test]
fn a_program_named_like_ciliums_in_a_pod_raises_no_critical() {
    if can_run(&[]) {
        owners::a_program_named_like_ciliums_in_a_pod_raises_no_critical();
    }
}
