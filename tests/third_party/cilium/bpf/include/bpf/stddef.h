/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Copyright Authors of Cilium */

#pragma once

#ifndef NULL
#define NULL ((void *)0)
#endif

#define bool	_Bool

enum {
	false	= 0,
	true	= 1,
};
