#!/bin/sh
# SPDX-License-Identifier: MIT
