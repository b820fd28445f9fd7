/* SPDX-License-Identifier: MIT */
/*
 * alloc/segalloc.c - per-segment range allocator, all bookkeeping outside.
 *
 * The segment is only a number range [0, capacity): nothing is mapped or
 * touched. It is tiled by blocks, each free or used, kept in ONE B+tree
 * ordered by offset (boundary tags kept outside the segment):
 *
 *  - A leaf holds up to FAN blocks as two arrays, sizes and tags; a used
 *    block's size carries USED in its low bit (sizes are multiples of the
 *    alignment, >= 8). It stores no offsets: the blocks tile the segment,
 *    so block i starts at the leaf's base (its first offset) plus the sizes
 *    of blocks 0..i-1, summed while val[] is scanned anyway. Every change
 *    therefore keeps the tiling: a replacement covers exactly the block it
 *    replaces, a removal hands its range to the block before it, borrows
 *    and splits move the right leaf's base. An inner node holds, per child,
 *    the child's lowest offset and its largest FREE block. The root's
 *    maximum is the largest free region, exactly.
 *  - alloc is address-ordered first fit: at each node take the first child
 *    whose maximum fits, in the leaf the first free block that fits; it
 *    cannot miss a fit that exists. First fit by address fragments about as
 *    little as best fit (Johnstone & Wilson, "The memory fragmentation
 *    problem: solved?", ISMM 1998).
 *  - free looks its block up by offset: the block must exist, be used and
 *    have exactly the size alloc gave, else it is a broken invariant
 *    (kvf__die). Its address neighbours are the adjacent blocks (usually in
 *    the same leaf); free ones are merged, so two free blocks are never
 *    adjacent and a fully freed segment is one block again.
 *  - Summaries: every node keeps its largest free block (max, equal to the
 *    parent's entry for it) and sub, an upper bound on all its entries but
 *    one largest. An alloc that shrinks a node's largest entry to v >= sub
 *    sets max = v without rescanning the node; only v < sub rescans (which
 *    makes sub exact again). A free that merges in place rescans its leaf
 *    and raises the levels above in O(1) each (a raise keeps an exact sub
 *    exact). Structural changes (splits, merges, borrows) recompute the
 *    nodes they touch. Without sub, every alloc that took a node's largest
 *    block (the engine's fill always does, best fit across segments
 *    mostly) rescanned every node on its path, ~500 instructions.
 *    Inner nodes also keep maxi, an entry holding max, and maxchild,
 *    its child (set by rescans, kept by raises; maxchild shares the head
 *    word leaves use for base): a request larger than a node's sub fits
 *    only under that entry, so first fit descends there reading one line
 *    of the node, its head, instead of val[] up to the entry and then
 *    child[] (best fit across segments and the engine's fill mostly do;
 *    it takes the fragmentation_aware uniform median from ~80 to ~60 ns).
 *    sub_exact says sub is exactly the second largest entry (and, in
 *    inner nodes, subi where it is): then the largest shrinking below sub
 *    hands max to the second with no rescan, sub staying as a bound (a
 *    rescan or a raise makes it exact again). Best fit across segments
 *    takes a segment's largest block, which without sub_exact rescans
 *    every node on the path; sub_exact defers about half of those rescans
 *    (bimodal and wide medians 8-18% lower for every strategy). An
 *    in-place alloc of a leaf block equal to sub makes the leaf's sub a
 *    bound (it cannot tell which equal block was the second).
 *
 * Why this shape: the cost of an allocator whose metadata spans tens of MB
 * is cache misses, not instructions. A binary tree costs one miss per level
 * (~7 for thousands of regions) plus, with a separate hash of live
 * allocations, one more per operation. Here the inner levels are few (FAN
 * 32: three levels hold ~30,000 blocks), and one leaf holds both the free
 * block alloc takes and the used block it records, so an alloc or free
 * misses on one leaf and on the few inner nodes above it, which stay
 * cached while the allocator is busy but not under a master's whole
 * working set (batched frees prefetch them, below). No hash means no
 * rehash spikes either.
 *
 * Balance: nodes other than the root keep at least MIN_FILL entries; an
 * underfull node borrows from or merges with a sibling. Memory is 16 bytes
 * per block slot (size, tag) plus a 32-byte head per leaf (544 bytes, 560
 * with malloc's header; 800 with offsets); a fill leaves leaves 29/32 full,
 * so ~21 bytes per block in the engine's fill (measured: 29.5 with the
 * offset array, 34 with MIN_FILL 8), more after heavy churn.
 *
 * Debugging: build with -DKVF_SEGALLOC_CHECK to verify every node's max,
 * sub and parent entry, and that the leaves tile the segment, after each
 * change, and first fit's tail shortcut against the summed offset (slow;
 * make check runs the allocator's tests so, as test_segalloc_checked).
 *
 * Every size is rounded up to the alignment and every block starts
 * aligned, so a free block fits a request iff its size is at least the
 * rounded request: no padding, and largest_free answers "does it fit"
 * exactly. An unaligned segment tail (shorter than the alignment) is not
 * managed.
 *
 * Allocation of tree nodes: alloc and reserve turn one block into at most
 * three, which can split one node per level; the nodes for that are taken
 * (malloc) before anything changes, so NO_MEMORY leaves the tree intact.
 * free only removes blocks, so it never allocates and cannot fail. Spare
 * nodes are kept per allocator so steady churn does not call malloc.
 *
 * Batched frees (kvf__segalloc_free_many, a batch remove's frees in one
 * segment): one lock hold and one publish for all of them, and a run of
 * frees that merge in place in one leaf rescans that leaf and raises its
 * path once, at the end of the run, instead of once per free; a free
 * inside that pending leaf finds its block there, without a descent (a
 * fill removed in order frees neighbours). Before the
 * first free, the batch's descents are walked level by level with every
 * level's loads issued for all of them at once (prefetch_descents), so
 * their misses overlap: in a master's steady state the inner levels are
 * not cached either (between two removes, puts pass through megabytes),
 * and a free's lookup by offset was ~74% of its remove's samples, most of
 * them on inner nodes. A run of frees of neighbouring blocks in one leaf,
 * each after the one before it (a fill removed in order), is one merge
 * (free_run_locked()): one shift of the leaf's entries instead of one per
 * free, which took ~6% of a remove at 10M objects in memmove. A free in
 * a slab needs no descent but two dependent loads (the directory cell,
 * the slab's head): the batch's cells are prefetched while the engine
 * unlinks its records (kvf__segalloc_prefetch_free(), no lock), and the
 * cells, then the heads, for the whole batch before the first free
 * (prefetch_slabs()).
 *
 * Reuse lists (the fast path of alloc): a master's objects come in a
 * handful of sizes (KV-cache pages: one or two per model), and in steady
 * state a put follows a remove of the same size. A freed block whose
 * rounded size has a slot (REUSE_SIZES slots, claimed by a size allocated
 * a third time within REUSE_SEEN allocs, a slot going to a new size when
 * its own is stale or has nothing parked) and whose neighbours are both
 * held is not merged into the tree: it stays marked used there, with the
 * CACHED flag, and its offset goes on that size's list (REUSE_DEPTH
 * offsets, one array, with the leaf that held each when it was parked).
 * The next alloc of that size pops the newest one: a compare per slot, no
 * descent, no split, no summary to fix. The block's leaf still says
 * parked: the pop is a claim (offset, size, owner's tag, leaf), and up to
 * CLAIM_DEPTH claims are written into their leaves together
 * (apply_claims) before any operation other than alloc reads the tree
 * and whenever the claims fill up (alloc itself only looks for free
 * blocks, and a claimed block is used to the tree). A claim goes straight
 * to the leaf it carries when that leaf still holds its block
 * (hinted_parked_leaf(): checked, never trusted; a spare leaf holds no
 * block, and a leaf given back to malloc is first forgotten by every
 * hint); only a claim whose block a split, merge or borrow moved since
 * descends, its descent walked level by level with a batch of frees'.
 * Half of a steady-state remove's descents were claims'. To every
 * reader a parked block is free: free_bytes counts it, nr_allocs, the used
 * blocks and the scan skip it, reserve takes it.
 *  - Bound: parked bytes stay under reuse.limit (capacity / REUSE_SHARE
 *    by default; kvf__segalloc_set_reuse_limit, 0 turns the lists off).
 *  - A parked block borders only held blocks: a free next to one takes it
 *    off its list and merges with it in the tree as usual, and a block
 *    next to a free or parked one is never parked. So giving parked
 *    blocks back merges nothing, and the published largest_free, the
 *    larger of the tree's and the largest parked block, stays exactly the
 *    largest request alloc can serve.
 *  - When the tree cannot serve a request but a parked block could (the
 *    lists hold space the tree needs), every list gives its blocks back
 *    to the tree and first fit runs: NO_SPACE still means no free range
 *    fits, as without the lists.
 * Allocations are then not all address-ordered first fit (a parked block
 * is an exact fit wherever it is); tests/unit/test_segalloc checks the
 * lists against the tree alone on the same requests. The sizes whose
 * lists hold a block are published (pub.parked), and a park is noted in
 * the segment set's hint (struct kvf__park_hint), so placement can go
 * to an exact fit without a pass over the segments and take it alone
 * (kvf__segalloc_has_parked, kvf__segalloc_try_take_parked).
 *
 * Slabs: a size with a slot whose objects are small against the segment
 * (slab_objs(): SLAB_MIN_OBJS to SLAB_MAX_OBJS of them at least one
 * directory cell long, at most capacity / SLAB_SHARE bytes) is held in
 * slabs once it was allocated SLAB_AFTER times since it took the slot. A slab
 * is one used block of the tree (flag SLAB, tag 0) holding k objects of that
 * size: a bitmap says which are held, an array keeps the high halves of their
 * tags (4 bytes per object against the tree's 16 per block; slab_tag()). The
 * per-segment directory (about 2^SLAB_CELLS_LOG cells of 16 bytes, made
 * at the first slab) finds an object's slab in O(1): a slab is at least a
 * cell long, so a cell meets at most two (the one covering its first
 * byte, the one starting inside it); a miss is a plain block of the tree.
 * An alloc of the size takes a parked block first, else a slot of the
 * newest slab with one free (the last of its class's partial array: a
 * run of allocs asks for the heads of the slabs it will take at once,
 * prefetch_partials()), else carves a new slab by first fit, but not
 * where less than capacity / SLAB_ROOM would stay free. A free in a slab
 * clears a bit: no descent, no merge; the slab goes back to the tree as
 * one free block when its last object goes.
 *  - Space back: a slab's free slots serve its own size only. When the
 *    tree cannot meet a request (after the parked blocks were given
 *    back), slabs with free slots are broken up until it can
 *    (slabs_make_room(), slab_break()): each held object becomes a plain
 *    used block with its tag, each run of free slots a free block merged
 *    with its free neighbours. The nodes that takes are reserved before
 *    anything changes (NO_MEMORY leaves the slab whole). So NO_SPACE
 *    still means no free range fits, and the published largest_free,
 *    which counts the largest size with a free slot, is a request alloc
 *    can serve (its own size from the slab, any smaller one by breaking
 *    it). A size that loses its slot breaks its partial slabs up at once
 *    (a stray list keeps them if memory is short; its full slabs join it
 *    at their first free) so no slot waits for a size nobody allocates.
 *  - To every reader a free slot is free (free_bytes counts it) and a
 *    held object a used block (nr_allocs, used_blocks and scan list it,
 *    with its tag); reserve takes exactly one free slot of its size.
 *  - KVF_SEGALLOC_CHECK verifies after every change: each SLAB block is
 *    in the directory and agrees with it, is never empty, its bitmap
 *    counts its free slots, a free slot has no tag, it is listed (class
 *    array, at the place it names, or stray) iff it has a free slot,
 *    and each class's array has room for all its slabs; the directory's
 *    cells name only slabs meeting them; and the free bytes are the
 *    tree's free blocks plus parked blocks plus free slots, less the
 *    pending claims.
 *
 * Concurrency: one mutex per allocator guards everything. After each change
 * the lock holder publishes free_bytes, largest_free and the allocation
 * count with atomic stores (the parked sizes as their lists change), so
 * placement reads them lock-free (possibly stale, never torn).
 *
 * Scanning (kvf__segalloc_scan, at the end of this file): one descent to
 * a start offset, then the leaves in address order, stepping a root-to-
 * leaf path like an iterator (no sibling links needed), the next leaf
 * prefetched while the current one is read. Eviction's clock hands use it
 * so their allocator misses are few and in sequence.
 */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "alloc/segalloc.h"
#include "base/die.h"
#include "base/grow.h"
#include "base/lock.h"
#include "base/prefetch.h"

#define FAN 32
/*
 * FAN / 8, not the textbook FAN / 2 or / 4: a fill splits its last leaf
 * into MIN_FILL entries on the right and the rest on the left, so leaves
 * end up (FAN + 1 - MIN_FILL) / FAN full; with 4 that is 29/32 and the
 * engine's allocator memory is ~28 bytes per object instead of ~34.
 */
#define MIN_FILL (FAN / 8)
#define USED 1ULL
/*
 * A used block parked in an exact-size reuse list (see "Reuse lists"
 * above): free to the outside, used to the tree. Sizes are multiples of
 * the alignment (>= 8), so the low three bits are free for flags.
 */
#define CACHED 2ULL
/*
 * A used block that is a slab (see "Slabs" above): K objects of one size
 * kept in the slab's bitmap, not in the tree. Held, never parked.
 */
#define SLAB 4ULL
#define FLAGS (USED | CACHED | SLAB)
/* The flags of a parked block. */
#define PARKED (USED | CACHED)
/*
 * Height h needs >= 2 * MIN_FILL^h blocks; a segment holds at most
 * 2^62 / 8 = 2^59, so h <= 28.
 */
#define MAX_HEIGHT 29
#define MAX_SPARE 8
/* Reuse lists: sizes per allocator, blocks per size. */
#define REUSE_SIZES KVF__SEGALLOC_REUSE_SIZES
/* Recent sizes remembered to admit a size to a slot (reuse_seen). */
#define REUSE_SEEN 8
#define REUSE_DEPTH 64
/* Popped parked blocks whose leaf is written later (struct reuse). */
#define CLAIM_DEPTH 32
/* A size not allocated in this many allocs gives up its slot. */
#define REUSE_STALE 4096
/* Default bound on parked bytes: capacity / REUSE_SHARE. */
#define REUSE_SHARE 16
/*
 * Slabs: about 2^SLAB_CELLS_LOG directory cells per segment, a slab at
 * least one cell long and holding SLAB_MIN_OBJS to SLAB_MAX_OBJS objects,
 * at most capacity / SLAB_SHARE bytes. 2^11 cells, not 2^12: the
 * directory is half as large and a slab holds twice the objects, so the
 * engine's allocator bytes per object at 1M went from 9.5 to 7.8 (slab
 * heads and cells) with no paired change in time
 * (docs/benchmarks.md); the largest slab doubled with the cell, so the
 * smallest size a segment gives slabs stays where it was.
 */
#define SLAB_CELLS_LOG 11
#define SLAB_MIN_OBJS 4
#define SLAB_MAX_OBJS 2048
_Static_assert(SLAB_MAX_OBJS <= UINT16_MAX, "struct slab counts in 16 bits");
#define SLAB_SHARE 16
/* No slab is carved once less than capacity / SLAB_ROOM would stay free. */
#define SLAB_ROOM 8
/*
 * Nor for a size allocated fewer than SLAB_AFTER times since it took its
 * slot: a master's page sizes pass at once, the wide placement mix's
 * sizes, each seen now and then, do not (their slabs cost it fill).
 */
#define SLAB_AFTER 64

/*
 * Leaves and inner nodes share a head (struct node: count, summaries,
 * val[]), so the summary code works on either; what follows val[] differs.
 * val[i]: leaf - block size | USED; inner - largest free block under child
 * i. A leaf stores no offsets: blocks tile the segment, so block i starts
 * at base plus the sizes of blocks 0..i-1 (computed while scanning val[],
 * which every operation reads anyway). That makes a leaf 544 bytes instead
 * of 792 and saves the cold line of offsets on every alloc.
 */
struct node {
	uint32_t n;
	uint32_t maxi; /* inner nodes: an entry holding max */
	union {
		uint64_t base;         /* leaves: offset of block 0 */
		struct node *maxchild; /* inner nodes: child[maxi] */
	};
	/*
	 * max: the largest free block under this node, exactly (the parent's
	 * val[] entry for it holds the same). sub: an upper bound on every
	 * entry but one largest (so sub == max when two entries tie). With
	 * it, shrinking the largest entry to v >= sub gives max = v with no
	 * rescan; the engine's fill (the tail block, largest everywhere,
	 * shrinks on every alloc) and best fit across segments do that.
	 */
	uint64_t max;
	uint64_t sub;
	/*
	 * Inner nodes: when sub_exact, sub is exactly the largest entry but
	 * the one at maxi, and subi holds it (subi != maxi). Then the largest
	 * entry shrinking below sub hands max to subi without a rescan (sub
	 * stays, as a bound). Leaves do not use them.
	 */
	uint32_t subi;
	uint32_t sub_exact;
	uint64_t val[FAN];
};

struct leaf {
	struct node h;
	uint64_t tag[FAN]; /* the tag of a used block (0 when free) */
};

struct inner {
	struct node h;
	uint64_t key[FAN];         /* lowest offset under child i */
	struct node *child[FAN];
};

static inline struct leaf *as_leaf(const struct node *n)
{
	return (struct leaf *)n;
}

static inline struct inner *as_inner(const struct node *n)
{
	return (struct inner *)n;
}

/*
 * Exact-size reuse lists: per size (rounded), the offsets of freed blocks
 * of that size still marked used in the tree (CACHED), newest last, each
 * with the leaf that held it when it was parked (a hint: see
 * hinted_parked_leaf()).
 */
struct reuse_list {
	uint64_t size;     /* 0: slot unused */
	uint64_t last_use; /* reuse.clock at this size's last alloc */
	uint32_t n;
	uint32_t slab_k;       /* objects per slab of this size; 0: no slabs */
	uint32_t hits;         /* allocs of it since it took the slot, to SLAB_AFTER */
	uint32_t gen;          /* bumped when the slot changes size */
	uint64_t nr_slabs;     /* slabs of this generation, full ones too */
	/* Its slabs with a free slot, newest last (slab_partial_top()). */
	struct slab **partial;
	uint32_t nr_partial;
	size_t partial_cap; /* kept >= nr_slabs (slab_carve()) */
	uint64_t off[REUSE_DEPTH];
	struct node *leaf[REUSE_DEPTH];
};

/* A popped parked block whose leaf still says parked (apply_claims). */
struct claim {
	uint64_t off;
	uint64_t size;
	uint64_t tag;
	struct node *leaf; /* its leaf when parked: a hint */
};

struct reuse {
	struct reuse_list list[REUSE_SIZES];
	/* Handed out, leaf not yet written: applied in one batch. */
	struct claim claim[CLAIM_DEPTH];
	uint32_t nr_claims;
	uint64_t bytes; /* parked in the lists, counted free */
	uint64_t limit; /* at most this many bytes parked; 0: off */
	uint64_t clock; /* allocs so far (ages the slots) */
	/* The last sizes allocated without a slot, newest at seen_at. */
	uint64_t seen[REUSE_SEEN];
	uint32_t seen_at;
};

/*
 * A slab: @k objects of @size bytes from @base, one used block of the tree
 * (val k * size | USED | SLAB, tag 0). Bit i of used[] is set while object
 * i is held; tag[i] is bits 32-63 of object i's tag. In its class's
 * partial array (@cls, at @at) while @nfree > 0; @cls NULL once its size
 * lost its class (it then only drains, on the stray list while @nfree >
 * 0).
 */
struct slab {
	uint64_t base, end, size;
	uint16_t k, nfree; /* k <= SLAB_MAX_OBJS */
	uint32_t gen;      /* of @cls when carved */
	struct reuse_list *cls;
	union {
		uintptr_t at;	   /* listed by its class: partial[at] */
		struct slab *prev; /* stray: the list's, doubly linked */
	};
	struct slab *next; /* stray only */
	uint64_t words[]; /* used[k/64 up], then the tags (slab_tags()) */
};

/*
 * 56 bytes: a slab of the engine's large pages holds a few tens of them
 * (44 in kvforge-bench at 1M objects), so each byte here costs every
 * object a few hundredths of a byte (a tag pointer and 32-bit counts
 * took 16 more).
 */
_Static_assert(sizeof(struct slab) == 56, "a slab's head stays 56 bytes");

/*
 * What a slab keeps of a tag: its high half. The engine's tags are key
 * hashes, and the bucket index finds a record from bits 32-63 of its
 * hash alone (metadata/index_bucket.c), so 4 bytes per object do what
 * 8 did; a slab object's tag reads back with its low half 0
 * (slab_tag_of()). Callers re-check every owner a tag leads to.
 */
static inline uint32_t slab_tag(uint64_t tag)
{
	return (uint32_t)(tag >> 32);
}

static inline uint32_t slab_words(uint32_t k)
{
	return (k + 63) / 64;
}

/* The slab's tags: k of them, right after its bitmap. */
static inline uint32_t *slab_tags(const struct slab *s)
{
	return (uint32_t *)(s->words + slab_words(s->k));
}

static inline uint64_t slab_tag_of(const struct slab *s, uint32_t i)
{
	return (uint64_t)slab_tags(s)[i] << 32;
}

/*
 * The slab directory: cell c covers [c << shift, (c + 1) << shift). A slab
 * is at least one cell long, so a cell meets at most two: @cover, holding
 * the cell's first byte, and @start, starting inside it.
 */
struct slab_cell {
	struct slab *cover, *start;
};

struct kvf__segalloc {
	struct kvf__segalloc_pub pub; /* must stay first: see segalloc.h */
	_Atomic uint64_t nr_allocs;
	_Atomic uint64_t node_bytes; /* tree nodes, spares included */
	uint64_t size;

	pthread_mutex_t lock;
	struct node *root;
	unsigned height;     /* 0: the root is a leaf */
	uint64_t free_bytes; /* authoritative copies, under the lock */
	uint64_t largest;    /* = root->max, kept up to date by every change */
	uint64_t allocs;
	/* Spare nodes, linked through val[0]. */
	struct node *spare_inner, *spare_leaf;
	unsigned nr_spare_inner, nr_spare_leaf;
	struct reuse reuse;
	/* kvf__segalloc_set_park_hint(), read when parking. */
	struct kvf__park_hint *_Atomic hint;
	_Atomic uint32_t hint_index;
	/* Slabs: the directory (NULL until the first slab), its cells. */
	struct slab_cell *dir;
	uint64_t dir_cells;
	unsigned dir_shift;
	/* @dir once made, for kvf__segalloc_prefetch_free() (no lock). */
	struct slab_cell *_Atomic dir_pub;
	uint64_t nr_slabs;
	/* Slabs with a free slot whose size lost its class, doubly linked. */
	struct slab *stray;
	uint64_t nr_broken; /* slabs broken up (slab_break()), ever */
};

_Static_assert(KVF__PARK_HINT_SLOTS == 4, "kvf__park_hint_slot: top 2 bits");

/* A block as the operations see it. */
struct blk {
	uint64_t off;
	uint64_t val; /* size | USED, | CACHED when parked in a reuse list */
	uint64_t tag; /* the caller's tag of a used block; 0 if free */
};

static inline uint64_t blk_size(uint64_t val)
{
	return val & ~FLAGS;
}

/* Held by an owner: used, and not parked in a reuse list. */
static inline bool allocated(uint64_t val)
{
	return (val & FLAGS) == USED;
}

/* Block @i of leaf @l, which starts at @off. */
static inline struct blk leaf_blk(const struct node *l, uint32_t i,
				  uint64_t off)
{
	return (struct blk){ off, l->val[i], as_leaf(l)->tag[i] };
}

static inline void leaf_set(struct node *l, uint32_t i, struct blk b)
{
	l->val[i] = b.val;
	as_leaf(l)->tag[i] = b.tag;
}

/*
 * Index of the last block of leaf @l starting at or before @key (0 if
 * none); its offset goes to *@off.
 */
static uint32_t leaf_find(const struct node *l, uint64_t key, uint64_t *off)
{
	uint64_t o = l->base, end;
	uint32_t i = 0;

	while (i + 1 < l->n && (end = o + blk_size(l->val[i])) <= key) {
		o = end;
		i++;
	}
	*off = o;
	return i;
}

/* Sum of the sizes of blocks [@s, @s + @cnt) of leaf @l. */
static uint64_t leaf_span(const struct node *l, uint32_t s, uint32_t cnt)
{
	uint64_t sum = 0;

	for (uint32_t i = s; i < s + cnt; i++)
		sum += blk_size(l->val[i]);
	return sum;
}

/* ---- node pool ---- */

static size_t node_bytes(bool leaf)
{
	return leaf ? sizeof(struct leaf) : sizeof(struct inner);
}

/* A new tree node, counted in the allocator's bookkeeping bytes. */
static struct node *node_alloc(struct kvf__segalloc *a, bool leaf)
{
	struct node *n = malloc(node_bytes(leaf));

	if (n)
		atomic_fetch_add_explicit(&a->node_bytes, node_bytes(leaf),
					  memory_order_relaxed);
	return n;
}

static void spare_push(struct node **list, unsigned *nr, struct node *n)
{
	memcpy(&n->val[0], list, sizeof(*list));
	*list = n;
	(*nr)++;
}

/* Make sure a change can split every level and grow a new root. */
static int spares_fill(struct kvf__segalloc *a)
{
	while (a->nr_spare_leaf < 1) {
		struct node *n = node_alloc(a, true);

		if (!n)
			return KVF_ERR_NO_MEMORY;
		spare_push(&a->spare_leaf, &a->nr_spare_leaf, n);
	}
	while (a->nr_spare_inner < a->height + 1) {
		struct node *n = node_alloc(a, false);

		if (!n)
			return KVF_ERR_NO_MEMORY;
		spare_push(&a->spare_inner, &a->nr_spare_inner, n);
	}
	return KVF_OK;
}

static struct node *spare_get(struct kvf__segalloc *a, bool leaf)
{
	struct node **list = leaf ? &a->spare_leaf : &a->spare_inner;
	struct node *n = *list;

	if (!n)
		kvf__die("no spare %s", leaf ? "leaf" : "inner node");
	memcpy(list, &n->val[0], sizeof(*list));
	if (leaf)
		a->nr_spare_leaf--;
	else
		a->nr_spare_inner--;
	n->n = 0;
	return n;
}

static void forget_leaf(struct kvf__segalloc *a, const struct node *l);

/*
 * A node leaves the tree. A spare leaf holds no block (n = 0), so a
 * parked block's leaf hint that still names it fails its check; one that
 * goes back to malloc is first forgotten by every hint.
 */
static void spare_put(struct kvf__segalloc *a, struct node *n, bool leaf)
{
	n->n = 0;
	if (leaf && a->nr_spare_leaf < MAX_SPARE)
		spare_push(&a->spare_leaf, &a->nr_spare_leaf, n);
	else if (!leaf && a->nr_spare_inner < MAX_SPARE)
		spare_push(&a->spare_inner, &a->nr_spare_inner, n);
	else {
		if (leaf)
			forget_leaf(a, n);
		atomic_fetch_sub_explicit(&a->node_bytes, node_bytes(leaf),
					  memory_order_relaxed);
		free(n);
	}
}

/* ---- node summaries ---- */

/*
 * The size of block @v as a free block: 0 when used (low bit set), without
 * a branch. Leaves interleave used and free blocks at random, so a branch
 * on "used?" is mispredicted about every other block.
 */
static inline uint64_t free_size(uint64_t v)
{
	return v & ((v & USED) - 1);
}

/* Recompute @n->max and @n->sub from the entries (a leaf iff @leaf). */
static void node_recalc(struct node *n, bool leaf)
{
	uint64_t m = 0, s = 0;
	uint32_t mi = 0;

	if (leaf) {
		/* A used block has its low bit set: mask it to 0, no branch. */
		for (uint32_t i = 0; i < n->n; i++) {
			uint64_t v = free_size(n->val[i]), lo;

			lo = v < m ? v : m;
			s = lo > s ? lo : s;
			m = v > m ? v : m;
		}
		n->max = m;
		n->sub = s;
		/* Used blocks count 0, so s is exactly the second. */
		n->sub_exact = 1;
		return;
	}
	/*
	 * Inner nodes also note which entries hold max and sub. Six selects
	 * per entry were too many for gcc, which branched on "v > m" and on
	 * "lo > s" instead (17% and 10% mispredicted in the wide churn,
	 * callgrind): the selects are masks, so the loop has no branch but
	 * its exit. Wide mix, mean ns per placement (5 interleaved runs):
	 * fragmentation_aware 243 against 259 branching, random 203
	 * against 214.
	 */
	uint32_t si = 0;

	for (uint32_t i = 0; i < n->n; i++) {
		uint64_t v = n->val[i];
		uint64_t gt = 0 - (uint64_t)(v > m);
		uint64_t lo = v ^ ((v ^ m) & gt);
		uint32_t loi = i ^ ((i ^ mi) & (uint32_t)gt);
		uint64_t take = 0 - (uint64_t)(lo > s);

		s ^= (s ^ lo) & take;
		si ^= (si ^ loi) & (uint32_t)take;
		mi ^= (mi ^ i) & (uint32_t)gt;
		m ^= (m ^ v) & gt;
	}
	n->max = m;
	n->sub = s;
	n->maxi = mi;
	n->maxchild = as_inner(n)->child[mi];
	n->subi = si;
	n->sub_exact = n->n > 1 && si != mi;
}

/*
 * An entry of @n (a leaf iff @leaf) shrank from free size @old to @new (the
 * arrays already say so); returns whether @n->max changed. Only the
 * largest entry shrinking can move max, and if what is left still reaches
 * sub (which bounds every other entry) it is the new max: no rescan, and
 * sub stays a bound. Entries only grow through free, which rescans.
 */
static bool entry_shrunk(struct node *n, bool leaf, uint32_t i, uint64_t old,
			 uint64_t new)
{
	uint64_t m = n->max;

	if (old != m) {
		/* The exact second shrank: sub stays, but only as a bound. */
		if (!leaf && i == n->subi)
			n->sub_exact = 0;
		return false;
	}
	if (new >= n->sub) {
		n->max = new;
		return new != m;
	}
	if (n->sub_exact && (leaf || i == n->maxi)) {
		/*
		 * The exact second becomes the largest; every other entry is
		 * at most sub (the shrunk one too), so sub stays a bound.
		 */
		n->max = n->sub;
		n->sub_exact = 0;
		if (!leaf) {
			n->maxi = n->subi;
			n->maxchild = as_inner(n)->child[n->subi];
		}
		return n->max != m;
	}
	node_recalc(n, leaf);
	return n->max != m;
}

/* The lowest offset under @n (a leaf iff @leaf). */
static inline uint64_t lowest(const struct node *n, bool leaf)
{
	return leaf ? n->base : as_inner(n)->key[0];
}

/* Entry @i of @p from its child (whose max is up to date). */
static inline void refresh(struct node *p, uint32_t i, bool child_leaf)
{
	struct inner *in = as_inner(p);

	in->key[i] = lowest(in->child[i], child_leaf);
	p->val[i] = in->child[i]->max;
}

/*
 * Index of the last entry of inner node @n with key <= @key (0 if none).
 * A branch-free binary search (keys ascend): five selects in a full node
 * instead of a compare per entry passed (the reuse lists' descent by
 * offset, callgrind: 344 instructions per lookup in a three-level tree
 * with the linear scan).
 */
static inline uint32_t find_pos(const struct node *n, uint64_t key)
{
	const uint64_t *k = as_inner(n)->key;
	uint32_t lo = 0, len = n->n;

	while (len > 1) {
		uint32_t half = len / 2;

		lo = k[lo + half] <= key ? lo + half : lo;
		len -= half;
	}
	return lo;
}

/* Move @cnt entries from @src[@s] to @dst[@d] (arrays may overlap). */
static void move_entries(struct node *dst, uint32_t d, struct node *src,
			 uint32_t s, uint32_t cnt, bool leaf)
{
	memmove(&dst->val[d], &src->val[s], cnt * sizeof(dst->val[0]));
	if (leaf) {
		memmove(&as_leaf(dst)->tag[d], &as_leaf(src)->tag[s],
			cnt * sizeof(uint64_t));
		return;
	}
	memmove(&as_inner(dst)->key[d], &as_inner(src)->key[s],
		cnt * sizeof(uint64_t));
	memmove(&as_inner(dst)->child[d], &as_inner(src)->child[s],
		cnt * sizeof(struct node *));
}

/* ---- the one structural change: replace a block by 0..3 blocks ---- */

/*
 * The blocks must tile the segment after every change, since leaves derive
 * offsets from sizes: a replacement covers exactly the block it replaces,
 * and a removal (nrep 0) gives the block's range to the block before it.
 * When that block is in the previous leaf, absorb() grows it before the
 * removal; here the leaf then only moves its base up.
 */
struct change {
	uint64_t key;          /* offset of the block to replace */
	const struct blk *rep; /* its replacement, in address order */
	uint32_t nrep;
	struct node *split;    /* out: new right sibling of the node */
};

static void leaf_replace(struct kvf__segalloc *a, struct node *l,
			 struct change *c)
{
	uint64_t off, o;
	uint32_t i = leaf_find(l, c->key, &off), n = l->n - 1 + c->nrep;
	struct blk tmp[FAN + 2];
	uint32_t k = 0, left;

	if (l->n == 0 || off != c->key)
		kvf__die("block at %#llx missing", (unsigned long long)c->key);
	if (!c->nrep) {
		uint64_t sz = blk_size(l->val[i]);

		if (i)
			l->val[i - 1] += sz;
		else
			l->base += sz;
	}
	if (n <= FAN) {
		move_entries(l, i + c->nrep, l, i + 1, l->n - i - 1, true);
		for (uint32_t j = 0; j < c->nrep; j++)
			leaf_set(l, i + j, c->rep[j]);
		l->n = n;
		node_recalc(l, true);
		return;
	}
	/* Overflow (rare, nrep >= 2): lay the new sequence out, then split. */
	o = l->base;
	for (uint32_t j = 0; j < l->n; j++) {
		if (j != i)
			tmp[k++] = leaf_blk(l, j, o);
		else
			for (uint32_t r = 0; r < c->nrep; r++)
				tmp[k++] = c->rep[r];
		o += blk_size(l->val[j]);
	}
	c->split = spare_get(a, true);
	/*
	 * First fit by address fills a segment from its low end, so most
	 * splits happen at the last block of a leaf: keep the left leaf
	 * nearly full then (it will rarely grow again) instead of halving,
	 * which would leave every leaf half empty after a fill.
	 */
	left = i + 1 == l->n ? n - MIN_FILL : n / 2;
	for (uint32_t j = 0; j < n; j++) {
		struct node *dst = j < left ? l : c->split;
		uint32_t at = j < left ? j : j - left;

		leaf_set(dst, at, tmp[j]);
	}
	l->n = left;
	c->split->n = n - left;
	c->split->base = tmp[left].off;
	node_recalc(l, true);
	node_recalc(c->split, true);
}

/*
 * Insert @sib (its max up to date; a leaf iff @child_leaf) after position
 * @i of inner node @p; recomputes the summaries of @p and of its split, if
 * any.
 */
static void inner_insert(struct kvf__segalloc *a, struct node *p, uint32_t i,
			 struct node *sib, bool child_leaf, struct change *c)
{
	struct node *dst = p;
	uint32_t at = i + 1;

	c->split = NULL;
	if (p->n == FAN) {
		/* Split the parent in halves first; the caller sees c->split. */
		struct node *r = spare_get(a, false);
		uint32_t left = FAN / 2;

		move_entries(r, 0, p, left, FAN - left, false);
		r->n = FAN - left;
		p->n = left;
		c->split = r;
		if (at > left) {
			dst = r;
			at -= left;
		}
	}
	move_entries(dst, at + 1, dst, at, dst->n - at, false);
	as_inner(dst)->child[at] = sib;
	refresh(dst, at, child_leaf);
	dst->n++;
	node_recalc(p, false);
	if (c->split)
		node_recalc(c->split, false);
}

/* Fix an underfull child @i of @p by borrowing from or merging with a
 * neighbour. Leaves keep tiling: a borrow moves the right one's base. */
static void rebalance(struct kvf__segalloc *a, struct node *p, uint32_t i,
		      bool child_leaf)
{
	uint32_t li = i > 0 ? i - 1 : i, tot;
	struct node *l = as_inner(p)->child[li];
	struct node *r = as_inner(p)->child[li + 1];

	tot = l->n + r->n;
	if (tot <= FAN) {
		move_entries(l, l->n, r, 0, r->n, child_leaf);
		l->n = tot;
		spare_put(a, r, child_leaf);
		move_entries(p, li + 1, p, li + 2, p->n - li - 2, false);
		p->n--;
		node_recalc(l, child_leaf);
		refresh(p, li, child_leaf);
		return;
	}
	if (l->n > r->n) {
		uint32_t mv = l->n - tot / 2;

		if (child_leaf)
			r->base -= leaf_span(l, l->n - mv, mv);
		move_entries(r, mv, r, 0, r->n, child_leaf);
		move_entries(r, 0, l, l->n - mv, mv, child_leaf);
		l->n -= mv;
		r->n += mv;
	} else {
		uint32_t mv = r->n - tot / 2;

		if (child_leaf)
			r->base += leaf_span(r, 0, mv);
		move_entries(l, l->n, r, 0, mv, child_leaf);
		move_entries(r, 0, r, mv, r->n - mv, child_leaf);
		l->n += mv;
		r->n -= mv;
	}
	node_recalc(l, child_leaf);
	node_recalc(r, child_leaf);
	refresh(p, li, child_leaf);
	refresh(p, li + 1, child_leaf);
}

static void replace_in(struct kvf__segalloc *a, struct node *n,
		       unsigned level, struct change *c)
{
	uint32_t i;
	bool child_leaf = level == 1;
	struct node *ch;

	if (level == 0) {
		leaf_replace(a, n, c);
		return;
	}
	i = find_pos(n, c->key);
	ch = as_inner(n)->child[i];
	replace_in(a, ch, level - 1, c);
	if (c->split) {
		refresh(n, i, child_leaf);
		inner_insert(a, n, i, c->split, child_leaf, c);
		return;
	}
	if (ch->n < MIN_FILL && n->n > 1)
		rebalance(a, n, i, child_leaf);
	else
		refresh(n, i, child_leaf);
	node_recalc(n, false);
}

/* Replace the block at @key by @rep[0..@nrep); nodes must be spared. */
static void replace(struct kvf__segalloc *a, uint64_t key,
		    const struct blk *rep, uint32_t nrep)
{
	struct change c = { key, rep, nrep, NULL };

	replace_in(a, a->root, a->height, &c);
	if (c.split) {
		struct node *r = spare_get(a, false);
		bool child_leaf = a->height == 0;

		kvf__assert(a->height + 1 < MAX_HEIGHT);
		as_inner(r)->child[0] = a->root;
		as_inner(r)->child[1] = c.split;
		r->n = 2;
		refresh(r, 0, child_leaf);
		refresh(r, 1, child_leaf);
		node_recalc(r, false);
		a->root = r;
		a->height++;
	} else if (a->height > 0 && a->root->n == 1) {
		struct node *old = a->root;

		a->root = as_inner(old)->child[0];
		a->height--;
		spare_put(a, old, false);
	}
	a->largest = a->root->max;
}

/* ---- lookups (read only) ---- */

/*
 * A root-to-leaf path: node[h] is the node at height h (node[0] the leaf),
 * idx[h] the entry taken in it; off is the offset of leaf block idx[0].
 */
struct path {
	struct node *node[MAX_HEIGHT];
	uint32_t idx[MAX_HEIGHT];
	uint64_t off;
};

/* The leaf and position of the block containing @off (< capacity). */
static struct node *lookup(const struct kvf__segalloc *a, uint64_t off,
			   struct path *p)
{
	struct node *n = a->root;

	for (unsigned h = a->height; h > 0; h--) {
		p->node[h] = n;
		p->idx[h] = find_pos(n, off);
		n = as_inner(n)->child[p->idx[h]];
	}
	p->node[0] = n;
	p->idx[0] = leaf_find(n, off, &p->off);
	return n;
}

/*
 * After an alloc in place in the leaf of @p (no split, its first offset
 * unchanged) that shrank one free size @old to @new, bring
 * the summaries on the path up to date, stopping at the first node whose
 * maximum does not move. O(1) per level unless a node's largest entry
 * shrank below its sub (then that node is rescanned).
 */
static void fix_path(struct kvf__segalloc *a, const struct path *p,
		     uint64_t old, uint64_t new)
{
	for (unsigned h = 0;; h++) {
		struct node *n = p->node[h];
		uint64_t was = n->max;

		if (!entry_shrunk(n, h == 0, p->idx[h], old, new))
			return;
		if (h == a->height) {
			a->largest = n->max;
			return;
		}
		old = was;
		new = n->max;
		p->node[h + 1]->val[p->idx[h + 1]] = new;
	}
}

/*
 * An entry of inner node @n grew from @old to @new; returns whether
 * @n->max changed. O(1), and it keeps an exact sub exact: a new largest
 * leaves the former one (or, if it grew itself, the old sub) second.
 */
static bool entry_grown(struct node *n, uint32_t i, uint64_t old,
			uint64_t new)
{
	uint64_t m = n->max;

	if (new >= m) {
		if (i != n->maxi) {
			/* The former largest is now exactly second. */
			n->sub = m;
			n->subi = n->maxi;
			n->sub_exact = 1;
		}
		n->max = new;
		n->maxi = i;
		n->maxchild = as_inner(n)->child[i];
		return new != m;
	}
	if (new > n->sub) {
		/* Above every entry but the largest: exactly second. */
		n->sub = new;
		n->subi = i;
		n->sub_exact = 1;
	}
	return false;
}

/*
 * After a free merged in place in the leaf of @p: rescan the leaf (its
 * largest can only grow, but dropping the merged neighbours leaves its sub
 * merely a bound), then raise the path in O(1) per level up to the first
 * node whose maximum does not move.
 */
static void fix_path_freed(struct kvf__segalloc *a, const struct path *p)
{
	node_recalc(p->node[0], true);
	for (unsigned h = 1; h <= a->height; h++) {
		struct node *n = p->node[h];
		uint32_t i = p->idx[h];
		uint64_t old = n->val[i], new = p->node[h - 1]->max;

		if (old == new)
			return;
		n->val[i] = new;
		if (!entry_grown(n, i, old, new))
			return;
	}
	a->largest = a->root->max;
}

static struct blk block_at(const struct kvf__segalloc *a, uint64_t off)
{
	struct path p;
	const struct node *l = lookup(a, off, &p);

	return leaf_blk(l, p.idx[0], p.off);
}

/*
 * Remove the block at @key (not the first of the segment), giving its
 * range to the block before it so the blocks keep tiling. When that block
 * is the last of the previous leaf, grow it first (its summaries raised
 * like a free's); the removal then only moves this leaf's base.
 */
static void absorb(struct kvf__segalloc *a, uint64_t key)
{
	struct path p;
	struct node *l = lookup(a, key, &p);

	kvf__assert(key > 0 && p.off == key);
	if (p.idx[0] == 0) {
		uint64_t sz = blk_size(l->val[0]);

		l = lookup(a, key - 1, &p);
		l->val[p.idx[0]] += sz;
		fix_path_freed(a, &p);
	}
	replace(a, key, NULL, 0);
}

/*
 * Address-ordered first fit; the caller checked a->largest >= @need. The
 * block's offset goes to @p->off.
 */
static struct node *first_fit(const struct kvf__segalloc *a, uint64_t need,
			      struct path *p)
{
	struct node *n = a->root;
	uint64_t off, v, end = a->pub.capacity;
	uint32_t i;

	for (unsigned h = a->height; h > 0; h--) {
		struct node *in = n;

		/*
		 * Above sub only the largest entry fits (best fit across
		 * segments sends most requests here): take it without
		 * reading val[], one line of this node fewer.
		 */
		p->node[h] = in;
		if (need > in->sub) {
			i = in->maxi;
			n = in->maxchild;
		} else {
			for (i = 0; in->val[i] < need; i++)
				;
			n = as_inner(in)->child[i];
		}
		p->idx[h] = i;
		/* The subtree ends where its right sibling starts. */
		if (i + 1 < in->n)
			end = as_inner(in)->key[i + 1];
		/* The scan below reads val[] in order: fetch it all at once. */
		for (uint32_t j = 0; j < FAN; j += 64 / sizeof(n->val[0]))
			__builtin_prefetch(&n->val[j]);
	}
	p->node[0] = n;
	/*
	 * Only the leaf's largest block fits and it is the leaf's last (a
	 * fill's free tail, always): its offset is the leaf's end less its
	 * size, without summing the sizes of the blocks before it.
	 */
	i = n->n - 1;
	if (need > n->sub && free_size(n->val[i]) == n->max) {
		p->idx[0] = i;
		p->off = end - blk_size(n->val[i]);
#ifdef KVF_SEGALLOC_CHECK
		off = n->base + leaf_span(n, 0, i);
		if (off != p->off)
			kvf__die("first fit's tail at %#llx, summed %#llx",
				 (unsigned long long)p->off,
				 (unsigned long long)off);
#endif
		return n;
	}
	/*
	 * One branch per block, taken until the fit: used blocks count 0.
	 * The offset is the running sum of the sizes passed.
	 */
	off = n->base;
	for (i = 0; free_size(v = n->val[i]) < need; i++)
		off += blk_size(v);
	p->idx[0] = i;
	p->off = off;
	return n;
}

/* ---- exact-size reuse lists ---- */

/*
 * Publish whether @rl holds a block (pub.parked, for placement's exact
 * fits): called wherever a list's emptiness or size may change.
 */
static bool slab_take(struct kvf__segalloc *a, struct reuse_list *rl,
		      uint64_t tag, uint64_t *offset);
static void slab_orphan(struct kvf__segalloc *a, struct reuse_list *rl);
static uint32_t slab_objs(const struct kvf__segalloc *a, uint64_t need);

/* The slab holding @off, or NULL (a plain block of the tree). O(1). */
static inline struct slab *slab_at(const struct kvf__segalloc *a,
				   uint64_t off)
{
	const struct slab_cell *c;
	struct slab *s;

	if (!a->dir || off >= a->pub.capacity)
		return NULL;
	c = &a->dir[off >> a->dir_shift];
	s = c->cover;
	if (s && off < s->end)
		return s;
	s = c->start;
	return s && off >= s->base ? s : NULL;
}

static void reuse_publish(struct kvf__segalloc *a, const struct reuse_list *rl)
{
	atomic_store_explicit(&a->pub.parked[rl - a->reuse.list],
			      rl->n || rl->nr_partial ? rl->size : 0,
			      memory_order_relaxed);
}

static struct reuse_list *reuse_find(struct kvf__segalloc *a, uint64_t size)
{
	for (unsigned k = 0; k < REUSE_SIZES; k++)
		if (a->reuse.list[k].size == size)
			return &a->reuse.list[k];
	return NULL;
}

/*
 * The largest size with a parked block (!@slabs) or with a slab with a
 * free slot (@slabs); 0 if none.
 */
static uint64_t largest_listed(const struct kvf__segalloc *a, bool slabs)
{
	uint64_t m = 0;

	for (unsigned k = 0; k < REUSE_SIZES; k++) {
		const struct reuse_list *rl = &a->reuse.list[k];

		if ((slabs ? rl->nr_partial != 0 : rl->n != 0) && rl->size > m)
			m = rl->size;
	}
	return m;
}

/* The largest parked block (0 if none). */
static uint64_t reuse_largest(const struct kvf__segalloc *a)
{
	return largest_listed(a, false);
}

/*
 * The list a freed block of @need bytes may be parked in, or NULL: its
 * size has a slot with room, the bound allows it, and both neighbours
 * (@prev_val, @next_val; USED at the segment's ends) are held by owners,
 * so no parked block ever borders a free or parked one.
 */
static struct reuse_list *reuse_room(struct kvf__segalloc *a, uint64_t need,
				     uint64_t prev_val, uint64_t next_val)
{
	struct reuse_list *rl;

	if (!allocated(prev_val) || !allocated(next_val) ||
	    a->reuse.bytes + need > a->reuse.limit)
		return NULL;
	rl = reuse_find(a, need);
	return rl && rl->n < REUSE_DEPTH ? rl : NULL;
}

/* Tell the segment set's hint that @a parked a block of @size. */
static void note_park(struct kvf__segalloc *a, uint64_t size)
{
	struct kvf__park_hint *h =
		atomic_load_explicit(&a->hint, memory_order_relaxed);
	unsigned k = kvf__park_hint_slot(size);

	if (!h)
		return;
	atomic_store_explicit(&h->slot[k].size, size, memory_order_relaxed);
	atomic_store_explicit(
		&h->slot[k].seg,
		atomic_load_explicit(&a->hint_index, memory_order_relaxed),
		memory_order_relaxed);
}

/* Park the block at @off, leaf position @p, in @rl (reuse_room said so). */
static void reuse_park(struct kvf__segalloc *a, struct reuse_list *rl,
		       const struct path *p, uint64_t off)
{
	struct node *l = p->node[0];

	l->val[p->idx[0]] |= CACHED;
	as_leaf(l)->tag[p->idx[0]] = 0;
	rl->leaf[rl->n] = l;
	rl->off[rl->n++] = off;
	a->reuse.bytes += rl->size;
	reuse_publish(a, rl);
	note_park(a, rl->size);
}

/* Take the parked block at @off (@size bytes) out of its list. */
static void reuse_unlist(struct kvf__segalloc *a, uint64_t off, uint64_t size)
{
	struct reuse_list *rl = reuse_find(a, size);

	for (uint32_t i = 0; rl && i < rl->n; i++) {
		if (rl->off[i] == off) {
			rl->off[i] = rl->off[--rl->n];
			rl->leaf[i] = rl->leaf[rl->n];
			a->reuse.bytes -= size;
			reuse_publish(a, rl);
			return;
		}
	}
	kvf__die("parked block %#llx missing from its list",
		 (unsigned long long)off);
}

/* The leaf holding the parked block at @off (@size bytes), at @p. */
static struct node *parked_leaf(struct kvf__segalloc *a, uint64_t off,
				uint64_t size, struct path *p)
{
	struct node *l = lookup(a, off, p);

	if (p->off != off || l->val[p->idx[0]] != (size | PARKED))
		kvf__die("parked block %#llx lost", (unsigned long long)off);
	return l;
}

/*
 * parked_leaf() without the descent when @hint, the leaf that held the
 * block when it was parked, still holds it: then only @p's leaf level
 * (node[0], idx[0], off) is filled, which is all a claim writes. The hint
 * is checked, not trusted: it names a leaf of this allocator (a tree
 * leaf or a spare, n = 0; forget_leaf() clears hints to a leaf given back
 * to malloc), and a tree leaf that has a parked block of @size starting
 * at @off holds the one block there, the leaves tiling the segment. A
 * split, merge or borrow that moved the block elsewhere fails the check,
 * and the descent finds it.
 */
static struct node *hinted_parked_leaf(struct kvf__segalloc *a, uint64_t off,
				       uint64_t size, struct node *hint,
				       struct path *p)
{
	if (hint && hint->n && hint->base <= off) {
		uint64_t at;
		uint32_t i = leaf_find(hint, off, &at);

		if (at == off && hint->val[i] == (size | PARKED)) {
			p->node[0] = hint;
			p->idx[0] = i;
			p->off = at;
			return hint;
		}
	}
	return parked_leaf(a, off, size, p);
}

/* Clear every hint naming leaf @l, which is going back to malloc. */
static void forget_leaf(struct kvf__segalloc *a, const struct node *l)
{
	struct reuse *ru = &a->reuse;

	for (unsigned k = 0; k < REUSE_SIZES; k++)
		for (uint32_t i = 0; i < ru->list[k].n; i++)
			if (ru->list[k].leaf[i] == l)
				ru->list[k].leaf[i] = NULL;
	for (uint32_t i = 0; i < ru->nr_claims; i++)
		if (ru->claim[i].leaf == l)
			ru->claim[i].leaf = NULL;
}

/*
 * Turn the parked block at @off (out of its list already) into a free
 * block of the tree. Its neighbours are held (see reuse_room), so nothing
 * merges: the tree gains exactly this block.
 */
static void reuse_to_tree(struct kvf__segalloc *a, uint64_t off, uint64_t size)
{
	struct path p;
	struct node *l = parked_leaf(a, off, size, &p);

	l->val[p.idx[0]] = size;
	fix_path_freed(a, &p);
}

/* Give every block parked in @rl back to the tree. */
static void reuse_flush_list(struct kvf__segalloc *a, struct reuse_list *rl)
{
	while (rl->n) {
		a->reuse.bytes -= rl->size;
		reuse_to_tree(a, rl->off[--rl->n], rl->size);
	}
	reuse_publish(a, rl);
}

static void reuse_flush(struct kvf__segalloc *a)
{
	for (unsigned k = 0; k < REUSE_SIZES && a->reuse.bytes; k++)
		reuse_flush_list(a, &a->reuse.list[k]);
}

/*
 * Was @need allocated without a slot at least twice among the last
 * REUSE_SEEN such allocs? Remembers this one too. A master's page sizes
 * pass at once; a spread of sizes (the placement workload's wide mix)
 * all but never does, and stays with first fit.
 */
static bool reuse_seen(struct reuse *r, uint64_t need)
{
	unsigned hits = 0;

	for (unsigned k = 0; k < REUSE_SEEN; k++)
		hits += r->seen[k] == need;
	r->seen_at = (r->seen_at + 1) % REUSE_SEEN;
	r->seen[r->seen_at] = need;
	return hits >= 2;
}

/*
 * A size allocated again takes a slot: an unused one, else the least
 * recently allocated size's if its list is empty or the size has gone
 * stale (its blocks go back to the tree first). Otherwise the size is
 * not tracked and its frees go to the tree.
 */
static void reuse_claim(struct kvf__segalloc *a, uint64_t need)
{
	struct reuse_list *v = &a->reuse.list[0];

	if (!reuse_seen(&a->reuse, need))
		return;
	for (unsigned k = 0; k < REUSE_SIZES; k++) {
		struct reuse_list *rl = &a->reuse.list[k];

		if (!rl->size) {
			v = rl;
			break;
		}
		if (rl->last_use < v->last_use)
			v = rl;
	}
	/*
	 * A size with slabs keeps its slot until it goes stale: its slabs'
	 * free slots serve no other size (the wide placement mix lost fill
	 * to slabs orphaned by sizes taking turns).
	 */
	if (v->size && (v->n || v->nr_slabs) &&
	    a->reuse.clock - v->last_use < REUSE_STALE)
		return;
	reuse_flush_list(a, v);
	slab_orphan(a, v);
	v->size = need;
	v->last_use = a->reuse.clock;
	v->slab_k = slab_objs(a, need);
	v->hits = 0;
}

/*
 * Start loading leaf @l's head and sizes (val[]), for writing: what a
 * free or a claim reads to find its block. Not the tags: each writes one,
 * a store that waits in the store buffer with the others until the lock
 * is released, and asking for all nine lines of every leaf a batch
 * touches left no misses in flight for the rest (perf, churn_remove at
 * 10M objects: prefetch_descents 14% of it, on the prefetches).
 */
static inline void prefetch_leaf(const struct node *l)
{
	for (size_t b = 0; b < offsetof(struct leaf, tag); b += 64)
		kvf__prefetch_for_write((const char *)l + b);
}

/* Frees whose descents one prefetch pass interleaves (bounds the stack). */
#define DESCENT_CHUNK 32

/* Start loading the lines of inner node @n that find_pos() reads. */
static void prefetch_search_lines(const struct node *n)
{
	const char *k = (const char *)as_inner(n)->key;

	__builtin_prefetch(n);
	for (size_t b = 0; b < sizeof(as_inner(n)->key); b += 64)
		__builtin_prefetch(k + b);
}

/*
 * Walk the descents of @n offsets to their leaves level by level, each
 * level's loads for every offset issued before any is used, so a batch's
 * misses on inner nodes and leaves overlap instead of queueing one
 * descent behind another; the leaves end up loading for writing. Inner
 * levels do not stay cached under a master's working set (a batch
 * remove's releases spent ~55% of their samples on inner-node misses).
 * Reads only; the caller holds the lock.
 */
static void prefetch_descents(const struct kvf__segalloc *a,
			      const uint64_t *off, size_t n)
{
	const struct node *cur[DESCENT_CHUNK];
	uint32_t pos[DESCENT_CHUNK];

	for (size_t i = 0; i < n; i++)
		cur[i] = a->root;
	for (unsigned h = a->height; h > 0; h--) {
		for (size_t i = 0; i < n; i++) {
			pos[i] = find_pos(cur[i], off[i]);
			__builtin_prefetch(&as_inner(cur[i])->child[pos[i]]);
		}
		for (size_t i = 0; i < n; i++) {
			cur[i] = as_inner(cur[i])->child[pos[i]];
			if (h > 1)
				prefetch_search_lines(cur[i]);
		}
	}
	for (size_t i = 0; i < n; i++)
		prefetch_leaf(cur[i]);
}

/* Round @size up to the alignment; 0 if it overflows or exceeds capacity. */
static uint64_t rounded(const struct kvf__segalloc *a, uint64_t size)
{
	uint64_t need = (size + a->pub.align_mask) & ~a->pub.align_mask;

	return need < size || need > a->pub.capacity ? 0 : need;
}

/* Does free @y start right where free @x's block ends (a run's next)? */
static bool frees_adjoin(const struct kvf__segalloc *a,
			 const struct kvf__segalloc_range *x,
			 const struct kvf__segalloc_range *y)
{
	uint64_t need = rounded(a, x->size);

	return need && y->offset == x->offset + need;
}

/*
 * Start loading, for the @n frees @r, the directory cells and then the
 * heads of the slabs that slab_at() reads, each level's loads issued for
 * every free before any is used: a steady state's frees land in slabs
 * all over the segment, and slab_at()'s cell and slab head are two
 * dependent misses per free, queued one free behind another without this
 * (perf, churn_remove at 1M objects: a quarter of its samples waited on
 * them, in apply_claims). The heads are asked for writing (a free
 * counts its slab's free slots there). With read prefetches alone GCC
 * finds the function free of side effects and drops the call.
 */
static void prefetch_slabs(const struct kvf__segalloc *a,
			   const struct kvf__segalloc_range *r, size_t n)
{
	uint64_t prev = UINT64_MAX;

	if (!a->dir)
		return;
	/* A fill removed in order frees neighbours: one cell, loaded once. */
	for (size_t i = 0; i < n; i++) {
		uint64_t cell = r[i].offset >> a->dir_shift;

		if (r[i].offset < a->pub.capacity && cell != prev)
			__builtin_prefetch(&a->dir[cell]);
		prev = cell;
	}
	prev = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		uint64_t cell = r[i].offset >> a->dir_shift;
		const struct slab_cell *c;

		if (r[i].offset >= a->pub.capacity || cell == prev)
			continue;
		prev = cell;
		c = &a->dir[cell];
		if (c->cover)
			kvf__prefetch_for_write(c->cover);
		if (c->start)
			kvf__prefetch_for_write(c->start);
	}
}

/*
 * prefetch_descents() for the offsets of @r inside the segment, and for
 * the pending claims' blocks that have no leaf hint, in one pass: the
 * claims of a batch of puts and the frees of the next batch remove miss
 * together instead of in two waves. A claim with a hint needs no descent
 * (hinted_parked_leaf()): its leaf alone starts loading.
 */
static void prefetch_claims_and_frees(const struct kvf__segalloc *a,
				      const struct kvf__segalloc_range *r,
				      size_t n)
{
	const struct reuse *ru = &a->reuse;
	uint64_t off[DESCENT_CHUNK];
	size_t m = 0;

	prefetch_slabs(a, r, n);
	for (uint32_t i = 0; i < ru->nr_claims; i++) {
		if (ru->claim[i].leaf)
			prefetch_leaf(ru->claim[i].leaf);
		else
			off[m++] = ru->claim[i].off;
	}
	for (size_t i = 0; i < n; i++) {
		const struct slab *s = slab_at(a, r[i].offset);

		if (s) {
			/* An object of a slab: its bit and tag, no descent. */
			uint64_t o = (r[i].offset - s->base) / s->size;

			__builtin_prefetch(&s->words[o / 64], 1);
			__builtin_prefetch(&slab_tags(s)[o], 1);
			continue;
		}
		if (r[i].offset >= a->pub.capacity)
			continue;
		/*
		 * The neighbour right after the free before it: a run
		 * (free_run_locked()) finds it in that one's leaf.
		 */
		if (i > 0 && frees_adjoin(a, &r[i - 1], &r[i]))
			continue;
		if (m == DESCENT_CHUNK) {
			prefetch_descents(a, off, m);
			m = 0;
		}
		off[m++] = r[i].offset;
	}
	if (m)
		prefetch_descents(a, off, m);
}

_Static_assert(CLAIM_DEPTH <= DESCENT_CHUNK, "one prefetch pass per batch");

/*
 * Write the leaves of every claimed block (the owner's tag in, CACHED
 * out; no summary moves, the tree saw them used all along), their
 * descents walked together first, with those of the @n frees @r the
 * caller makes next (none: NULL, 0), so that the misses of scattered
 * leaves and their inner nodes overlap. The lock held; every operation
 * but alloc calls it before reading the tree.
 */
static void apply_claims(struct kvf__segalloc *a,
			 const struct kvf__segalloc_range *r, size_t n)
{
	struct reuse *ru = &a->reuse;

	prefetch_claims_and_frees(a, r, n);
	for (uint32_t i = 0; i < ru->nr_claims; i++) {
		const struct claim *c = &ru->claim[i];
		struct path p;
		struct node *l =
			hinted_parked_leaf(a, c->off, c->size, c->leaf, &p);

		l->val[p.idx[0]] = c->size | USED;
		as_leaf(l)->tag[p.idx[0]] = c->tag;
	}
	ru->nr_claims = 0;
}

/*
 * Take @a's lock with every claim written into its leaf: what every
 * operation but alloc needs before it reads the tree (a batch free
 * applies them itself, with its own descents).
 */
static void lock_settled(struct kvf__segalloc *a)
{
	pthread_mutex_lock(&a->lock);
	apply_claims(a, NULL, 0);
}

/*
 * Hand the newest block parked in @rl (not empty) to @tag's owner. The
 * block's leaf is written later, with the other claims (apply_claims): a
 * leaf write per pop waited on a cold descent (half of alloc_locked's
 * samples in churn).
 */
static inline __attribute__((always_inline)) uint64_t
reuse_pop(struct kvf__segalloc *a, struct reuse_list *rl, uint64_t tag)
{
	uint64_t off = rl->off[--rl->n];
	struct node *leaf = rl->leaf[rl->n];

	if (a->reuse.nr_claims == CLAIM_DEPTH)
		apply_claims(a, NULL, 0);
	a->reuse.claim[a->reuse.nr_claims++] = (struct claim){
		.off = off, .size = rl->size, .tag = tag, .leaf = leaf
	};
	a->reuse.bytes -= rl->size;
	reuse_publish(a, rl);
	return off;
}

/*
 * The fast path of alloc: a parked block of exactly @need bytes, newest
 * first, handed to @tag's owner. One slot compare per tracked size and a
 * pop. False when none is parked.
 */
static bool reuse_take(struct kvf__segalloc *a, uint64_t need, uint64_t tag,
		       uint64_t *offset)
{
	struct reuse_list *rl = reuse_find(a, need);

	a->reuse.clock++;
	if (!rl) {
		reuse_claim(a, need);
		return false;
	}
	rl->last_use = a->reuse.clock;
	rl->hits += rl->hits < SLAB_AFTER;
	if (!rl->n)
		return slab_take(a, rl, tag, offset);
	*offset = reuse_pop(a, rl, tag);
	return true;
}

/* ---- slabs ---- */

struct pending_leaf;
static const char *release_locked(struct kvf__segalloc *a, uint64_t offset,
				  uint64_t size, struct pending_leaf *pl);
static int tree_alloc(struct kvf__segalloc *a, uint64_t need, uint64_t flags,
		      uint64_t tag, uint64_t *offset);

static size_t slab_bytes_of(uint32_t k)
{
	return sizeof(struct slab) + (size_t)slab_words(k) * sizeof(uint64_t) +
	       (size_t)k * sizeof(uint32_t);
}

/*
 * Objects per slab of @need bytes, or 0 when the size gets no slabs: a
 * slab is at least one directory cell long (so a cell meets at most two
 * slabs) and holds SLAB_MIN_OBJS to SLAB_MAX_OBJS objects in at most
 * capacity / SLAB_SHARE bytes.
 */
static uint32_t slab_objs(const struct kvf__segalloc *a, uint64_t need)
{
	uint64_t cell = 1ULL << a->dir_shift;
	uint64_t k = (cell + need - 1) / need;

	if (k < SLAB_MIN_OBJS || k > SLAB_MAX_OBJS ||
	    k * need > a->pub.capacity / SLAB_SHARE)
		return 0;
	return (uint32_t)k;
}

/* Enter @s in the directory (@set) or take it out (!@set). */
static void slab_dir_set(struct kvf__segalloc *a, struct slab *s, bool set)
{
	uint64_t c0 = s->base >> a->dir_shift, c1 = (s->end - 1) >> a->dir_shift;

	for (uint64_t c = c0; c <= c1; c++) {
		struct slab **e = (c << a->dir_shift) >= s->base ?
					  &a->dir[c].cover :
					  &a->dir[c].start;

		*e = set ? s : NULL;
	}
}

/*
 * @s's class, or NULL: a size that lost its class slot (or whose slot went
 * to another size) keeps its slabs only until they drain.
 */
static inline struct reuse_list *slab_class(const struct slab *s)
{
	struct reuse_list *rl = s->cls;

	return rl && rl->gen == s->gen && rl->slab_k ? rl : NULL;
}

/*
 * A slab with a free slot is listed: in its class's partial array, or on
 * the stray list once its size lost its class (slab_orphan(), the only
 * place a class changes, moves the listed ones first). An array, not a
 * list: allocs take the newest slab until it is full, and with a list
 * each next slab's head was known only once the one before it was read,
 * a cold miss per slab one after another (perf, churn at 1M objects:
 * slab_pop and slab_list_del ~18% of put_start); in an array a run of
 * allocs knows its slabs at once (prefetch_partials()). A slab leaving
 * from elsewhere than the end (emptied, broken up) gives its place to the
 * last one, which is then taken a little earlier than its turn.
 */
static void slab_list_add(struct kvf__segalloc *a, struct slab *s)
{
	struct reuse_list *rl = slab_class(s);

	if (rl) {
		/* Room: partial_cap >= nr_slabs (slab_carve()). */
		s->at = rl->nr_partial;
		rl->partial[rl->nr_partial++] = s;
		return;
	}
	s->prev = NULL;
	s->next = a->stray;
	if (a->stray)
		a->stray->prev = s;
	a->stray = s;
}

static void slab_list_del(struct kvf__segalloc *a, struct slab *s)
{
	struct reuse_list *rl = slab_class(s);

	if (rl) {
		struct slab *last = rl->partial[--rl->nr_partial];

		rl->partial[s->at] = last;
		last->at = s->at;
		return;
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		a->stray = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
}

/* The slab allocs of @rl's size take a slot of next (nr_partial > 0). */
static inline struct slab *slab_partial_top(const struct reuse_list *rl)
{
	return rl->partial[rl->nr_partial - 1];
}

/*
 * Start loading, for writing, the heads of the slabs the next @n allocs
 * of @rl's size take slots of once its parked blocks are gone (one slab
 * per alloc at most: a slab may serve several).
 */
static void prefetch_partials(const struct reuse_list *rl, uint32_t n)
{
	n = n > rl->n ? n - rl->n : 0;
	for (uint32_t i = 1; i <= n && i <= rl->nr_partial; i++)
		kvf__prefetch_for_write(rl->partial[rl->nr_partial - i]);
}

static int slab_break(struct kvf__segalloc *a, struct slab *s);
static void apply_claims(struct kvf__segalloc *a,
			 const struct kvf__segalloc_range *r, size_t n);

/*
 * @rl's size loses its class. Its partial slabs are broken up (their free
 * slots back to the tree), or kept stray when memory is short; its full
 * ones drain (a slab goes back to the tree when its last object is freed,
 * or is broken up under pressure once it has a free slot: stray then).
 */
static void slab_orphan(struct kvf__segalloc *a, struct reuse_list *rl)
{
	uint32_t n = rl->nr_partial;

	rl->nr_partial = 0;
	rl->gen++;
	rl->nr_slabs = 0;
	rl->slab_k = 0;
	reuse_publish(a, rl);
	for (uint32_t i = 0; i < n; i++)
		slab_list_add(a, rl->partial[i]); /* stray now */
	apply_claims(a, NULL, 0);
	while (a->stray && !slab_break(a, a->stray))
		;
}

/* Take a free slot of @s for @tag's owner; the caller counts it used. */
static uint64_t slab_pop(struct kvf__segalloc *a, struct slab *s,
			 uint64_t tag)
{
	uint64_t *used = s->words;
	uint32_t w = 0, i;

	while (used[w] == ~0ULL)
		w++;
	i = w * 64 + (uint32_t)__builtin_ctzll(~used[w]);
	used[w] |= 1ULL << (i % 64);
	slab_tags(s)[i] = slab_tag(tag);
	if (!--s->nfree) {
		slab_list_del(a, s);
		reuse_publish(a, s->cls);
	}
	return s->base + i * s->size;
}

/*
 * Room in @rl's partial array for one more slab, whatever becomes
 * partial: every slab of the class may (a free never allocates). False
 * when memory is short.
 */
static bool partial_room(struct reuse_list *rl)
{
	struct slab **p = kvf__grow(rl->partial, &rl->partial_cap,
				    rl->nr_slabs + 1, sizeof(*p), 16);

	if (!p)
		return false;
	rl->partial = p;
	return true;
}

/*
 * Carve a new slab for @rl's size from the tree (first fit of its whole
 * length) and list it. False, nothing changed, when the tree has no room
 * or memory is short: the caller then allocates a plain block.
 */
static bool slab_carve(struct kvf__segalloc *a, struct reuse_list *rl)
{
	uint32_t k = rl->slab_k, words = slab_words(k);
	uint64_t bytes = k * rl->size, base;
	struct slab *s;

	/*
	 * Not in a nearly full segment: a slab's free slots serve only its
	 * size, and carving there cost the wide placement mix 0.4% of its
	 * fill at first failure (test_exact_fit_keeps_fill).
	 */
	if (a->largest < bytes ||
	    a->free_bytes < bytes + a->pub.capacity / SLAB_ROOM)
		return false;
	if (!a->dir) {
		a->dir = calloc(a->dir_cells, sizeof(*a->dir));
		if (!a->dir)
			return false;
		atomic_fetch_add_explicit(&a->node_bytes,
					  a->dir_cells * sizeof(*a->dir),
					  memory_order_relaxed);
		atomic_store_explicit(&a->dir_pub, a->dir,
				      memory_order_release);
	}
	if (!partial_room(rl))
		return false;
	s = calloc(1, slab_bytes_of(k));
	if (!s)
		return false;
	if (tree_alloc(a, bytes, USED | SLAB, 0, &base)) {
		free(s);
		return false;
	}
	/* The tree counted the slab used; its slots are all free. */
	a->free_bytes += bytes;
	a->allocs--;
	atomic_fetch_add_explicit(&a->node_bytes, slab_bytes_of(k),
				  memory_order_relaxed);
	s->base = base;
	s->end = base + bytes;
	s->size = rl->size;
	s->k = (uint16_t)k;
	s->nfree = (uint16_t)k;
	/* Bits past the last object read as held: slab_pop never takes them. */
	if (k % 64)
		s->words[words - 1] = ~0ULL << (k % 64);
	s->cls = rl;
	s->gen = rl->gen;
	rl->nr_slabs++;
	slab_list_add(a, s);
	slab_dir_set(a, s, true);
	a->nr_slabs++;
	reuse_publish(a, rl);
	return true;
}

/*
 * The slab path of alloc for @rl's size (no block parked): a slot of the
 * newest partial slab, else of a slab carved now. False when neither.
 */
static bool slab_take(struct kvf__segalloc *a, struct reuse_list *rl,
		      uint64_t tag, uint64_t *offset)
{
	if (!rl->nr_partial &&
	    (!rl->slab_k || rl->hits < SLAB_AFTER || !slab_carve(a, rl)))
		return false;
	*offset = slab_pop(a, slab_partial_top(rl), tag);
	return true;
}

/* Give the empty slab @s back to the tree as one free range. */
static void slab_dissolve(struct kvf__segalloc *a, struct slab *s,
			  struct pending_leaf *pl)
{
	uint64_t bytes = s->end - s->base;
	struct reuse_list *rl = slab_class(s);
	struct path p;
	struct node *l = lookup(a, s->base, &p);

	if (p.off != s->base || l->val[p.idx[0]] != (bytes | USED | SLAB))
		kvf__die("slab %#llx lost from the tree",
			 (unsigned long long)s->base);
	/* Listed: it had a free slot before its last object went (k > 1). */
	slab_list_del(a, s);
	if (rl) {
		reuse_publish(a, rl);
		rl->nr_slabs--;
	}
	slab_dir_set(a, s, false);
	/* A plain used block again, freed like one. */
	l->val[p.idx[0]] = bytes | USED;
	a->free_bytes -= bytes;
	a->allocs++;
	if (release_locked(a, s->base, bytes, pl))
		kvf__die("slab %#llx not freeable", (unsigned long long)s->base);
	atomic_fetch_sub_explicit(&a->node_bytes, slab_bytes_of(s->k),
				  memory_order_relaxed);
	a->nr_slabs--;
	free(s);
}

/* Whether slot @i of @s holds an object. */
static inline bool slab_held(const struct slab *s, uint32_t i)
{
	return s->words[i / 64] & (1ULL << (i % 64));
}

/* The end of the run of slots of @s from @i that are all free or all held
 * (a held run is one slot: each object becomes a block of its own). */
static uint32_t slab_piece_end(const struct slab *s, uint32_t i)
{
	uint32_t j = i + 1;

	if (!slab_held(s, i))
		while (j < s->k && !slab_held(s, j))
			j++;
	return j;
}

/* Bring the spare lists back to MAX_SPARE each (after slab_break). */
static void spares_trim(struct kvf__segalloc *a)
{
	while (a->nr_spare_leaf > MAX_SPARE) {
		struct node *n = spare_get(a, true);

		forget_leaf(a, n);
		atomic_fetch_sub_explicit(&a->node_bytes, node_bytes(true),
					  memory_order_relaxed);
		free(n);
	}
	while (a->nr_spare_inner > MAX_SPARE) {
		atomic_fetch_sub_explicit(&a->node_bytes, node_bytes(false),
					  memory_order_relaxed);
		free(spare_get(a, false));
	}
}

/*
 * Break up slab @s (not empty) under pressure: each held object becomes a
 * plain used block of the tree with its tag, each run of free slots a free
 * block, merged with free neighbours or parked like any freed block. Its
 * pieces replace the slab's block one at a time, so the nodes every
 * replacement may need are taken from malloc first: KVF_OK, or
 * KVF_ERR_NO_MEMORY with nothing changed. A replacement adds one entry and
 * splits at most one leaf, and an inner node splits only when a child
 * split filled it: P pieces need at most P leaves and P + height + 1
 * inner nodes (a generous bound: the surplus goes back at the end). The
 * lock held, claims applied (the frees below read parked neighbours).
 */
static int slab_break(struct kvf__segalloc *a, struct slab *s)
{
	uint64_t bytes = s->end - s->base, cur, freed = 0;
	struct reuse_list *rl = slab_class(s);
	uint32_t pieces = 0, runs = 0;
	struct path p;
	struct node *l;

	for (uint32_t i = 0; i < s->k; i = slab_piece_end(s, i))
		pieces++;
	while (a->nr_spare_leaf < pieces + 1 ||
	       a->nr_spare_inner < pieces + a->height + 2) {
		bool leaf = a->nr_spare_leaf < pieces + 1;
		struct node *n = node_alloc(a, leaf);

		if (!n) {
			spares_trim(a);
			return KVF_ERR_NO_MEMORY;
		}
		if (leaf)
			spare_push(&a->spare_leaf, &a->nr_spare_leaf, n);
		else
			spare_push(&a->spare_inner, &a->nr_spare_inner, n);
	}
	l = lookup(a, s->base, &p);
	if (p.off != s->base || l->val[p.idx[0]] != (bytes | USED | SLAB))
		kvf__die("slab %#llx lost from the tree",
			 (unsigned long long)s->base);
	if (s->nfree)
		slab_list_del(a, s);
	if (rl) {
		reuse_publish(a, rl);
		rl->nr_slabs--;
	}
	slab_dir_set(a, s, false);
	/*
	 * Split off the pieces front to back, the rest a used block each
	 * time; a run of free slots first a used block too, counted like an
	 * object (the tree must tile and its free blocks never adjoin).
	 */
	cur = s->base;
	for (uint32_t i = 0, j; i < s->k; i = j) {
		struct blk rep[2];
		uint64_t len;

		j = slab_piece_end(s, i);
		len = (uint64_t)(j - i) * s->size;
		rep[0] = (struct blk){ cur, len | USED,
				       slab_held(s, i) ? slab_tag_of(s, i) : 0 };
		rep[1] = (struct blk){ cur + len, (s->end - cur - len) | USED,
				       0 };
		replace(a, cur, rep, j < s->k ? 2 : 1);
		if (!slab_held(s, i)) {
			freed += len;
			runs++;
		}
		cur += len;
	}
	a->free_bytes -= freed;
	a->allocs += runs;
	/*
	 * Then the runs are freed, each a plain free but never parked: the
	 * point is free space in the tree (the reuse limit is what
	 * reuse_room() reads).
	 */
	for (uint32_t i = 0; i < s->k; i = slab_piece_end(s, i)) {
		const char *why;

		if (slab_held(s, i))
			continue;
		why = release_locked(a, s->base + (uint64_t)i * s->size,
				     (uint64_t)(slab_piece_end(s, i) - i) *
					     s->size,
				     NULL);
		if (why)
			kvf__die("slab %#llx run %u: %s",
				 (unsigned long long)s->base, i, why);
	}
	spares_trim(a);
	atomic_fetch_sub_explicit(&a->node_bytes, slab_bytes_of(s->k),
				  memory_order_relaxed);
	a->nr_slabs--;
	a->nr_broken++;
	free(s);
	return KVF_OK;
}

/*
 * Break up slabs with free slots, stray ones first, until the tree holds
 * a free block of @need bytes or none is left: a slab's free slots serve
 * its own size only, and a request the tree cannot meet must find them
 * as free space, or slabs would cost fill. True when any was broken up
 * (the caller publishes). The lock held; applies the claims.
 */
static bool slabs_make_room(struct kvf__segalloc *a, uint64_t need)
{
	bool broke = false;

	apply_claims(a, NULL, 0);
	while (a->stray && a->largest < need && reuse_largest(a) < need) {
		if (slab_break(a, a->stray))
			return broke;
		broke = true;
	}
	for (unsigned k = 0; k < REUSE_SIZES && a->largest < need; k++) {
		struct reuse_list *rl = &a->reuse.list[k];

		while (rl->nr_partial && a->largest < need &&
		       reuse_largest(a) < need) {
			if (slab_break(a, slab_partial_top(rl)))
				return broke;
			broke = true;
		}
	}
	return broke;
}

/*
 * Free object (@off, @size) of slab @s: NULL, or why it is not a held
 * object of that size (nothing changed). A slab whose last object goes
 * returns to the tree. O(1) unless it does.
 */
static const char *slab_release(struct kvf__segalloc *a, struct slab *s,
				uint64_t off, uint64_t size,
				struct pending_leaf *pl)
{
	uint64_t rel = off - s->base, need = size ? rounded(a, size) : 0, bit;
	uint32_t i = (uint32_t)(rel / s->size), w = i / 64;

	bit = 1ULL << (i % 64);
	if (rel % s->size || !(s->words[w] & bit))
		return "not allocated";
	if (need != s->size)
		return "wrong size";
	s->words[w] &= ~bit;
	slab_tags(s)[i] = 0;
	a->free_bytes += s->size;
	a->allocs--;
	if (++s->nfree == s->k) {
		slab_dissolve(a, s, pl);
		return NULL;
	}
	if (s->nfree == 1)
		slab_list_add(a, s);
	if (slab_class(s)) {
		if (s->nfree == 1)
			reuse_publish(a, s->cls);
		note_park(a, s->size);
	}
	return NULL;
}

/*
 * reserve of exactly one free slot of @s (@off, @need): KVF_OK, else
 * KVF_ERR_NO_SPACE with nothing changed (a range across slots or held).
 */
static int slab_reserve(struct kvf__segalloc *a, struct slab *s, uint64_t off,
			uint64_t need, uint64_t tag)
{
	uint64_t rel = off - s->base, bit;
	uint32_t i = (uint32_t)(rel / s->size), w = i / 64;

	bit = 1ULL << (i % 64);
	if (rel % s->size || need != s->size || (s->words[w] & bit))
		return KVF_ERR_NO_SPACE;
	s->words[w] |= bit;
	slab_tags(s)[i] = slab_tag(tag);
	if (!--s->nfree) {
		struct reuse_list *rl = slab_class(s);

		slab_list_del(a, s);
		if (rl)
			reuse_publish(a, rl);
	}
	a->free_bytes -= need;
	a->allocs++;
	return KVF_OK;
}

/*
 * The held objects of the slab at @base with offsets >= @from, in order,
 * into @out[*k], at most @max of them; *@end is the end of the last one
 * stored. Returns true when @max were stored.
 */
static bool slab_collect(const struct kvf__segalloc *a, uint64_t base,
			 uint64_t from, struct kvf__segalloc_block *out,
			 size_t *k, size_t max, uint64_t *end)
{
	const struct slab *s = slab_at(a, base);
	uint64_t rel = from > s->base ? from - s->base : 0;
	uint32_t i = (uint32_t)((rel + s->size - 1) / s->size);

	for (; i < s->k && *k < max; i++) {
		if (!slab_held(s, i))
			continue;
		out[(*k)++] = (struct kvf__segalloc_block){
			s->base + i * s->size, s->size, slab_tag_of(s, i) };
		*end = s->base + (i + 1) * s->size;
	}
	return *k == max;
}

/* ---- publishing ---- */

#ifdef KVF_SEGALLOC_CHECK
/*
 * Verify @n's summaries and its parent entries, and that the leaves tile
 * the segment: *@at is where the next leaf must start.
 */
static uint64_t check_node(const struct node *n, unsigned level, uint64_t *at)
{
	uint64_t m = 0, s = 0;

	if (!level && n->base != *at)
		kvf__die("leaf base %llx, expected %llx",
			 (unsigned long long)n->base, (unsigned long long)*at);
	for (uint32_t i = 0; i < n->n; i++) {
		uint64_t v = level ? n->val[i] : free_size(n->val[i]);

		if (!level)
			*at += blk_size(n->val[i]);
		else if (as_inner(n)->key[i] != *at ||
			 check_node(as_inner(n)->child[i], level - 1, at) != v)
			kvf__die("entry %u at level %u stale", i, level);
		if (v > m) {
			s = m;
			m = v;
		} else if (v > s) {
			s = v;
		}
	}
	if (!level && n->sub_exact && n->sub != s)
		kvf__die("leaf sub %llx not exact (%llx)",
			 (unsigned long long)n->sub, (unsigned long long)s);
	if (level && n->n &&
	    (n->val[n->maxi] != n->max ||
	     n->maxchild != as_inner(n)->child[n->maxi] ||
	     (n->sub_exact && (n->subi == n->maxi || n->subi >= n->n ||
			       n->val[n->subi] != n->sub || n->sub != s))))
		kvf__die("level %u: maxi %u stale", level, n->maxi);
	if (n->max != m || n->sub < s)
		kvf__die("level %u: max %llx (%llx) sub %llx (%llx)", level,
			 (unsigned long long)n->max, (unsigned long long)m,
			 (unsigned long long)n->sub, (unsigned long long)s);
	return m;
}
#endif

#ifdef KVF_SEGALLOC_CHECK
/*
 * Parked blocks under @n: count and bytes into @nr and @bytes; each must
 * border only held blocks (@prev: the block before the first one here,
 * updated as the walk goes).
 */
static void check_parked(const struct node *n, unsigned level, uint64_t *prev,
			 uint64_t *nr, uint64_t *bytes)
{
	for (uint32_t i = 0; i < n->n; i++) {
		uint64_t v;

		if (level) {
			check_parked(as_inner(n)->child[i], level - 1, prev, nr,
				     bytes);
			continue;
		}
		v = n->val[i];
		if (((v & CACHED) && !allocated(*prev)) ||
		    ((*prev & CACHED) && !allocated(v)))
			kvf__die("parked block borders a free or parked one");
		if (v & CACHED) {
			(*nr)++;
			*bytes += blk_size(v);
		}
		*prev = v;
	}
}

/*
 * A leaf hint names a leaf of the tree or a spare one, never memory
 * given back to malloc (hinted_parked_leaf() reads it).
 */
static void check_hint(const struct kvf__segalloc *a, const struct node *h)
{
	struct path p;

	if (!h)
		return;
	if (h->n) {
		if (h->base < a->pub.capacity && lookup(a, h->base, &p) == h)
			return;
	} else {
		for (const struct node *s = a->spare_leaf; s;
		     memcpy(&s, &s->val[0], sizeof(s)))
			if (s == h)
				return;
	}
	kvf__die("a parked block's leaf hint %p names no leaf", (void *)h);
}

/* The lists name exactly the parked blocks of the tree. */
static void check_reuse(const struct kvf__segalloc *a)
{
	uint64_t prev = USED, nr = 0, bytes = 0, listed = 0, claimed = 0;

	check_parked(a->root, a->height, &prev, &nr, &bytes);
	for (unsigned k = 0; k < REUSE_SIZES; k++) {
		const struct reuse_list *rl = &a->reuse.list[k];

		for (uint32_t i = 0; i < rl->n; i++) {
			struct blk b = block_at(a, rl->off[i]);

			check_hint(a, rl->leaf[i]);

			if (b.off != rl->off[i] || b.val != (rl->size | PARKED))
				kvf__die("listed block %#llx not parked",
					 (unsigned long long)rl->off[i]);
		}
		if (atomic_load_explicit(&a->pub.parked[k],
					 memory_order_relaxed) !=
		    (rl->n || rl->nr_partial ? rl->size : 0))
			kvf__die("parked size of list %u not published", k);
		listed += rl->n;
	}
	for (uint32_t i = 0; i < a->reuse.nr_claims; i++) {
		const struct claim *c = &a->reuse.claim[i];
		struct blk b = block_at(a, c->off);

		check_hint(a, c->leaf);
		if (b.off != c->off || b.val != (c->size | PARKED))
			kvf__die("claimed block %#llx not parked",
				 (unsigned long long)c->off);
		listed++;
		claimed += c->size;
	}
	if (nr != listed || bytes != a->reuse.bytes + claimed ||
	    a->reuse.bytes > a->reuse.limit)
		kvf__die("%llu parked blocks (%llu bytes), %llu listed (%llu)",
			 (unsigned long long)nr, (unsigned long long)bytes,
			 (unsigned long long)listed,
			 (unsigned long long)a->reuse.bytes);
}

/*
 * The slabs of the tree under @n, and its free bytes: every slab block is
 * in the directory and agrees with it; a slab is never empty, its bitmap
 * counts its free slots, a small slot is held, a free slot has no tag; it
 * is in its class's partial array iff it has a free slot and a class.
 * *@nr counts slabs, *@free the tree's free bytes plus free slots.
 */
static void check_slab_tree(const struct kvf__segalloc *a,
			    const struct node *n, unsigned level, uint64_t *nr,
			    uint64_t *free)
{
	uint64_t off = n->base;

	for (uint32_t i = 0; i < n->n; i++) {
		uint64_t v = n->val[i], held = 0;
		const struct slab *s;

		if (level) {
			check_slab_tree(a, as_inner(n)->child[i], level - 1,
					nr, free);
			continue;
		}
		*free += free_size(v);
		if (v & CACHED)
			*free += blk_size(v);
		if (v & SLAB) {
			s = slab_at(a, off);
			if (!s || s->base != off || s->end - s->base !=
							    blk_size(v) ||
			    s->end - s->base != s->k * s->size ||
			    as_leaf(n)->tag[i] || (v & CACHED))
				kvf__die("slab %#llx not in the directory",
					 (unsigned long long)off);
			for (uint32_t j = 0; j < s->k; j++) {
				bool u = slab_held(s, j);

				held += u;
				if ((!u && slab_tags(s)[j]) ||
				    slab_at(a, s->base + j * s->size) != s)
					kvf__die("slab %#llx slot %u",
						 (unsigned long long)off, j);
			}
			if (held + s->nfree != s->k || !held)
				kvf__die("slab %#llx counts %u free of %u",
					 (unsigned long long)off, s->nfree,
					 s->k);
			{
				const struct reuse_list *rl = slab_class(s);
				bool listed = false;

				if (rl)
					listed = s->at < rl->nr_partial &&
						 rl->partial[s->at] == s;
				else
					for (const struct slab *t = a->stray; t;
					     t = t->next)
						listed |= t == s;
				if (listed != (s->nfree > 0) ||
				    (rl && rl->size != s->size))
					kvf__die("slab %#llx listing",
						 (unsigned long long)off);
			}
			*free += (uint64_t)s->nfree * s->size;
			(*nr)++;
		}
		off += blk_size(v);
	}
}

static void check_slabs(const struct kvf__segalloc *a)
{
	uint64_t nr = 0, free = 0, claimed = 0, listed = 0;

	check_slab_tree(a, a->root, a->height, &nr, &free);
	for (uint32_t i = 0; i < a->reuse.nr_claims; i++)
		claimed += a->reuse.claim[i].size;
	for (uint64_t c = 0; a->dir && c < a->dir_cells; c++) {
		const struct slab *cv = a->dir[c].cover, *st = a->dir[c].start;
		uint64_t at = c << a->dir_shift;

		if ((cv && (cv->base > at || cv->end <= at)) ||
		    (st && (st->base <= at ||
			    st->base >= at + (1ULL << a->dir_shift))))
			kvf__die("slab directory cell %llu",
				 (unsigned long long)c);
	}
	for (unsigned k = 0; k < REUSE_SIZES; k++) {
		const struct reuse_list *rl = &a->reuse.list[k];

		if (rl->nr_partial > rl->partial_cap ||
		    rl->nr_slabs > rl->partial_cap)
			kvf__die("partial array %u too small", k);
		for (uint32_t i = 0; i < rl->nr_partial; i++, listed++) {
			const struct slab *t = rl->partial[i];

			if (slab_class(t) != rl || !t->nfree || t->at != i)
				kvf__die("partial array %u", k);
		}
	}
	for (const struct slab *t = a->stray; t; t = t->next, listed++)
		if (slab_class(t) || !t->nfree ||
		    (t->next && t->next->prev != t))
			kvf__die("stray slab %#llx",
				 (unsigned long long)t->base);
	if (nr != a->nr_slabs || free - claimed != a->free_bytes)
		kvf__die("%llu slabs (%llu counted), %llu free bytes "
			 "(%llu counted)",
			 (unsigned long long)nr,
			 (unsigned long long)a->nr_slabs,
			 (unsigned long long)(free - claimed),
			 (unsigned long long)a->free_bytes);
	(void)listed;
}
#endif

static void publish(struct kvf__segalloc *a)
{
	uint64_t parked = reuse_largest(a), slot = largest_listed(a, true);
#ifdef KVF_SEGALLOC_CHECK
	uint64_t at = 0;

	if (check_node(a->root, a->height, &at) != a->largest ||
	    at != a->pub.capacity)
		kvf__die("largest stale or blocks do not tile");
	check_reuse(a);
	check_slabs(a);
#endif
	atomic_store_explicit(&a->pub.free_bytes, a->free_bytes,
			      memory_order_release);
	/*
	 * Parked blocks border only held ones, so giving them back merges
	 * nothing: the largest region alloc can find is exactly the larger
	 * of the tree's and the largest parked block.
	 */
	if (slot > parked)
		parked = slot;
	atomic_store_explicit(&a->pub.largest_free,
			      parked > a->largest ? parked : a->largest,
			      memory_order_release);
	atomic_store_explicit(&a->nr_allocs, a->allocs, memory_order_release);
}

/* Whether the largest_free publish() would give now holds @need. */
static bool published_fit(const struct kvf__segalloc *a, uint64_t need)
{
	return a->largest >= need || reuse_largest(a) >= need ||
	       largest_listed(a, true) >= need;
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
	a->root = node_alloc(a, true);
	if (!a->root)
		goto err_free;
	a->root->n = 1;
	a->root->base = 0;
	a->root->val[0] = cap;
	as_leaf(a->root)->tag[0] = 0;
	a->root->max = cap;
	a->root->sub = 0;
	a->root->sub_exact = 1;
	a->free_bytes = cap;
	a->largest = cap;
	a->reuse.limit = cap / REUSE_SHARE;
	a->dir_shift = 63 - (unsigned)__builtin_clzll(cap);
	a->dir_shift = a->dir_shift > SLAB_CELLS_LOG ?
			       a->dir_shift - SLAB_CELLS_LOG :
			       0;
	while ((1ULL << a->dir_shift) < alignment)
		a->dir_shift++;
	a->dir_cells = (cap >> a->dir_shift) + 1;
	if (kvf__mutex_init_short(&a->lock))
		goto err_root;
	publish(a);
	*out = a;
	return KVF_OK;

err_root:
	free(a->root);
err_free:
	free(a);
	return KVF_ERR_NO_MEMORY;
}

static void free_tree(struct node *n, unsigned level)
{
	if (level > 0)
		for (uint32_t i = 0; i < n->n; i++)
			free_tree(as_inner(n)->child[i], level - 1);
	free(n);
}

void kvf__segalloc_destroy(struct kvf__segalloc *a)
{
	if (!a)
		return;
	/*
	 * Each slab once, in the cell holding its base: as that cell's
	 * start, or as its cover when the cell before does not name it (a
	 * slab freed earlier is not read again).
	 */
	for (uint64_t c = 0; a->dir && c < a->dir_cells; c++) {
		struct slab *cv = a->dir[c].cover;

		if (cv && (!c || (a->dir[c - 1].cover != cv &&
				  a->dir[c - 1].start != cv)))
			free(cv);
		free(a->dir[c].start);
	}
	free(a->dir);
	for (unsigned k = 0; k < REUSE_SIZES; k++)
		free(a->reuse.list[k].partial);
	free_tree(a->root, a->height);
	while (a->nr_spare_inner)
		free(spare_get(a, false));
	while (a->nr_spare_leaf)
		free(spare_get(a, true));
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/*
 * With the lock held: allocate @need (rounded) bytes. With @pub false the
 * caller publishes (kvf__segalloc_try_alloc_many(): once for a run).
 */
static int alloc_locked(struct kvf__segalloc *a, uint64_t need, uint64_t tag,
			uint64_t *offset, bool pub)
{
	int rc;

	if (a->reuse.limit && reuse_take(a, need, tag, offset)) {
		a->free_bytes -= need;
		a->allocs++;
		if (pub)
			publish(a);
		return KVF_OK;
	}
	/*
	 * The tree cannot serve it but a parked block could: the lists give
	 * all their blocks back to the tree (none merges, see reuse_room),
	 * and first fit runs on the result.
	 */
	if (a->largest < need && reuse_largest(a) >= need)
		reuse_flush(a);
	/*
	 * A slab's free slot serves its own size only: a smaller request
	 * taking one (counted whole) lured fragmentation_aware's best fit
	 * to segments full but for such slots, bimodal fill at first failure
	 * 0.99986 -> 0.99900 (kvforge-bench --workload placement). Instead
	 * the slabs with free slots are broken up until the tree fits it.
	 */
	if (a->largest < need && slabs_make_room(a, need)) {
		if (a->largest < need && reuse_largest(a) >= need)
			reuse_flush(a);
		if (a->largest < need)
			publish(a);
	}
	if (a->largest < need)
		return KVF_ERR_NO_SPACE;
	rc = tree_alloc(a, need, USED, tag, offset);
	if (!rc && pub)
		publish(a);
	return rc;
}

/*
 * First fit of @need bytes (<= a->largest) in the tree, the block marked
 * @flags (USED, or USED | SLAB for a slab, @tag 0) and counted used. Does
 * not publish. KVF_OK or KVF_ERR_NO_MEMORY (nothing changed).
 */
static int tree_alloc(struct kvf__segalloc *a, uint64_t need, uint64_t flags,
		      uint64_t tag, uint64_t *offset)
{
	struct blk b, rep[2];
	struct node *l;
	struct path p;
	uint32_t i;
	int rc;

	rc = spares_fill(a);
	if (rc)
		return rc;
	l = first_fit(a, need, &p);
	i = p.idx[0];
	b = leaf_blk(l, i, p.off);
	if (b.val == need || l->n < FAN) {
		/* In place: the leaf keeps room (the common case). */
		if (b.val != need) {
			move_entries(l, i + 2, l, i + 1, l->n - i - 1, true);
			leaf_set(l, i + 1,
				 (struct blk){ b.off + need, b.val - need, 0 });
			l->n++;
		}
		l->val[i] = need | flags;
		as_leaf(l)->tag[i] = tag;
		/*
		 * The leaf's first key stays, and a free entry shrinking can
		 * only move its node's maximum if it was the largest: sub
		 * needs no update otherwise.
		 */
		if (b.val == l->max)
			fix_path(a, &p, b.val, b.val - need);
		else if (b.val == l->sub)
			l->sub_exact = 0; /* it may have been the second */
	} else {
		rep[0] = (struct blk){ b.off, need | flags, tag };
		rep[1] = (struct blk){ b.off + need, b.val - need, 0 };
		replace(a, b.off, rep, 2);
	}
	a->free_bytes -= need;
	a->allocs++;
	*offset = b.off;
	return KVF_OK;
}

/* alloc_locked() under the lock; @wait false: KVF_ERR_BUSY if it is held. */
static int alloc_entry(struct kvf__segalloc *a, uint64_t size, uint64_t tag,
		       uint64_t *offset, bool wait)
{
	uint64_t need;
	int rc;

	if (!size || !offset)
		return KVF_ERR_INVALID_PARAMS;
	need = rounded(a, size);
	if (!need)
		return KVF_ERR_NO_SPACE;
	if (!wait && pthread_mutex_trylock(&a->lock))
		return KVF_ERR_BUSY;
	if (wait)
		pthread_mutex_lock(&a->lock);
	rc = alloc_locked(a, need, tag, offset, true);
	pthread_mutex_unlock(&a->lock);
	return rc;
}

/* prefetch_partials() for a run of @n allocs of @need bytes. */
static void prefetch_run(struct kvf__segalloc *a, uint64_t need, uint32_t n)
{
	const struct reuse_list *rl =
		a->reuse.limit ? reuse_find(a, need) : NULL;

	if (rl)
		prefetch_partials(rl, n);
}

int kvf__segalloc_try_alloc_many(struct kvf__segalloc *a, uint64_t size,
				 uint32_t n, const uint64_t *tags,
				 uint64_t *offsets)
{
	uint64_t need;
	uint32_t k = 0;

	if (!size || (n && (!tags || !offsets)))
		return KVF_ERR_INVALID_PARAMS;
	need = rounded(a, size);
	if (!need || !n)
		return 0;
	if (pthread_mutex_trylock(&a->lock))
		return KVF_ERR_BUSY;
	/*
	 * Each block after the first only where the figure publish() would
	 * have given says it fits, as a caller checking
	 * kvf__segalloc_may_fit() before each alloc would: past that, the
	 * tree could serve it only by breaking slabs up, and another
	 * segment may hold it whole.
	 */
	prefetch_run(a, need, n);
	while (k < n && (!k || published_fit(a, need)) &&
	       alloc_locked(a, need, tags[k], &offsets[k], false) == KVF_OK)
		k++;
	if (k)
		publish(a);
	pthread_mutex_unlock(&a->lock);
	return (int)k;
}

int kvf__segalloc_alloc_tagged(struct kvf__segalloc *a, uint64_t size,
			       uint64_t tag, uint64_t *offset)
{
	return alloc_entry(a, size, tag, offset, true);
}

int kvf__segalloc_try_alloc_tagged(struct kvf__segalloc *a, uint64_t size,
				   uint64_t tag, uint64_t *offset)
{
	return alloc_entry(a, size, tag, offset, false);
}

void kvf__park_hint_init(struct kvf__park_hint *h, uint64_t alignment)
{
	h->align_mask = alignment - 1;
	for (unsigned k = 0; k < KVF__PARK_HINT_SLOTS; k++) {
		atomic_init(&h->slot[k].size, 0);
		atomic_init(&h->slot[k].seg, UINT32_MAX);
	}
}

void kvf__segalloc_set_park_hint(struct kvf__segalloc *a,
				 struct kvf__park_hint *h, uint32_t index)
{
	atomic_store_explicit(&a->hint_index, index, memory_order_relaxed);
	atomic_store_explicit(&a->hint, h, memory_order_relaxed);
}

int kvf__segalloc_try_take_parked(struct kvf__segalloc *a, uint64_t size,
				  uint64_t tag, uint64_t *offset)
{
	int got;

	if (!offset)
		return KVF_ERR_INVALID_PARAMS;
	got = kvf__segalloc_try_take_parked_many(a, size, 1, &tag, offset);
	return got == 1 ? KVF_OK : got == 0 ? KVF_ERR_NO_SPACE : got;
}

int kvf__segalloc_try_take_parked_many(struct kvf__segalloc *a, uint64_t size,
				       uint32_t n, const uint64_t *tags,
				       uint64_t *offsets)
{
	struct reuse_list *rl;
	uint64_t need;
	uint32_t got = 0;

	if (!size || !tags || !offsets)
		return KVF_ERR_INVALID_PARAMS;
	need = rounded(a, size);
	if (!need || !n)
		return 0;
	if (pthread_mutex_trylock(&a->lock))
		return KVF_ERR_BUSY;
	rl = a->reuse.limit ? reuse_find(a, need) : NULL;
	/*
	 * What reuse_take() does for alloc, minus the admission and without
	 * carving a slab.
	 */
	if (rl)
		prefetch_partials(rl, n);
	for (; rl && got < n && (rl->n || rl->nr_partial); got++) {
		rl->last_use = ++a->reuse.clock;
		offsets[got] =
			rl->n ? reuse_pop(a, rl, tags[got])
			      : slab_pop(a, slab_partial_top(rl), tags[got]);
		a->free_bytes -= need;
		a->allocs++;
	}
	if (got)
		publish(a);
	pthread_mutex_unlock(&a->lock);
	return (int)got;
}

/*
 * A leaf whose summaries a batch of frees has not fixed yet
 * (kvf__segalloc_free_many): frees that merge in place in one leaf, one
 * after another (a fill's neighbours freed in address order), rescan it
 * and raise its path once instead of once each. Frees only grow blocks,
 * so one raise from the first value to the last leaves every node's max
 * what the single raises would, and sub a valid bound; nothing but
 * lookups by offset (which read no summary) may run while one is pending.
 */
struct pending_leaf {
	struct path p;
	bool set;
};

/*
 * Copy the levels of @src a tree of @height uses: a whole struct path is
 * MAX_HEIGHT levels (~360 bytes), and its copy took a quarter of a batch
 * free's samples in release_locked.
 */
static void path_copy(struct path *dst, const struct path *src,
		      unsigned height)
{
	for (unsigned h = 0; h <= height; h++) {
		dst->node[h] = src->node[h];
		dst->idx[h] = src->idx[h];
	}
	dst->off = src->off;
}

static void pending_flush(struct kvf__segalloc *a, struct pending_leaf *pl)
{
	if (pl && pl->set) {
		fix_path_freed(a, &pl->p);
		pl->set = false;
	}
}

/*
 * Merge the @span blocks from leaf position @i of @p on with the free
 * neighbours the caller found in the same leaf, in place, into @m, if the
 * leaf stays full enough. With @pl (a batch) the leaf's summaries are
 * fixed later.
 */
static bool free_in_leaf(struct kvf__segalloc *a, struct path *p,
			 uint32_t span, bool merge_prev, bool merge_next,
			 struct blk m, struct pending_leaf *pl)
{
	struct node *l = p->node[0];
	uint32_t s = p->idx[0] - merge_prev;
	uint32_t d = span - 1 + merge_prev + merge_next;

	if (d && l->n - d < MIN_FILL && a->height > 0)
		return false;
	move_entries(l, s + 1, l, s + 1 + d, l->n - s - 1 - d, true);
	l->n -= d;
	leaf_set(l, s, m);
	/*
	 * Only a raise happened here. Measured: raising the leaf in O(1) too
	 * (sub left a loose bound by the dropped neighbours) made the allocs
	 * after it dearer (bimodal p50 +10 ns): they then rescan leaves in
	 * the timed path. Rescanning the leaf here and raising the inner
	 * levels in O(1) kept allocs as fast and made the engine's remove
	 * p50 16% cheaper than rescanning the whole path.
	 */
	if (!pl) {
		fix_path_freed(a, p);
		return true;
	}
	if (pl->set && pl->p.node[0] != l)
		pending_flush(a, pl);
	path_copy(&pl->p, p, a->height);
	pl->set = true;
	return true;
}

/*
 * lookup() of @off, from the pending leaf of @pl when @off lies in it: a
 * batch freeing neighbours (a fill removed in order) then reads one leaf
 * instead of descending from the root again. Its path is current: the
 * tree changes shape only after the pending leaf is flushed.
 */
static struct node *lookup_near(const struct kvf__segalloc *a, uint64_t off,
				struct path *p, const struct pending_leaf *pl)
{
	struct node *l;
	uint64_t at;
	uint32_t i;

	if (!pl || !pl->set || off < pl->p.node[0]->base)
		return lookup(a, off, p);
	l = pl->p.node[0];
	i = leaf_find(l, off, &at);
	if (off >= at + blk_size(l->val[i]))
		return lookup(a, off, p);
	path_copy(p, &pl->p, a->height);
	p->idx[0] = i;
	p->off = at;
	return l;
}

/*
 * Free (@offset, @size) if it is exactly one used block: NULL. If it is
 * not, nothing changes and the reason is returned.
 */
static const char *release_locked(struct kvf__segalloc *a, uint64_t offset,
				  uint64_t size, struct pending_leaf *pl)
{
	uint64_t need = size ? rounded(a, size) : 0, end, start;
	struct blk b = { 0, 0, 0 }, prev = { 0, USED, 0 }, next = { 0, USED, 0 }, m;
	bool prev_here = false, next_here = false;
	struct reuse_list *rl;
	const struct node *l;
	struct path p;
	uint32_t i;

	if (offset < a->pub.capacity) {
		l = lookup_near(a, offset, &p, pl);
		i = p.idx[0];
		b = leaf_blk(l, i, p.off);
		/* Neighbours: usually in the same leaf. */
		prev_here = i > 0;
		if (prev_here)
			prev = leaf_blk(l, i - 1,
					b.off - blk_size(l->val[i - 1]));
		else if (offset > 0)
			prev = block_at(a, offset - 1);
		end = b.off + blk_size(b.val);
		next_here = i + 1 < l->n;
		if (next_here)
			next = leaf_blk(l, i + 1, end);
		else if (end < a->pub.capacity)
			next = block_at(a, end);
	}
	if (b.off != offset || !allocated(b.val) || !need ||
	    blk_size(b.val) != need)
		return b.off == offset && allocated(b.val) ? "wrong size" :
							     "not allocated";
	/* Park it for the next alloc of its size, if it may be. */
	rl = reuse_room(a, need, prev.val, next.val);
	if (rl) {
		reuse_park(a, rl, &p, offset);
		goto done;
	}
	/* Parked neighbours leave their lists and merge with it as free. */
	if (prev.val & CACHED) {
		reuse_unlist(a, prev.off, blk_size(prev.val));
		prev.val = blk_size(prev.val);
	}
	if (next.val & CACHED) {
		reuse_unlist(a, next.off, blk_size(next.val));
		next.val = blk_size(next.val);
	}
	/* Merge with free neighbours: the merged block starts at @start. */
	start = prev.val & USED ? offset : prev.off;
	m = (struct blk){ start,
			  (prev.val & USED ? 0 : prev.val) + need +
				  (next.val & USED ? 0 : next.val),
			  0 };
	if ((prev_here || (prev.val & USED)) &&
	    (next_here || (next.val & USED)) &&
	    free_in_leaf(a, &p, 1, !(prev.val & USED), !(next.val & USED), m,
			 pl))
		goto done;
	/* Structural changes read the summaries: fix the pending leaf first. */
	pending_flush(a, pl);
	/*
	 * A neighbour in another leaf, or the leaf would underflow. Tiling
	 * holds at every step: the next block goes to this one, this one
	 * to the previous, then the block at @start (now covering all of
	 * them) becomes the free merged block.
	 */
	if (!(next.val & USED))
		absorb(a, next.off);
	if (start != offset)
		absorb(a, offset);
	replace(a, start, &m, 1);
done:
	a->free_bytes += need;
	a->allocs--;
	return NULL;
}

static const char *release(struct kvf__segalloc *a, uint64_t offset,
			   uint64_t size)
{
	struct slab *s;
	const char *why;

	lock_settled(a);
	s = slab_at(a, offset);
	why = s ? slab_release(a, s, offset, size, NULL) :
		  release_locked(a, offset, size, NULL);
	if (!why)
		publish(a);
	pthread_mutex_unlock(&a->lock);
	return why;
}

int kvf__segalloc_release(struct kvf__segalloc *a, uint64_t offset,
			  uint64_t size)
{
	return release(a, offset, size) ? KVF_ERR_INVALID_PARAMS : KVF_OK;
}

void kvf__segalloc_free(struct kvf__segalloc *a, uint64_t offset,
			uint64_t size)
{
	const char *why = release(a, offset, size);

	if (why)
		kvf__die("free of [%#llx, +%llu): %s",
			 (unsigned long long)offset, (unsigned long long)size,
			 why);
}

/*
 * How many of @r[0..@n) (two at least) are neighbouring used blocks of
 * one leaf, each the next entry after the one before, all with a
 * neighbour on each side in that leaf (or the segment's start before the
 * first): the run free_run_locked() can free at once. 0 if there is no
 * such run. Fills @p with the first's path.
 */
static uint32_t run_in_leaf(const struct kvf__segalloc *a,
			    const struct kvf__segalloc_range *r, size_t n,
			    const struct pending_leaf *pl, struct path *p)
{
	const struct node *l;
	uint64_t end;
	uint32_t i, len = 0;

	/* Most frees have no neighbour after them in the batch: no lookup. */
	if (n < 2 || r[0].offset >= a->pub.capacity ||
	    !frees_adjoin(a, &r[0], &r[1]))
		return 0;
	l = lookup_near(a, r[0].offset, p, pl);
	i = p->idx[0];
	if (p->off != r[0].offset || (i == 0 && r[0].offset > 0))
		return 0;
	for (end = p->off; len < n && i + len + 1 < l->n; len++) {
		uint64_t v = l->val[i + len];

		if (r[len].offset != end || !allocated(v) || !r[len].size ||
		    blk_size(v) != rounded(a, r[len].size))
			break;
		end += blk_size(v);
	}
	return len >= 2 ? len : 0;
}

/*
 * Free a run of neighbouring blocks in one leaf (a fill removed in
 * address order) as one merge: one shift of the leaf's entries instead of
 * one per block. The result is what release_locked() gives freeing them
 * in order: the first could be parked (both its neighbours held) and is
 * taken off its list again by the second, which merges with it; no other
 * can be parked, its left neighbour being free. Returns how many it
 * freed: 0 when r[0] starts no run or the merge would underflow the leaf
 * (release_locked() then frees r[0] alone).
 */
static size_t free_run_locked(struct kvf__segalloc *a,
			      const struct kvf__segalloc_range *r, size_t n,
			      struct pending_leaf *pl)
{
	struct blk prev = { 0, USED, 0 }, next, m;
	bool merge_prev, merge_next;
	uint64_t freed = 0;
	struct node *l;
	struct path p;
	uint32_t i, len = run_in_leaf(a, r, n, pl, &p);

	if (!len)
		return 0;
	l = p.node[0];
	i = p.idx[0];
	if (i > 0)
		prev = leaf_blk(l, i - 1, p.off - blk_size(l->val[i - 1]));
	/* Free or parked neighbours merge; held blocks and slabs do not. */
	merge_prev = !(prev.val & USED) || (prev.val & CACHED);
	/*
	 * Keep MIN_FILL entries in the leaf: a shorter run, the next block
	 * then one of the batch's, held; the rest go one by one.
	 */
	if (a->height > 0 && len + MIN_FILL + merge_prev > l->n + 1)
		len = l->n + 1 - MIN_FILL - merge_prev;
	if (len < 2)
		return 0;
	for (uint32_t k = 0; k < len; k++)
		freed += blk_size(l->val[i + k]);
	next = leaf_blk(l, i + len, p.off + freed);
	merge_next = !(next.val & USED) || (next.val & CACHED);
	if (a->height > 0 &&
	    l->n - (len - 1 + merge_prev + merge_next) < MIN_FILL) {
		/* Then the block after the run would merge too: one less. */
		len--;
		freed -= blk_size(l->val[i + len]);
		next = leaf_blk(l, i + len, p.off + freed);
		merge_next = false;
	}
	if (len < 2)
		return 0;
	if (prev.val & CACHED)
		reuse_unlist(a, prev.off, blk_size(prev.val));
	if (next.val & CACHED)
		reuse_unlist(a, next.off, blk_size(next.val));
	m = (struct blk){ merge_prev ? prev.off : p.off,
			  (merge_prev ? blk_size(prev.val) : 0) + freed +
				  (merge_next ? blk_size(next.val) : 0),
			  0 };
	if (!free_in_leaf(a, &p, len, merge_prev, merge_next, m, pl))
		kvf__die("a run's merge underflowed its leaf");
	a->free_bytes += freed;
	a->allocs -= len;
	return len;
}

void kvf__segalloc_prefetch_free(const struct kvf__segalloc *a,
				 uint64_t offset)
{
	struct slab_cell *dir =
		atomic_load_explicit(&a->dir_pub, memory_order_relaxed);

	/* The directory outlives every slab: it goes only with @a. */
	if (dir && offset < a->pub.capacity)
		__builtin_prefetch(&dir[offset >> a->dir_shift]);
}

void kvf__segalloc_free_many(struct kvf__segalloc *a,
			     const struct kvf__segalloc_range *r, size_t n)
{
	struct pending_leaf pl = { .set = false };
	const char *why = NULL;
	size_t i;

	if (!n)
		return;
	pthread_mutex_lock(&a->lock);
	apply_claims(a, r, n);
	for (i = 0; i < n && !why; i++) {
		struct slab *s = slab_at(a, r[i].offset);
		size_t run;

		if (s) {
			why = slab_release(a, s, r[i].offset, r[i].size, &pl);
			continue;
		}
		run = free_run_locked(a, r + i, n - i, &pl);

		if (run) {
			i += run - 1;
			continue;
		}
		why = release_locked(a, r[i].offset, r[i].size, &pl);
#ifdef KVF_SEGALLOC_CHECK
		/* A pending leaf is stale by design: verify without one. */
		if (!why && !pl.set)
			publish(a);
#endif
	}
	pending_flush(a, &pl);
	publish(a);
	pthread_mutex_unlock(&a->lock);
	if (why)
		kvf__die("free of [%#llx, +%llu): %s",
			 (unsigned long long)r[i - 1].offset,
			 (unsigned long long)r[i - 1].size, why);
}

int kvf__segalloc_reserve_tagged(struct kvf__segalloc *a, uint64_t offset,
				 uint64_t size, uint64_t tag)
{
	struct blk b, rep[3];
	uint64_t need, end, b_end;
	uint32_t k = 0;
	int rc;

	if (!size || (offset & a->pub.align_mask) || offset >= a->pub.capacity)
		return KVF_ERR_INVALID_PARAMS;
	need = rounded(a, size);
	if (!need || need > a->pub.capacity - offset)
		return KVF_ERR_INVALID_PARAMS;
	end = offset + need;
	lock_settled(a);
	b = block_at(a, offset);
	if (b.val & SLAB) {
		rc = slab_reserve(a, slab_at(a, offset), offset, need, tag);
		if (!rc)
			publish(a);
		goto out;
	}
	if (b.val & CACHED) {
		/* Free to the outside: back to the tree, then reserve. */
		reuse_unlist(a, b.off, blk_size(b.val));
		reuse_to_tree(a, b.off, blk_size(b.val));
		b = block_at(a, offset);
	}
	b_end = b.off + blk_size(b.val);
	if ((b.val & USED) || b_end < end) {
		rc = KVF_ERR_NO_SPACE;
		goto out;
	}
	rc = spares_fill(a);
	if (rc)
		goto out;
	if (b.off < offset)
		rep[k++] = (struct blk){ b.off, offset - b.off, 0 };
	rep[k++] = (struct blk){ offset, need | USED, tag };
	if (end < b_end)
		rep[k++] = (struct blk){ end, b_end - end, 0 };
	replace(a, b.off, rep, k);
	a->free_bytes -= need;
	a->allocs++;
	publish(a);
out:
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void kvf__segalloc_set_reuse_limit(struct kvf__segalloc *a, uint64_t bytes)
{
	lock_settled(a);
	a->reuse.limit = bytes;
	if (a->reuse.bytes > bytes)
		reuse_flush(a);
	for (unsigned k = 0; !bytes && k < REUSE_SIZES; k++)
		slab_orphan(a, &a->reuse.list[k]);
	publish(a);
	pthread_mutex_unlock(&a->lock);
}

uint64_t kvf__segalloc_reuse_bytes(struct kvf__segalloc *a)
{
	uint64_t bytes;

	pthread_mutex_lock(&a->lock);
	bytes = a->reuse.bytes;
	pthread_mutex_unlock(&a->lock);
	return bytes;
}

uint64_t kvf__segalloc_nr_slabs(struct kvf__segalloc *a, uint64_t *broken)
{
	uint64_t n;

	pthread_mutex_lock(&a->lock);
	n = a->nr_slabs;
	if (broken)
		*broken = a->nr_broken;
	pthread_mutex_unlock(&a->lock);
	return n;
}

/* Append the used blocks under @n to @out[*k]. */
static void collect_used(const struct kvf__segalloc *a, const struct node *n,
			 unsigned level, struct kvf__segalloc_block *out,
			 size_t *k)
{
	uint64_t off = n->base, end;

	for (uint32_t i = 0; i < n->n; i++) {
		if (level > 0) {
			collect_used(a, as_inner(n)->child[i], level - 1, out,
				     k);
			continue;
		}
		if (allocated(n->val[i]))
			out[(*k)++] = (struct kvf__segalloc_block){
				off, blk_size(n->val[i]), as_leaf(n)->tag[i] };
		else if (n->val[i] & SLAB)
			slab_collect(a, off, 0, out, k, SIZE_MAX, &end);
		off += blk_size(n->val[i]);
	}
}

int kvf__segalloc_used_blocks(struct kvf__segalloc *a,
			      struct kvf__segalloc_block **out, size_t *n)
{
	size_t k = 0;

	lock_settled(a);
	*out = malloc((a->allocs ? a->allocs : 1) * sizeof(**out));
	if (*out)
		collect_used(a, a->root, a->height, *out, &k);
	pthread_mutex_unlock(&a->lock);
	*n = k;
	return *out ? KVF_OK : KVF_ERR_NO_MEMORY;
}

uint64_t kvf__segalloc_free_bytes(const struct kvf__segalloc *a)
{
	return kvf__segalloc_free_fast(a);
}

uint64_t kvf__segalloc_meta_bytes(const struct kvf__segalloc *a)
{
	return sizeof(*a) + atomic_load_explicit(&a->node_bytes,
						 memory_order_relaxed);
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

/* ---- address-order scan (eviction's clock hand) ---- */

/*
 * Step @p to the next leaf in address order, or return NULL after the
 * last one. The path is an iterator: climb to the first level with a
 * right sibling, then descend along leftmost children. Amortised O(1)
 * per leaf, and it needs no sibling links in the nodes.
 */
static struct node *next_leaf(const struct kvf__segalloc *a, struct path *p)
{
	unsigned h = 1;

	while (h <= a->height && p->idx[h] + 1 >= p->node[h]->n)
		h++;
	if (h > a->height)
		return NULL;
	p->idx[h]++;
	for (; h > 0; h--) {
		p->node[h - 1] = as_inner(p->node[h])->child[p->idx[h]];
		p->idx[h - 1] = 0;
	}
	return p->node[0];
}

/* Start fetching the leaf after @p's (the walk reads all of it). */
static void prefetch_next_leaf(const struct kvf__segalloc *a,
			       const struct path *p)
{
	const struct node *n;

	if (!a->height || p->idx[1] + 1 >= p->node[1]->n)
		return;
	n = as_inner(p->node[1])->child[p->idx[1] + 1];
	for (size_t b = 0; b < sizeof(struct leaf); b += 64)
		__builtin_prefetch((const char *)n + b);
}

size_t kvf__segalloc_scan(struct kvf__segalloc *a, uint64_t from,
			  struct kvf__segalloc_block *out, size_t max,
			  uint64_t *next)
{
	const struct node *l;
	struct path p;
	uint64_t off;
	size_t k = 0;
	uint32_t i;

	lock_settled(a);
	*next = a->pub.capacity;
	if (!max || from >= a->pub.capacity)
		goto out;
	l = lookup(a, from, &p);
	i = p.idx[0];
	off = p.off;
	while (l) {
		prefetch_next_leaf(a, &p);
		for (; i < l->n; i++) {
			uint64_t sz = blk_size(l->val[i]);

			off += sz;
			if ((l->val[i] & SLAB) && off > from) {
				uint64_t end;

				if (slab_collect(a, off - sz, from, out, &k,
						 max, &end)) {
					*next = end;
					goto out;
				}
				continue;
			}
			if (!allocated(l->val[i]) || off - sz < from)
				continue;
			out[k++] = (struct kvf__segalloc_block){
				off - sz, sz, as_leaf(l)->tag[i] };
			if (k == max) {
				*next = off;
				goto out;
			}
		}
		l = next_leaf(a, &p);
		if (l)
			off = l->base;
		i = 0;
	}
out:
	pthread_mutex_unlock(&a->lock);
	return k;
}
