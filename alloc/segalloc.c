/* SPDX-License-Identifier: MIT */
/*
 * alloc/segalloc.c - per-segment range allocator, all bookkeeping outside.
 *
 * The segment is only a number range [0, capacity): nothing is mapped or
 * touched. Two structures describe it:
 *
 *  - Free regions live in a treap ordered by offset, each node augmented
 *    with the largest region sizes of its two subtrees. The root's max is
 *    the largest free region, exactly. Allocation is address-ordered first
 *    fit: descend left whenever the left subtree's max fits, so the search
 *    is O(log n) expected and never misses a fit that exists. First fit by
 *    address fragments about as little as best fit (Johnstone & Wilson,
 *    "The memory fragmentation problem: solved?", ISMM 1998) and needs one
 *    tree instead of two. Freeing finds the address neighbours in the same
 *    tree and coalesces, so adjacent free regions never coexist.
 *
 *  - Live allocations live in an open-addressing hash (offset -> size,
 *    16 bytes a slot, load <= 1/2), so free() can check that it is given
 *    exactly what alloc returned; anything else is a broken invariant.
 *
 * Every size is rounded up to the alignment and every region starts
 * aligned, so a region fits a request iff its size is at least the rounded
 * request: no padding, and largest_free answers "does it fit" exactly.
 * An unaligned segment tail (shorter than the alignment) is not managed.
 *
 * Memory: 32-64 bytes of hash per live allocation plus a 56-byte node per
 * free region (at most one more than the live allocations, usually far
 * fewer). Nodes come from chunked pools, so the hot path does not malloc
 * except when the hash doubles (amortised O(1); the rehash runs under the
 * lock, ~10 ms at a million live allocations). free() cannot fail: if a
 * new region node cannot be allocated there, the process dies, as it would
 * on any other broken invariant (a 56 KiB chunk malloc failing means the
 * master is out of memory anyway).
 *
 * Concurrency: one mutex per allocator guards everything. After each change
 * the lock holder publishes free_bytes, largest_free and the allocation
 * count with atomic stores, so placement reads them lock-free (possibly
 * stale, never torn).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include <kvforge/status.h>

#include "alloc/segalloc.h"
#include "engine/die.h"

struct node {
	uint64_t off;
	uint64_t size;
	/*
	 * Largest sizes in the left and right subtrees, kept here so that a
	 * descent decides its direction from the node it already loaded:
	 * one cache miss per level instead of two.
	 */
	uint64_t lmax, rmax;
	struct node *l, *r;
	uint32_t prio; /* treap heap key: parents have larger priorities */
};

#define NODES_PER_CHUNK 1024

struct node_chunk {
	struct node_chunk *next;
	struct node nodes[NODES_PER_CHUNK];
};

struct slot {
	uint64_t key; /* offset + 1; 0 = empty */
	uint64_t size;
};

struct kvf__segalloc {
	struct kvf__segalloc_pub pub; /* must stay first: see segalloc.h */
	_Atomic uint64_t nr_allocs;
	uint64_t size;
	unsigned align_shift;

	pthread_mutex_t lock;
	struct node *root;
	struct node *spare;  /* free node list, linked through ->r */
	struct node_chunk *chunks;
	uint64_t free_bytes; /* authoritative copies, under the lock */
	uint64_t rng;

	struct slot *tab;
	uint64_t tab_mask;  /* capacity - 1, capacity a power of two */
	unsigned tab_shift; /* 64 - log2(capacity) */
	uint64_t tab_used;
};

/* ---- node pool ---- */

static struct node *node_get(struct kvf__segalloc *a)
{
	struct node *n = a->spare;

	if (!n) {
		struct node_chunk *c = malloc(sizeof(*c));

		if (!c)
			return NULL;
		c->next = a->chunks;
		a->chunks = c;
		for (int i = NODES_PER_CHUNK - 1; i >= 0; i--) {
			c->nodes[i].r = a->spare;
			a->spare = &c->nodes[i];
		}
		n = a->spare;
	}
	a->spare = n->r;
	/* xorshift64 for treap priorities; under the lock. */
	a->rng ^= a->rng << 13;
	a->rng ^= a->rng >> 7;
	a->rng ^= a->rng << 17;
	n->prio = (uint32_t)(a->rng >> 32);
	n->l = n->r = NULL;
	return n;
}

static void node_put(struct kvf__segalloc *a, struct node *n)
{
	n->r = a->spare;
	a->spare = n;
}

/* ---- augmented treap ---- */

static inline uint64_t max3(uint64_t x, uint64_t y, uint64_t z)
{
	uint64_t m = x > y ? x : y;

	return m > z ? m : z;
}

/* Largest size in the subtree rooted at @n. */
static inline uint64_t tmax(const struct node *n)
{
	return n ? max3(n->size, n->lmax, n->rmax) : 0;
}

static inline void fix(struct node *n)
{
	n->lmax = tmax(n->l);
	n->rmax = tmax(n->r);
}

/* Join two treaps where every offset in @x is below every one in @y. */
static struct node *merge(struct node *x, struct node *y)
{
	if (!x)
		return y;
	if (!y)
		return x;
	if (x->prio > y->prio) {
		x->r = merge(x->r, y);
		fix(x);
		return x;
	}
	y->l = merge(x, y->l);
	fix(y);
	return y;
}

/* Split @t into offsets < @key (*lo) and >= @key (*hi). */
static void split(struct node *t, uint64_t key, struct node **lo,
		  struct node **hi)
{
	if (!t) {
		*lo = *hi = NULL;
		return;
	}
	if (t->off < key) {
		split(t->r, key, &t->r, hi);
		fix(t);
		*lo = t;
	} else {
		split(t->l, key, lo, &t->l);
		fix(t);
		*hi = t;
	}
}

static struct node *insert(struct node *t, struct node *n)
{
	if (!t) {
		fix(n);
		return n;
	}
	if (n->prio > t->prio) {
		split(t, n->off, &n->l, &n->r);
		fix(n);
		return n;
	}
	if (n->off < t->off)
		t->l = insert(t->l, n);
	else
		t->r = insert(t->r, n);
	fix(t);
	return t;
}

/* Unlink the node at @key (must exist); the caller recycles it. */
static struct node *unlink_key(struct node *t, uint64_t key)
{
	if (!t)
		kvf__die("free region at %#llx missing", (unsigned long long)key);
	if (key == t->off)
		return merge(t->l, t->r);
	if (key < t->off)
		t->l = unlink_key(t->l, key);
	else
		t->r = unlink_key(t->r, key);
	fix(t);
	return t;
}

/*
 * Give the node at @key the region [@off, @off + @size), which must keep
 * its place in the address order, and refresh the maxima on its path.
 */
static void reshape(struct node *t, uint64_t key, uint64_t off, uint64_t size)
{
	if (!t)
		kvf__die("free region at %#llx missing", (unsigned long long)key);
	if (key == t->off) {
		t->off = off;
		t->size = size;
	} else if (key < t->off) {
		reshape(t->l, key, off, size);
	} else {
		reshape(t->r, key, off, size);
	}
	fix(t);
}

/* Address-ordered first fit: the lowest region with size >= @need. */
static struct node *first_fit(struct node *t, uint64_t need)
{
	if (tmax(t) < need)
		return NULL;
	for (;;) {
		if (t->lmax >= need)
			t = t->l;
		else if (t->size >= need)
			return t;
		else
			t = t->r; /* the subtree fits, so the right side does */
	}
}

/* The regions just below (or at) and just above @off, either may be NULL. */
static void neighbours(struct node *t, uint64_t off, struct node **below,
		       struct node **above)
{
	*below = *above = NULL;
	while (t) {
		if (t->off <= off) {
			*below = t;
			t = t->r;
		} else {
			*above = t;
			t = t->l;
		}
	}
}

/* ---- live allocation hash ---- */

static inline uint64_t slot_of(const struct kvf__segalloc *a, uint64_t off)
{
	/* Fibonacci hashing: the top bits of the product are the best mixed. */
	return ((off >> a->align_shift) * 0x9e3779b97f4a7c15ULL) >>
	       a->tab_shift;
}

static int tab_grow(struct kvf__segalloc *a)
{
	uint64_t cap = (a->tab_mask + 1) * 2;
	struct slot *old = a->tab, *t = calloc(cap, sizeof(*t));
	uint64_t old_cap = a->tab_mask + 1;

	if (!t)
		return KVF_ERR_NO_MEMORY;
	a->tab = t;
	a->tab_mask = cap - 1;
	a->tab_shift--;
	for (uint64_t i = 0; i < old_cap; i++) {
		uint64_t j;

		if (!old[i].key)
			continue;
		for (j = slot_of(a, old[i].key - 1); t[j].key;
		     j = (j + 1) & a->tab_mask)
			;
		t[j] = old[i];
	}
	free(old);
	return KVF_OK;
}

/* Make room for one more entry before touching anything else. */
static int tab_reserve(struct kvf__segalloc *a)
{
	if ((a->tab_used + 1) * 2 > a->tab_mask + 1)
		return tab_grow(a);
	return KVF_OK;
}

static void tab_add(struct kvf__segalloc *a, uint64_t off, uint64_t size)
{
	uint64_t j = slot_of(a, off);

	while (a->tab[j].key)
		j = (j + 1) & a->tab_mask;
	a->tab[j].key = off + 1;
	a->tab[j].size = size;
	a->tab_used++;
}

/* Remove @off and return its size; 0 if it is not live. */
static uint64_t tab_del(struct kvf__segalloc *a, uint64_t off)
{
	uint64_t j = slot_of(a, off), size;

	for (;; j = (j + 1) & a->tab_mask) {
		if (!a->tab[j].key)
			return 0;
		if (a->tab[j].key == off + 1)
			break;
	}
	size = a->tab[j].size;
	/*
	 * Backward-shift deletion keeps probe chains intact without
	 * tombstones: an entry after the hole moves into it unless its home
	 * slot lies cyclically in (hole, entry].
	 */
	for (uint64_t k = j;;) {
		uint64_t home;

		k = (k + 1) & a->tab_mask;
		if (!a->tab[k].key)
			break;
		home = slot_of(a, a->tab[k].key - 1);
		if (((k - home) & a->tab_mask) < ((k - j) & a->tab_mask))
			continue;
		a->tab[j] = a->tab[k];
		j = k;
	}
	a->tab[j].key = 0;
	a->tab_used--;
	return size;
}

/* ---- publishing ---- */

static void publish(struct kvf__segalloc *a)
{
	atomic_store_explicit(&a->pub.free_bytes, a->free_bytes,
			      memory_order_release);
	atomic_store_explicit(&a->pub.largest_free, tmax(a->root),
			      memory_order_release);
	atomic_store_explicit(&a->nr_allocs, a->tab_used, memory_order_release);
}

/* ---- API ---- */

int kvf__segalloc_create(uint64_t size, uint64_t alignment,
			 struct kvf__segalloc **out)
{
	struct kvf__segalloc *a;
	uint64_t cap;

	if (!out || alignment < 8 || (alignment & (alignment - 1)) ||
	    size < alignment || size > (1ULL << 62))
		return KVF_ERR_INVALID_PARAMS;
	a = calloc(1, sizeof(*a));
	if (!a)
		return KVF_ERR_NO_MEMORY;
	cap = size & ~(alignment - 1);
	a->pub.align_mask = alignment - 1;
	a->pub.capacity = cap;
	a->size = size;
	a->align_shift = (unsigned)__builtin_ctzll(alignment);
	a->rng = 0x2545f4914f6cdd1dULL ^ (uintptr_t)a;
	a->tab_mask = 63;
	a->tab_shift = 64 - 6;
	a->tab = calloc(a->tab_mask + 1, sizeof(*a->tab));
	if (!a->tab)
		goto err_free;
	a->root = node_get(a);
	if (!a->root)
		goto err_tab;
	a->root->off = 0;
	a->root->size = cap;
	fix(a->root);
	a->free_bytes = cap;
	if (pthread_mutex_init(&a->lock, NULL))
		goto err_nodes;
	publish(a);
	*out = a;
	return KVF_OK;

err_nodes:
	free(a->chunks);
err_tab:
	free(a->tab);
err_free:
	free(a);
	return KVF_ERR_NO_MEMORY;
}

void kvf__segalloc_destroy(struct kvf__segalloc *a)
{
	struct node_chunk *c, *next;

	if (!a)
		return;
	for (c = a->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a->tab);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* Round @size up to the alignment; 0 if it overflows or exceeds capacity. */
static uint64_t rounded(const struct kvf__segalloc *a, uint64_t size)
{
	uint64_t need = (size + a->pub.align_mask) & ~a->pub.align_mask;

	return need < size || need > a->pub.capacity ? 0 : need;
}

int kvf__segalloc_alloc(struct kvf__segalloc *a, uint64_t size,
			uint64_t *offset)
{
	struct node *n;
	uint64_t need, off;
	int rc;

	if (!size || !offset)
		return KVF_ERR_INVALID_PARAMS;
	need = rounded(a, size);
	if (!need)
		return KVF_ERR_NO_SPACE;
	pthread_mutex_lock(&a->lock);
	n = first_fit(a->root, need);
	if (!n) {
		rc = KVF_ERR_NO_SPACE;
		goto out;
	}
	rc = tab_reserve(a);
	if (rc)
		goto out;
	off = n->off;
	/* Start the hash slot's cache miss while the tree is updated. */
	__builtin_prefetch(&a->tab[slot_of(a, off)], 1);
	if (n->size == need) {
		a->root = unlink_key(a->root, off);
		node_put(a, n);
	} else {
		reshape(a->root, off, off + need, n->size - need);
	}
	tab_add(a, off, need);
	a->free_bytes -= need;
	publish(a);
	*offset = off;
out:
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void kvf__segalloc_free(struct kvf__segalloc *a, uint64_t offset,
			uint64_t size)
{
	struct node *lo, *hi, *n;
	uint64_t need = size ? rounded(a, size) : 0, got, end;

	pthread_mutex_lock(&a->lock);
	got = tab_del(a, offset);
	if (!got || got != need)
		kvf__die("free of [%#llx, +%llu): %s", (unsigned long long)offset,
			 (unsigned long long)size,
			 got ? "wrong size" : "not allocated");
	end = offset + need;
	neighbours(a->root, offset, &lo, &hi);
	if ((lo && lo->off + lo->size > offset) || (hi && hi->off < end))
		kvf__die("allocated range [%#llx, +%llu) overlaps a free one",
			 (unsigned long long)offset, (unsigned long long)need);
	if (lo && lo->off + lo->size == offset) {
		uint64_t grown = lo->size + need;

		if (hi && hi->off == end) {
			grown += hi->size;
			a->root = unlink_key(a->root, hi->off);
			node_put(a, hi);
		}
		reshape(a->root, lo->off, lo->off, grown);
	} else if (hi && hi->off == end) {
		reshape(a->root, hi->off, offset, hi->size + need);
	} else {
		n = node_get(a);
		if (!n)
			kvf__die("no memory for a free region node");
		n->off = offset;
		n->size = need;
		a->root = insert(a->root, n);
	}
	a->free_bytes += need;
	publish(a);
	pthread_mutex_unlock(&a->lock);
}

int kvf__segalloc_reserve(struct kvf__segalloc *a, uint64_t offset,
			  uint64_t size)
{
	struct node *lo, *hi, *n = NULL;
	uint64_t need, end, lo_end;
	int rc;

	if (!size || (offset & a->pub.align_mask) || offset >= a->pub.capacity)
		return KVF_ERR_INVALID_PARAMS;
	need = rounded(a, size);
	if (!need || need > a->pub.capacity - offset)
		return KVF_ERR_INVALID_PARAMS;
	end = offset + need;
	pthread_mutex_lock(&a->lock);
	neighbours(a->root, offset, &lo, &hi);
	if (!lo || lo->off + lo->size < end) {
		rc = KVF_ERR_NO_SPACE;
		goto out;
	}
	rc = tab_reserve(a);
	if (rc)
		goto out;
	lo_end = lo->off + lo->size;
	if (lo->off < offset && lo_end > end) {
		/* Take the middle: the region splits in two. */
		n = node_get(a);
		if (!n) {
			rc = KVF_ERR_NO_MEMORY;
			goto out;
		}
		n->off = end;
		n->size = lo_end - end;
	}
	if (lo->off == offset && lo_end == end) {
		a->root = unlink_key(a->root, offset);
		node_put(a, lo);
	} else if (lo->off == offset) {
		reshape(a->root, offset, end, lo_end - end);
	} else {
		reshape(a->root, lo->off, lo->off, offset - lo->off);
	}
	if (n)
		a->root = insert(a->root, n);
	tab_add(a, offset, need);
	a->free_bytes -= need;
	publish(a);
out:
	pthread_mutex_unlock(&a->lock);
	return rc;
}

uint64_t kvf__segalloc_free_bytes(const struct kvf__segalloc *a)
{
	return kvf__segalloc_free_fast(a);
}

uint64_t kvf__segalloc_largest_free(const struct kvf__segalloc *a)
{
	return kvf__segalloc_largest_fast(a);
}

uint64_t kvf__segalloc_size(const struct kvf__segalloc *a)
{
	return a->size;
}

uint64_t kvf__segalloc_capacity(const struct kvf__segalloc *a)
{
	return a->pub.capacity;
}

uint64_t kvf__segalloc_alignment(const struct kvf__segalloc *a)
{
	return a->pub.align_mask + 1;
}

uint64_t kvf__segalloc_used_bytes(const struct kvf__segalloc *a)
{
	return a->pub.capacity - kvf__segalloc_free_fast(a);
}

uint64_t kvf__segalloc_nr_allocs(const struct kvf__segalloc *a)
{
	return atomic_load_explicit(&a->nr_allocs, memory_order_relaxed);
}
