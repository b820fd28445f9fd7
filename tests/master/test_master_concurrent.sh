#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/master/test_master_concurrent.sh - several clients on several
# connections and event-loop threads at once, pipelined requests and the
# client flow; the test the ThreadSanitizer tier runs against the master.
exec "$(dirname "$0")/test_master_e2e.sh" concurrent pipeline flow
