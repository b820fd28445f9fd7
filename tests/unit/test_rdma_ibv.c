/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_ibv.c - the libibverbs backend as far as a machine
 * without a device allows: the library loads at run time and every call
 * of the table resolves; no device (ENOSYS kernel or empty list) is
 * reported as unavailable with the reason, once, on one log line; the
 * probe agrees. With a device, kvf__rdma_dev_open() must succeed and pick
 * port 1 (the transport itself is tested on hardware by test_rdma_hw).
 * When libibverbs.so.1 cannot be loaded at all, that is checked to be
 * reported and the test is skipped (exit 77).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <kvforge/rdma.h>
#include <kvforge/status.h>

#include "rdma/stream.h"

static const struct kvf__verbs_ops *ibv;

static void test_table_complete(void **state)
{
	const void *const *slot = (const void *const *)ibv;

	(void)state;
	assert_string_equal(ibv->name, "libibverbs");
	/* Every function pointer after the name is resolved. */
	for (size_t i = 1; i < sizeof(*ibv) / sizeof(void *); i++)
		assert_non_null(slot[i]);
	/* Loading is once per process. */
	assert_ptr_equal(kvf__verbs_ibv(NULL, 0), ibv);
}

static void test_device_or_reason(void **state)
{
	struct kvf__rdma_dev *dev = NULL;
	struct kvf_rdma_info info;
	char why[160] = "";
	int ret;

	(void)state;
	ret = kvf__rdma_dev_open(ibv, &dev, why, sizeof(why));
	assert_int_equal(kvf_rdma_probe(&info, NULL, NULL), KVF_OK);
	if (ret == KVF_OK) {
		/* A device: a name, a GID, and the probe sees it too. */
		assert_non_null(dev);
		assert_true(dev->name[0]);
		assert_true(info.nr_devices >= 1);
		kvf__rdma_dev_close(dev);
		return;
	}
	assert_int_equal(ret, KVF_ERR_UNAVAILABLE);
	assert_null(dev);
	assert_true(why[0]);
	assert_false(info.available);
	assert_true(info.reason[0]);
	printf("# no usable RDMA device: %s\n", why);
}

/* However often RDMA is probed, "unavailable" is logged on one line. */
static void test_one_log_line(void **state)
{
	struct kvf_rdma_info info;
	FILE *tmp = tmpfile();
	char line[512];
	int saved, lines = 0;

	(void)state;
	assert_non_null(tmp);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	for (int i = 0; i < 5; i++)
		kvf_rdma_probe(&info, NULL, NULL);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	while (fgets(line, sizeof(line), tmp))
		lines++;
	fclose(tmp);
	/* Runs first: exactly one line when RDMA is unavailable. */
	assert_int_equal(lines, info.available ? 0 : 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_log_line),
		cmocka_unit_test(test_table_complete),
		cmocka_unit_test(test_device_or_reason),
	};
	char why[160] = "";

	ibv = kvf__verbs_ibv(why, sizeof(why));
	if (!ibv) {
		if (!why[0])
			return 1;
		printf("1..0 # SKIP %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
