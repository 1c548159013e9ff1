/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Copyright Authors of Cilium */

/*
 * This is just a dummy header with dummy values to allow for test
 * compilation without the full code generation engine backend.
 */
#define CIDR4_HMAP_ELEMS 1024
#define CIDR4_LMAP_ELEMS 1024
#define CIDR4_FILTER
#define CIDR4_LPM_PREFILTER
#define CIDR6_FILTER
#define CIDR6_LPM_PREFILTER
