/*
 * locality.c - slurm-topo's SPANK plugin: adds
 *
 *     --locality=LEVEL[:wait|:fail|:auto] LEVEL = prefer|nvl|network_group|zone|region|any
 *                                         (nvl: one NVLink domain, :wait or :fail only)
 *     --locality=nvl:segment=N[:spread|:consolidate][:wait|:fail]
 *                                         an nvl job larger than one domain in segments of N nodes, each in
 *                                         one domain (the filter sets segment_size on Slurm 25.11.2+)
 *     --locality-regions=LABEL[,LABEL]  region or zone labels ([A-Za-z0-9._-], 1..63 characters)
 *     --plan=KEY=VALUE[,KEY=VALUE]      the job's parallel plan for the cost model (tp=, pp=, dp=, bytes=,
 *                                       tp_bytes=, pp_bytes=, order=, compute=, comm=, overlap=, ...)
 *
 * to sbatch, salloc and srun (also in `#SBATCH` lines) and checks the values on the submit host, so a typo
 * fails there with `sbatch: error: ...` naming the valid values. It forwards nothing itself: Slurm puts every
 * registered option of a SPANK plugin into the job's spank_job_env as
 *     _SLURM_SPANK_OPTION_locality_locality=VALUE
 *     _SLURM_SPANK_OPTION_locality_locality_regions=VALUE
 *     _SLURM_SPANK_OPTION_locality_plan=VALUE
 * which job_submit/slurm_topo_filter/ reads in slurmctld (where the decision is made; the plan it copies
 * into the job's AdminComment as "slurm-topo-plan: VALUE", where explain reads it and no update can change it).
 *
 * Options are registered with spank_option_register() from slurm_spank_init(): sbatch/salloc (allocator
 * context) ignore an exported spank_options[] table. They are registered in every context, because slurmstepd
 * looks up the options a step carries; in remote contexts (slurmd, slurmstepd, prolog) the callbacks do nothing.
 *
 * Build: job_submit/build-spank [OUTDIR]   (gcc against /usr/include/slurm/spank.h, from libslurm-dev).
 * A SPANK plugin only loads on the Slurm major.minor it was built for (SLURM_VERSION_NUMBER is compiled in by
 * SPANK_PLUGIN), so build it again after every Slurm upgrade.
 * Load: plugstack.conf line `optional /path/to/locality.so`, on submit hosts and compute nodes.
 */
#include <stdio.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(locality, 1);

#define LEVELS "prefer|nvl|network_group|zone|region|any"
#define MAX_LABEL 63
#define MAX_VALUE 1024

#ifndef LOCALITY_BUILT_FOR	/* build-spank passes the major.minor of the headers, e.g. "22.05" */
#define LOCALITY_BUILT_FOR "unknown"
#endif
/* Visible in the .so: strings locality.so | grep 'built for' */
const char locality_built_for[] = "slurm-topo locality SPANK plugin built for Slurm " LOCALITY_BUILT_FOR;

static const char *levels[] = { "prefer", "nvl", "network_group", "zone", "region", "any", NULL };
static const char *modes[] = { "wait", "fail", "auto", NULL };
static const char *segment_policies[] = { "spread", "consolidate", NULL };
#define SEGMENT_KEY "segment="
#define MAX_SEGMENT_DIGITS 4

static int _in(const char *word, size_t len, const char **list)
{
	for (int i = 0; list[i]; i++)
		if (strlen(list[i]) == len && !strncmp(word, list[i], len))
			return 1;
	return 0;
}

/* "nvl:segment=N[:spread|:consolidate][:wait|:fail]", N 1..9999 without a leading zero (policy/vocab.py
 * parse_segment); arg points past "nvl:segment=" */
static int _valid_segment(const char *arg)
{
	size_t digits = strspn(arg, "0123456789");
	const char *p = arg + digits;
	const char *colon;

	if (digits == 0 || digits > MAX_SEGMENT_DIGITS || arg[0] == '0')
		return 0;
	if (!*p)
		return 1;
	if (*p++ != ':')
		return 0;
	colon = strchr(p, ':');
	if (_in(p, colon ? (size_t) (colon - p) : strlen(p), segment_policies)) {
		if (!colon)
			return 1;
		p = colon + 1;
	}
	return !strcmp(p, "wait") || !strcmp(p, "fail");
}

/* "zone", "zone:fail", "prefer:wait" ... */
static int _valid_locality(const char *arg)
{
	if (!strncmp(arg, "nvl:" SEGMENT_KEY, strlen("nvl:" SEGMENT_KEY)))
		return _valid_segment(arg + strlen("nvl:" SEGMENT_KEY));
	const char *colon = strchr(arg, ':');
	size_t len = colon ? (size_t) (colon - arg) : strlen(arg);

	if (!_in(arg, len, levels))
		return 0;
	if (!colon)
		return 1;
	if (len == 3 && !strncmp(arg, "nvl", 3) && !strcmp(colon + 1, "auto"))
		return 0;	/* an NVLink domain has no looser level to relax to */
	return _in(colon + 1, strlen(colon + 1), modes);
}

static int _label_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '.' || c == '_' || c == '-';
}

/* "us-west", "us-west,europe-west1-b": labels as the inventory allows them */
static int _valid_regions(const char *arg)
{
	size_t run = 0;

	if (!*arg || strlen(arg) > MAX_VALUE)
		return 0;
	for (const char *p = arg;; p++) {
		if (*p == ',' || *p == '\0') {
			if (run == 0)
				return 0;	/* empty label: ",x", "x,,y", "x," */
			run = 0;
			if (*p == '\0')
				return 1;
		} else if (_label_char(*p) && ++run <= MAX_LABEL) {
			continue;
		} else {
			return 0;
		}
	}
}

/* "tp=8,pp=2,bytes=10G,compute=450ms,comm=30%": known keys, values of [A-Za-z0-9.%-] (the cost model's own
 * parser checks the numbers; this keeps the text one token a record can carry) */
static const char *plan_keys[] = { "tp", "pp", "dp", "bytes", "allreduce_bytes", "tp_bytes", "pp_bytes",
				   "order", "gpus_per_node", "compute", "comm", "overlap", "ep", "cp", "ep_bytes",
				   "cp_bytes", NULL };
#define MAX_PLAN 200

static int _value_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
		c == '%' || c == '-';
}

static int _valid_plan(const char *arg)
{
	const char *p = arg;

	if (!*arg || strlen(arg) > MAX_PLAN)
		return 0;
	while (*p) {
		const char *eq = strchr(p, '=');
		const char *end = strchr(p, ',');

		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || !_in(p, (size_t) (eq - p), plan_keys) || eq + 1 == end)
			return 0;
		for (const char *v = eq + 1; v < end; v++)
			if (!_value_char(*v))
				return 0;
		if (!*end)
			return 1;
		p = end + 1;
		if (!*p)
			return 0;	/* a trailing comma */
	}
	return 0;
}

/* What the user typed, for a message: at most 40 printable ASCII characters */
static const char *_shown(const char *arg, char *buf, size_t size)
{
	size_t i;

	for (i = 0; arg[i] && i < size - 1 && i < 40; i++)
		buf[i] = (arg[i] > 32 && arg[i] < 127) ? arg[i] : '?';
	buf[i] = '\0';
	return buf;
}

static int _opt_locality(int val, const char *optarg, int remote)
{
	char buf[48];

	if (remote)
		return ESPANK_SUCCESS;
	if (optarg && _valid_locality(optarg))
		return ESPANK_SUCCESS;
	if (optarg && !strncmp(optarg, "nvl:" SEGMENT_KEY, strlen("nvl:" SEGMENT_KEY))) {
		slurm_error("--locality=nvl:segment=N[:spread|:consolidate][:wait|:fail]: N a whole number from 1 "
			    "to 9999 (the nodes of one segment, kept in one NVLink domain), not '%s'",
			    _shown(optarg, buf, sizeof(buf)));
		return ESPANK_BAD_ARG;
	}
	if (optarg && !strcmp(optarg, "nvl:auto")) {
		slurm_error("--locality=nvl:auto: an NVLink domain has no looser level to relax to; use nvl "
			    "(waits) or nvl:fail, or LEVEL:auto with LEVEL network_group, zone or region");
		return ESPANK_BAD_ARG;
	}
	slurm_error("--locality: invalid value '%s': use LEVEL or LEVEL:wait, LEVEL:fail or LEVEL:auto, "
		    "LEVEL one of " LEVELS, optarg ? _shown(optarg, buf, sizeof(buf)) : "");
	return ESPANK_BAD_ARG;
}

static int _opt_regions(int val, const char *optarg, int remote)
{
	char buf[48];

	if (remote)
		return ESPANK_SUCCESS;
	if (optarg && _valid_regions(optarg))
		return ESPANK_SUCCESS;
	slurm_error("--locality-regions: invalid value '%s': use a comma list of region or zone labels "
		    "(letters, digits, '.', '_', '-'; at most %d characters each)",
		    optarg ? _shown(optarg, buf, sizeof(buf)) : "", MAX_LABEL);
	return ESPANK_BAD_ARG;
}

static int _opt_plan(int val, const char *optarg, int remote)
{
	char buf[48];

	if (remote)
		return ESPANK_SUCCESS;
	if (optarg && _valid_plan(optarg))
		return ESPANK_SUCCESS;
	slurm_error("--plan: invalid value '%s': use KEY=VALUE[,KEY=VALUE], KEY one of tp, pp, dp, bytes, "
		    "allreduce_bytes, tp_bytes, pp_bytes, order, gpus_per_node, compute, comm, overlap, ep, cp, "
		    "ep_bytes, cp_bytes; values of "
		    "letters, digits, '.', '%%', '-' "
		    "(at most %d characters)", optarg ? _shown(optarg, buf, sizeof(buf)) : "", MAX_PLAN);
	return ESPANK_BAD_ARG;
}

static struct spank_option options[] = {
	{ "locality", "LEVEL[:wait|:fail|:auto]",
	  "Keep the job's nodes together: LEVEL = " LEVELS " (default set by the site); :wait holds a job "
	  "no group can ever hold, :fail rejects it, :auto waits as :wait for a time budget; "
	  "nvl:segment=N[:spread|:consolidate] runs a job larger than one NVLink domain in segments of N "
	  "nodes, each in one domain (slurm-topo)",
	  1, 0, (spank_opt_cb_f) _opt_locality },
	{ "locality-regions", "REGION[,REGION]",
	  "Keep every node of the job in these regions or zones (slurm-topo)",
	  1, 0, (spank_opt_cb_f) _opt_regions },
	{ "plan", "tp=N,pp=N,dp=N,bytes=B[,compute=S]",
	  "The job's parallel plan, for slurm-topo's cost model (explain): tp, pp, dp sizes, the gradient bytes "
	  "all-reduced a step, and optionally tp_bytes, pp_bytes, compute, comm, overlap, ep, cp, ep_bytes, cp_bytes "
	  "(slurm-topo)",
	  1, 0, (spank_opt_cb_f) _opt_plan },
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();

	for (int i = 0; options[i].name; i++) {
		spank_err_t rc = spank_option_register(sp, &options[i]);

		/* only a client (sbatch/salloc/srun) must have the options; elsewhere never fail a job */
		if (rc != ESPANK_SUCCESS && (ctx == S_CTX_ALLOCATOR || ctx == S_CTX_LOCAL)) {
			slurm_error("locality: cannot register --%s: %s", options[i].name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}
