/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Copyright Authors of Cilium */
#pragma once

#include "features.h"

/* This file is regenerated with different macros at startup of the agent.
 * See pkg/datapath/linux/probes/probes.go to add new macros.
 */

/* Only skb related features. */
