# shellcheck shell=bash
# The plumbing .ci/run, .ci/reliability and .ci/ecosystem share. Each of
# them sources it first:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Sourcing it changes to the repository root (ROOT), sets JOBS, APT and
# DEBIAN_FRONTEND, and turns core files off. A script may set these before
# sourcing:
#
#   CI_LOG_PREFIX  put after "==> " in every log line ("ecosystem: ")
#   CI_DIE_PREFIX  what die's message starts with (default "ci")
#
# and these before calling summary (the stage driver's summary table):
#
#   CI_SUMMARY_WIDTH  width of the stage name column (default 18)
#   CI_SUMMARY_SECS   "float": seconds as %7s with a tenth (default), or
#                     "int": whole seconds as %5d
#
# The stage driver: a script defines stage_<name> functions, calls
# stage_init "$@" (the stage names asked for; none means all), then
# `stage <name>` for each in order, and exits with "$FAILED". A failing
# stage does not stop the others unless GMP_CI_KEEP_GOING=0; the summary
# (on exit) gives each stage's result and time.
#
# ctest runs through run_ctest, which stops every test at DEADLINE (a time
# in seconds since the epoch) if the script set one.

# Stages are called indirectly ("stage_$name"), which shellcheck cannot see.
# shellcheck disable=SC2317

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck disable=SC2034 # ROOT is for the scripts that source this
ROOT=$PWD
JOBS=$(nproc)
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600 -o APT::Sandbox::User=root)
: "${CI_LOG_PREFIX:=}"
: "${CI_DIE_PREFIX:=ci}"
: "${CI_SUMMARY_WIDTH:=18}"
: "${CI_SUMMARY_SECS:=float}"

ulimit -c 0 # an aborting test (tu_expect_abort) must not leave a core file

# ---- messages and time -------------------------------------------------------

log() { printf '\n\033[1m==> %s%s\033[0m\n' "$CI_LOG_PREFIX" "$*"; }
die() {
	printf '%s: %s\n' "$CI_DIE_PREFIX" "$*" >&2
	exit 1
}
now() { date +%s.%N; }
# Seconds since $1 (a now), with a tenth.
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }

# ---- packages and builds -----------------------------------------------------

# Installs those of the given Debian packages that are not installed yet.
need_pkgs() {
	local missing=() p st
	for p in "$@"; do
		if st=$(dpkg -s "$p" 2>/dev/null) &&
			[[ $st == *"Status: install ok installed"* ]]; then
			continue
		fi
		missing+=("$p")
	done
	((${#missing[@]})) || return 0
	log "installing ${missing[*]}"
	"${APT[@]}" -qq update
	"${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}"
}

# build_project [-q] <source dir> <build dir> [cmake args...]: configures
# the tree (-q: without cmake's configure output) and builds it.
build_project() {
	local quiet=0
	if [[ $1 == -q ]]; then
		quiet=1
		shift
	fi
	local src=$1 dir=$2
	shift 2
	if ((quiet)); then
		cmake -S "$src" -B "$dir" "$@" >/dev/null
	else
		cmake -S "$src" -B "$dir" "$@"
	fi
	cmake --build "$dir" -j"$JOBS"
}

# build [-q] <build dir> [cmake args...]: the same for this repository.
build() {
	if [[ $1 == -q ]]; then
		build_project -q . "${@:2}"
	else
		build_project . "$@"
	fi
}

# run_ctest <build dir> [ctest args...]: runs a build tree's tests. With a
# DEADLINE, --stop-time makes every test that is still running at it time
# out, and starts none after it. ctest takes a time of day (one already
# past today means tomorrow), so check first.
run_ctest() {
	local stop=()
	if [[ -n ${DEADLINE:-} ]]; then
		(($(date +%s) < DEADLINE)) ||
			die "CI time budget (GMP_CI_BUDGET=${GMP_CI_BUDGET}s) used up"
		stop=(--stop-time "$(date -d "@$DEADLINE" +%H:%M:%S)")
	fi
	ctest --test-dir "$1" --output-on-failure -j"$JOBS" "${stop[@]}" "${@:2}"
}

# ---- the stage driver --------------------------------------------------------

# stage_init <stage names...>: the stages asked for; starts the clock and
# prints the summary on exit.
stage_init() {
	ONLY=("$@")
	SUMMARY=()
	FAILED=0
	T0=$(now)
	: "${GMP_CI_KEEP_GOING:=1}"
	trap summary EXIT
}

# Whether a stage was asked for (all are when no names were given).
want() {
	((${#ONLY[@]} == 0)) && return 0
	local s
	for s in "${ONLY[@]}"; do
		[[ $s == "$1" ]] && return 0
	done
	return 1
}

# Seconds (as since gives them) as the summary gives them.
_summary_secs() {
	if [[ $CI_SUMMARY_SECS == int ]]; then
		printf '%5d' "${1%.*}"
	else
		printf '%7s' "$1"
	fi
}

summary() {
	local line
	printf '\n==> summary\n'
	for line in "${SUMMARY[@]}"; do
		printf '    %s\n' "$line"
	done
	printf '    %-*s %s s\n' "$CI_SUMMARY_WIDTH" total "$(_summary_secs "$(since "$T0")")"
}

# stage <name> [always]: runs stage_<name> if it was asked for; "always"
# runs it regardless and makes a failure fatal. set -e holds inside it.
stage() {
	local name=$1 mode=${2:-} t rc secs cell
	if [[ $mode != always ]] && ! want "$name"; then
		return 0
	fi
	if ((FAILED)) && [[ $GMP_CI_KEEP_GOING == 0 ]]; then
		SUMMARY+=("$(printf '%-*s skipped' "$CI_SUMMARY_WIDTH" "$name")")
		return 0
	fi
	log "stage $name"
	t=$(now)
	set +e
	(
		set -e
		"stage_$name"
	)
	rc=$?
	set -e
	secs=$(since "$t")
	cell=$(_summary_secs "$secs")
	if ((rc == 0)); then
		SUMMARY+=("$(printf '%-*s %s s  ok' "$CI_SUMMARY_WIDTH" "$name" "$cell")")
	else
		SUMMARY+=("$(printf '%-*s %s s  FAILED (exit %d)' "$CI_SUMMARY_WIDTH" \
			"$name" "$cell" "$rc")")
		FAILED=1
		[[ $mode != always ]] || exit 1
	fi
	printf '==> stage %s: %s in %s s\n' "$name" \
		"$( ((rc == 0)) && echo ok || echo FAILED)" "$secs"
}
