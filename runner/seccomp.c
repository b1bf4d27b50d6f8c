/* seccomp.c: the seccomp profile of every sandbox, as an OCI
 * `linux.seccomp` object (the docker runtime renders the same table).
 *
 * Default allow, with a deny list: the run's code is an ordinary Linux
 * program (interpreters, compilers, test runners) and must not trip over
 * an allow list; what is denied is what a sandboxed program has no
 * business doing and what widens the kernel's attack surface. Capabilities
 * are all dropped as well, so most of these would fail anyway; the filter
 * is the second wall. Every rule says why. */
#include "supervisor.h"

#include <errno.h>

struct rule {
	const char *const *names;
	const char *why;
};

#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct rule deny[] = {
	{ NAMES("mount", "umount", "umount2", "pivot_root", "chroot", "move_mount",
		"open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
		"mount_setattr"),
	  "the sandbox's filesystem layout is fixed by the supervisor" },
	{ NAMES("unshare", "setns"),
	  "new namespaces (user namespaces above all) expose kernel code paths "
	  "that are otherwise unreachable without privileges" },
	{ NAMES("ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
		"pidfd_getfd"),
	  "no process may inspect or steer another one, PID 1 included" },
	{ NAMES("io_uring_setup", "io_uring_enter", "io_uring_register"),
	  "io_uring performs system calls the filter never sees and has a long "
	  "record of kernel exploits" },
	{ NAMES("keyctl", "add_key", "request_key"),
	  "kernel keyrings are not namespaced" },
	{ NAMES("bpf", "perf_event_open", "userfaultfd"),
	  "kernel attack surface; userfaultfd widens race windows for exploits" },
	{ NAMES("kexec_load", "kexec_file_load", "reboot", "init_module",
		"finit_module", "delete_module", "swapon", "swapoff", "acct",
		"quotactl", "syslog", "settimeofday", "clock_settime",
		"clock_adjtime", "adjtimex", "iopl", "ioperm", "vhangup",
		"open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
		"nfsservctl", "uselib", "ustat", "sysfs", "_sysctl",
		"fanotify_init", "personality"),
	  "host administration, kernel modules, clocks and legacy interfaces: "
	  "nothing a run needs" },
};

static struct json_object *names_array(const char *const *names)
{
	struct json_object *a = json_object_new_array();

	for (; *names; names++)
		json_object_array_add(a, json_object_new_string(*names));
	return a;
}

struct json_object *seccomp_profile(void)
{
	struct json_object *o = json_object_new_object();
	struct json_object *arches = json_object_new_array();
	struct json_object *calls = json_object_new_array();

	json_object_object_add(o, "defaultAction",
			       json_object_new_string("SCMP_ACT_ALLOW"));
	json_object_array_add(arches, json_object_new_string("SCMP_ARCH_X86_64"));
	json_object_array_add(arches, json_object_new_string("SCMP_ARCH_X86"));
	json_object_array_add(arches, json_object_new_string("SCMP_ARCH_X32"));
	json_object_object_add(o, "architectures", arches);
	for (size_t i = 0; i < sizeof(deny) / sizeof(deny[0]); i++) {
		struct json_object *r = json_object_new_object();
		json_object_object_add(r, "names", names_array(deny[i].names));
		json_object_object_add(r, "action",
				       json_object_new_string("SCMP_ACT_ERRNO"));
		json_object_object_add(r, "errnoRet", json_object_new_int(EPERM));
		json_object_object_add(r, "comment", json_object_new_string(deny[i].why));
		json_object_array_add(calls, r);
	}
	/* clone3 passes its flags in a struct the filter cannot read, so it
	 * cannot be checked for namespace flags: ENOSYS makes libc fall back
	 * to clone(2), whose flags are checked below. */
	struct json_object *c3 = json_object_new_object();
	json_object_object_add(c3, "names", names_array(NAMES("clone3")));
	json_object_object_add(c3, "action", json_object_new_string("SCMP_ACT_ERRNO"));
	json_object_object_add(c3, "errnoRet", json_object_new_int(ENOSYS));
	json_object_array_add(calls, c3);
	/* clone(2) with any CLONE_NEW* flag (NEWNS, NEWCGROUP, NEWUTS,
	 * NEWIPC, NEWUSER, NEWPID, NEWNET) would create a namespace, as
	 * unshare does: one rule per flag, each matching when that bit is
	 * set. */
	static const long ns_flags[] = { 0x00020000, 0x02000000, 0x04000000,
					 0x08000000, 0x10000000, 0x20000000,
					 0x40000000 };
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		struct json_object *r = json_object_new_object();
		struct json_object *as = json_object_new_array();
		struct json_object *a = json_object_new_object();
		json_object_object_add(r, "names", names_array(NAMES("clone")));
		json_object_object_add(r, "action",
				       json_object_new_string("SCMP_ACT_ERRNO"));
		json_object_object_add(r, "errnoRet", json_object_new_int(EPERM));
		json_object_object_add(a, "index", json_object_new_int(0));
		json_object_object_add(a, "value", json_object_new_int64(ns_flags[i]));
		json_object_object_add(a, "valueTwo", json_object_new_int64(ns_flags[i]));
		json_object_object_add(a, "op", json_object_new_string("SCMP_CMP_MASKED_EQ"));
		json_object_array_add(as, a);
		json_object_object_add(r, "args", as);
		json_object_object_add(r, "comment",
				       json_object_new_string("clone() creating a namespace, "
							      "as unshare"));
		json_object_array_add(calls, r);
	}
	json_object_object_add(o, "syscalls", calls);
	return o;
}
