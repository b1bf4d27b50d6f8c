/* cgroup.c: resource usage of a sandbox, read from its cgroup after the
 * command ended and before the container is deleted: true high-water
 * marks kept by the kernel, not samples. Works on cgroup v1 (and hybrid)
 * and v2 hosts. */
#include "supervisor.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static bool read_i64(const char *path, int64_t *v)
{
	FILE *f = fopen(path, "re");
	long long x;
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "%lld", &x) == 1;
	fclose(f);
	if (ok)
		*v = x;
	return ok;
}

/* "key value" files (memory.oom_control, cpu.stat, memory.events). */
static bool read_key(const char *path, const char *key, int64_t *v)
{
	FILE *f = fopen(path, "re");
	char k[64];
	long long x;
	bool found = false;

	if (!f)
		return false;
	while (fscanf(f, "%63s %lld", k, &x) == 2) {
		if (strcmp(k, key) == 0) {
			*v = x;
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

struct json_object *cgroup_usage(const char *cid, bool *oom_killed)
{
	struct statfs sf;
	char p[512];
	int64_t cpu_ns = -1, mem = -1, pids = -1, oom = 0;
	bool v2 = statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;

	if (v2) {
		int64_t usec;
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/sandbox/%s/cpu.stat", cid);
		if (read_key(p, "usage_usec", &usec))
			cpu_ns = usec * 1000;
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/sandbox/%s/memory.peak", cid);
		(void)read_i64(p, &mem);
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/sandbox/%s/pids.peak", cid);
		(void)read_i64(p, &pids);
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/sandbox/%s/memory.events", cid);
		(void)read_key(p, "oom_kill", &oom);
	} else {
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/cpuacct/sandbox/%s/cpuacct.usage", cid);
		(void)read_i64(p, &cpu_ns);
		(void)snprintf(p, sizeof(p),
			       "/sys/fs/cgroup/memory/sandbox/%s/memory.max_usage_in_bytes", cid);
		(void)read_i64(p, &mem);
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/pids/sandbox/%s/pids.peak", cid);
		(void)read_i64(p, &pids);
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/memory/sandbox/%s/memory.oom_control", cid);
		(void)read_key(p, "oom_kill", &oom);
	}
	*oom_killed = oom > 0;
	struct json_object *o = json_object_new_object();
	if (cpu_ns >= 0) {
		char txt[32];
		(void)snprintf(txt, sizeof(txt), "%.3f", (double)cpu_ns / 1e9);
		json_object_object_add(o, "cpu_time_sec",
				       json_object_new_double_s((double)cpu_ns / 1e9, txt));
	}
	if (mem >= 0) {
		char txt[32];
		double mb = (double)mem / 1048576.0;
		(void)snprintf(txt, sizeof(txt), "%.2f", mb);
		json_object_object_add(o, "peak_rss_mb", json_object_new_double_s(mb, txt));
	}
	if (pids >= 0)
		json_object_object_add(o, "pids", json_object_new_int64(pids));
	return o;
}

void cgroup_remove(const char *cid)
{
	static const char *const ctrls[] = { "", "memory/", "pids/", "cpu/", "cpuacct/",
					     "cpu,cpuacct/", "cpuset/", "devices/", "freezer/",
					     "blkio/", "hugetlb/", "net_cls/", "net_prio/",
					     "perf_event/", "systemd/", "unified/" };
	char p[300];

	for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
		(void)snprintf(p, sizeof(p), "/sys/fs/cgroup/%ssandbox/%s", ctrls[i], cid);
		(void)rmdir(p);
	}
}
