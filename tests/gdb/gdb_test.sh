#!/usr/bin/env bash
# gdb_test.sh GDB PROG [EMULATOR ARGS...]
#
# Drives gdb in batch mode over PROG (tests/gdb/gdb_tasks.c, built with -g)
# and checks that the libgmp extension, auto-loaded from the program's or
# libgmp.so's .debug_gdb_scripts section, names the right tasks, states,
# wait reasons and functions:
#
#   info gmp-tasks       the four tasks with their states and entries
#   gmp-bt ID            each parked task's stack, through the runtime's
#                        frames down to the user's, from its saved gobuf;
#                        the running one's from its thread
#   gmp-sched            the Ps and Ms
#
# With GMP_GDB_SCENARIO=detached in the environment, PROG runs its
# "detached" scenario (one P, taken by sysmon from a task that keeps it past
# its slice) and the extension must show that task as detached.
#
# With EMULATOR ARGS (a cross build: qemu-aarch64 -L SYSROOT ...), the
# program runs under the emulator's gdb stub and GDB (gdb-multiarch)
# attaches to it. Exit status 77 means skipped (CTest SKIP_RETURN_CODE),
# with the reason on stdout.
set -uo pipefail

gdb=$1 prog=$2
shift 2
emu=("$@")

skip() {
	echo "SKIPPED: $*"
	exit 77
}
command -v "$gdb" >/dev/null 2>&1 || skip "no $gdb on this machine (install gdb; gdb-multiarch for cross builds)"
"$gdb" -nx -batch -ex 'python import gdb.unwinder' >/dev/null 2>&1 ||
	skip "$gdb has no Python support"

common=(-nx -batch
	-iex 'set auto-load safe-path /'
	-iex 'set debuginfod enabled off'
	-iex 'set pagination off'
	-iex 'set confirm off'
	-iex 'set print thread-events off')
cmds=(-ex 'break gdb_checkpoint')
scenario=${GMP_GDB_SCENARIO:-tasks}
pargs=()
if [[ $scenario == detached ]]; then
	pargs=(detached)
	look=(-ex 'info gmp-tasks'
		-ex 'eval "gmp-bt %d", id_spinner'
		-ex 'gmp-sched'
		-ex 'bt 2'
		-ex 'kill')
else
	look=(-ex 'info gmp-tasks'
		-ex 'eval "gmp-bt %d", id_chan_waiter'
		-ex 'eval "gmp-bt %d", id_mutex_waiter'
		-ex 'eval "gmp-bt %d", id_wg_waiter'
		-ex 'eval "gmp-bt %d", id_spinner'
		-ex 'gmp-sched'
		-ex 'bt 2'
		-ex 'kill')
fi

if ((${#emu[@]} == 0)); then
	out=$(timeout 240 "$gdb" "${common[@]}" "${cmds[@]}" -ex run "${look[@]}" \
		--args "$prog" "${pargs[@]}" 2>&1)
else
	sysroot=
	for ((i = 0; i < ${#emu[@]}; i++)); do
		[[ ${emu[i]} == -L ]] && sysroot=${emu[i + 1]}
	done
	port=$((20000 + RANDOM % 30000))
	"${emu[@]}" -g "$port" "$prog" "${pargs[@]}" >/dev/null 2>&1 &
	qpid=$!
	# Wait (up to 20 s) until the stub listens; connecting to find out
	# would use up the one connection it takes.
	hexport=$(printf ':%04X ' "$port")
	for ((i = 0; i < 200; i++)); do
		grep -q "${hexport}[0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
		sleep 0.1
	done
	# qemu's stub can take seconds to stop every thread of a busy guest;
	# gdb's default 2 s remotetimeout then gives up on a reply and reads
	# the late one as the answer to its next packet ("Ignoring packet
	# error", "Invalid hex digit").
	out=$(timeout 600 "$gdb" "${common[@]}" \
		-iex "set remotetimeout 60" \
		-iex "set sysroot /" \
		-iex "set solib-search-path $(dirname "$prog"):$(dirname "$prog")/..:${sysroot:-/}/lib" \
		"$prog" -ex "target remote :$port" "${cmds[@]}" -ex continue \
		"${look[@]}" 2>&1)
	kill "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
fi
printf '%s\n' "$out"

fail=0
# expect DESCRIPTION EXTENDED-REGEX: the output must match.
expect() {
	if ! grep -Eq -- "$2" <<<"$out"; then
		echo "FAIL: $1 (no match for: $2)"
		fail=1
	fi
}
# section HEADER-REGEX: the lines of one gmp-bt answer, up to the next.
section() {
	awk -v h="$1" '
		$0 ~ h { on = 1; print; next }
		on && /^(task [0-9]+ |[ ]+Id |gomaxprocs=)/ { on = 0 }
		on { print }' <<<"$out"
}
# expect_bt TASK-VARIABLE-LABEL HEADER-REGEX FUNCTION...: that backtrace
# names every FUNCTION.
expect_bt() {
	local label=$1 hdr=$2 text f
	shift 2
	text=$(section "$hdr")
	if [[ -z $text ]]; then
		echo "FAIL: gmp-bt of the $label task printed nothing"
		fail=1
		return
	fi
	for f in "$@"; do
		if ! grep -Eq -- "$f" <<<"$text"; then
			echo "FAIL: gmp-bt of the $label task does not name $f"
			fail=1
		fi
	done
}

expect "the extension was auto-loaded" '^ +Id +State +Wait reason +M +Entry'
if [[ $scenario == detached ]]; then
	expect "info gmp-tasks: chan_waiter" '^ +[0-9]+ +waiting +chan receive +last M[0-9]+ +chan_waiter$'
	expect "info gmp-tasks: the detached spinner" '^ +[0-9]+ +detached +- +M[0-9]+ +spinner$'
	expect "info gmp-tasks: the count" '^2 tasks$'
	expect_bt "detached" '^task [0-9]+ is running on M[0-9]+, thread [0-9]+ \(LWP [0-9]+\), detached from its P:' \
		'spinner \(' 'gmp__ctx_trampoline'
	expect "gmp-sched: the header" '^gomaxprocs=1 idleprocs=[0-9]+ threads=[0-9]+ '
	expect "gmp-sched: the spinner's M" '^ +M[0-9]+ +tid=[0-9]+ +p=- +running task [0-9]+ \(spinner\), detached from its P$'
	expect "bt after gmp-bt" '^#0 +gdb_checkpoint \(\)'
	if grep -Eq 'Python Exception|Undefined command|Error occurred in Python' <<<"$out"; then
		echo "FAIL: gdb reported an error"
		fail=1
	fi
	exit "$fail"
fi
expect "info gmp-tasks: chan_waiter" '^ +[0-9]+ +waiting +chan receive +last M[0-9]+ +chan_waiter$'
expect "info gmp-tasks: mutex_waiter" '^ +[0-9]+ +waiting +mutex +last M[0-9]+ +mutex_waiter$'
expect "info gmp-tasks: wg_waiter" '^ +[0-9]+ +waiting +wait group +last M[0-9]+ +wg_waiter$'
expect "info gmp-tasks: spinner" '^ +[0-9]+ +running +- +M[0-9]+ +spinner$'
expect "info gmp-tasks: the count" '^4 tasks$'
# The innermost frames are the runtime's (gmp__park, or its caller when
# the switch was a tail call), then the public call, then the user's, and
# the trampoline ends every task's stack.
expect_bt "channel" '^task [0-9]+ \[waiting, chan receive\]:' \
	'^#0 .*(gmp__(mcall|park|waiter_sleep|waiter_park)|chan_park)' 'in gmp_chan_recv ' 'in wait_on_chan ' \
	'gmp__ctx_trampoline'
expect_bt "mutex" '^task [0-9]+ \[waiting, mutex\]:' \
	'in gmp_mutex_lock ' 'in mutex_waiter ' 'gmp__ctx_trampoline'
expect_bt "wait-group" '^task [0-9]+ \[waiting, wait group\]:' \
	'in gmp_wg_wait ' 'in task_main ' 'gmp__ctx_trampoline'
expect_bt "running" '^task [0-9]+ is running on M[0-9]+, thread [0-9]+' \
	'spinner \(' 'gmp__ctx_trampoline'
expect "gmp-sched: the header" '^gomaxprocs=2 idleprocs=[0-9]+ threads=[0-9]+ '
expect "gmp-sched: live tasks" '^gomaxprocs=2 .* tasks=4$'
expect "gmp-sched: P0" '^ +P0 +(running|idle) +m='
expect "gmp-sched: P1" '^ +P1 +(running|idle) +m='
expect "gmp-sched: the spinner's M" '^ +M[0-9]+ +tid=[0-9]+ +p=P[01] +running task [0-9]+ \(spinner\)$'
# The thread's own backtrace is intact after gmp-bt.
expect "bt after gmp-bt" '^#0 +gdb_checkpoint \(\)'
expect "bt after gmp-bt, caller" '^#1 +0x[0-9a-f]+ in main \('
if grep -Eq 'Python Exception|Undefined command|Error occurred in Python' <<<"$out"; then
	echo "FAIL: gdb reported an error"
	fail=1
fi
exit "$fail"
