# SPDX-License-Identifier: MIT
EXTRA_DIST += tests/unit/helpers.h
