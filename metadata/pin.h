/* SPDX-License-Identifier: MIT */
/*
 * metadata/pin.h - the pin bits, one definition for the object record
 * (its @flags, metadata/object.h) and the journal (an OBJECT_PUT record's
 * flags, journal/journal.h), which stores them as they are.
 *
 * A hard pin keeps an object from eviction; a soft pin makes eviction
 * take it last until its deadline (the record's stamp) passes. The values
 * are on disk in every journal: they never change.
 */
#ifndef KVF_METADATA_PIN_H
#define KVF_METADATA_PIN_H

enum kvf__pin_flags {
	KVF__OBJ_HARD_PIN = 1u << 0,
	KVF__OBJ_SOFT_PIN = 1u << 1,
};

#define KVF__OBJ_PIN_MASK (KVF__OBJ_HARD_PIN | KVF__OBJ_SOFT_PIN)

_Static_assert(KVF__OBJ_HARD_PIN == 1 && KVF__OBJ_SOFT_PIN == 2,
	       "pin bits are stored in journal records: their values are fixed");

#endif /* KVF_METADATA_PIN_H */
