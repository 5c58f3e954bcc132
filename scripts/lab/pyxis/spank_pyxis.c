/*
 * spank_pyxis.c: the lab's stand-in for NVIDIA's Pyxis, a SPANK plugin that lets srun run a task inside a container
 * image (--container-image). Built by `lab.sh slurm --pyxis` against Debian's libslurm-dev spank.h and named in
 * the lab's plugstack.conf, so srun, sbatch and slurmstepd load it as they load the real one.
 *
 * What it shares with Pyxis, so that a program reading srun's words reads the same words: the options and their
 * help text as `srun --help` lists them under "Options provided by plugins:" (--container-image,
 * --container-mounts, --container-name), the image reference as an enroot URI ([USER@][REGISTRY#]IMAGE[:TAG], where
 * a TAG of sha256:<hex> names the manifest by its digest, as enroot 3.5 passes it to the registry), the lines it
 * prints ("pyxis: importing docker image: REF" for a step of one task, "pyxis: imported docker image: REF" on every
 * node, and on failure "pyxis: child N failed with error code: C", "pyxis: failed to import docker image",
 * "pyxis: printing enroot log file:", the log's lines indented by four spaces, "pyxis: couldn't start container"),
 * and the failure surfacing in task_init_privileged so that srun sees the step fail.
 *
 * What it does instead of enroot: the node's podman pulls the image (the lab's registry, LAB.md) and exports a
 * container's filesystem into RUNTIME_PATH/UID/pyxis_JOB.STEP, or for --container-name=NAME[:FLAGS] into
 * RUNTIME_PATH/UID/pyxis_NAME, Pyxis's name for it with container_scope=global (its default): a named container is
 * kept on the node after its step, and a later step given the name reuses it and skips the import (no "imported"
 * line), --container-image or not, as Pyxis does; FLAGS as Pyxis's (auto, the default, and no_exec reuse or
 * create; create refuses an existing one; exec, attaching to a running container, the stand-in has none to give).
 * Nothing removes a named container but `enroot remove` (pyxis/enroot, the lab's stand-in of it). Each task then
 * enters a mount namespace of its own in which /proc, /sys, /dev, /tmp,
 * /etc/hosts, the PMIx server's directory and the --container-mounts are bound into that tree, and chroots into
 * it (enroot pivot_roots into a squashfs-backed tree and maps users: neither is needed to run the task's program
 * from the image's files, which is what the lab tests). An unnamed container's tree is removed when the step ends.
 *
 * plugstack.conf arguments: runtime_path=DIR (default /run/pyxis, as Pyxis's), podman=PATH (default
 * /usr/bin/podman).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1)

static char *opt_image, *opt_mounts, *opt_name_arg, *opt_name, *opt_name_flags;
static char runtime_path[1024] = "/run/pyxis";
static char podman[1024] = "/usr/bin/podman";
static char rootfs[2048];
static int user_init_rv, created, enabled;

static int opt_set(char **dst, const char *name, const char *optarg)
{
	if (optarg == NULL || *optarg == '\0') {
		slurm_error("pyxis: --%s: argument required", name);
		return -1;
	}
	/* Slurm may call an option's callback twice with the same value. */
	if (*dst != NULL) {
		if (strcmp(*dst, optarg) == 0)
			return 0;
		slurm_error("pyxis: --%s specified multiple times", name);
		return -1;
	}
	*dst = strdup(optarg);
	return *dst == NULL ? -1 : 0;
}

static int cb_image(int val, const char *optarg, int remote) { return opt_set(&opt_image, "container-image", optarg); }
static int cb_mounts(int val, const char *optarg, int remote) { return opt_set(&opt_mounts, "container-mounts", optarg); }
/* cb_name: NAME[:FLAGS], as Pyxis splits it */
static int cb_name(int val, const char *optarg, int remote)
{
	char *flags;
	/* the argument as given stays whole: Slurm's second call compares it */
	if (opt_set(&opt_name_arg, "container-name", optarg) < 0)
		return -1;
	if (opt_name != NULL)
		return 0;
	opt_name = strdup(opt_name_arg);
	if (opt_name == NULL)
		return -1;
	flags = strchr(opt_name, ':');
	if (flags != NULL)
		*flags++ = '\0';
	if (opt_name[0] == '\0') {
		slurm_error("pyxis: --container-name: empty name");
		return -1;
	}
	opt_name_flags = strdup(flags != NULL && *flags != '\0' ? flags : "auto");
	if (strcmp(opt_name_flags, "auto") != 0 && strcmp(opt_name_flags, "create") != 0 &&
	    strcmp(opt_name_flags, "exec") != 0 && strcmp(opt_name_flags, "no_exec") != 0) {
		slurm_error("pyxis: --container-name: flag must be \"auto\", \"create\", \"exec\" or \"no_exec\"");
		return -1;
	}
	return 0;
}

struct spank_option spank_opts[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	  "[pyxis] the image to use for the container filesystem. Can be either a docker image given as an enroot URI, "
	  "or a path to a squashfs file on the remote host filesystem.",
	  1, 0, cb_image },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]",
	  "[pyxis] bind mount[s] inside the container. Mount flags are separated with \"+\", e.g. \"ro+rprivate\"",
	  1, 0, cb_mounts },
	{ "container-name", "NAME",
	  "[pyxis] name to use for saving and loading the container on the host. Unnamed containers are removed after "
	  "the slurm task is complete; named containers are not. If a container with this name already exists, the "
	  "existing container is used and the import is skipped.",
	  1, 0, cb_name },
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_LOCAL && spank_context() != S_CTX_REMOTE && spank_context() != S_CTX_ALLOCATOR)
		return 0;
	for (int i = 0; i < ac; i++) {
		if (strncmp(av[i], "runtime_path=", 13) == 0)
			snprintf(runtime_path, sizeof(runtime_path), "%s", av[i] + 13);
		else if (strncmp(av[i], "podman=", 7) == 0)
			snprintf(podman, sizeof(podman), "%s", av[i] + 7);
	}
	for (int i = 0; spank_opts[i].name != NULL; ++i) {
		spank_err_t rc = spank_option_register(sp, &spank_opts[i]);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("pyxis: couldn't register option %s: %s", spank_opts[i].name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	if (opt_image == NULL && opt_name == NULL) {
		if (opt_mounts != NULL)
			slurm_error("pyxis: ignoring --container-mounts because neither --container-image nor --container-name is set");
		return 0;
	}
	enabled = 1;
	return 0;
}

/* podman_ref: the enroot URI docker://[USER@][REGISTRY#]IMAGE[:TAG] (enroot 3.5's grammar) as podman's
 * REGISTRY/IMAGE[:TAG|@sha256:HEX]; no registry is Docker Hub's, as for enroot. -1: not such a URI. */
static int podman_ref(const char *image, char *out, size_t n)
{
	const char *s = image, *hash, *colon;
	char registry[512] = "registry-1.docker.io", name[512], tag[256] = "latest";
	if (strncmp(s, "docker://", 9) == 0)
		s += 9;
	if (*s == '/' || *s == '.')
		return -2; /* a squashfs file */
	const char *at = strchr(s, '@');
	if (at != NULL && (hash = strchr(s, '#')) != NULL && at < hash)
		s = at + 1; /* USER@: credentials are enroot's business, not the lab's */
	if ((hash = strchr(s, '#')) != NULL) {
		if ((size_t)(hash - s) >= sizeof(registry) || hash == s)
			return -1;
		snprintf(registry, sizeof(registry), "%.*s", (int)(hash - s), s);
		s = hash + 1;
	}
	colon = strchr(s, ':');
	if (colon != NULL) {
		snprintf(tag, sizeof(tag), "%s", colon + 1);
		snprintf(name, sizeof(name), "%.*s", (int)(colon - s), s);
	} else
		snprintf(name, sizeof(name), "%s", s);
	if (name[0] == '\0' || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789/._-") != strlen(name))
		return -1;
	if (strchr(name, '/') == NULL && strcmp(registry, "registry-1.docker.io") == 0) {
		char lib[600];
		snprintf(lib, sizeof(lib), "library/%s", name);
		snprintf(name, sizeof(name), "%.500s", lib);
	}
	if (strncmp(tag, "sha256:", 7) == 0)
		snprintf(out, n, "%s/%s@%s", registry, name, tag);
	else
		snprintf(out, n, "%s/%s:%s", registry, name, tag);
	return 0;
}

/* run: argv under a clean environment, its stdout and stderr into the log fd; its exit code, or -1 */
static int run(char *const argv[], int log)
{
	pid_t pid = fork();
	int status;
	if (pid < 0) {
		slurm_error("pyxis: fork error: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char *env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", NULL };
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(log, 1);
		dup2(log, 2);
		execve(argv[0], argv, env);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0) {
		slurm_error("pyxis: could not wait for child %d: %s", pid, strerror(errno));
		return -1;
	}
	if (WIFSIGNALED(status)) {
		slurm_error("pyxis: child %d terminated with signal %d", pid, WTERMSIG(status));
		return -1;
	}
	if (WEXITSTATUS(status) != 0) {
		slurm_error("pyxis: child %d failed with error code: %d", pid, WEXITSTATUS(status));
		return -1;
	}
	return 0;
}

/* print_log: the importer's output as Pyxis prints enroot's log ("[INFO] ..." lines, "[ERROR] ..." for errors) */
static void print_log(int log)
{
	char line[4096];
	FILE *f;
	lseek(log, 0, SEEK_SET);
	f = fdopen(dup(log), "r");
	if (f == NULL)
		return;
	slurm_error("pyxis: printing enroot log file:");
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '\0')
			continue;
		if (strncmp(line, "Error: ", 7) == 0)
			slurm_error("pyxis:     [ERROR] %s", line + 7);
		else
			slurm_error("pyxis:     [INFO] %s", line);
	}
	fclose(f);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) { return remove(p); }

static int import_image(spank_t sp, uid_t uid, uint32_t job, uint32_t step, uint32_t ntasks)
{
	char ref[1200], cname[128], dir[1100], script[4096];
	int log = memfd_create("enroot-log", MFD_CLOEXEC), rc;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/%u", runtime_path, (unsigned)uid);
	mkdir(runtime_path, 0755);
	mkdir(dir, 0700);
	if (opt_name != NULL) {
		if (strchr(opt_name, '/') != NULL || opt_name[0] == '.') {
			slurm_error("pyxis: --container-name: invalid name: %s", opt_name);
			return -1;
		}
		snprintf(rootfs, sizeof(rootfs), "%s/pyxis_%s", dir, opt_name);
		if (stat(rootfs, &st) == 0) {
			if (strcmp(opt_name_flags, "create") == 0) {
				slurm_error("pyxis: error: \"create\" flag was passed to --container-name but the container already exists");
				return -1;
			}
			if (strcmp(opt_name_flags, "exec") == 0) {
				slurm_error("pyxis: error: \"exec\" flag was passed to --container-name but the container is not running");
				return -1;
			}
			/* as Pyxis: the import is skipped, the existing filesystem used, said at info level only */
			slurm_info("pyxis: reusing existing container filesystem");
			return 0;
		}
		if (strcmp(opt_name_flags, "exec") == 0) {
			slurm_error("pyxis: error: \"exec\" flag was passed to --container-name but the container is not running");
			return -1;
		}
		if (opt_image == NULL) {
			slurm_error("pyxis: error: a container with name \"pyxis_%s\" does not exist, and --container-image is not set",
				    opt_name);
			return -1;
		}
	} else
		snprintf(rootfs, sizeof(rootfs), "%s/pyxis_%u.%u", dir, job, step);
	rc = podman_ref(opt_image, ref, sizeof(ref));
	if (rc == -2) {
		slurm_error("pyxis: the lab's stand-in imports docker images only, not squashfs files: %s", opt_image);
		return -1;
	}
	if (rc < 0) {
		slurm_error("pyxis: failed to import docker image");
		slurm_error("pyxis: printing enroot log file:");
		slurm_error("pyxis:     [ERROR] Invalid image reference: docker://%s", opt_image);
		return -1;
	}
	if (ntasks <= 1)
		slurm_spank_log("pyxis: importing docker image: %s", opt_image);
	snprintf(cname, sizeof(cname), "pyxis-%u.%u", job, step);
	/* pull, export a container's filesystem, remove the container; the pulled image stays in the node's store as
	 * enroot's layer cache stays in its cache directory */
	snprintf(script, sizeof(script),
		 "set -e; p=\"$1\"; ref=\"$2\"; dir=\"$3\"; name=\"$4\"\n"
		 "\"$p\" pull -q \"$ref\" >/dev/null\n"
		 "\"$p\" rm -f \"$name\" >/dev/null 2>&1 || true\n"
		 "\"$p\" create --name \"$name\" \"$ref\" /bin/true >/dev/null\n"
		 "trap '\"$p\" rm -f \"$name\" >/dev/null 2>&1' EXIT\n"
		 "mkdir -p \"$dir.new\"\n"
		 "\"$p\" export \"$name\" | tar -x -C \"$dir.new\"\n"
		 "mv \"$dir.new\" \"$dir\"\n");
	rc = run((char *const[]){ "/bin/sh", "-c", script, "sh", podman, ref, rootfs, cname, NULL }, log);
	if (rc < 0) {
		char tmp[2100];
		slurm_error("pyxis: failed to import docker image");
		print_log(log);
		close(log);
		snprintf(tmp, sizeof(tmp), "%s.new", rootfs);
		nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		return -1;
	}
	close(log);
	created = 1;
	slurm_spank_log("pyxis: imported docker image: %s", opt_image);
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	uid_t uid;
	uint32_t job, step, ntasks = 0;
	if (!enabled || spank_context() != S_CTX_REMOTE)
		return 0;
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) {
		slurm_error("pyxis: couldn't get job info");
		user_init_rv = -1;
		return 0;
	}
	spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks);
	/* As Pyxis: an error here does not reach srun (Slurm ignores user_init's rc), so it is returned by
	 * task_init_privileged, which fails the task. */
	user_init_rv = import_image(sp, uid, job, step, ntasks);
	return 0;
}

/* bind: SRC onto ROOTFS/DST, creating the target as a directory or a file like the source */
static int bind(const char *src, const char *dst, int flags)
{
	char target[4200];
	struct stat st;
	if (stat(src, &st) < 0)
		return -1;
	snprintf(target, sizeof(target), "%s%s", rootfs, dst);
	if (S_ISDIR(st.st_mode)) {
		char cmd[4300];
		snprintf(cmd, sizeof(cmd), "%s", target);
		for (char *p = cmd + strlen(rootfs) + 1; *p; p++)
			if (*p == '/') {
				*p = '\0';
				mkdir(cmd, 0755);
				*p = '/';
			}
		mkdir(target, 0755);
	} else {
		int fd = open(target, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0)
			close(fd);
	}
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	if (flags & MS_RDONLY)
		mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	char pmix[1024];
	if (!enabled)
		return 0;
	if (user_init_rv != 0) {
		slurm_error("pyxis: couldn't start container");
		return -1;
	}
	slurm_info("pyxis: starting container");
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		slurm_error("pyxis: couldn't join mount namespace: %s", strerror(errno));
		return -1;
	}
	if (bind("/proc", "/proc", 0) < 0 || bind("/sys", "/sys", 0) < 0 || bind("/dev", "/dev", 0) < 0 ||
	    bind("/tmp", "/tmp", 0) < 0) {
		slurm_error("pyxis: container start failed with error code: 1");
		slurm_error("pyxis: printing enroot log file:");
		slurm_error("pyxis:     [ERROR] could not mount the host's /proc, /sys, /dev or /tmp: %s", strerror(errno));
		return -1;
	}
	bind("/etc/hosts", "/etc/hosts", MS_RDONLY);
	if (spank_getenv(sp, "PMIX_SERVER_TMPDIR", pmix, sizeof(pmix)) == ESPANK_SUCCESS && pmix[0] == '/')
		bind(pmix, pmix, 0);
	if (opt_mounts != NULL) {
		char *dup = strdup(opt_mounts), *rest = dup, *m;
		while (dup != NULL && (m = strsep(&rest, ",")) != NULL) {
			char *src = strsep(&m, ":"), *dst = m ? strsep(&m, ":") : NULL, *fl = m;
			if (dst == NULL || *dst == '\0')
				dst = src;
			if (src == NULL || *src != '/' || *dst != '/' ||
			    bind(src, dst, (fl != NULL && strstr(fl, "ro") != NULL) ? MS_RDONLY : 0) < 0) {
				slurm_error("pyxis: --container-mounts: invalid format: %s", opt_mounts);
				free(dup);
				return -1;
			}
		}
		free(dup);
	}
	if (chroot(rootfs) < 0 || chdir("/") < 0) {
		slurm_error("pyxis: couldn't chroot to the container filesystem: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	/* an unnamed container is removed after the task, as Pyxis removes it */
	if (spank_context() == S_CTX_REMOTE && created && opt_name == NULL && rootfs[0] != '\0')
		nftw(rootfs, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
