/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Copyright Authors of Cilium */

#pragma once

#include <linux/types.h>
#include <linux/byteorder.h>
#include <linux/bpf.h>
#include <linux/if_packet.h>

#include "compiler.h"
#include "section.h"
#include "helpers.h"
#include "builtins.h"
#include "tailcall.h"
#include "errno.h"
#include "loader.h"
#include "csum.h"
#include "access.h"
