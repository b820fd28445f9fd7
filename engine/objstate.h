/* SPDX-License-Identifier: MIT */
/*
 * engine/objstate.h - the object state machine as batch/get.c and
 * batch/remove.c include it. The definition is metadata/objstate.h; this
 * header adds nothing and goes once no file includes it.
 */
#ifndef KVF_ENGINE_OBJSTATE_H
#define KVF_ENGINE_OBJSTATE_H

#include "metadata/objstate.h"

#endif /* KVF_ENGINE_OBJSTATE_H */
