/* SPDX-License-Identifier: MIT */
/* kvforge.h - everything public. */
#ifndef KVFORGE_H
#define KVFORGE_H
#include <kvforge/version.h>
#include <kvforge/status.h>
#include <kvforge/log.h>
#include <kvforge/engine.h>
#include <kvforge/segment.h>
#include <kvforge/batch.h>
#include <kvforge/profile.h>
#include <kvforge/rdma.h>
#endif
