/* hostprep.c: host preparation the supervisor does itself at start, so an
 * operator never has to.
 *
 * crun refuses a "hybrid" cgroup layout (v1 hierarchies mounted plus a v2
 * hierarchy at /sys/fs/cgroup/unified) while any controller is attached to
 * the v2 side ("cgroups in hybrid mode not supported"). Debian kernels
 * leave controllers that have no v1 mount (hugetlb here) on the v2 side.
 * Mounting a v1 hierarchy for each such controller moves it over and
 * leaves v2 empty, which crun accepts. */
#include "supervisor.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

int hostprep_cgroups(void)
{
	struct statfs sf;
	char ctrls[512] = "";
	FILE *f;

	/* Hybrid means: /sys/fs/cgroup is a tmpfs of v1 mounts and a v2
	 * mount sits at unified/. Pure v1 or pure v2 need nothing. */
	if (statfs("/sys/fs/cgroup", &sf) < 0 || sf.f_type != TMPFS_MAGIC)
		return 0;
	f = fopen("/sys/fs/cgroup/unified/cgroup.controllers", "re");
	if (!f)
		return 0;
	if (!fgets(ctrls, sizeof(ctrls), f))
		ctrls[0] = '\0';
	fclose(f);
	strtrim(ctrls);
	if (!*ctrls)
		return 0;

	int rc = 0;
	for (char *save = NULL, *c = strtok_r(ctrls, " ", &save); c;
	     c = strtok_r(NULL, " ", &save)) {
		char path[256];
		(void)snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", c);
		if (mkdir(path, 0555) < 0 && errno != EEXIST) {
			log_error("hostprep: mkdir %s: %s", path, strerror(errno));
			rc = -1;
			continue;
		}
		if (mount("none", path, "cgroup", 0, c) < 0) {
			log_error("hostprep: mounting v1 %s hierarchy: %s", c,
				  strerror(errno));
			rc = -1;
			continue;
		}
		log_info("hostprep: moved cgroup controller %s from the unified "
			 "hierarchy to v1 (crun refuses hybrid layouts)", c);
	}
	return rc;
}
