#!/usr/bin/env bash
# The test of examples/http_server: a real server process and real
# clients (curl where installed, else bash's /dev/tcp; raw sockets for what
# curl cannot send).
#
#   http_test.sh SERVER [EMULATOR...]
#
# Checks keep-alive (two requests on one connection), pipelining (two
# requests in one write, answered in order), HTTP/1.0, a malformed request
# (400, then the server closes), a missing Host, a path that climbs out of
# the root (403), a large file (8 MiB of random bytes, compared by
# checksum), the idle timeout (--idle-timeout: a silent connection is
# closed), and a clean stop on SIGTERM with a connection open (exit
# status 0 within a few seconds). Time bounds are generous: the machine
# may be busy. Exit 0 on success, 1 on failure. HTTP_TEST_NO_CURL=1 tries
# the /dev/tcp client even where curl is installed.
set -uo pipefail

SERVER=${1:?usage: http_test.sh SERVER [EMULATOR...]}
shift
EMU=("$@")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/http_test.XXXXXX")
PID=
FAILS=0

# shellcheck disable=SC2317 # called by the trap
cleanup() {
	[[ -n $PID ]] && kill -KILL "$PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

pass() { printf 'ok   %s\n' "$*"; }
fail() {
	printf 'FAIL %s\n' "$*"
	FAILS=$((FAILS + 1))
}

# ---- the server -------------------------------------------------------------
mkdir -p "$WORK/root/sub"
printf 'file content\n' >"$WORK/root/a.txt"
printf 'secret\n' >"$WORK/secret.txt"
head -c $((8 << 20)) /dev/urandom >"$WORK/root/sub/big.bin"

IDLE=3 # --idle-timeout, seconds
GMP_MAXPROCS=2 "${EMU[@]}" "$SERVER" --root="$WORK/root" --idle-timeout=$IDLE \
	>"$WORK/out" 2>"$WORK/err" &
PID=$!
PORT=
for _ in $(seq 100); do # up to 10 s
	PORT=$(sed -n 's/^port=\([0-9]*\)$/\1/p' "$WORK/out")
	[[ -n $PORT ]] && break
	kill -0 "$PID" 2>/dev/null || break
	sleep 0.1
done
if [[ -z $PORT ]]; then
	echo "FAIL the server did not print its port"
	cat "$WORK/err"
	exit 1
fi
URL=http://127.0.0.1:$PORT

# Sends printf "$@" on a new connection in one write and prints everything
# the server sends until it closes (at most 10 s).
raw() {
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
	# shellcheck disable=SC2059 # the format is the request
	printf "$@" >&3
	timeout 10 cat <&3
	local rc=$?
	exec 3>&-
	return $rc
}

# GET of $1 on the open connection fd 3 (HTTP/1.1, keep-alive): the body
# goes to stdout, the head is read line by line (bash reads sockets a byte
# at a time, so nothing of the next response is consumed).
get_on_3() {
	local line len=0
	printf 'GET %s HTTP/1.1\r\nHost: test\r\n\r\n' "$1" >&3
	IFS= read -r -t 10 line <&3 || return 1
	[[ $line == "HTTP/1.1 200 "* ]] || return 1
	while IFS= read -r -t 10 line <&3; do
		line=${line%$'\r'}
		[[ -z $line ]] && break
		if [[ ${line,,} == content-length:* ]]; then
			len=${line#*:}
			len=${len// /}
		fi
	done
	timeout 10 head -c "$len" <&3
}

# ---- keep-alive -----------------------------------------------------------------
if [[ -z ${HTTP_TEST_NO_CURL:-} ]] && command -v curl >/dev/null; then
	got=$(curl -s --max-time 10 -w '|%{num_connects}\n' "$URL/" "$URL/static/a.txt")
	want=$'Hello, world!\n|1\nfile content\n|0'
	if [[ $got == "$want" ]]; then
		pass "keep-alive: curl made one connection for two requests"
	else
		fail "keep-alive (curl): got $(printf %q "$got")"
	fi
else
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	a=$(get_on_3 /)
	b=$(get_on_3 /static/a.txt)
	exec 3>&-
	if [[ $a == "Hello, world!" && $b == "file content" ]]; then
		pass "keep-alive: two requests on one connection"
	else
		fail "keep-alive: got $(printf %q "$a") and $(printf %q "$b")"
	fi
fi

# ---- pipelining ----------------------------------------------------------------
got=$(raw 'GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /static/a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | tr -d '\r')
if [[ $(grep -c '^HTTP/1.1 200 OK$' <<<"$got") == 2 &&
	$(grep -x -e 'Hello, world!' -e 'file content' <<<"$got" | tr '\n' '|') == "Hello, world!|file content|" ]]; then
	pass "pipelining: both responses, in order"
else
	fail "pipelining: got $(printf %q "$got")"
fi

# ---- HTTP/1.0 ------------------------------------------------------------------
got=$(raw 'GET / HTTP/1.0\r\n\r\n' | tr -d '\r')
if [[ $? == 0 && $got == "HTTP/1.1 200 OK"* && $got == *$'Connection: close\n'* && $got == *"Hello, world!" ]]; then
	pass "HTTP/1.0: answered, then closed"
else
	fail "HTTP/1.0: got $(printf %q "$got")"
fi

# ---- malformed requests: 400, then the server closes ---------------------------
got=$(raw 'THIS IS NOT HTTP\r\n\r\n')
rc=$?
if [[ $rc == 0 && $got == "HTTP/1.1 400 "* ]]; then
	pass "malformed request: 400 and close"
else
	fail "malformed request: rc=$rc got $(printf %q "$got")"
fi
got=$(raw 'GET / HTTP/1.1\r\n\r\n')
rc=$?
if [[ $rc == 0 && $got == "HTTP/1.1 400 "* ]]; then
	pass "HTTP/1.1 without Host: 400 and close"
else
	fail "no Host: rc=$rc got $(printf %q "$got")"
fi

# ---- paths outside the root ----------------------------------------------------
for path in /static/../secret.txt /static/%2e%2e/secret.txt /static/sub/../../secret.txt /static/%2F/etc/passwd; do
	got=$(raw 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$path")
	if [[ $got == "HTTP/1.1 403 "* && $got != *secret* ]]; then
		pass "403 for $path"
	else
		fail "$path: got $(printf %q "${got:0:200}")"
	fi
done
got=$(raw 'GET /static/nothing.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
if [[ $got == "HTTP/1.1 404 "* ]]; then
	pass "404 for a missing file"
else
	fail "missing file: $(printf %q "${got:0:200}")"
fi

# ---- a large file --------------------------------------------------------------
want=$(cksum <"$WORK/root/sub/big.bin")
if [[ -z ${HTTP_TEST_NO_CURL:-} ]] && command -v curl >/dev/null; then
	got=$(curl -s --max-time 60 "$URL/static/sub/big.bin" | cksum)
else
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	got=$(get_on_3 /static/sub/big.bin | cksum)
	exec 3>&-
fi
if [[ $got == "$want" ]]; then
	pass "8 MiB file: same checksum"
else
	fail "8 MiB file: checksum $got, want $want"
fi

# ---- an idle connection is closed after --idle-timeout ------------------------------
# One that never sends, and one that sends a request and then nothing: the
# server closes each (cat sees the end) no sooner than IDLE - 1 s after its
# last read began, and well within IDLE + 7 s.
for what in silent after-request; do
	exec 5<>"/dev/tcp/127.0.0.1/$PORT"
	if [[ $what == after-request ]]; then
		printf 'GET / HTTP/1.1\r\nHost: t\r\n\r\n' >&5
		IFS= read -r -t 10 line <&5
	fi
	t0=$(date +%s%N)
	timeout $((IDLE + 7)) cat <&5 >/dev/null
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	exec 5>&-
	if ((rc != 0)); then
		fail "idle timeout ($what): still open after $((IDLE + 7)) s"
	elif ((ms < (IDLE - 1) * 1000)); then
		fail "idle timeout ($what): closed after $ms ms, before ${IDLE} s"
	else
		pass "idle timeout ($what): closed after $ms ms"
	fi
done

# ---- a clean stop, with an idle connection open -----------------------------------
exec 4<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET / HTTP/1.1\r\nHost: t\r\n\r\n' >&4
IFS= read -r -t 10 line <&4 # answered; the connection is idle now
kill -TERM "$PID"
stopped=0
for _ in $(seq 100); do # up to 10 s
	if ! kill -0 "$PID" 2>/dev/null; then
		stopped=1
		break
	fi
	sleep 0.1
done
if ((stopped)); then
	wait "$PID"
	rc=$?
	PID=
	if [[ $rc == 0 ]]; then
		pass "SIGTERM: exit status 0"
	else
		fail "SIGTERM: exit status $rc"
	fi
else
	fail "SIGTERM: still running after 10 s"
fi
exec 4>&-
if [[ -s $WORK/err ]]; then
	echo "server's stderr:"
	cat "$WORK/err"
fi

((FAILS == 0)) && echo "all passed" && exit 0
echo "$FAILS failed"
exit 1
