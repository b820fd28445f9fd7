/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_hugemem.c - huge-page mappings and the large arrays
 * built on them: mappings of 2 MiB or more are 2 MiB aligned and zeroed,
 * smaller ones page aligned; an array grown with kvf__huge_grow() keeps
 * every element it held across each doubling, including the move from
 * malloc()'s memory into a mapping of its own at KVF__HUGE_ARRAY_MIN
 * bytes, gives back the same array while it has room, and refuses a size
 * that overflows without losing what it holds.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metadata/hugemem.h"

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] || p[n - 1])
			return false;
	return true;
}

static void mappings_aligned_and_zero(void **state)
{
	static const size_t sizes[] = {1,
				       4096,
				       100000,
				       KVF__HUGE_PAGE - 1,
				       KVF__HUGE_PAGE,
				       3 * KVF__HUGE_PAGE + 5};

	(void)state;
	assert_null(kvf__huge_alloc(0));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned char *p = kvf__huge_alloc(sizes[i]);
		uintptr_t align =
			sizes[i] >= KVF__HUGE_PAGE ? KVF__HUGE_PAGE : 4096;

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % align, 0);
		assert_true(kvf__huge_size(sizes[i]) >= sizes[i]);
		assert_true(all_zero(p, sizes[i]));
		memset(p, 0x5a, sizes[i]);
		kvf__huge_free(p, sizes[i]);
	}
}

/*
 * Elements appended one by one, as the journal's buffers grow: each
 * doubling keeps them all, the array leaves malloc() for a mapping of
 * its own once it is KVF__HUGE_ARRAY_MIN bytes or more (2 MiB aligned
 * from then on), and a need within the capacity changes nothing.
 */
static void grown_arrays_keep_their_elements(void **state)
{
	size_t n = 3 * KVF__HUGE_ARRAY_MIN / sizeof(uint64_t), cap = 0;
	uint64_t *a = NULL;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		size_t before = cap;
		uint64_t *g = kvf__huge_grow(a, &cap, i + 1, sizeof(*a), 1000);

		assert_non_null(g);
		assert_true(cap >= i + 1);
		if (before) {
			assert_true(cap == before || cap == 2 * before);
			if (cap == before)
				assert_ptr_equal(g, a);
		} else {
			assert_int_equal(cap, 1000);
		}
		if (cap != before) {
			for (size_t j = 0; j < i; j++)
				assert_int_equal(g[j], j * 2654435761u);
			if (cap * sizeof(*a) >= KVF__HUGE_ARRAY_MIN)
				assert_int_equal((uintptr_t)g % KVF__HUGE_PAGE,
						 0);
		}
		a = g;
		a[i] = i * 2654435761u;
	}
	kvf__huge_array_free(a, cap, sizeof(*a));
	kvf__huge_array_free(NULL, 0, sizeof(*a));
}

/* A need far beyond the capacity doubles until it fits, at once. */
static void large_needs_fit_at_once(void **state)
{
	size_t cap = 0;
	unsigned char *a = kvf__huge_grow(NULL, &cap, 10, 1, 16);

	(void)state;
	assert_non_null(a);
	assert_int_equal(cap, 16);
	memcpy(a, "0123456789", 10);
	a = kvf__huge_grow(a, &cap, 5 * KVF__HUGE_ARRAY_MIN, 1, 16);
	assert_non_null(a);
	assert_true(cap >= 5 * KVF__HUGE_ARRAY_MIN &&
		    cap / 2 < 5 * KVF__HUGE_ARRAY_MIN);
	assert_memory_equal(a, "0123456789", 10);
	kvf__huge_array_free(a, cap, 1);
}

/* A size whose bytes overflow is refused; the array stays as it was. */
static void overflow_refused(void **state)
{
	size_t cap = 0, before;
	uint32_t *a = kvf__huge_grow(NULL, &cap, 4, sizeof(*a), 4);

	(void)state;
	assert_non_null(a);
	a[3] = 77;
	before = cap;
	assert_null(kvf__huge_grow(a, &cap, SIZE_MAX / 2, sizeof(*a), 4));
	assert_int_equal(cap, before);
	assert_int_equal(a[3], 77);
	kvf__huge_array_free(a, cap, sizeof(*a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mappings_aligned_and_zero),
		cmocka_unit_test(grown_arrays_keep_their_elements),
		cmocka_unit_test(large_needs_fit_at_once),
		cmocka_unit_test(overflow_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
